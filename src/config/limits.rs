//! The resource limits (issue 12): per-stage connection timeouts, the connection cap, the
//! bound on what is read from Zabbix and on concurrent Zabbix calls, and the session
//! limits of the stateful mode, and the threads the sidecar runs on. Each is a parameter with
//! a documented default.

use std::num::NonZeroUsize;
use std::time::Duration;

use super::error::ConfigError;
use super::merge::Resolved;
use super::params::Param;
use super::values::{self, format_size};

/// Every limit, with its default when the parameter is not given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `TLSHandshakeTimeout`: a TLS handshake must complete within this time.
    pub tls_handshake: Duration,
    /// `HeaderTimeout`: from the connection (or the end of the previous response) to a
    /// complete request head, HTTP/1-or-2 detection included.
    pub header: Duration,
    /// `BodyTimeout`: the whole request body must arrive within this time.
    pub body: Duration,
    /// `IdleTimeout`: a connection with no request in flight closes after this time.
    pub idle: Duration,
    /// `HTTP2KeepAlive`: PING interval on HTTP/2; no answer within it closes the
    /// connection. `None` (0) disables the pings.
    pub http2_keep_alive: Option<Duration>,
    /// `MaxConnections`: connections beyond this are closed at accept.
    pub max_connections: usize,
    /// `MaxZabbixResponseSize`: the read of a Zabbix answer stops here.
    pub max_zabbix_response_size: usize,
    /// `MaxZabbixConcurrency`: Zabbix calls in flight at once, for all callers together.
    pub max_zabbix_concurrency: usize,
    /// `MaxZabbixConnectionAge`: a connection to Zabbix older than this carries no more
    /// calls, so the frontend's name is looked up again.
    pub max_zabbix_connection_age: Duration,
    /// `MaxSessions`: stateful sessions at once.
    pub max_sessions: usize,
    /// `MaxSessionsPerToken`: stateful sessions one API token may hold at once, so one
    /// caller cannot take every session.
    pub max_sessions_per_token: usize,
    /// `MaxRequestsPerSession`: requests one stateful session may have in flight at once,
    /// each counted until its handler is done (a write waiting for its approval goes on
    /// when its client hangs up).
    pub max_requests_per_session: usize,
    /// `MaxPendingApprovals`: page approvals one Zabbix user may have waiting at once, so
    /// one caller cannot fill the store (or the approvers' page).
    pub max_pending_approvals: usize,
    /// `MaxRejectedTokens`: distinct tokens Zabbix rejected that one client address may
    /// send per minute before unknown tokens from it are refused unasked.
    pub max_rejected_tokens: usize,
    /// `SessionIdleTimeout`: a session without traffic ends after this time.
    pub session_idle: Duration,
    /// `ElicitationTimeout`: an approval question unanswered this long is declined.
    pub elicitation: Duration,
    /// `WorkerThreads`: the async runtime's threads; `None` (0) is one per CPU the process
    /// may use. One by default: next to Zabbix's PHP a single thread serves far more calls
    /// than Zabbix can answer, with the least CPU per call (README "Performance").
    pub worker_threads: Option<NonZeroUsize>,
}

pub const DEFAULT_TLS_HANDSHAKE_SECS: u64 = 10;
pub const DEFAULT_HEADER_SECS: u64 = 10;
pub const DEFAULT_BODY_SECS: u64 = 30;
pub const DEFAULT_IDLE_SECS: u64 = 60;
pub const DEFAULT_HTTP2_KEEP_ALIVE_SECS: u64 = 30;
pub const DEFAULT_MAX_CONNECTIONS: usize = 1000;
pub const DEFAULT_MAX_ZABBIX_RESPONSE_SIZE: usize = 16 << 20;
pub const DEFAULT_MAX_ZABBIX_CONCURRENCY: usize = 64;
pub const DEFAULT_MAX_ZABBIX_CONNECTION_AGE_SECS: u64 = 300;
pub const DEFAULT_MAX_SESSIONS: usize = 1000;
pub const DEFAULT_MAX_SESSIONS_PER_TOKEN: usize = 50;
pub const DEFAULT_MAX_REQUESTS_PER_SESSION: usize = 64;
pub const DEFAULT_MAX_PENDING_APPROVALS: usize = 20;
pub const DEFAULT_MAX_REJECTED_TOKENS: usize = 20;
pub const DEFAULT_SESSION_IDLE_SECS: u64 = 1800;
pub const DEFAULT_ELICITATION_SECS: u64 = 300;

