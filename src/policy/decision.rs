//! The decision: what the rest of the sidecar acts on, parsed strictly from the raw value
//! of `data.zabbix.mcp.decision`. Only a well-formed object with `allow == true` allows;
//! every other shape denies with a reason that names what was wrong.

use std::sync::LazyLock;

use regorus::Value;
use regorus::value::Object;
use serde::{Deserialize, Serialize};

use super::input::ToolKind;

mod rate;
pub use rate::RateLimits;

/// The outcome of one policy evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// UUID v4; returned to the agent with every denial and keys the decision log.
    pub decision_id: String,
    /// The effective verdict. In dry-run mode a would-be denial is `true` here and
    /// `dry_run_would_deny` is set.
    pub allow: bool,
    /// Why the policy denied (or, in dry-run, would have denied).
    pub reasons: Vec<String>,
    pub approval: Approval,
    /// Who may decide on the approval page; `Some` exactly when `approval` is `page`.
    pub approvers: Option<Approvers>,
    /// `None`: the policy set no limit, so the catalog default (7 days) applies.
    pub history: Option<HistoryLimits>,
    /// `None`: the policy set no cap, so the tool's own maximum applies.
    pub max_limit: Option<u32>,
    /// Per-caller limits (`rate`); `None`: only `RateLimit`/`MaxConcurrent` apply.
    pub rate: Option<RateLimits>,
    /// Dry-run mode only: the policy denied, but the call goes through.
    pub dry_run_would_deny: bool,
    /// Wall time of the evaluation, conversion of the input included.
    pub eval_ns: u64,
    /// Revision of the policy set that decided; empty if none was loaded.
    pub revision: String,
    /// The raw policy result, for the decision log; `Undefined` if there was none.
    #[serde(skip)]
    pub(crate) raw: Value,
}

/// Whether a write needs a human yes before it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// Apply without asking.
    None,
    /// Ask when the client can elicit, else apply (the official server's behaviour).
    IfSupported,
    /// Never apply without a human yes; refuse when the client cannot ask.
    Required,
    /// Never apply without the yes of a person signed in to the approval page with their
    /// own Zabbix credentials (the only mode an agent holding the token cannot answer).
    Page,
}

/// Who may decide a `page` approval (the decision's `approvers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approvers {
    /// The approver must be in at least one of these Zabbix user groups (by name).
    pub usrgrps: Vec<String>,
    /// Four eyes: the approver's userid must differ from the caller's.
    pub distinct_from_caller: bool,
}

/// History window limits for `history_get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryLimits {
    /// Widest allowed `time_till - time_from`.
    pub max_window_seconds: u64,
    /// How far back `time_from` may reach from now.
    pub max_age_seconds: u64,
}

/// The validated content of a decision object, before mode and bookkeeping are applied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) allow: bool,
    pub(crate) reasons: Vec<String>,
    pub(crate) approval: Approval,
    pub(crate) approvers: Option<Approvers>,
    pub(crate) history: Option<HistoryLimits>,
    pub(crate) max_limit: Option<u32>,
    pub(crate) rate: Option<RateLimits>,
}

/// The keys of the decision's nested objects (`approvers`, `history`) as regorus strings,
/// allocated once: looking a key up takes a `Value`.
struct Keys {
    usrgrps: Value,
    distinct_from_caller: Value,
    max_window_seconds: Value,
    max_age_seconds: Value,
}

static KEYS: LazyLock<Keys> = LazyLock::new(|| Keys {
    usrgrps: Value::from("usrgrps"),
    distinct_from_caller: Value::from("distinct_from_caller"),
    max_window_seconds: Value::from("max_window_seconds"),
    max_age_seconds: Value::from("max_age_seconds"),
});

