//! The MCP gate: at most a fixed number of requests being answered at once outside
//! sessions (every request in the stateless mode, 2026-07-28 requests in the stateful
//! one), by the direct path (`direct.rs`) or by rmcp. rmcp gives every stateless request it
//! answers its own service task and three channels (about 40 kB between them), and a call
//! on either path holds its state until Zabbix answers, so a thousand busy connections
//! would otherwise hold a thousand of those; past the gate a request waits holding only its
//! parsed head and body. The wait is bounded
//! by `Timeout`; running out of it is `overloaded` (nothing was done, retry): the request's
//! JSON-RPC error in a 200, as `mcp::errors::refused` words it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Requests being answered at once, per Zabbix call slot: every slot can be busy while as
/// many requests again (lists, denials, resource reads) go on.
const PER_ZABBIX_SLOT: usize = 2;
/// The gate never gets narrower than this, whatever `MaxZabbixConcurrency` is.
const MIN_WIDTH: usize = 32;

/// No place freed up within the wait.
#[derive(Debug, thiserror::Error)]
#[error(
    "the sidecar is overloaded: {width} MCP requests stayed in progress for {}s; nothing was done, retry later",
    .wait.as_secs()
)]
pub(crate) struct GateFull {
    width: usize,
    wait: Duration,
}

pub(crate) struct McpGate {
    slots: Arc<Semaphore>,
    width: usize,
    wait: Duration,
}

impl McpGate {
    /// A gate `PER_ZABBIX_SLOT` times as wide as `MaxZabbixConcurrency`; waits at most `wait`.
    pub(crate) fn new(max_zabbix_concurrency: usize, wait: Duration) -> McpGate {
        let width = max_zabbix_concurrency
            .saturating_mul(PER_ZABBIX_SLOT)
            .max(MIN_WIDTH);
        McpGate {
            slots: Arc::new(Semaphore::new(width)),
            width,
            wait,
        }
    }

    /// Requests inside now (read by `/metrics`).
    pub(crate) fn in_use(&self) -> usize {
        self.width.saturating_sub(self.slots.available_permits())
    }

    /// A place among the requests being answered, or why none freed up within `wait`.
    pub(crate) async fn enter(&self) -> Result<Inside, GateFull> {
        match tokio::time::timeout(self.wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Inside {
                _permit: Arc::new(permit),
            }),
            // Never closed; treated as overload rather than a panic.
            Ok(Err(_)) | Err(_) => {
                tracing::info!(
                    width = self.width,
                    "request refused: MCP requests at the limit (overloaded)"
                );
                Err(GateFull {
                    width: self.width,
                    wait: self.wait,
                })
            }
        }
    }
}

/// A request's place inside the gate. It travels in the request's extensions to the
/// handler's context, which the direct path and rmcp keep in a task of their own until the
/// call ends: a client that hangs up does not give the place back while its call goes on.
#[derive(Clone, Debug)]
pub(crate) struct Inside {
    _permit: Arc<OwnedSemaphorePermit>,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::McpGate;

    #[tokio::test]
    async fn a_full_gate_refuses_after_its_wait() {
        let gate = McpGate::new(1, Duration::from_millis(10));
        let mut held = Vec::new();
        for _ in 0..super::MIN_WIDTH {
            held.push(gate.enter().await.ok().unwrap());
        }
        let refused = gate.enter().await.err().unwrap();
        assert!(refused.to_string().contains("32 MCP requests"), "{refused}");
        held.pop();
        assert!(gate.enter().await.is_ok());
    }
}
