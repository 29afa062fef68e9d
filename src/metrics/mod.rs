//! Prometheus metrics: the registry, one typed method per counted event, and the text
//! exposition served at `/metrics` (see [`scrape`] for the values read at scrape time, and
//! [`process`] for the process's own, under the standard unprefixed `process_*` names).
//!
//! Labels come only from closed sets: catalog tool names, policy phases, outcomes, error
//! codes and the Zabbix methods the catalog sends. Never a token, user, host or argument.
//! Series with enum labels are registered up front and kept in arrays, so counting one is
//! an index and an atomic add; tool and method labels cost one hash lookup.

pub mod process;
mod scrape;
#[cfg(test)]
mod tests;

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::policy::{Decision, Phase};
pub use crate::ratelimit::Scope as RateScope;
use crate::zabbix::{Method, ZabbixError};

pub use scrape::{CONTENT_TYPE, Scrape};

/// Every metric name starts with this (and `_`), but the standard `process_*` ones.
pub const PREFIX: &str = "zabbix_mcp_guard";

/// Policy evaluation takes microseconds with the compiled VM; the top buckets catch a
/// policy that went slow.
const EVALUATION_BUCKETS: [f64; 11] = [
    0.000_005, 0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.01,
    0.05,
];
/// Zabbix answers in milliseconds to seconds; `Timeout` is at most 30 s.
const ZABBIX_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// How a tool call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolOutcome {
    /// A result was returned.
    Ok,
    /// A tool error (its code is the `code` label).
    Error,
    /// An input-required round trip started (MCP 2026-07-28 approval).
    Pending,
}

/// One approval step, as the decision log's `approval` events name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// The policy asked for no approval (or `if_supported` without a way to ask).
    NotRequired,
    /// An input-required round trip was started.
    Requested,
    Approved,
    Declined,
    Cancelled,
    /// Approval was needed but could not be asked for.
    Unavailable,
    /// A page approval was created.
    PageRequested,
    PageApproved,
    PageDeclined,
    PageExpired,
    /// An approved page approval was sent to Zabbix by the caller's retry.
    PageRedeemed,
    /// An approver took a page approval back before a retry redeemed it.
    PageWithdrawn,
}

/// The registry and every series counted on the request path. Shared by the app.
pub struct Metrics {
    registry: Registry,
    tool_calls: Family<ToolCallLabels, Counter>,
    /// `[phase][result]`, see [`phase_index`] and [`DecisionResult`].
    decisions: [[Counter; DECISION_RESULTS.len()]; PHASES.len()],
    evaluation_seconds: [Histogram; PHASES.len()],
    approvals: [Counter; APPROVAL_OUTCOMES.len()],
    zabbix_requests: Family<ZabbixLabels, Counter>,
    zabbix_seconds: Family<MethodLabels, Histogram, fn() -> Histogram>,
    rate_limited: [Counter; RATE_SCOPES.len()],
    mcp_paths: [Counter; MCP_PATHS.len()],
    /// `[ok, failed]`.
    config_reloads: [Counter; 2],
    /// `[session, listen_stream]`, see [`Revoked`].
    revocation_closures: [Counter; 2],
    session_requests_refused: Counter,
    config_restart_required: Gauge,
}

/// How a configuration reload ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigReload {
    /// Read and validated; what can change live is in force. `restart_required`: the file
    /// also changes parameters that wait for a restart.
    Applied { restart_required: bool },
    /// The file did not load: nothing of it was applied.
    Failed,
}

/// What was closed because Zabbix no longer accepts the token that opened it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revoked {
    Session,
    ListenStream,
}

