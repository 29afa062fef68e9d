//! Argument validation: every argument is checked against its tool definition before
//! anything reaches the policy or Zabbix, and normalized (IDs become strings, defaults are
//! filled in). Each error names the constraint that was not met.
//!
//! Defaults come from the catalog before the policy decides, so the policy sees what will be
//! sent. A default that the decision's limits do not admit (a `limit` above the caller's
//! `max_limit`, a history window wider than the caller's) is fitted to them afterwards
//! (`fit_defaults`, after which the policy decides again); only values the caller gave are
//! refused (`enforce_limits`).

use serde_json::{Map, Value};

use crate::catalog::time::MAX_TIMESTAMP;
use crate::catalog::{
    ArgDef, ArgRule, ArgType, DEFAULT_HISTORY_MAX_AGE_SECONDS, DEFAULT_HISTORY_MAX_WINDOW_SECONDS,
    DEFAULT_LIMIT, MAX_LIMIT, Mapping, ToolDef, rules, structured, time,
};
use crate::display;
use crate::zabbix::ZabbixVersion;

/// Validated, normalized arguments: what the policy sees and what builds the request. The
/// second field names the arguments that were filled in by default (not given by the caller).
#[derive(Debug, Clone, PartialEq)]
pub struct Arguments(pub Map<String, Value>, pub(crate) Vec<&'static str>);

/// Limits that may differ per caller (the policy decides them; these are the defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_limit: u32,
    pub history_max_window_seconds: i64,
    pub history_max_age_seconds: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArgError(pub String);

/// The longest message an argument error carries, in characters. Messages quote the value
/// they refuse, and a value may be most of a 1 MB request: quoted whole, each refused call
/// wrote it back to the agent and into the process log (an agent could fill the log a
/// megabyte a call). Longer messages keep their start, which names the argument and the
/// rule, and their end, and say how much was left out between.
const MAX_MESSAGE_CHARS: usize = 400;
/// Of those, the message's last characters kept (a hint after the value, its closing quote).
const MESSAGE_TAIL_CHARS: usize = 60;

/// Most list arguments Zabbix will take in one call; more is a mistake, not a query.
pub(crate) const MAX_LIST_LEN: usize = 1000;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_limit: MAX_LIMIT,
            history_max_window_seconds: DEFAULT_HISTORY_MAX_WINDOW_SECONDS,
            history_max_age_seconds: DEFAULT_HISTORY_MAX_AGE_SECONDS,
        }
    }
}

impl ArgError {
    /// An error with `message`, cut in the middle past [`MAX_MESSAGE_CHARS`].
    pub(crate) fn new(message: String) -> Self {
        let total = message.chars().count();
        if total <= MAX_MESSAGE_CHARS {
            return ArgError(message);
        }
        let head_chars = MAX_MESSAGE_CHARS - MESSAGE_TAIL_CHARS;
        let byte_at = |chars: usize| {
            message
                .char_indices()
                .nth(chars)
                .map_or(message.len(), |(at, _)| at)
        };
        let head = message.get(..byte_at(head_chars)).unwrap_or_default();
        let tail = message
            .get(byte_at(total - MESSAGE_TAIL_CHARS)..)
            .unwrap_or_default();
        let cut = total - head_chars - MESSAGE_TAIL_CHARS;
        ArgError(format!("{head}… ({cut} characters left out) …{tail}"))
    }
}

impl Arguments {
    pub fn get(&self, name: &str) -> Option<&Value> {
        member(&self.0, name)
    }

    /// Whether `name` was filled in by default rather than given by the caller.
    pub fn defaulted(&self, name: &str) -> bool {
        self.1.contains(&name)
    }

    pub fn limit(&self) -> u32 {
        self.get("limit")
            .and_then(Value::as_u64)
            .and_then(|l| u32::try_from(l).ok())
            .unwrap_or(DEFAULT_LIMIT)
    }
}

/// `map[name]`, found by comparing names: an argument map holds only the tool's own
/// members (`validate` refuses any other first), a handful, where serde_json's map would
/// hash every name looked up with SipHash.
fn member<'a>(map: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    map.iter()
        .find_map(|(key, value)| (key == name).then_some(value))
}

fn err(message: String) -> ArgError {
    ArgError::new(message)
}