const STAGE_RANGE: (u64, u64) = (1, 300);
const IDLE_RANGE: (u64, u64) = (1, 3600);
const KEEP_ALIVE_RANGE: (u64, u64) = (0, 3600);
const COUNT_RANGE: (u64, u64) = (1, 100_000);
const CONCURRENCY_RANGE: (u64, u64) = (1, 4096);
const CONNECTION_AGE_RANGE: (u64, u64) = (1, 86_400);
const SESSION_REQUESTS_RANGE: (u64, u64) = (1, 10_000);
/// At most the in-memory store's capacity: one user could not have more waiting anyway.
const PENDING_RANGE: (u64, u64) = (1, 10_000);
/// Well above `MaxResponseSize` (256K at most): it bounds memory, not the answer.
const ZABBIX_RESPONSE_RANGE: (u64, u64) = (1 << 20, 256 << 20);
const SESSION_IDLE_RANGE: (u64, u64) = (10, 86_400);
const ELICITATION_RANGE: (u64, u64) = (10, 3600);
const WORKER_THREADS_RANGE: (u64, u64) = (0, 256);

impl Default for Limits {
    fn default() -> Self {
        Limits {
            tls_handshake: Duration::from_secs(DEFAULT_TLS_HANDSHAKE_SECS),
            header: Duration::from_secs(DEFAULT_HEADER_SECS),
            body: Duration::from_secs(DEFAULT_BODY_SECS),
            idle: Duration::from_secs(DEFAULT_IDLE_SECS),
            http2_keep_alive: Some(Duration::from_secs(DEFAULT_HTTP2_KEEP_ALIVE_SECS)),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_zabbix_response_size: DEFAULT_MAX_ZABBIX_RESPONSE_SIZE,
            max_zabbix_concurrency: DEFAULT_MAX_ZABBIX_CONCURRENCY,
            max_zabbix_connection_age: Duration::from_secs(DEFAULT_MAX_ZABBIX_CONNECTION_AGE_SECS),
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_token: DEFAULT_MAX_SESSIONS_PER_TOKEN,
            max_requests_per_session: DEFAULT_MAX_REQUESTS_PER_SESSION,
            max_pending_approvals: DEFAULT_MAX_PENDING_APPROVALS,
            max_rejected_tokens: DEFAULT_MAX_REJECTED_TOKENS,
            session_idle: Duration::from_secs(DEFAULT_SESSION_IDLE_SECS),
            elicitation: Duration::from_secs(DEFAULT_ELICITATION_SECS),
            worker_threads: Some(NonZeroUsize::MIN),
        }
    }
}