/// The members of a decision object that the sidecar reads, found in one pass over the
/// object: a lookup of each compares keys as regorus values, some fifty times per call.
#[derive(Default)]
struct Members<'a> {
    allow: Option<&'a Value>,
    reasons: Option<&'a Value>,
    approval: Option<&'a Value>,
    approvers: Option<&'a Value>,
    history: Option<&'a Value>,
    max_limit: Option<&'a Value>,
    rate: Option<&'a Value>,
    /// The first key that is none of the above.
    unknown: Option<&'a Value>,
}

impl Decision {
    /// A denial that did not come from a policy evaluation (e.g. a later check in the
    /// request path), with a fresh id.
    pub fn deny(reason: impl Into<String>) -> Self {
        Self {
            decision_id: new_decision_id(),
            allow: false,
            reasons: vec![reason.into()],
            approval: Approval::None,
            approvers: None,
            history: None,
            max_limit: None,
            rate: None,
            dry_run_would_deny: false,
            eval_ns: 0,
            revision: String::new(),
            raw: Value::Undefined,
        }
    }

    /// The raw policy result as JSON (`None` if the policy produced none), as logged.
    pub fn raw_result(&self) -> Option<serde_json::Value> {
        if self.raw == Value::Undefined {
            return None;
        }
        serde_json::to_value(&self.raw).ok()
    }
}

impl Approval {
    /// The policy spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::IfSupported => "if_supported",
            Self::Required => "required",
            Self::Page => "page",
        }
    }

    /// What applies when the policy does not say: the official server's behaviour, so a
    /// minimal policy does not silently drop the approval step of writes.
    pub(crate) const fn default_for(kind: ToolKind) -> Self {
        match kind {
            ToolKind::Read => Self::None,
            ToolKind::Write => Self::IfSupported,
        }
    }
}

impl Verdict {
    /// Parses a raw policy result. `Err` carries the reason the value is malformed; the
    /// caller turns it into a denial.
    pub(crate) fn parse(raw: &Value, kind: ToolKind) -> Result<Self, String> {
        let object = match raw {
            Value::Undefined => {
                return Err(
                    "policy result undefined (no data.zabbix.mcp.decision for this input)".into(),
                );
            }
            Value::Object(object) => object,
            other => {
                return Err(format!(
                    "decision is not an object (got {})",
                    type_name(other)
                ));
            }
        };
        let members = Members::of(object);
        // A misspelt key would otherwise be dropped in silence and its default applied:
        // `"aproval": "page"` allowed a write with `if_supported`, which the agent answers.
        if let Some(key) = members.unknown {
            return Err(format!(
                "decision has an unknown key {key} (allowed: allow, reasons, approval, approvers, history, max_limit, rate)"
            ));
        }
        let allow = match members.allow {
            None => return Err("decision has no allow field".into()),
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err("allow is not a boolean".into()),
        };
        let reasons = members.reasons.map_or(Ok(Vec::new()), parse_reasons)?;
        let approval = members
            .approval
            .map_or(Ok(Approval::default_for(kind)), parse_approval)?;
        let approvers = match (approval, members.approvers) {
            (Approval::Page, Some(value)) => Some(parse_approvers(value)?),
            (Approval::Page, None) => {
                return Err("approval page needs approvers (usrgrps, distinct_from_caller)".into());
            }
            (_, Some(_)) => return Err("approvers is only valid with approval page".into()),
            (_, None) => None,
        };
        let history = members.history.map(parse_history).transpose()?;
        let max_limit = members.max_limit.map(parse_max_limit).transpose()?;
        let rate = members.rate.map(rate::parse_rate).transpose()?;
        Ok(Self {
            allow,
            reasons,
            approval,
            approvers,
            history,
            max_limit,
            rate,
        })
    }
}

impl<'a> Members<'a> {
    fn of(object: &'a Object) -> Self {
        let mut members = Members::default();
        for (key, value) in object.iter() {
            let Value::String(name) = key else {
                members.unknown.get_or_insert(key);
                continue;
            };
            let slot = match name.as_ref() {
                "allow" => &mut members.allow,
                "reasons" => &mut members.reasons,
                "approval" => &mut members.approval,
                "approvers" => &mut members.approvers,
                "history" => &mut members.history,
                "max_limit" => &mut members.max_limit,
                "rate" => &mut members.rate,
                _ => {
                    members.unknown.get_or_insert(key);
                    continue;
                }
            };
            *slot = Some(value);
        }
        members
    }
}

