//! Readiness from cached state: a background task asks Zabbix for its version, and the
//! shared store (`SharedStore=redis://…`) to take a write, every [`REFRESH_INTERVAL`];
//! `/readyz` and `/metrics` read the last answers instead of calling either on every
//! probe. Until the first answers are in, a probe waits for them (bounded by `Timeout`).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::store::Store;

/// How often Zabbix and the store are asked; probes between two refreshes cost nothing.
pub(crate) const REFRESH_INTERVAL: Duration = Duration::from_secs(10);

/// The last answers of Zabbix (to `apiinfo.version`) and of the shared store.
#[derive(Clone, Debug)]
pub(crate) struct Checked {
    /// The version, or why it could not be asked.
    pub zabbix: Result<String, String>,
    /// The shared store's answer; `None` when approvals and limits live in memory.
    pub store: Option<Result<(), String>>,
    /// Unix seconds of the check.
    pub checked_at: u64,
}

/// The cached state, shared by every connection.
#[derive(Clone)]
pub(crate) struct Readiness(watch::Receiver<Option<Checked>>);

impl Readiness {
    /// Starts the refresher; it stops with `stop`.
    pub fn spawn(
        app: Arc<App>,
        stop: CancellationToken,
    ) -> (Readiness, tokio::task::JoinHandle<()>) {
        let (tx, rx) = watch::channel(None);
        let task = tokio::spawn(async move {
            loop {
                let (zabbix, store) = tokio::join!(app.zabbix.refresh_version(), ping(&app.store));
                let checked_at = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                tx.send_replace(Some(Checked {
                    zabbix: zabbix.map(|v| v.to_string()).map_err(|e| e.to_string()),
                    store,
                    checked_at,
                }));
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(REFRESH_INTERVAL) => {}
                }
            }
        });
        (Readiness(rx), task)
    }

    /// The cached state; waits (at most `wait`) only before the first check finished.
    pub async fn checked(&self, wait: Duration) -> Option<Checked> {
        let mut rx = self.0.clone();
        match tokio::time::timeout(wait, rx.wait_for(Option::is_some)).await {
            Ok(Ok(state)) => state.clone(),
            _ => None,
        }
    }

    /// The last state, without waiting (`None` before the first check ended).
    pub fn last(&self) -> Option<Checked> {
        self.0.borrow().clone()
    }
}

/// The shared store's answer; `None` for the memory store, which has nothing to ask.
async fn ping(store: &Store) -> Option<Result<(), String>> {
    match store {
        Store::Memory(_) => None,
        Store::Redis(_) => Some(store.ping().await.map_err(|e| e.to_string())),
    }
}