/// Which code answered a stateless MCP request: the sidecar itself (`tools/list` and
/// `tools/call` before 2026-07-28) or rmcp's transport (everything else).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpPath {
    Direct,
    Rmcp,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolCallLabels {
    tool: &'static str,
    outcome: &'static str,
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ZabbixLabels {
    method: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseResultLabels {
    phase: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScopeLabels {
    scope: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PathLabels {
    path: &'static str,
}

/// Phase names in [`phase_index`] order.
const PHASES: [&str; 4] = ["list", "call", "resource", "approve"];
/// A decision's result: allowed, denied, or allowed only because of dry-run.
const DECISION_RESULTS: [&str; 3] = ["allow", "deny", "dry_run_deny"];
const APPROVAL_OUTCOMES: [ApprovalOutcome; 12] = [
    ApprovalOutcome::NotRequired,
    ApprovalOutcome::Requested,
    ApprovalOutcome::Approved,
    ApprovalOutcome::Declined,
    ApprovalOutcome::Cancelled,
    ApprovalOutcome::Unavailable,
    ApprovalOutcome::PageRequested,
    ApprovalOutcome::PageApproved,
    ApprovalOutcome::PageDeclined,
    ApprovalOutcome::PageExpired,
    ApprovalOutcome::PageRedeemed,
    ApprovalOutcome::PageWithdrawn,
];
const RATE_SCOPES: [RateScope; 4] = RateScope::ALL;
const MCP_PATHS: [McpPath; 2] = [McpPath::Direct, McpPath::Rmcp];

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric; series with enum labels are created now, so they read 0
    /// from the first scrape on.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix(PREFIX);
        let tool_calls = Family::<ToolCallLabels, Counter>::default();
        registry.register(
            "tool_calls",
            "Tool calls by tool, outcome (ok, error, pending) and error code",
            tool_calls.clone(),
        );
        let decision_family = Family::<PhaseResultLabels, Counter>::default();
        registry.register(
            "policy_decisions",
            "Policy decisions logged, by phase and result (allow, deny, dry_run_deny)",
            decision_family.clone(),
        );
        let decisions = PHASES.map(|phase| {
            DECISION_RESULTS.map(|result| {
                decision_family.get_or_create_owned(&PhaseResultLabels { phase, result })
            })
        });
        let evaluation_family =
            Family::<PhaseLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                evaluation_histogram,
            );
        registry.register(
            "policy_evaluation_seconds",
            "Time to evaluate one policy decision, by phase",
            evaluation_family.clone(),
        );
        let evaluation_seconds =
            PHASES.map(|phase| evaluation_family.get_or_create_owned(&PhaseLabels { phase }));
        let approvals = counters(
            &mut registry,
            "approvals",
            "Write approval steps by outcome",
            APPROVAL_OUTCOMES.map(|outcome| OutcomeLabels {
                outcome: outcome.as_str(),
            }),
        );
        let zabbix_requests = Family::<ZabbixLabels, Counter>::default();
        registry.register(
            "zabbix_requests",
            "Requests sent to the Zabbix API, by method and result",
            zabbix_requests.clone(),
        );
        let zabbix_seconds =
            Family::<MethodLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                zabbix_histogram,
            );
        registry.register(
            "zabbix_request_duration_seconds",
            "Zabbix API request duration (including the wait for a call slot), by method",
            zabbix_seconds.clone(),
        );
        let rate_limited = counters(
            &mut registry,
            "rate_limited",
            "Calls refused by a per-caller limit, by scope (policy_rate, policy_concurrent, rate_limit, max_concurrent)",
            RATE_SCOPES.map(|scope| ScopeLabels {
                scope: scope.as_str(),
            }),
        );
        let mcp_paths = counters(
            &mut registry,
            "mcp_requests",
            "Stateless MCP requests by the code that answered them (direct: tools/list and tools/call before protocol 2026-07-28; rmcp: the rest)",
            MCP_PATHS.map(|path| PathLabels {
                path: path.as_str(),
            }),
        );
        let config_reloads = counters(
            &mut registry,
            "config_reloads",
            "Configuration reloads (SIGHUP) by result (ok, failed: nothing of the file was applied)",
            ["ok", "failed"].map(|result| ResultLabels { result }),
        );
        let revocation_closures = counters(
            &mut registry,
            "revocation_closures",
            "Sessions and subscriptions/listen streams closed because Zabbix no longer accepts their token, by kind (session, listen_stream)",
            ["session", "listen_stream"].map(|kind| KindLabels { kind }),
        );
        let session_requests_refused = Counter::default();
        registry.register(
            "session_requests_refused",
            "Requests refused because their stateful session had MaxRequestsPerSession requests in flight",
            session_requests_refused.clone(),
        );
        let config_restart_required = Gauge::default();
        registry.register(
            "config_restart_required",
            "1 when the configuration last reloaded changes parameters that take effect only at a restart",
            config_restart_required.clone(),
        );
        Metrics {
            registry,
            tool_calls,
            decisions,
            evaluation_seconds,
            approvals,
            zabbix_requests,
            zabbix_seconds,
            rate_limited,
            mcp_paths,
            config_reloads,
            revocation_closures,
            session_requests_refused,
            config_restart_required,
        }
    }

    /// A configuration reload ended.
    pub fn config_reload(&self, outcome: ConfigReload) {
        match outcome {
            ConfigReload::Applied { restart_required } => {
                self.config_reloads[0].inc();
                self.config_restart_required
                    .set(i64::from(restart_required));
            }
            ConfigReload::Failed => {
                self.config_reloads[1].inc();
            }
        }
    }

    /// `n` sessions or streams were closed because their token is no longer accepted.
    pub fn revocation_closed(&self, kind: Revoked, n: u64) {
        self.revocation_closures[kind as usize].inc_by(n);
    }

    /// A request was refused: its session had `MaxRequestsPerSession` in flight.
    pub fn session_request_refused(&self) {
        self.session_requests_refused.inc();
    }

    /// A stateless MCP request was answered by `path`.
    pub fn mcp_request(&self, path: McpPath) {
        self.mcp_paths[path as usize].inc();
    }

    /// A tool call ended; `code` is the tool error code (`"none"` unless `Error`).
    pub fn tool_call(&self, tool: &'static str, outcome: ToolOutcome, code: &'static str) {
        self.tool_calls
            .get_or_create(&ToolCallLabels {
                tool,
                outcome: outcome.as_str(),
                code,
            })
            .inc();
    }

    /// A policy decision was logged for `phase`; counts it and its evaluation time.
    pub fn policy_decision(&self, phase: Phase, decision: &Decision) {
        let p = phase_index(phase);
        let result = if !decision.allow {
            1
        } else if decision.dry_run_would_deny {
            2
        } else {
            0
        };
        self.decisions[p][result].inc();
        self.evaluation_seconds[p].observe(decision.eval_ns as f64 / 1e9);
    }

    /// One approval step.
    pub fn approval(&self, outcome: ApprovalOutcome) {
        self.approvals[outcome as usize].inc();
    }

    /// One Zabbix API request and how long it took.
    pub fn zabbix_request<T>(
        &self,
        method: Method,
        result: &Result<T, ZabbixError>,
        elapsed: Duration,
    ) {
        let method = method.as_str();
        self.zabbix_requests
            .get_or_create(&ZabbixLabels {
                method,
                result: zabbix_result(result),
            })
            .inc();
        self.zabbix_seconds
            .get_or_create(&MethodLabels { method })
            .observe(elapsed.as_secs_f64());
    }

    /// A call refused by a per-caller limit (called by the rate limiter).
    pub fn rate_limited(&self, scope: RateScope) {
        self.rate_limited[scope as usize].inc();
    }

    /// Calls one limit refused since start.
    pub fn rate_limited_count(&self, scope: RateScope) -> u64 {
        self.rate_limited[scope as usize].get()
    }

    /// The text exposition: the registered series, then the values read at scrape time.
    pub fn render(&self, scrape: Scrape) -> String {
        scrape::render(&self.registry, scrape)
    }
}