/// A fresh decision id (hyphenated, written without the formatting machinery: one per call).
pub(crate) fn new_decision_id() -> String {
    let mut text = uuid::Uuid::encode_buffer();
    uuid::Uuid::new_v4()
        .hyphenated()
        .encode_lower(&mut text)
        .to_owned()
}

fn parse_reasons(value: &Value) -> Result<Vec<String>, String> {
    const BAD: &str = "reasons must be an array or set of strings";
    // Rego's `reasons contains msg if ...` produces a set; literals produce arrays.
    let items: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        Value::Set(items) => items.iter().collect(),
        _ => return Err(BAD.into()),
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::String(s) => Ok(s.to_string()),
            _ => Err(BAD.to_string()),
        })
        .collect()
}

fn parse_approval(value: &Value) -> Result<Approval, String> {
    const BAD: &str = "approval must be one of none|if_supported|required|page";
    match value {
        Value::String(s) => match s.as_ref() {
            "none" => Ok(Approval::None),
            "if_supported" => Ok(Approval::IfSupported),
            "required" => Ok(Approval::Required),
            "page" => Ok(Approval::Page),
            _ => Err(BAD.into()),
        },
        _ => Err(BAD.into()),
    }
}

fn parse_approvers(value: &Value) -> Result<Approvers, String> {
    const BAD: &str = "approvers must be an object with usrgrps (a non-empty array of group names) and distinct_from_caller (a boolean)";
    let Value::Object(object) = value else {
        return Err(BAD.into());
    };
    only_keys(
        object,
        "approvers",
        [&KEYS.usrgrps, &KEYS.distinct_from_caller],
    )?;
    let usrgrps: Vec<String> = match object.get(&KEYS.usrgrps) {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.to_string()),
                _ => Err(BAD.to_string()),
            })
            .collect::<Result<_, _>>()?,
        Some(Value::Set(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.to_string()),
                _ => Err(BAD.to_string()),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(BAD.into()),
    };
    // No group would mean nobody may approve: a policy mistake, named rather than guessed.
    if usrgrps.is_empty() {
        return Err(BAD.into());
    }
    let distinct_from_caller = match object.get(&KEYS.distinct_from_caller) {
        Some(Value::Bool(b)) => *b,
        _ => return Err(BAD.into()),
    };
    Ok(Approvers {
        usrgrps,
        distinct_from_caller,
    })
}

fn parse_history(value: &Value) -> Result<HistoryLimits, String> {
    const BAD: &str = "history must be an object with non-negative integer max_window_seconds and max_age_seconds";
    let Value::Object(object) = value else {
        return Err(BAD.into());
    };
    only_keys(
        object,
        "history",
        [&KEYS.max_window_seconds, &KEYS.max_age_seconds],
    )?;
    let seconds = |key: &Value| match object.get(key) {
        Some(Value::Number(n)) => n.as_u64().ok_or_else(|| BAD.to_string()),
        _ => Err(BAD.to_string()),
    };
    Ok(HistoryLimits {
        max_window_seconds: seconds(&KEYS.max_window_seconds)?,
        max_age_seconds: seconds(&KEYS.max_age_seconds)?,
    })
}

fn parse_max_limit(value: &Value) -> Result<u32, String> {
    const BAD: &str = "max_limit must be a positive integer";
    match value {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| BAD.into()),
        _ => Err(BAD.into()),
    }
}