/// Reads the limit parameters; each one absent keeps its default.
pub fn build(r: &Resolved) -> Result<Limits, ConfigError> {
    let d = Limits::default();
    let secs = |param, range, default: Duration| -> Result<Duration, ConfigError> {
        Ok(int(r, param, range)?.map_or(default, Duration::from_secs))
    };
    let count = |param, range, default: usize| -> Result<usize, ConfigError> {
        Ok(int(r, param, range)?.map_or(default, |v| usize::try_from(v).unwrap_or(default)))
    };
    Ok(Limits {
        tls_handshake: secs(Param::TlsHandshakeTimeout, STAGE_RANGE, d.tls_handshake)?,
        header: secs(Param::HeaderTimeout, STAGE_RANGE, d.header)?,
        body: secs(Param::BodyTimeout, STAGE_RANGE, d.body)?,
        idle: secs(Param::IdleTimeout, IDLE_RANGE, d.idle)?,
        http2_keep_alive: match int(r, Param::Http2KeepAlive, KEEP_ALIVE_RANGE)? {
            Some(0) => None,
            Some(v) => Some(Duration::from_secs(v)),
            None => d.http2_keep_alive,
        },
        max_connections: count(Param::MaxConnections, COUNT_RANGE, d.max_connections)?,
        max_zabbix_response_size: match r.get(Param::MaxZabbixResponseSize) {
            Some(e) => {
                let (min, max) = ZABBIX_RESPONSE_RANGE;
                let bytes = values::size(&e.at(), &e.value, min, max)?;
                usize::try_from(bytes).unwrap_or(d.max_zabbix_response_size)
            }
            None => d.max_zabbix_response_size,
        },
        max_zabbix_concurrency: count(
            Param::MaxZabbixConcurrency,
            CONCURRENCY_RANGE,
            d.max_zabbix_concurrency,
        )?,
        max_zabbix_connection_age: secs(
            Param::MaxZabbixConnectionAge,
            CONNECTION_AGE_RANGE,
            d.max_zabbix_connection_age,
        )?,
        max_sessions: count(Param::MaxSessions, COUNT_RANGE, d.max_sessions)?,
        max_sessions_per_token: count(
            Param::MaxSessionsPerToken,
            COUNT_RANGE,
            d.max_sessions_per_token,
        )?,
        max_requests_per_session: count(
            Param::MaxRequestsPerSession,
            SESSION_REQUESTS_RANGE,
            d.max_requests_per_session,
        )?,
        max_pending_approvals: count(
            Param::MaxPendingApprovals,
            PENDING_RANGE,
            d.max_pending_approvals,
        )?,
        max_rejected_tokens: count(Param::MaxRejectedTokens, COUNT_RANGE, d.max_rejected_tokens)?,
        session_idle: secs(
            Param::SessionIdleTimeout,
            SESSION_IDLE_RANGE,
            d.session_idle,
        )?,
        elicitation: secs(Param::ElicitationTimeout, ELICITATION_RANGE, d.elicitation)?,
        worker_threads: match int(r, Param::WorkerThreads, WORKER_THREADS_RANGE)? {
            Some(v) => usize::try_from(v).ok().and_then(NonZeroUsize::new),
            None => d.worker_threads,
        },
    })
}

fn int(r: &Resolved, param: Param, (min, max): (u64, u64)) -> Result<Option<u64>, ConfigError> {
    r.get(param)
        .map(|e| values::integer(&e.at(), &e.value, min, max))
        .transpose()
}

