//! `notifications/tools/list_changed`: telling the clients that hold a tool list that it
//! may have changed, so that they list again instead of calling tools that are gone.
//!
//! A list changes when a reload changes the tool rules (`AllowTool`, `DenyTool`, …) or
//! installs a policy set of another revision (by SIGHUP or the directory watcher). Only
//! sessions can hear it: a stateful session over streamable HTTP (on its GET stream) and
//! `stdio`. Stateless requests have no channel back once answered, so there the
//! capability is not announced. Every open session is told, whether or not its own
//! caller's list differs: telling one too many costs a `tools/list`, telling one too few
//! leaves an agent calling a tool it may no longer have.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::service::{Peer, RoleServer};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::app::App;

/// How long a session may take to accept a notification before it is skipped.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// The sessions that hear `notifications/tools/list_changed`, and what says the list changed.
#[derive(Debug)]
pub struct ListChanged {
    /// Sessions come here at `notifications/initialized`; a closed one leaves at the next
    /// registration or announcement, so the list holds no more than the open sessions and
    /// those closed since.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// Bumped when the tool rules change (the policy revision has a watch of its own).
    rules: watch::Sender<u64>,
    enabled: bool,
}

impl ListChanged {
    /// `enabled` when clients keep sessions (`SessionMode=stateful`, `stdio`).
    pub fn new(enabled: bool) -> ListChanged {
        ListChanged {
            peers: Mutex::new(Vec::new()),
            rules: watch::Sender::new(0),
            enabled,
        }
    }

    /// Whether the server announces `tools.listChanged` and sends the notification.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// A session that completed its initialization.
    pub(crate) fn register(&self, peer: Peer<RoleServer>) {
        if !self.enabled {
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

    /// Sends the notification to every open session; how many accepted it.
    pub async fn announce(&self) -> usize {
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        // All at once: a session that does not take it holds up no other, and the whole
        // announcement lasts SEND_TIMEOUT at most.
        let sessions = peers.len();
        let mut sends = JoinSet::new();
        for peer in peers {
            sends.spawn(async move {
                let sent = tokio::time::timeout(SEND_TIMEOUT, peer.notify_tool_list_changed());
                matches!(sent.await, Ok(Ok(())))
            });
        }
        let mut told = 0;
        while let Some(sent) = sends.join_next().await {
            told += usize::from(matches!(sent, Ok(true)));
        }
        tracing::info!(sessions, told, "tool list change announced");
        told
    }

    /// Announces each change of the tool rules or of the policy revision, until aborted;
    /// changes that come while an announcement is under way are announced once after it.
    /// `None` when disabled.
    pub fn spawn(app: &Arc<App>) -> Option<JoinHandle<()>> {
        if !app.list_changed.enabled {
            return None;
        }
        let mut rules = app.list_changed.rules.subscribe();
        let mut revisions = app.policy.revisions();
        // What is in force now is what the sessions list: only later changes count.
        rules.mark_unchanged();
        revisions.mark_unchanged();
        let app = app.clone();
        Some(tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = rules.changed() => if changed.is_err() { return },
                    changed = revisions.changed() => if changed.is_err() { return },
                }
                rules.mark_unchanged();
                revisions.mark_unchanged();
                app.list_changed.announce().await;
            }
        }))
    }
}