/// Checks the raw `arguments` of a call against the tool and normalizes them.
pub fn validate(
    tool: &ToolDef,
    raw: Option<&Map<String, Value>>,
    version: ZabbixVersion,
    now: i64,
) -> Result<Arguments, ArgError> {
    let empty = Map::new();
    let raw = raw.unwrap_or(&empty);
    for name in raw.keys() {
        if !tool.args.iter().any(|a| a.name == name) {
            let accepted: Vec<&str> = tool.args.iter().map(|a| a.name).collect();
            return Err(err(format!(
                "unknown argument {name:?}; {} accepts: {}",
                tool.name,
                accepted.join(", ")
            )));
        }
    }
    let mut out = Map::new();
    for def in tool.args {
        // LLM clients often send null for "not given": treat it as absent.
        match member(raw, def.name).filter(|v| !v.is_null()) {
            Some(value) => {
                let value = check(def, value, version)?;
                refuse_hidden_text(def.name, &value)?;
                out.insert(def.name.to_owned(), value);
            }
            None if def.required => {
                return Err(err(format!("{} is required", def.name)));
            }
            None if matches!(def.maps_to, Mapping::Limit) => {
                out.insert(def.name.to_owned(), Value::from(DEFAULT_LIMIT));
            }
            None => {}
        }
    }
    for rule in tool.rules {
        rules::apply(rule, &mut out, now)?;
    }
    let defaulted = tool
        .args
        .iter()
        .map(|a| a.name)
        .filter(|name| member(&out, name).is_some() && member(raw, name).is_none_or(Value::is_null))
        .collect();
    Ok(Arguments(out, defaulted))
}