/// The `-T` value of a limit parameter; `None` for any other parameter.
pub fn render(limits: &Limits, param: Param) -> Option<String> {
    let secs = |d: Duration| d.as_secs().to_string();
    Some(match param {
        Param::TlsHandshakeTimeout => secs(limits.tls_handshake),
        Param::HeaderTimeout => secs(limits.header),
        Param::BodyTimeout => secs(limits.body),
        Param::IdleTimeout => secs(limits.idle),
        Param::Http2KeepAlive => limits.http2_keep_alive.map_or("0".into(), secs),
        Param::MaxConnections => limits.max_connections.to_string(),
        Param::MaxZabbixResponseSize => format_size(limits.max_zabbix_response_size as u64),
        Param::MaxZabbixConcurrency => limits.max_zabbix_concurrency.to_string(),
        Param::MaxZabbixConnectionAge => secs(limits.max_zabbix_connection_age),
        Param::MaxSessions => limits.max_sessions.to_string(),
        Param::MaxSessionsPerToken => limits.max_sessions_per_token.to_string(),
        Param::MaxRequestsPerSession => limits.max_requests_per_session.to_string(),
        Param::MaxPendingApprovals => limits.max_pending_approvals.to_string(),
        Param::MaxRejectedTokens => limits.max_rejected_tokens.to_string(),
        Param::SessionIdleTimeout => secs(limits.session_idle),
        Param::ElicitationTimeout => secs(limits.elicitation),
        Param::WorkerThreads => limits
            .worker_threads
            .map_or(0, NonZeroUsize::get)
            .to_string(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::{DEFAULT_MAX_CONNECTIONS, Limits};
    use crate::config::{Config, ConfigError, EnvContract, FlagValue, Param, Sources};

    fn load(extra: &[(Param, &str)]) -> Result<Config, ConfigError> {
        let mut flags = vec![
            FlagValue::new(Param::FrontendUrl, "http://127.0.0.1/"),
            FlagValue::new(Param::AllowedIp, "127.0.0.1"),
        ];
        flags.extend(extra.iter().map(|(p, v)| FlagValue::new(*p, *v)));
        Config::load(&Sources {
            config_file: None,
            env: BTreeMap::new(),
            flags,
            env_contract: EnvContract::Guard,
        })
    }

    #[test]
    fn defaults_hold_without_parameters() {
        let c = load(&[]).unwrap();
        assert_eq!(c.limits, Limits::default());
        assert_eq!(c.limits.max_connections, DEFAULT_MAX_CONNECTIONS);
        let text = c.render_effective();
        assert!(text.contains("MaxConnections=1000\n"), "{text}");
        assert!(text.contains("MaxZabbixResponseSize=16M\n"), "{text}");
        assert!(text.contains("WorkerThreads=1\n"), "{text}");
    }

    #[test]
    fn each_limit_is_read_and_ranged() {
        let l = load(&[
            (Param::TlsHandshakeTimeout, "3"),
            (Param::HeaderTimeout, "4"),
            (Param::BodyTimeout, "5"),
            (Param::IdleTimeout, "6"),
            (Param::Http2KeepAlive, "0"),
            (Param::MaxConnections, "7"),
            (Param::MaxZabbixResponseSize, "2M"),
            (Param::MaxZabbixConcurrency, "8"),
            (Param::MaxSessions, "9"),
            (Param::MaxSessionsPerToken, "3"),
            (Param::MaxRequestsPerSession, "12"),
            (Param::MaxPendingApprovals, "4"),
            (Param::MaxRejectedTokens, "11"),
            (Param::SessionIdleTimeout, "60"),
            (Param::ElicitationTimeout, "30"),
            (Param::WorkerThreads, "2"),
        ])
        .unwrap()
        .limits;
        assert_eq!(l.tls_handshake, Duration::from_secs(3));
        assert_eq!(l.header, Duration::from_secs(4));
        assert_eq!(l.body, Duration::from_secs(5));
        assert_eq!(l.idle, Duration::from_secs(6));
        assert_eq!(l.http2_keep_alive, None);
        assert_eq!(l.max_connections, 7);
        assert_eq!(l.max_zabbix_response_size, 2 << 20);
        assert_eq!(l.max_zabbix_concurrency, 8);
        assert_eq!(l.max_sessions, 9);
        assert_eq!(l.max_sessions_per_token, 3);
        assert_eq!(l.max_requests_per_session, 12);
        assert_eq!(l.max_pending_approvals, 4);
        assert_eq!(l.max_rejected_tokens, 11);
        assert_eq!(l.session_idle, Duration::from_secs(60));
        assert_eq!(l.elicitation, Duration::from_secs(30));
        assert_eq!(l.worker_threads.map(|n| n.get()), Some(2));
        let per_cpu = load(&[(Param::WorkerThreads, "0")]).unwrap().limits;
        assert_eq!(per_cpu.worker_threads, None);
        for (param, bad) in [
            (Param::HeaderTimeout, "0"),
            (Param::MaxConnections, "0"),
            (Param::MaxZabbixResponseSize, "64K"),
            (Param::MaxZabbixConcurrency, "x"),
            (Param::MaxRequestsPerSession, "0"),
            (Param::MaxRequestsPerSession, "10001"),
            (Param::WorkerThreads, "257"),
            (Param::WorkerThreads, "-1"),
        ] {
            let err = load(&[(param, bad)]).unwrap_err().to_string();
            assert!(err.contains(param.flag()), "{bad}: {err}");
        }
    }
}
