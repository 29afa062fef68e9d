//! `notifications/tools/list_changed`: telling the clients that hold a tool list that it
//! may have changed, so that they list again instead of calling tools that are gone.
//!
//! A list changes when a reload changes the tool rules (`AllowTool`, `DenyTool`, …) or
//! installs a policy set of another revision (by SIGHUP or the directory watcher). Two
//! kinds of client hear it:
//! - sessions: a stateful session over streamable HTTP (on its GET stream) and `stdio`;
//! - `subscriptions/listen` streams (protocol 2026-07-28), in either session mode: the
//!   request stays open and carries the notifications (`server::listeners` bounds them).
//!
//! Stateless requests of older protocols have no channel back once answered, so a
//! stateless sidecar does not announce the capability to them. Every listener is told,
//! whether or not its own caller's list differs: telling one too many costs a
//! `tools/list`, telling one too few leaves an agent calling a tool it may no longer have.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::service::{Peer, RoleServer, SubscriptionContext, SubscriptionSink};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::app::App;

/// How long a client may take to accept a notification before it is skipped.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// The clients that hear `notifications/tools/list_changed`, and what says the list changed.
#[derive(Debug)]
pub struct ListChanged {
    /// Sessions come here at their first `notifications/initialized` (the handler lists
    /// its session once: `mcp::GuardHandler`); a closed one leaves at the next registration
    /// or announcement, so the list holds no more than the open sessions and those closed
    /// since.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// Open `subscriptions/listen` streams that accepted the notification, by a number of
    /// their own; each leaves when its request ends.
    streams: Mutex<Streams>,
    /// Bumped when the tool rules change (the policy revision has a watch of its own).
    rules: watch::Sender<u64>,
    /// Ends every listen stream with its final result (graceful shutdown).
    closing: CancellationToken,
    sessions: bool,
}

#[derive(Debug, Default)]
struct Streams {
    next: u64,
    open: HashMap<u64, SubscriptionSink>,
}

/// Takes a listen stream off the list when its request ends, however it ends.
struct Listening<'a> {
    list: &'a ListChanged,
    key: Option<u64>,
}

impl ListChanged {
    /// `sessions` when clients keep sessions (`SessionMode=stateful`, `stdio`).
    pub fn new(sessions: bool) -> ListChanged {
        ListChanged {
            peers: Mutex::new(Vec::new()),
            streams: Mutex::new(Streams::default()),
            rules: watch::Sender::new(0),
            closing: CancellationToken::new(),
            sessions,
        }
    }

    /// Whether sessions hear the notification, so that `initialize` announces
    /// `tools.listChanged` (listen streams hear it in every mode).
    pub fn sessions(&self) -> bool {
        self.sessions
    }

    /// A session that completed its initialization.
    pub(crate) fn register(&self, peer: Peer<RoleServer>) {
        if !self.sessions {
            return;
        }
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        peers.retain(|p| !p.is_transport_closed());
        peers.push(peer);
    }

    /// The tool rules changed.
    pub(crate) fn rules_changed(&self) {
        self.rules.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Serves one `subscriptions/listen` stream until its client ends it or the server
    /// shuts down (`close`); the stream hears every change meanwhile, if it asked to.
    pub(crate) async fn listen(&self, subscription: &SubscriptionContext) {
        let key = (subscription.accepted().tools_list_changed == Some(true)).then(|| {
            let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
            let key = streams.next;
            streams.next = streams.next.wrapping_add(1);
            streams.open.insert(key, subscription.sink().clone());
            key
        });
        let _listening = Listening { list: self, key };
        tokio::select! {
            () = subscription.cancelled() => {}
            () = self.closing.cancelled() => {}
        }
    }

    /// Ends every listen stream with its final result; later ones end at once.
    pub fn close(&self) {
        self.closing.cancel();
    }

    /// Listen streams open now that hear the notification.
    pub fn streams(&self) -> usize {
        self.streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open
            .len()
    }

    /// Sessions on the list now (closed ones taken off first): each open session that
    /// completed its initialization, once.
    pub fn sessions_listed(&self) -> usize {
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        peers.retain(|p| !p.is_transport_closed());
        peers.len()
    }

    /// Sends the notification to every open session and listen stream; how many took it.
    pub async fn announce(&self) -> usize {
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        let sinks: Vec<SubscriptionSink> = {
            let streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
            streams.open.values().cloned().collect()
        };
        // All at once: a client that does not take it holds up no other, and the whole
        // announcement lasts SEND_TIMEOUT at most.
        let (sessions, subscriptions) = (peers.len(), sinks.len());
        let mut sends = JoinSet::new();
        for peer in peers {
            sends.spawn(async move {
                let sent = tokio::time::timeout(SEND_TIMEOUT, peer.notify_tool_list_changed());
                matches!(sent.await, Ok(Ok(())))
            });
        }
        for sink in sinks {
            sends.spawn(async move {
                let sent = tokio::time::timeout(SEND_TIMEOUT, sink.notify_tool_list_changed());
                matches!(sent.await, Ok(Ok(())))
            });
        }
        let mut told = 0;
        while let Some(sent) = sends.join_next().await {
            told += usize::from(matches!(sent, Ok(true)));
        }
        tracing::info!(sessions, subscriptions, told, "tool list change announced");
        told
    }

    /// Announces each change of the tool rules or of the policy revision, until aborted;
    /// changes that come while an announcement is under way are announced once after it.
    pub fn spawn(app: &Arc<App>) -> JoinHandle<()> {
        let mut rules = app.list_changed.rules.subscribe();
        let mut revisions = app.policy.revisions();
        // What is in force now is what the sessions list: only later changes count.
        rules.mark_unchanged();
        revisions.mark_unchanged();
        let app = app.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = rules.changed() => if changed.is_err() { return },
                    changed = revisions.changed() => if changed.is_err() { return },
                }
                rules.mark_unchanged();
                revisions.mark_unchanged();
                app.list_changed.announce().await;
            }
        })
    }
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            let mut streams = self
                .list
                .streams
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            streams.open.remove(&key);
        }
    }
}
