//! The open-file limit: raised at start from its soft value to its hard one, since each
//! connection, each connection to Zabbix, Redis and the logs take a descriptor, and the
//! usual soft limit (1024) runs out before `MaxConnections` is reached; an accept that
//! fails for it leaves clients waiting in the backlog instead of being refused.

use rustix::process::{Resource, getrlimit, setrlimit};

use crate::config::Config;

/// Descriptors besides connections: listeners, logs, Redis, the runtime's own.
const MARGIN: u64 = 64;

/// What start-up did with the limit, for its log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit found and the one in force now (`None`: unlimited).
    pub before: Option<u64>,
    pub now: Option<u64>,
    /// Descriptors the configuration may take at once.
    pub needed: u64,
}

impl FdLimit {
    /// Whether the limit in force may run out before the configured limits do.
    pub fn short(&self) -> bool {
        self.now.is_some_and(|now| now < self.needed)
    }
}

/// Raises the soft limit to the hard one (a failure, such as a system-call filter
/// refusing it, keeps the soft one).
pub fn raise(config: &Config) -> FdLimit {
    let limits = &config.limits;
    let listeners = if config.approval_page.is_some() { 2 } else { 1 };
    let needed = u64::try_from(
        limits
            .max_connections
            .saturating_mul(listeners)
            .saturating_add(limits.max_zabbix_concurrency),
    )
    .unwrap_or(u64::MAX)
    .saturating_add(MARGIN);
    let found = getrlimit(Resource::Nofile);
    let mut now = found.current;
    if found.current.is_some() && found.current != found.maximum {
        let raised = rustix::process::Rlimit {
            current: found.maximum,
            maximum: found.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            now = found.maximum;
        }
    }
    FdLimit {
        before: found.current,
        now,
        needed,
    }
}
