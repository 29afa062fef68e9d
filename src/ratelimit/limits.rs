//! The values a limit is made of: a call budget (`calls` per `per_seconds`, GCRA with a
//! burst of `calls`), a concurrency cap, and which of them apply to one call.

use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Largest `calls` a policy or `RateLimit` may set.
pub const MAX_CALLS: u32 = 1_000_000;
/// Largest `per_seconds` (one day): longer windows are a quota, not a rate.
pub const MAX_PER_SECONDS: u32 = 86_400;
/// Largest `concurrent` / `MaxConcurrent`.
pub const MAX_CONCURRENT: u32 = 10_000;

/// `calls` per `per_seconds`: up to `calls` at once, then one more every
/// `per_seconds / calls` (GCRA; a steady caller gets exactly `calls` per window).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallRate {
    calls: NonZeroU32,
    per_seconds: NonZeroU32,
}

/// The per-caller limits of one call: the policy's (from the decision's `rate`) and the
/// parameters' (`RateLimit`, `MaxConcurrent`). Both apply; the stricter one refuses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    pub policy_calls: Option<CallRate>,
    pub policy_concurrent: Option<NonZeroU32>,
    pub param_calls: Option<CallRate>,
    pub param_concurrent: Option<NonZeroU32>,
}

/// Which limit refused a call (the `scope` of the metric and of the log event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The decision's `rate.calls` / `rate.per_seconds`.
    PolicyRate,
    /// The decision's `rate.concurrent`.
    PolicyConcurrent,
    /// The `RateLimit` parameter.
    RateLimit,
    /// The `MaxConcurrent` parameter.
    MaxConcurrent,
}

impl CallRate {
    /// `None` unless both are in range (1..=MAX_CALLS, 1..=MAX_PER_SECONDS).
    pub fn new(calls: u64, per_seconds: u64) -> Option<CallRate> {
        let calls = u32::try_from(calls).ok().filter(|c| *c <= MAX_CALLS)?;
        let per_seconds = u32::try_from(per_seconds)
            .ok()
            .filter(|s| *s <= MAX_PER_SECONDS)?;
        Some(CallRate {
            calls: NonZeroU32::new(calls)?,
            per_seconds: NonZeroU32::new(per_seconds)?,
        })
    }

    /// Parses the `RateLimit` spelling `<calls>/<seconds>` (e.g. `600/60`).
    pub fn parse(text: &str) -> Result<CallRate, String> {
        let bad = || {
            format!(
                "expected <calls>/<seconds> with calls 1-{MAX_CALLS} and seconds 1-{MAX_PER_SECONDS}, e.g. 600/60"
            )
        };
        let (calls, seconds) = text.split_once('/').ok_or_else(bad)?;
        let number = |s: &str| {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse::<u64>().ok()
        };
        match (number(calls), number(seconds)) {
            (Some(c), Some(s)) => CallRate::new(c, s).ok_or_else(bad),
            _ => Err(bad()),
        }
    }

    pub fn calls(self) -> u32 {
        self.calls.get()
    }

    pub fn per_seconds(self) -> u32 {
        self.per_seconds.get()
    }

    /// The burst: this many calls may come at once.
    pub fn burst(self) -> NonZeroU32 {
        self.calls
    }

    /// The time one call's worth of budget takes to come back.
    pub fn emission(self) -> Duration {
        Duration::from_secs(u64::from(self.per_seconds.get())) / self.calls.get()
    }
}

impl fmt::Display for CallRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.calls, self.per_seconds)
    }
}

impl Applied {
    /// Whether any limit applies (none: the call is not counted at all).
    pub fn any(&self) -> bool {
        self.policy_calls.is_some()
            || self.policy_concurrent.is_some()
            || self.param_calls.is_some()
            || self.param_concurrent.is_some()
    }

    /// Only the decision's own limits: the configured ones were taken before it.
    pub fn policy_only(self) -> Applied {
        Applied {
            param_calls: None,
            param_concurrent: None,
            ..self
        }
    }

    /// The value of the limit behind `scope`, as the policy or the parameter spells it.
    pub fn limit_text(&self, scope: Scope) -> Option<String> {
        match scope {
            Scope::PolicyRate => self.policy_calls.map(|r| r.to_string()),
            Scope::PolicyConcurrent => self.policy_concurrent.map(|c| c.to_string()),
            Scope::RateLimit => self.param_calls.map(|r| r.to_string()),
            Scope::MaxConcurrent => self.param_concurrent.map(|c| c.to_string()),
        }
    }

    /// The call budgets in the order they are checked: the policy's first, so that calls
    /// a tight per-tool budget refuses do not use up the caller's `RateLimit`.
    pub(crate) fn rates(&self) -> impl Iterator<Item = (Scope, CallRate)> {
        [
            self.policy_calls.map(|r| (Scope::PolicyRate, r)),
            self.param_calls.map(|r| (Scope::RateLimit, r)),
        ]
        .into_iter()
        .flatten()
    }

    /// The concurrency caps, all taken or none.
    pub(crate) fn slots(&self) -> impl Iterator<Item = (Scope, NonZeroU32)> {
        [
            self.policy_concurrent.map(|c| (Scope::PolicyConcurrent, c)),
            self.param_concurrent.map(|c| (Scope::MaxConcurrent, c)),
        ]
        .into_iter()
        .flatten()
    }
}

impl Scope {
    pub const ALL: [Scope; 4] = [
        Scope::PolicyRate,
        Scope::PolicyConcurrent,
        Scope::RateLimit,
        Scope::MaxConcurrent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::PolicyRate => "policy_rate",
            Scope::PolicyConcurrent => "policy_concurrent",
            Scope::RateLimit => "rate_limit",
            Scope::MaxConcurrent => "max_concurrent",
        }
    }

    /// Whether this is a concurrency cap (retry soon) rather than a call budget.
    pub fn is_concurrency(self) -> bool {
        matches!(self, Scope::PolicyConcurrent | Scope::MaxConcurrent)
    }

    /// The bucket name part: policy and parameter budgets never share a bucket.
    pub(crate) fn bucket(self) -> &'static str {
        match self {
            Scope::PolicyRate | Scope::PolicyConcurrent => "policy",
            Scope::RateLimit | Scope::MaxConcurrent => "param",
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::CallRate;

    #[test]
    fn rate_limit_spelling() {
        let rate = CallRate::parse("600/60").expect("valid");
        assert_eq!((rate.calls(), rate.per_seconds()), (600, 60));
        assert_eq!(rate.emission(), Duration::from_millis(100));
        assert_eq!(rate.to_string(), "600/60");
        for bad in [
            "",
            "600",
            "600/",
            "/60",
            "0/60",
            "600/0",
            "-1/60",
            "1.5/60",
            "600/60s",
            " 600/60",
            "1000001/1",
            "1/86401",
        ] {
            assert!(CallRate::parse(bad).is_err(), "{bad:?}");
        }
    }
}
