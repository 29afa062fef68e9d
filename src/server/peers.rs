//! The addresses a listener admits (`AllowedIP`, `ApprovalAllowedIP`), replaceable while
//! the sidecar runs: a configuration reload puts a new list in, new connections are
//! checked against it at accept, and every open connection is told, so that one whose
//! peer the new list leaves out is closed (its requests under way finish first).

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use ipnet::IpNet;
use tokio::sync::watch;

use crate::server::guard;

/// One listener's admitted addresses; every connection of the listener watches it.
#[derive(Debug)]
pub struct AllowedPeers(watch::Sender<Arc<[IpNet]>>);

/// The next change of a list, owning the watch it hands back (`None`: no more changes).
pub(crate) type NextChange = Pin<Box<dyn Future<Output = Option<PeerWatch>> + Send>>;

/// What one connection (or the accept loop) holds to read the current list.
#[derive(Clone, Debug)]
pub(crate) struct PeerWatch(watch::Receiver<Arc<[IpNet]>>);

impl AllowedPeers {
    pub fn new(nets: &[IpNet]) -> AllowedPeers {
        AllowedPeers(watch::Sender::new(Arc::from(nets)))
    }

    /// Puts a new list in force; returns whether it differs from the one before.
    pub fn replace(&self, nets: &[IpNet]) -> bool {
        self.0.send_if_modified(|current| {
            if **current == *nets {
                return false;
            }
            *current = Arc::from(nets);
            true
        })
    }

    pub fn admits(&self, peer: IpAddr) -> bool {
        guard::peer_allowed(&self.0.borrow(), peer)
    }

    pub(crate) fn watch(&self) -> PeerWatch {
        PeerWatch(self.0.subscribe())
    }
}

impl PeerWatch {
    pub(crate) fn admits(&self, peer: IpAddr) -> bool {
        guard::peer_allowed(&self.0.borrow(), peer)
    }

    /// Waits for the next list; `None` once it can no longer change (never while the
    /// app lives, which holds the sender).
    pub(crate) async fn changed(&mut self) -> Option<()> {
        self.0.changed().await.ok()
    }

    /// [`PeerWatch::changed`] as one owned future, to keep across the turns of a loop.
    pub(crate) fn next_change(mut self) -> NextChange {
        Box::pin(async move { self.changed().await.map(|()| self) })
    }
}

#[cfg(test)]
mod tests {
    use super::AllowedPeers;

    #[tokio::test]
    async fn a_new_list_reaches_every_watcher() {
        let local: Vec<ipnet::IpNet> = vec!["127.0.0.1/32".parse().expect("net")];
        let peers = AllowedPeers::new(&local);
        let mut watch = peers.watch();
        let me = "127.0.0.1".parse().expect("ip");
        assert!(watch.admits(me));
        assert!(!peers.replace(&local), "the same list is no change");
        let other: Vec<ipnet::IpNet> = vec!["10.0.0.0/8".parse().expect("net")];
        assert!(peers.replace(&other));
        assert_eq!(watch.changed().await, Some(()));
        assert!(!watch.admits(me));
        assert!(!peers.admits(me));
        assert!(peers.admits("10.1.2.3".parse().expect("ip")));
    }
}
