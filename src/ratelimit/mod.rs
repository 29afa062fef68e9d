//! Per-caller limits: the decision's `rate` (calls per window, concurrent calls) and the
//! `RateLimit` / `MaxConcurrent` ceilings, checked before anything is sent to Zabbix.
//!
//! Keyed by the caller's Zabbix userid, not the token: a user's tokens share one budget
//! (minting another token does not buy more calls), and the userid is what Zabbix
//! authorises and audits. A budget is identified by the caller, its kind (policy or
//! parameter) and its value: calls the policy gives the same `calls`/`per_seconds` share
//! one budget, calls it gives another value have a budget of their own; likewise for
//! `concurrent`. The parameter budgets are one per caller whatever the tool, and
//! `MaxConcurrent`'s slots one count per caller whatever its value (a reload changes it).
//!
//! Order: concurrency slots first (all or none, given back on refusal), then the policy's
//! call budget, then `RateLimit`. A call refused by `RateLimit` has counted against the
//! policy budget; a read refused by the policy has not touched `RateLimit`. A write takes
//! `RateLimit` and `MaxConcurrent` before its targets are looked up (`mcp::limit`).
//!
//! In memory by default (`governor` GCRA); with `SharedStore=redis://…` every replica
//! admits through one Lua script on Redis, so replicas share the budgets; concurrency is a
//! lease renewed while the call runs, so a replica that dies frees its slots within
//! [`LEASE_TTL`]. If Redis cannot be asked, calls are refused (fail closed).

mod limits;
mod memory;

use std::num::NonZeroU32;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::store::{AdmitReply, RateAdmit, Store, StoreError};

pub use limits::{Applied, CallRate, MAX_CALLS, MAX_CONCURRENT, MAX_PER_SECONDS, Scope};
use memory::MemoryLimiter;

/// A call refused for concurrency may retry this soon: slots free as calls end.
pub const CONCURRENCY_RETRY: Duration = Duration::from_secs(1);
/// A Redis concurrency lease lapses this long after its last renewal.
pub const LEASE_TTL: Duration = Duration::from_secs(30);
/// Leases are renewed this often while the call runs.
const LEASE_RENEW: Duration = Duration::from_secs(10);

/// The parameter ceilings, read together once per call.
#[derive(Clone, Copy, Debug)]
struct ParamLimits {
    calls: Option<CallRate>,
    concurrent: Option<NonZeroU32>,
}

/// Admits calls under the per-caller limits. One per app.
pub struct RateLimiter {
    backend: Backend,
    /// `RateLimit` and `MaxConcurrent`; a configuration reload replaces them. A budget is
    /// keyed by its value, so calls under a new value start a budget of their own.
    params: RwLock<ParamLimits>,
    /// Refusals are counted here (`rate_limited_total{scope}`), where they are decided.
    metrics: Arc<Metrics>,
}

enum Backend {
    Memory(Arc<MemoryLimiter>),
    Redis(Arc<Store>),
}

/// Why a call was not admitted.
#[derive(Debug, thiserror::Error)]
pub enum RateLimitError {
    #[error("{} limit reached ({}); retry after {} s; nothing was sent to Zabbix", .scope.as_str(), limit_text(*.scope), retry_seconds(*.retry_after))]
    Limited { scope: Scope, retry_after: Duration },
    #[error("the per-caller limits could not be checked ({0}); nothing was sent to Zabbix")]
    Store(#[from] StoreError),
    #[error(
        "the policy sets more than {} distinct rate limits; nothing was sent to Zabbix",
        memory::MAX_BUDGETS
    )]
    TooManyBudgets,
}

/// A refusal from a backend, before it is counted.
#[derive(Debug)]
pub(crate) enum Refusal {
    Limited { scope: Scope, retry_after: Duration },
    TooManyBudgets,
}

/// One concurrency slot: a caller under one cap (the parts of its bucket name, which the
/// in-memory limiter need not write out for every call).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SlotKey {
    bucket: &'static str,
    cap: NonZeroU32,
    caller: String,
}

/// Held while an admitted call runs; dropping it gives the concurrency slots back.
pub struct Admission {
    release: Release,
}

enum Release {
    None,
    Memory(Arc<MemoryLimiter>, Vec<SlotKey>),
    Redis { renewing: CancellationToken },
}

impl SlotKey {
    pub(crate) fn new(scope: Scope, cap: NonZeroU32, caller: &str) -> SlotKey {
        SlotKey {
            bucket: scope.bucket(),
            cap: counted_under(scope, cap),
            caller: caller.to_owned(),
        }
    }
}