/// Refuses a key of `object` other than `allowed`, naming it (as `rate` does). Both keys
/// are required, so only an object of more than two has one to look for: a well-formed
/// decision costs a length check.
fn only_keys(object: &Object, what: &str, allowed: [&Value; 2]) -> Result<(), String> {
    if object.len() <= 2 {
        return Ok(());
    }
    match object.keys().find(|key| !allowed.contains(key)) {
        None => Ok(()),
        Some(key) => Err(format!(
            "{what} has an unknown key {key} (allowed: {}, {})",
            allowed[0], allowed[1]
        )),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Set(_) => "set",
        Value::Object(_) => "object",
        Value::Undefined => "undefined",
    }
}

#[cfg(test)]
mod tests {
    use regorus::Value;

    use super::{Approval, Approvers, HistoryLimits, ToolKind, Verdict};

    fn parse(json: &str, kind: ToolKind) -> Result<Verdict, String> {
        Verdict::parse(&Value::from_json_str(json).expect("json"), kind)
    }

    #[test]
    fn full_decision_parses() {
        let v = parse(
            r#"{"allow": true, "reasons": [], "approval": "required",
                "history": {"max_window_seconds": 3600, "max_age_seconds": 86400},
                "max_limit": 50, "rate": {"calls": 10, "per_seconds": 60, "concurrent": 2}}"#,
            ToolKind::Write,
        )
        .expect("well-formed");
        assert!(v.allow);
        assert_eq!(v.approval, Approval::Required);
        assert_eq!(
            v.history,
            Some(HistoryLimits {
                max_window_seconds: 3600,
                max_age_seconds: 86400
            })
        );
        assert_eq!(v.max_limit, Some(50));
        let rate = v.rate.expect("rate");
        assert_eq!(rate.calls.map(|c| c.to_string()), Some("10/60".into()));
        assert_eq!(rate.concurrent.map(|c| c.get()), Some(2));
    }

    #[test]
    fn minimal_decision_gets_defaults_by_tool_kind() {
        let read = parse(r#"{"allow": true}"#, ToolKind::Read).expect("ok");
        assert_eq!(read.approval, Approval::None);
        assert_eq!(
            (read.history, read.max_limit, read.rate),
            (None, None, None)
        );
        let write = parse(r#"{"allow": true}"#, ToolKind::Write).expect("ok");
        assert_eq!(write.approval, Approval::IfSupported);
    }

    #[test]
    fn reasons_may_be_a_set() {
        let mut object = regorus::Value::new_object();
        let mut set = regorus::Value::new_set();
        set.as_set_mut().expect("set").insert(Value::from("nope"));
        let map = object.as_object_mut().expect("object");
        map.insert(Value::from("allow"), Value::from(false));
        map.insert(Value::from("reasons"), set);
        let v = Verdict::parse(&object, ToolKind::Read).expect("ok");
        assert_eq!(v.reasons, vec!["nope".to_string()]);
    }

    #[test]
    fn malformed_decisions_name_the_problem() {
        let cases = [
            ("true", "decision is not an object (got boolean)"),
            ("[]", "decision is not an object (got array)"),
            ("{}", "decision has no allow field"),
            (r#"{"allow": "true"}"#, "allow is not a boolean"),
            (r#"{"allow": 1}"#, "allow is not a boolean"),
            (
                r#"{"allow": true, "approval": "maybe"}"#,
                "approval must be one of",
            ),
            (
                r#"{"allow": true, "approval": 1}"#,
                "approval must be one of",
            ),
            (r#"{"allow": true, "reasons": "x"}"#, "reasons must be"),
            (r#"{"allow": true, "reasons": [1]}"#, "reasons must be"),
            (r#"{"allow": true, "history": 3600}"#, "history must be"),
            (
                r#"{"allow": true, "history": {"max_window_seconds": 1}}"#,
                "history must be",
            ),
            (
                r#"{"allow": true, "history": {"max_window_seconds": -1, "max_age_seconds": 1}}"#,
                "history must be",
            ),
            (r#"{"allow": true, "history": null}"#, "history must be"),
            (r#"{"allow": true, "max_limit": 0}"#, "max_limit must be"),
            (r#"{"allow": true, "max_limit": 1.5}"#, "max_limit must be"),
            (r#"{"allow": true, "max_limit": "10"}"#, "max_limit must be"),
            (
                r#"{"allow": true, "max_limit": 5000000000}"#,
                "max_limit must be",
            ),
            (r#"{"allow": true, "rate": {}}"#, "rate must set"),
            (
                r#"{"allow": true, "aproval": "page"}"#,
                r#"decision has an unknown key "aproval" (allowed: allow, reasons"#,
            ),
            (
                r#"{"allow": false, "max_limt": 10}"#,
                r#"decision has an unknown key "max_limt""#,
            ),
            (
                r#"{"allow": true, "history": {"max_window_seconds": 1, "max_age_seconds": 1, "max_ages": 1}}"#,
                r#"history has an unknown key "max_ages" (allowed: "max_window_seconds", "max_age_seconds")"#,
            ),
            (
                r#"{"allow": true, "rate": {"calls": 1, "per_seconds": 1, "x": 1}}"#,
                "rate has an unknown key",
            ),
        ];
        for (json, expected) in cases {
            let err = parse(json, ToolKind::Read).expect_err(json);
            assert!(err.starts_with(expected), "{json}: {err}");
        }
        let undefined = Verdict::parse(&Value::Undefined, ToolKind::Read).expect_err("undefined");
        assert!(undefined.starts_with("policy result undefined"));
    }

    #[test]
    fn page_approval_carries_its_approvers() {
        let v = parse(
            r#"{"allow": true, "approval": "page",
                "approvers": {"usrgrps": ["Zabbix administrators"], "distinct_from_caller": true}}"#,
            ToolKind::Write,
        )
        .expect("well-formed");
        assert_eq!(v.approval, Approval::Page);
        assert_eq!(
            v.approvers,
            Some(Approvers {
                usrgrps: vec!["Zabbix administrators".into()],
                distinct_from_caller: true
            })
        );
        let cases = [
            (
                r#"{"allow": true, "approval": "page"}"#,
                "approval page needs approvers",
            ),
            (
                r#"{"allow": true, "approval": "required", "approvers": {"usrgrps": ["a"], "distinct_from_caller": true}}"#,
                "approvers is only valid with approval page",
            ),
            (
                r#"{"allow": true, "approval": "page", "approvers": {"usrgrps": [], "distinct_from_caller": true}}"#,
                "approvers must be",
            ),
            (
                r#"{"allow": true, "approval": "page", "approvers": {"usrgrps": ["a"]}}"#,
                "approvers must be",
            ),
            (
                r#"{"allow": true, "approval": "page", "approvers": {"usrgrps": ["a"], "distinct_from_caller": "yes"}}"#,
                "approvers must be",
            ),
            (
                r#"{"allow": true, "approval": "page", "approvers": {"usrgrps": "a", "distinct_from_caller": true}}"#,
                "approvers must be",
            ),
            (
                r#"{"allow": true, "approval": "page", "approvers": {"usrgrps": [1], "distinct_from_caller": true}}"#,
                "approvers must be",
            ),
            (
                r#"{"allow": true, "approval": "page", "approvers": null}"#,
                "approvers must be",
            ),
            (
                r#"{"allow": true, "approval": "page", "approvers": {"usrgrps": ["a"], "distinct_from_caller": false, "users": ["admin"]}}"#,
                r#"approvers has an unknown key "users""#,
            ),
        ];
        for (json, expected) in cases {
            let err = parse(json, ToolKind::Write).expect_err(json);
            assert!(err.starts_with(expected), "{json}: {err}");
        }
    }

    #[test]
    fn approval_serde_spelling() {
        assert_eq!(
            serde_json::to_string(&Approval::IfSupported).expect("ser"),
            "\"if_supported\""
        );
        assert_eq!(Approval::Required.as_str(), "required");
        assert_eq!(
            serde_json::to_string(&Approval::Page).expect("ser"),
            "\"page\""
        );
    }
}
