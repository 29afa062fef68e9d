//! The application state shared by every request: configuration, the Zabbix client, the
//! caller cache, tool exposure, and the tool list built for the Zabbix version in use.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use crate::config::{self, Config, SessionMode};
use crate::exposure::Exposure;
use crate::list_changed::ListChanged;
use crate::mcp::approval::{ApprovalError, Approver};
use crate::mcp::listing::ListDecisions;
use crate::mcp::tools::ToolList;
use crate::metrics::Metrics;
use crate::policy::{
    DecisionLog, DecisionLogOptions, DecisionLogSink, PolicyEngine, PolicyError, PolicyMode,
    PolicySource,
};
use crate::ratelimit::RateLimiter;
use crate::server::peers::AllowedPeers;
use crate::server::rejected::{ACCEPTED_MEMORY, RejectedTokens, WINDOW as REJECTED_WINDOW};
use crate::store::{Store, StoreError};
use crate::targets::TargetResolver;
use crate::zabbix::{CallerResolver, ClientSettings, ZabbixClient, ZabbixError};

/// How many token identities are cached, and for how long: short, so that a revoked or
/// disabled token stops working within a minute.
const CALLER_CACHE_CAPACITY: u64 = 10_000;
const CALLER_CACHE_TTL: Duration = Duration::from_secs(60);

pub struct App {
    /// The configuration as started. What a reload changes (`crate::reconfigure`) is read
    /// from the fields that hold it: `allowed_peers`, `approval_peers`, [`App::exposure`]
    /// and `limiter`.
    pub config: Config,
    /// `AllowedIP`: the MCP listener's peers.
    pub allowed_peers: AllowedPeers,
    /// `ApprovalAllowedIP`, when the approval page is on.
    pub approval_peers: Option<AllowedPeers>,
    pub zabbix: ZabbixClient,
    pub callers: CallerResolver,
    /// Tokens Zabbix rejected, per client address: bounds the lookups one address causes;
    /// and those it accepted, which keep working from an address locked out.
    pub(crate) rejected_tokens: RejectedTokens,
    /// Zabbix's `login_attempts` for the approval page, learned from a page approval's
    /// caller or a sign-in (`crate::approval_page::LoginAttempts`).
    pub(crate) login_attempts: crate::approval_page::LoginAttempts,
    pub targets: TargetResolver,
    /// `ToolPrefix` and the exposure rules, with a generation that a reload of the rules
    /// moves on, so that tool lists built under earlier rules are built again.
    exposure: RwLock<Arc<Exposure>>,
    exposure_generation: AtomicU64,
    /// The sessions told when the tool list may have changed (stateful and stdio).
    pub list_changed: ListChanged,
    pub policy: PolicyEngine,
    pub decisions: DecisionLog,
    /// `tools/list` decision sets, reused briefly per caller, client and policy revision.
    pub list_decisions: ListDecisions,
    pub approver: Approver,
    /// Page approvals and single-use records: memory, or Redis shared by replicas.
    pub store: Arc<Store>,
    /// Per-caller limits (policy `rate`, `RateLimit`, `MaxConcurrent`), in the same store.
    pub limiter: RateLimiter,
    /// Tool calls and resource reads under way; shutdown waits for them.
    pub in_flight: InFlight,
    /// Connections closed at accept because `MaxConnections` were open.
    pub refused_connections: std::sync::atomic::AtomicU64,
    /// Prometheus series counted on the request path (`/metrics`).
    pub metrics: Arc<Metrics>,
    tools: RwLock<Option<Arc<ToolList>>>,
}

/// Counts requests being served, so shutdown can let them finish.
#[derive(Debug, Default)]
pub struct InFlight(AtomicUsize);