/// The cap a slot is counted under: the policy's own value (calls it gives another value
/// have slots of their own), but one count per caller for `MaxConcurrent`, whatever its
/// value, so that calls in flight under the value before a reload count against the new
/// one (keyed by value, old and new calls both ran in full for a while).
fn counted_under(scope: Scope, cap: NonZeroU32) -> NonZeroU32 {
    match scope {
        Scope::MaxConcurrent => NonZeroU32::MAX,
        Scope::PolicyConcurrent | Scope::PolicyRate | Scope::RateLimit => cap,
    }
}

impl RateLimiter {
    /// `store` decides where budgets live: Redis when it is Redis, else this process.
    pub fn new(
        store: Arc<Store>,
        param_calls: Option<CallRate>,
        param_concurrent: Option<NonZeroU32>,
        metrics: Arc<Metrics>,
    ) -> RateLimiter {
        let backend = match &*store {
            Store::Redis(_) => Backend::Redis(store),
            Store::Memory(_) => Backend::Memory(Arc::new(MemoryLimiter::new())),
        };
        RateLimiter {
            backend,
            params: RwLock::new(ParamLimits {
                calls: param_calls,
                concurrent: param_concurrent,
            }),
            metrics,
        }
    }

    /// Puts new `RateLimit` / `MaxConcurrent` values in force for the calls that follow.
    pub fn replace_params(&self, calls: Option<CallRate>, concurrent: Option<NonZeroU32>) {
        *self.params.write().unwrap_or_else(PoisonError::into_inner) =
            ParamLimits { calls, concurrent };
    }

    /// The limits that apply to a call the policy decided with this `rate`.
    pub fn applied(&self, policy: Option<&crate::policy::RateLimits>) -> Applied {
        let params = *self.params.read().unwrap_or_else(PoisonError::into_inner);
        Applied {
            policy_calls: policy.and_then(|p| p.calls),
            policy_concurrent: policy.and_then(|p| p.concurrent),
            param_calls: params.calls,
            param_concurrent: params.concurrent,
        }
    }

    /// Admits one call of `caller` (the Zabbix userid) under `applied`.
    pub async fn admit(
        &self,
        caller: &str,
        applied: &Applied,
    ) -> Result<Admission, RateLimitError> {
        if !applied.any() {
            return Ok(Admission {
                release: Release::None,
            });
        }
        let outcome = match &self.backend {
            Backend::Memory(memory) => memory
                .admit(caller, applied)
                .map(|slots| Admission {
                    release: Release::Memory(memory.clone(), slots),
                })
                .map_err(refusal_error),
            Backend::Redis(store) => admit_shared(store, caller, applied).await,
        };
        if let Err(RateLimitError::Limited { scope, .. }) = &outcome {
            self.metrics.rate_limited(*scope);
        }
        outcome
    }

    /// Calls refused by one limit since start (the `rate_limited{scope}` metric).
    pub fn refused(&self, scope: Scope) -> u64 {
        self.metrics.rate_limited_count(scope)
    }

    /// Concurrency slots held in this process (memory backend; 0 with Redis).
    pub fn slots_in_use(&self) -> usize {
        match &self.backend {
            Backend::Memory(memory) => memory.slots_in_use(),
            Backend::Redis(_) => 0,
        }
    }
}

impl RateLimitError {
    /// The retry time the agent is given, in whole seconds (at least 1).
    pub fn retry_after_seconds(&self) -> Option<u64> {
        match self {
            RateLimitError::Limited { retry_after, .. } => Some(retry_seconds(*retry_after)),
            _ => None,
        }
    }

    /// Whether the call was over a limit (as opposed to the limits being uncheckable).
    pub fn scope(&self) -> Option<Scope> {
        match self {
            RateLimitError::Limited { scope, .. } => Some(*scope),
            _ => None,
        }
    }
}