fn check(def: &ArgDef, value: &Value, version: ZabbixVersion) -> Result<Value, ArgError> {
    let name = def.name;
    match &def.ty {
        ArgType::Ids => {
            let list = list_of(name, value, "IDs")?;
            let ids = list
                .iter()
                .enumerate()
                .map(|(i, v)| id(v).ok_or_else(|| {
                    err(format!("{name}[{i}] must be an ID (a string of digits or a non-negative integer), got {v}"))
                }))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Value::Array(ids))
        }
        ArgType::Strings { max_len } => {
            let list = list_of(name, value, "strings")?;
            for (i, v) in list.iter().enumerate() {
                match v.as_str() {
                    Some(s) if !s.is_empty() && s.chars().count() > *max_len => {
                        return Err(err(format!(
                            "{name}[{i}] must be at most {max_len} characters long"
                        )));
                    }
                    Some(s) if !s.is_empty() => {}
                    _ => {
                        return Err(err(format!(
                            "{name}[{i}] must be a non-empty string, got {v}"
                        )));
                    }
                }
            }
            Ok(value.clone())
        }
        ArgType::Text { max_len } => match value.as_str() {
            Some("") => Err(err(format!("{name} must not be empty"))),
            Some(s) if s.chars().count() > *max_len => Err(err(format!(
                "{name} must be at most {max_len} characters long"
            ))),
            Some(_) => Ok(value.clone()),
            None => Err(err(format!("{name} must be a string, got {value}"))),
        },
        ArgType::Limit => match integer(value) {
            Some(n) if (1..=i64::from(MAX_LIMIT)).contains(&n) => Ok(Value::from(n)),
            _ => Err(err(format!(
                "{name} must be between 1 and {MAX_LIMIT}, got {value}"
            ))),
        },
        ArgType::Bool => match value {
            Value::Bool(_) => Ok(value.clone()),
            _ => Err(err(format!("{name} must be true or false, got {value}"))),
        },
        ArgType::IntList { min, max } => {
            let list = list_of(name, value, "integers")?;
            let mut out = Vec::with_capacity(list.len());
            for (i, v) in list.iter().enumerate() {
                match integer(v) {
                    Some(n) if (*min..=*max).contains(&n) => out.push(Value::from(n)),
                    _ => {
                        return Err(err(format!(
                            "{name}[{i}] must be an integer between {min} and {max}, got {v}"
                        )));
                    }
                }
            }
            Ok(Value::Array(out))
        }
        ArgType::Enum(values) => {
            let names = || {
                values
                    .iter()
                    .filter(|e| version >= e.since)
                    .map(|e| e.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let Some(text) = value.as_str() else {
                return Err(err(format!(
                    "{name} must be one of {}, got {value}",
                    names()
                )));
            };
            match values.iter().find(|e| e.name == text) {
                Some(e) if version >= e.since => Ok(value.clone()),
                Some(e) => Err(err(format!(
                    "{name} {text:?} needs Zabbix {}.{} or later; this Zabbix is {version}",
                    e.since.major, e.since.minor
                ))),
                None => Err(err(format!(
                    "{name} must be one of {}, got {value}",
                    names()
                ))),
            }
        }
        ArgType::UnixTime => unix_time(name, value),
        ArgType::Id => id(value).ok_or_else(|| {
            err(format!(
                "{name} must be an ID (a string of digits or a non-negative integer), got {value}"
            ))
        }),
        ArgType::IdSet { allow_empty } => id_set(name, value, *allow_empty),
        ArgType::Int { min, max } => match integer(value) {
            Some(n) if (*min..=*max).contains(&n) => Ok(Value::from(n)),
            _ => Err(err(format!(
                "{name} must be an integer between {min} and {max}, got {value}"
            ))),
        },
        ArgType::IntChoice(choices) => match integer(value) {
            Some(n) if choices.iter().any(|c| c.value == n) => Ok(Value::from(n)),
            _ => Err(err(format!(
                "{name} must be {}, got {value}",
                choices
                    .iter()
                    .map(|c| format!("{} ({})", c.value, c.meaning))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ))),
        },
        ArgType::Timestamp => time::timestamp(name, value).map(Value::from).map_err(err),
        ArgType::FreeText { max_len } => match value.as_str() {
            Some(s) if s.chars().count() > *max_len => Err(err(format!(
                "{name} must be at most {max_len} characters long"
            ))),
            Some(_) => Ok(value.clone()),
            None => Err(err(format!("{name} must be a string, got {value}"))),
        },
        ArgType::Timeperiods => structured::timeperiods(name, value),
        ArgType::Tags { allow_empty } => structured::tags(name, value, *allow_empty),
    }
}

/// Unix seconds as Zabbix takes them (a 32-bit integer: it refuses a later time with its
/// own error). A time in milliseconds, an agent's usual slip, is named as such.
fn unix_time(name: &str, value: &Value) -> Result<Value, ArgError> {
    match integer(value) {
        Some(n) if (0..=MAX_TIMESTAMP).contains(&n) => Ok(Value::from(n)),
        Some(n) if n > MAX_TIMESTAMP && n / 1000 <= MAX_TIMESTAMP => Err(err(format!(
            "{name} must be a Unix time in seconds between 0 and {MAX_TIMESTAMP}, got {value} \
             (milliseconds? that is {} in seconds)",
            n / 1000
        ))),
        _ => Err(err(format!(
            "{name} must be a Unix time in seconds between 0 and {MAX_TIMESTAMP}, got {value}"
        ))),
    }
}

/// Text whose meaning would change on the way: refused in every string an argument holds,
/// naming where. Bidirectional controls and invisible format characters make text display
/// differently from what it is (to the person approving a write, or reading Zabbix later).
/// A NUL ends the text for Zabbix: on PostgreSQL its frontend escapes strings with libpq,
/// which stops at the NUL, so a name, filter or search would be looked up, and a message
/// stored, as the part before it, not the text the policy decided on.
fn refuse_hidden_text(name: &str, value: &Value) -> Result<(), ArgError> {
    let Some((path, at, c)) = hidden_in(value) else {
        return Ok(());
    };
    let why = if c == '\0' {
        "Zabbix cuts text at a NUL, so it would act on other text than the one given"
    } else {
        "bidirectional and invisible format characters are not accepted, as they make text \
         display differently from what it is"
    };
    Err(err(format!(
        "{name}{path} contains U+{:04X} at character {at} (counting from 0): {why}",
        u32::from(c)
    )))
}

/// The first NUL, bidirectional control or invisible format character of a text.
fn hidden_char(text: &str) -> Option<(usize, char)> {
    let nul = text.chars().position(|c| c == '\0').map(|at| (at, '\0'));
    match (nul, display::hidden_format_char(text)) {
        (Some(nul), Some(format)) => Some(if nul.0 < format.0 { nul } else { format }),
        (nul, format) => nul.or(format),
    }
}

/// The first hidden character in a value: its path below the argument, its character
/// index and the character.
fn hidden_in(value: &Value) -> Option<(String, usize, char)> {
    match value {
        Value::String(text) => hidden_char(text).map(|(at, c)| (String::new(), at, c)),
        Value::Array(list) => list
            .iter()
            .enumerate()
            .find_map(|(i, v)| hidden_in(v).map(|(path, at, c)| (format!("[{i}]{path}"), at, c))),
        Value::Object(map) => map.iter().find_map(|(key, v)| {
            hidden_in(v).map(|(path, at, c)| (format!(".{key}{path}"), at, c))
        }),
        _ => None,
    }
}

/// Distinct IDs (Zabbix refuses a repeated group, host or maintenance ID).
fn id_set(name: &str, value: &Value, allow_empty: bool) -> Result<Value, ArgError> {
    let list = match value {
        Value::Array(list) if list.is_empty() && allow_empty => return Ok(Value::Array(vec![])),
        _ => list_of(name, value, "IDs")?,
    };
    let mut ids: Vec<Value> = Vec::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        let Some(id) = id(v) else {
            return Err(err(format!(
                "{name}[{i}] must be an ID (a string of digits or a non-negative integer), got {v}"
            )));
        };
        if let Some(j) = ids.iter().position(|seen| seen == &id) {
            return Err(err(format!("{name}[{i}] repeats {name}[{j}] ({id})")));
        }
        ids.push(id);
    }
    Ok(Value::Array(ids))
}