impl McpPath {
    pub const fn as_str(self) -> &'static str {
        match self {
            McpPath::Direct => "direct",
            McpPath::Rmcp => "rmcp",
        }
    }
}

impl ToolOutcome {
    pub const fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::Ok => "ok",
            ToolOutcome::Error => "error",
            ToolOutcome::Pending => "pending",
        }
    }
}

/// Registers a counter family under `name` and creates its series for each of `labels` up
/// front, so counting one is an index into the returned array.
fn counters<L, const N: usize>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    labels: [L; N],
) -> [Counter; N]
where
    L: EncodeLabelSet + Clone + Eq + std::hash::Hash + std::fmt::Debug + Send + Sync + 'static,
{
    let family = Family::<L, Counter>::default();
    registry.register(name, help, family.clone());
    labels.map(|label| family.get_or_create_owned(&label))
}

impl ApprovalOutcome {
    pub const fn as_str(self) -> &'static str {
        match self {
            ApprovalOutcome::NotRequired => "not_required",
            ApprovalOutcome::Requested => "requested",
            ApprovalOutcome::Approved => "approved",
            ApprovalOutcome::Declined => "declined",
            ApprovalOutcome::Cancelled => "cancelled",
            ApprovalOutcome::Unavailable => "unavailable",
            ApprovalOutcome::PageRequested => "page_requested",
            ApprovalOutcome::PageApproved => "page_approved",
            ApprovalOutcome::PageDeclined => "page_declined",
            ApprovalOutcome::PageExpired => "page_expired",
            ApprovalOutcome::PageRedeemed => "page_redeemed",
            ApprovalOutcome::PageWithdrawn => "page_withdrawn",
        }
    }
}

impl From<crate::mcp::approval::Answer> for ApprovalOutcome {
    fn from(answer: crate::mcp::approval::Answer) -> Self {
        use crate::mcp::approval::Answer;
        match answer {
            Answer::Approved => ApprovalOutcome::Approved,
            Answer::Declined => ApprovalOutcome::Declined,
            Answer::Cancelled => ApprovalOutcome::Cancelled,
        }
    }
}

const fn phase_index(phase: Phase) -> usize {
    match phase {
        Phase::List => 0,
        Phase::Call => 1,
        Phase::Resource => 2,
        Phase::Approve => 3,
    }
}

/// The `result` label of a Zabbix request: a fixed word per error kind.
fn zabbix_result<T>(result: &Result<T, ZabbixError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(ZabbixError::Api { .. }) => "api_error",
        Err(ZabbixError::Timeout(_)) => "timeout",
        Err(ZabbixError::Unavailable(_) | ZabbixError::AnswerLost(_)) => "unavailable",
        Err(ZabbixError::ResponseTooLarge(_)) => "too_large",
        Err(ZabbixError::HttpStatus(_)) => "http_error",
        Err(ZabbixError::BadResponse(_)) => "bad_response",
        // Never sent: no MaxZabbixConcurrency slot came free within Timeout.
        Err(ZabbixError::Overloaded { .. }) => "overloaded",
        Err(ZabbixError::Request(_) | ZabbixError::BadUrl { .. } | ZabbixError::Tls(_)) => {
            "internal_error"
        }
    }
}

fn evaluation_histogram() -> Histogram {
    Histogram::new(EVALUATION_BUCKETS)
}

fn zabbix_histogram() -> Histogram {
    Histogram::new(ZABBIX_BUCKETS)
}