/// Held while one request is served.
pub struct InFlightGuard<'a>(&'a InFlight);

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Zabbix(#[from] ZabbixError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where the policy set comes from: `PolicyDir`, or the built-in set.
pub(crate) fn policy_source(config: &Config) -> PolicySource {
    match &config.policy_dir {
        Some(dir) => PolicySource::Dir(dir.clone()),
        None => PolicySource::BuiltIn,
    }
}

pub(crate) fn policy_mode(config: &Config) -> PolicyMode {
    match config.policy_mode {
        config::PolicyMode::Enforce => PolicyMode::Enforce,
        config::PolicyMode::DryRun => PolicyMode::DryRun,
    }
}

impl App {
    /// Builds the app. A policy set that does not load leaves the engine denying
    /// everything (fail closed), with the error in `/readyz` and `zabbix://about`.
    pub fn new(config: Config) -> Result<Arc<App>, AppError> {
        let policy = PolicyEngine::load_or_deny_all(policy_source(&config), policy_mode(&config));
        if let Some(error) = policy.status().last_error {
            tracing::error!(%error, "no policy loaded: every call is denied until one loads");
        }
        let sink = match &config.decision_log {
            config::DecisionLogSink::Stdout => DecisionLogSink::Stdout,
            config::DecisionLogSink::File(path) => DecisionLogSink::File(path.clone()),
        };
        let decisions = DecisionLog::open_with(
            sink,
            DecisionLogOptions {
                file_size_mb: config.decision_log_file_size_mb,
                ..DecisionLogOptions::default()
            },
        )?;
        let store_url = config
            .shared_store
            .as_ref()
            .map(|s| String::from_utf8_lossy(s.expose()).into_owned());
        let seal_key = config.approval_seal_key.as_ref().map(|k| k.expose());
        let store = Arc::new(Store::open(store_url.as_deref(), config.timeout, seal_key)?);
        if let Some(prefix) = store.redis_key_prefix() {
            // Which keys are this installation's, for an operator looking into Redis.
            tracing::info!(
                target: crate::telemetry::LIFECYCLE_TARGET,
                redis_key_prefix = prefix,
                "shared store in Redis"
            );
        }
        let approver = Approver::new(seal_key, store.clone())?;
        let metrics = Arc::new(Metrics::new());
        let zabbix = ZabbixClient::new(&ClientSettings {
            api_url: config.api_url(),
            timeout: config.timeout,
            ca_file: config.tls_ca_file.clone(),
            ignore_cert_errors: config.ignore_url_cert_errors,
            max_response_bytes: config.limits.max_zabbix_response_size,
            max_concurrency: config.limits.max_zabbix_concurrency,
            max_connection_age: config.limits.max_zabbix_connection_age,
        })?
        .with_metrics(metrics.clone());
        let limiter = RateLimiter::new(
            store.clone(),
            config.caller_limits.rate_limit,
            config.caller_limits.max_concurrent,
            metrics.clone(),
        );
        let exposure = Exposure::new(config.tool_prefix.clone(), config.tool_rules.clone());
        let rejected_tokens = RejectedTokens::new(
            config.limits.max_rejected_tokens,
            REJECTED_WINDOW,
            ACCEPTED_MEMORY,
        );
        let allowed_peers = AllowedPeers::new(&config.allowed_ip);
        let approval_peers = config
            .approval_page
            .as_ref()
            .map(|page| AllowedPeers::new(&page.allowed_ip));
        let list_changed = ListChanged::new(config.session_mode == SessionMode::Stateful);
        Ok(Arc::new(App {
            allowed_peers,
            approval_peers,
            config,
            zabbix,
            callers: CallerResolver::new(CALLER_CACHE_CAPACITY, CALLER_CACHE_TTL),
            rejected_tokens,
            login_attempts: crate::approval_page::LoginAttempts::default(),
            targets: TargetResolver,
            exposure: RwLock::new(Arc::new(exposure)),
            exposure_generation: AtomicU64::new(0),
            list_changed,
            policy,
            decisions,
            list_decisions: ListDecisions::default(),
            approver,
            store,
            limiter,
            in_flight: InFlight::default(),
            refused_connections: std::sync::atomic::AtomicU64::new(0),
            metrics,
            tools: RwLock::new(None),
        }))
    }

    /// The tools offered on the current Zabbix version, built once per version and
    /// exposure.
    pub async fn tool_list(&self) -> Result<Arc<ToolList>, ZabbixError> {
        let version = self.zabbix.version().await?;
        let generation = self.exposure_generation.load(Ordering::Acquire);
        if let Ok(slot) = self.tools.read()
            && let Some(list) = slot.as_ref()
            && list.version == version
            && list.exposure_generation == generation
        {
            return Ok(list.clone());
        }
        let (exposure, generation) = self.exposure();
        let list = Arc::new(ToolList::build(&exposure, generation, version));
        if let Ok(mut slot) = self.tools.write() {
            *slot = Some(list.clone());
        }
        Ok(list)
    }

    /// The exposure in force and its generation.
    pub fn exposure(&self) -> (Arc<Exposure>, u64) {
        // Read under the lock, so the pair always belongs together.
        let exposure = self.exposure.read().unwrap_or_else(PoisonError::into_inner);
        let generation = self.exposure_generation.load(Ordering::Acquire);
        (exposure.clone(), generation)
    }

    /// Puts new exposure rules in force: tool lists are built again on their next use.
    pub(crate) fn replace_exposure(&self, exposure: Exposure) {
        let mut slot = self
            .exposure
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        *slot = Arc::new(exposure);
        self.exposure_generation.fetch_add(1, Ordering::AcqRel);
        self.list_changed.rules_changed();
    }
}

impl InFlight {
    pub fn enter(&self) -> InFlightGuard<'_> {
        self.0.fetch_add(1, Ordering::SeqCst);
        InFlightGuard(self)
    }

    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::SeqCst);
    }
}