fn list_of<'v>(name: &str, value: &'v Value, what: &str) -> Result<&'v Vec<Value>, ArgError> {
    list_checked(name, value, what, false)
}

/// A JSON array of at most `MAX_LIST_LEN` entries (empty only where `allow_empty`).
pub(crate) fn list_checked<'v>(
    name: &str,
    value: &'v Value,
    what: &str,
    allow_empty: bool,
) -> Result<&'v Vec<Value>, ArgError> {
    match value {
        Value::Array(list) if list.is_empty() && !allow_empty => {
            Err(err(format!("{name} must not be empty")))
        }
        Value::Array(list) if list.len() > MAX_LIST_LEN => Err(err(format!(
            "{name} may hold at most {MAX_LIST_LEN} entries, got {}",
            list.len()
        ))),
        Value::Array(list) => Ok(list),
        _ => Err(err(format!(
            "{name} must be an array of {what}, got {value}"
        ))),
    }
}

/// An ID as Zabbix writes it: digits, as a string, without leading zeros. Integers are
/// accepted too. Zabbix reads `"0010084"` as 10084, so leading zeros are dropped here: the
/// policy, the decision log and Zabbix all see the one spelling, and a rule naming `"10084"`
/// cannot be passed by writing it another way. Out of Zabbix's range is Zabbix's to say.
fn id(value: &Value) -> Option<Value> {
    match value {
        Value::String(s)
            if !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()) =>
        {
            let digits = s.trim_start_matches('0');
            Some(Value::String(
                if digits.is_empty() { "0" } else { digits }.to_owned(),
            ))
        }
        Value::Number(n) => n.as_u64().map(|n| Value::String(n.to_string())),
        _ => None,
    }
}