async fn admit_shared(
    store: &Arc<Store>,
    caller: &str,
    applied: &Applied,
) -> Result<Admission, RateLimitError> {
    let Store::Redis(redis) = &**store else {
        return Err(RateLimitError::Store(StoreError::Backend(
            "the shared limiter needs the Redis store".into(),
        )));
    };
    let slots: Vec<(Scope, NonZeroU32)> = applied.slots().collect();
    let rates: Vec<(Scope, CallRate)> = applied.rates().collect();
    let admit = RateAdmit {
        rates: rates
            .iter()
            .map(|(scope, rate)| {
                let emission = u64::try_from(rate.emission().as_micros()).unwrap_or(u64::MAX);
                (
                    rate_bucket(*scope, *rate, caller),
                    emission.max(1),
                    rate.calls(),
                )
            })
            .collect(),
        slots: slots
            .iter()
            .map(|(scope, cap)| (slot_bucket(*scope, *cap, caller), cap.get()))
            .collect(),
        lease: uuid::Uuid::new_v4().to_string(),
        lease_ttl: LEASE_TTL,
    };
    let reply = match redis.rate_admit(&admit).await {
        Ok(reply) => reply,
        Err(error) => {
            // Redis may still run the script after we stopped waiting (a slow Redis):
            // the lease it would take is given back right behind it, not left to lapse.
            // Only then: a Redis that refused or failed ran nothing, and asking it again
            // would double each call's load on it during an outage.
            let buckets: Vec<String> = admit.slots.iter().map(|(b, _)| b.clone()).collect();
            if matches!(error, StoreError::Timeout(_)) && !buckets.is_empty() {
                release_later(store.clone(), buckets, admit.lease.clone());
            }
            return Err(error.into());
        }
    };
    match reply {
        AdmitReply::Admitted => {}
        AdmitReply::Rate { index, wait } => {
            let scope = rates.get(index).map_or(Scope::RateLimit, |r| r.0);
            return Err(RateLimitError::Limited {
                scope,
                retry_after: wait.max(Duration::from_millis(1)),
            });
        }
        AdmitReply::Slots { index } => {
            let scope = slots.get(index).map_or(Scope::MaxConcurrent, |s| s.0);
            return Err(RateLimitError::Limited {
                scope,
                retry_after: CONCURRENCY_RETRY,
            });
        }
    }
    let buckets: Vec<String> = admit.slots.into_iter().map(|(b, _)| b).collect();
    if buckets.is_empty() {
        return Ok(Admission {
            release: Release::None,
        });
    }
    let renewing = CancellationToken::new();
    tokio::spawn(renew(store.clone(), buckets, admit.lease, renewing.clone()));
    Ok(Admission {
        release: Release::Redis { renewing },
    })
}

/// Keeps a long call's leases alive until it ends (or the process dies), then gives them
/// back. One task does both, in order: a renewal puts back a lease Redis lost, so one sent
/// after the release (the call ending as a renewal starts) would hold a slot for
/// [`LEASE_TTL`] after its call.
async fn renew(store: Arc<Store>, buckets: Vec<String>, lease: String, stop: CancellationToken) {
    let Store::Redis(redis) = &*store else {
        return;
    };
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(LEASE_RENEW) => {}
        }
        if let Err(error) = redis.rate_renew(&buckets, &lease, LEASE_TTL).await {
            tracing::warn!(%error, "concurrency lease not renewed");
        }
    }
    if let Err(error) = redis.rate_release(&buckets, &lease).await {
        tracing::warn!(%error, "concurrency lease not released; it lapses");
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.release, Release::None) {
            Release::None => {}
            Release::Memory(memory, slots) => memory.release(&slots),
            // The renewing task gives the leases back once it has stopped renewing.
            Release::Redis { renewing } => renewing.cancel(),
        }
    }
}

/// Gives a Redis lease back, off the request path; if that fails it lapses after
/// [`LEASE_TTL`].
fn release_later(store: Arc<Store>, buckets: Vec<String>, lease: String) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            if let Store::Redis(redis) = &*store
                && let Err(error) = redis.rate_release(&buckets, &lease).await
            {
                tracing::warn!(%error, "concurrency lease not released; it lapses");
            }
        });
    }
}

fn refusal_error(refusal: Refusal) -> RateLimitError {
    match refusal {
        Refusal::Limited { scope, retry_after } => RateLimitError::Limited { scope, retry_after },
        Refusal::TooManyBudgets => RateLimitError::TooManyBudgets,
    }
}

fn rate_bucket(scope: Scope, rate: CallRate, caller: &str) -> String {
    format!("{}:{rate}:{caller}", scope.bucket())
}

fn slot_bucket(scope: Scope, cap: NonZeroU32, caller: &str) -> String {
    match scope {
        Scope::MaxConcurrent => format!("{}:any:{caller}", scope.bucket()),
        Scope::PolicyConcurrent | Scope::PolicyRate | Scope::RateLimit => {
            format!("{}:{cap}:{caller}", scope.bucket())
        }
    }
}

fn retry_seconds(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

fn limit_text(scope: Scope) -> &'static str {
    match scope {
        Scope::PolicyRate => "the policy's calls per period for this caller",
        Scope::PolicyConcurrent => "the policy's concurrent calls for this caller",
        Scope::RateLimit => "RateLimit, calls per period for this caller",
        Scope::MaxConcurrent => "MaxConcurrent, concurrent calls for this caller",
    }
}

#[cfg(test)]
mod tests;
