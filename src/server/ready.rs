//! Readiness from cached state: a background task asks Zabbix for its version every
//! [`REFRESH_INTERVAL`], and `/readyz` reads the last answer instead of calling Zabbix on
//! every probe. Until the first answer is in, a probe waits for it (bounded by `Timeout`).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::app::App;

/// How often Zabbix is asked; probes between two refreshes cost nothing upstream.
pub(crate) const REFRESH_INTERVAL: Duration = Duration::from_secs(10);

/// The last answer of Zabbix to `apiinfo.version`.
#[derive(Clone, Debug)]
pub(crate) struct ZabbixState {
    /// The version, or why it could not be asked.
    pub result: Result<String, String>,
    /// Unix seconds of the check.
    pub checked_at: u64,
}

/// The cached state, shared by every connection.
#[derive(Clone)]
pub(crate) struct Readiness(watch::Receiver<Option<ZabbixState>>);

impl Readiness {
    /// Starts the refresher; it stops with `stop`.
    pub fn spawn(
        app: Arc<App>,
        stop: CancellationToken,
    ) -> (Readiness, tokio::task::JoinHandle<()>) {
        let (tx, rx) = watch::channel(None);
        let task = tokio::spawn(async move {
            loop {
                let result = app
                    .zabbix
                    .refresh_version()
                    .await
                    .map(|v| v.to_string())
                    .map_err(|e| e.to_string());
                let checked_at = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                tx.send_replace(Some(ZabbixState { result, checked_at }));
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(REFRESH_INTERVAL) => {}
                }
            }
        });
        (Readiness(rx), task)
    }

    /// The cached state; waits (at most `wait`) only before the first check finished.
    pub async fn zabbix(&self, wait: Duration) -> Option<ZabbixState> {
        let mut rx = self.0.clone();
        match tokio::time::timeout(wait, rx.wait_for(Option::is_some)).await {
            Ok(Ok(state)) => state.clone(),
            _ => None,
        }
    }
}