/// Integers may arrive as JSON numbers (including 5.0) or digit strings.
pub(crate) fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9e15)
                .map(|f| f as i64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Fits the defaults the caller did not give to the caller's limits: a default `limit` above
/// `max_limit` becomes `max_limit`, a default `time_from` the widest window the limits allow.
/// Returns whether anything changed (the policy must then see the new values).
pub fn fit_defaults(tool: &ToolDef, args: &mut Arguments, limits: &Limits, now: i64) -> bool {
    let mut changed = false;
    if args.defaulted("limit") && args.limit() > limits.max_limit {
        args.0
            .insert("limit".to_owned(), Value::from(limits.max_limit));
        changed = true;
    }
    for rule in tool.rules {
        if let ArgRule::HistoryWindow { from, till } = rule
            && args.defaulted(from)
        {
            let till = args.get(till).and_then(Value::as_i64).unwrap_or(now);
            let widest = (till - limits.history_max_window_seconds)
                .max(now - limits.history_max_age_seconds);
            if args.get(from).and_then(Value::as_i64) != Some(widest) {
                args.0.insert((*from).to_owned(), Value::from(widest));
                changed = true;
            }
        }
    }
    changed
}

/// Checks the arguments against the caller's limits after the policy decided them: the
/// result count and the history window. Defaults were fitted before (`fit_defaults`), so
/// what fails here is a value the caller gave.
pub fn enforce_limits(
    tool: &ToolDef,
    args: &Arguments,
    limits: &Limits,
    now: i64,
) -> Result<(), ArgError> {
    if args.limit() > limits.max_limit {
        return Err(err(format!(
            "limit must be between 1 and {} for this caller, got {}",
            limits.max_limit,
            args.limit()
        )));
    }
    for rule in tool.rules {
        if let ArgRule::HistoryWindow { from, till } = rule {
            history_window(&args.0, from, till, limits, now)?;
        }
    }
    Ok(())
}

fn history_window(
    args: &Map<String, Value>,
    from_name: &str,
    till_name: &str,
    limits: &Limits,
    now: i64,
) -> Result<(), ArgError> {
    let window = limits.history_max_window_seconds;
    let max_age = limits.history_max_age_seconds;
    let earliest = now - max_age;
    let till = args.get(till_name).and_then(Value::as_i64).unwrap_or(now);
    // Validation always fills it in; without one, nothing is admitted.
    let Some(from) = args.get(from_name).and_then(Value::as_i64) else {
        return Err(err(format!("{from_name} is required")));
    };
    if from > till {
        return Err(err(format!(
            "{from_name} ({from}) must not be later than {till_name} ({till})"
        )));
    }
    if till - from > window {
        return Err(err(format!(
            "the history window may be at most {window} seconds ({}); {from_name}..{till_name} spans {} seconds",
            human(window),
            till - from
        )));
    }
    if from < earliest {
        return Err(err(format!(
            "{from_name} must be no earlier than {max_age} seconds ({}) ago, i.e. >= {earliest}",
            human(max_age)
        )));
    }
    Ok(())
}

fn human(seconds: i64) -> String {
    match seconds {
        s if s % 86_400 == 0 => plural(s / 86_400, "day"),
        s if s % 3_600 == 0 => plural(s / 3_600, "hour"),
        s => format!("{s} seconds"),
    }
}

fn plural(n: i64, unit: &str) -> String {
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{Limits, enforce_limits, fit_defaults, validate};
    use crate::catalog::find;
    use crate::zabbix::ZabbixVersion;

    const NOW: i64 = 1_767_225_600;
    const V70: ZabbixVersion = ZabbixVersion::new(7, 0, 0);
    const DAY: i64 = 86_400;

    fn limits(max_limit: u32, window: i64) -> Limits {
        Limits {
            max_limit,
            history_max_window_seconds: window,
            history_max_age_seconds: window,
        }
    }

    #[test]
    fn a_default_limit_is_fitted_and_an_explicit_one_refused() {
        let def = find("host_get").unwrap();
        let mut args = validate(def, None, V70, NOW).unwrap();
        assert_eq!(args.limit(), 100);
        assert!(args.defaulted("limit"));
        assert!(fit_defaults(def, &mut args, &limits(20, DAY), NOW));
        assert_eq!(args.limit(), 20);
        enforce_limits(def, &args, &limits(20, DAY), NOW).unwrap();

        let given = json!({"limit": 50});
        let mut args = validate(def, given.as_object(), V70, NOW).unwrap();
        assert!(!fit_defaults(def, &mut args, &limits(20, DAY), NOW));
        let err = enforce_limits(def, &args, &limits(20, DAY), NOW).unwrap_err();
        assert_eq!(
            err.0,
            "limit must be between 1 and 20 for this caller, got 50"
        );
    }

    #[test]
    fn the_history_window_is_filled_before_the_decision() {
        let def = find("history_get").unwrap();
        let raw = json!({"itemids": ["1"], "type": "float"});
        let mut args = validate(def, raw.as_object(), V70, NOW).unwrap();
        // What the policy sees first: the catalog's widest window ending now.
        assert_eq!(args.get("time_till"), Some(&Value::from(NOW)));
        assert_eq!(args.get("time_from"), Some(&Value::from(NOW - 7 * DAY)));
        // A caller limited to one day gets one day; nothing changes under the defaults.
        assert!(!fit_defaults(def, &mut args, &Limits::default(), NOW));
        assert!(fit_defaults(def, &mut args, &limits(1000, DAY), NOW));
        assert_eq!(args.get("time_from"), Some(&Value::from(NOW - DAY)));
        enforce_limits(def, &args, &limits(1000, DAY), NOW).unwrap();

        // A window the caller gave is checked, never moved.
        let raw = json!({"itemids": ["1"], "type": "float", "time_from": NOW - 3 * DAY});
        let mut args = validate(def, raw.as_object(), V70, NOW).unwrap();
        assert!(!fit_defaults(def, &mut args, &limits(1000, DAY), NOW));
        let err = enforce_limits(def, &args, &limits(1000, DAY), NOW).unwrap_err();
        assert!(err.0.contains("at most 86400 seconds (1 day)"), "{err}");
    }
}
