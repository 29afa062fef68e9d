//! The decision's `rate`: per-caller limits, parsed strictly. `calls` and `per_seconds`
//! come together (a call budget) or not at all; `concurrent` stands alone; at least one
//! of the two must be set. Unknown keys and wrong types deny with a reason naming them.

use std::num::NonZeroU32;

use regorus::Value;
use serde::Serialize;

use crate::ratelimit::{CallRate, MAX_CALLS, MAX_CONCURRENT, MAX_PER_SECONDS};

/// The per-caller limits a decision sets (`rate`); see [`crate::ratelimit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RateLimits {
    /// `calls` per `per_seconds` (serialized flat, as the policy writes it).
    #[serde(flatten)]
    pub calls: Option<CallRate>,
    /// `concurrent`: calls of this caller in flight at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent: Option<NonZeroU32>,
}

const KEYS: [&str; 3] = ["calls", "per_seconds", "concurrent"];

pub(super) fn parse_rate(value: &Value) -> Result<RateLimits, String> {
    let Value::Object(object) = value else {
        return Err(
            "rate must be an object with calls and per_seconds, concurrent, or both".into(),
        );
    };
    for key in object.keys() {
        let known = matches!(key, Value::String(s) if KEYS.contains(&s.as_ref()));
        if !known {
            return Err(format!(
                "rate has an unknown key {key} (allowed: calls, per_seconds, concurrent)"
            ));
        }
    }
    let get = |name: &str, max: u32| -> Result<Option<u32>, String> {
        match object.get(&Value::from(name)) {
            None => Ok(None),
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| (1..=max).contains(n))
                .map(Some)
                .ok_or_else(|| format!("rate.{name} must be an integer from 1 to {max}")),
            Some(_) => Err(format!("rate.{name} must be an integer from 1 to {max}")),
        }
    };
    let calls = get("calls", MAX_CALLS)?;
    let per_seconds = get("per_seconds", MAX_PER_SECONDS)?;
    let concurrent = get("concurrent", MAX_CONCURRENT)?.and_then(NonZeroU32::new);
    let calls = match (calls, per_seconds) {
        (Some(c), Some(s)) => CallRate::new(u64::from(c), u64::from(s)),
        (None, None) => None,
        _ => return Err("rate.calls and rate.per_seconds go together".into()),
    };
    if calls.is_none() && concurrent.is_none() {
        return Err("rate must set calls and per_seconds, concurrent, or both".into());
    }
    Ok(RateLimits { calls, concurrent })
}

#[cfg(test)]
mod tests {
    use regorus::Value;

    use super::parse_rate;

    fn parse(json: &str) -> Result<super::RateLimits, String> {
        parse_rate(&Value::from_json_str(json).expect("json"))
    }

    #[test]
    fn well_formed_rates() {
        let full = parse(r#"{"calls": 120, "per_seconds": 60, "concurrent": 8}"#).expect("ok");
        let calls = full.calls.expect("calls");
        assert_eq!((calls.calls(), calls.per_seconds()), (120, 60));
        assert_eq!(full.concurrent.map(|c| c.get()), Some(8));
        let only_calls = parse(r#"{"calls": 1, "per_seconds": 1}"#).expect("ok");
        assert!(only_calls.calls.is_some() && only_calls.concurrent.is_none());
        let only_concurrent = parse(r#"{"concurrent": 1}"#).expect("ok");
        assert!(only_concurrent.calls.is_none() && only_concurrent.concurrent.is_some());
        // Serialized as the policy spells it.
        assert_eq!(
            serde_json::to_value(full).expect("json"),
            serde_json::json!({"calls": 120, "per_seconds": 60, "concurrent": 8})
        );
        assert_eq!(
            serde_json::to_value(only_concurrent).expect("json"),
            serde_json::json!({"concurrent": 1})
        );
    }

    #[test]
    fn malformed_rates_name_the_problem() {
        let cases = [
            ("60", "rate must be an object"),
            ("null", "rate must be an object"),
            ("[]", "rate must be an object"),
            ("{}", "rate must set calls and per_seconds"),
            (
                r#"{"calls": 10}"#,
                "rate.calls and rate.per_seconds go together",
            ),
            (
                r#"{"per_seconds": 10}"#,
                "rate.calls and rate.per_seconds go together",
            ),
            (
                r#"{"calls": 0, "per_seconds": 60}"#,
                "rate.calls must be an integer from 1 to 1000000",
            ),
            (r#"{"calls": -1, "per_seconds": 60}"#, "rate.calls must be"),
            (r#"{"calls": 1.5, "per_seconds": 60}"#, "rate.calls must be"),
            (
                r#"{"calls": "10", "per_seconds": 60}"#,
                "rate.calls must be",
            ),
            (
                r#"{"calls": 2000000, "per_seconds": 60}"#,
                "rate.calls must be",
            ),
            (
                r#"{"calls": 10, "per_seconds": 0}"#,
                "rate.per_seconds must be an integer from 1 to 86400",
            ),
            (
                r#"{"calls": 10, "per_seconds": 90000}"#,
                "rate.per_seconds must be",
            ),
            (
                r#"{"concurrent": 0}"#,
                "rate.concurrent must be an integer from 1 to 10000",
            ),
            (r#"{"concurrent": true}"#, "rate.concurrent must be"),
            (
                r#"{"concurrent": 2, "burst": 5}"#,
                r#"rate has an unknown key "burst""#,
            ),
        ];
        for (json, expected) in cases {
            let err = parse(json).expect_err(json);
            assert!(err.starts_with(expected), "{json}: {err}");
        }
    }

    #[test]
    fn enforced_not_in_dry_run_and_a_bad_rate_denies() {
        use crate::policy::{PolicyEngine, PolicyMode};
        let dir = crate::policy::source::tests::temp_dir("rate");
        let policy = |rate: &str| {
            format!(
                "package zabbix.mcp\nimport rego.v1\ndecision := {{\"allow\": true, \"rate\": {rate}}}\n"
            )
        };
        std::fs::write(dir.join("p.rego"), policy(r#"{"concurrent": 3}"#)).expect("write");
        let input = crate::policy::input::tests::sample_input();
        let enforce = PolicyEngine::load(&dir, PolicyMode::Enforce).expect("loads");
        let decided = enforce.decide(&input);
        assert_eq!(
            decided.rate.and_then(|r| r.concurrent).map(|c| c.get()),
            Some(3)
        );
        let dry = PolicyEngine::load(&dir, PolicyMode::DryRun).expect("loads");
        assert_eq!(dry.decide(&input).rate, None, "dry-run blocks nothing");
        std::fs::write(dir.join("p.rego"), policy(r#"{"concurrent": "3"}"#)).expect("write");
        // The smoke evaluation refuses a set whose decisions are malformed.
        assert!(PolicyEngine::load(&dir, PolicyMode::Enforce).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
