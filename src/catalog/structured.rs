//! Structured list arguments of the maintenance tools: time periods and problem tags.
//! Each element is checked field by field (what a Zabbix 6.0 and 7.0 accept, verified on
//! the lab), normalized (integers as numbers, defaults written out), and every error names
//! the path of the offending field, e.g. `timeperiods[1].every`.

use serde_json::{Map, Value};

use crate::catalog::args::{self, ArgError, integer};
use crate::catalog::time;

/// The shortest period Zabbix accepts (5 minutes).
pub const PERIOD_MIN: i64 = 300;
/// The longest period: 999 days 23:59 is Zabbix 7.0's limit (6.0 takes up to 2^31-1).
pub const PERIOD_MAX: i64 = 86_399_940;
/// The latest start of day Zabbix accepts: 23:59.
pub const START_TIME_MAX: i64 = 86_340;
/// Zabbix 7.0's ranges for a daily and a weekly period's `every`; 6.0 takes any int32,
/// and a value between the two would pass on one lab and fail on the other with Zabbix's
/// own words. Nobody means every 1,000 days.
const EVERY_DAYS_MAX: i64 = 999;
const EVERY_WEEKS_MAX: i64 = 99;
/// Tag names and values: the maintenance_tag columns are 255 characters.
pub const TAG_MAX_LEN: usize = 255;

/// The time period types Zabbix 6.0-8.0 know (1 was removed long ago).
pub const TIMEPERIOD_TYPES: [(i64, &str); 4] =
    [(0, "one time"), (2, "daily"), (3, "weekly"), (4, "monthly")];

fn err(message: String) -> ArgError {
    ArgError::new(message)
}

/// The fields a time period of this type may have, and which of them are required.
fn fields_of(kind: i64) -> (&'static [&'static str], &'static [&'static str]) {
    match kind {
        0 => (
            &["timeperiod_type", "start_date", "period"],
            &["start_date", "period"],
        ),
        2 => (
            &["timeperiod_type", "every", "start_time", "period"],
            &["every", "start_time", "period"],
        ),
        3 => (
            &[
                "timeperiod_type",
                "every",
                "dayofweek",
                "start_time",
                "period",
            ],
            &["every", "dayofweek", "start_time", "period"],
        ),
        _ => (
            &[
                "timeperiod_type",
                "month",
                "day",
                "dayofweek",
                "every",
                "start_time",
                "period",
            ],
            &["month", "start_time", "period"],
        ),
    }
}

fn type_name(kind: i64) -> &'static str {
    TIMEPERIOD_TYPES
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or("unknown", |(_, name)| name)
}

/// Validates and normalizes a `timeperiods` list.
pub fn timeperiods(name: &str, value: &Value) -> Result<Value, ArgError> {
    let list = list(name, value, false, "time period objects")?;
    let mut out = Vec::with_capacity(list.len());
    for (i, element) in list.iter().enumerate() {
        out.push(Value::Object(timeperiod(&format!("{name}[{i}]"), element)?));
    }
    Ok(Value::Array(out))
}

fn timeperiod(path: &str, element: &Value) -> Result<Map<String, Value>, ArgError> {
    let Value::Object(fields) = element else {
        return Err(err(format!(
            "{path} must be an object with timeperiod_type, period and the fields of its type, got {element}"
        )));
    };
    let kind = match fields.get("timeperiod_type").map(integer) {
        None => {
            return Err(err(format!(
                "{path}.timeperiod_type is required: 0 one time, 2 daily, 3 weekly, 4 monthly"
            )));
        }
        Some(Some(k)) if TIMEPERIOD_TYPES.iter().any(|(t, _)| *t == k) => k,
        Some(_) => {
            return Err(err(format!(
                "{path}.timeperiod_type must be 0 (one time), 2 (daily), 3 (weekly) or 4 (monthly), got {}",
                fields["timeperiod_type"]
            )));
        }
    };
    let (allowed, required) = fields_of(kind);
    let mut extra: Vec<&str> = fields
        .keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
        .collect();
    if !extra.is_empty() {
        extra.sort_unstable();
        return Err(err(format!(
            "{path}: {} not allowed for timeperiod_type {kind} ({}); it takes: {}",
            plural_fields(&extra),
            type_name(kind),
            allowed.join(", ")
        )));
    }
    for field in required {
        if fields.get(*field).is_none_or(Value::is_null) {
            return Err(err(format!(
                "{path}.{field} is required for timeperiod_type {kind} ({})",
                type_name(kind)
            )));
        }
    }
    let mut out = Map::new();
    out.insert("timeperiod_type".into(), Value::from(kind));
    for field in &allowed[1..] {
        let Some(raw) = fields.get(*field).filter(|v| !v.is_null()) else {
            continue;
        };
        let at = format!("{path}.{field}");
        let number = match *field {
            "start_date" => time::timestamp(&at, raw).map_err(err)?,
            "start_time" => start_time(&at, raw)?,
            "period" => ranged(&at, raw, PERIOD_MIN, PERIOD_MAX, " seconds")?,
            "every" if kind == 4 => ranged(&at, raw, 1, 5, " (1st-4th week, 5 = last)")?,
            "every" if kind == 2 => ranged(&at, raw, 1, EVERY_DAYS_MAX, " days")?,
            "every" => ranged(&at, raw, 1, EVERY_WEEKS_MAX, " weeks")?,
            "dayofweek" => ranged(&at, raw, 1, 127, " (bitmask: 1 Monday .. 64 Sunday)")?,
            "month" => ranged(&at, raw, 1, 4095, " (bitmask: 1 January .. 2048 December)")?,
            _ => ranged(&at, raw, 1, 31, "")?,
        };
        out.insert((*field).into(), Value::from(number));
    }
    if kind == 4 {
        match (out.contains_key("day"), out.contains_key("dayofweek")) {
            (false, false) => {
                return Err(err(format!(
                    "{path}: a monthly period needs either day (day of the month) or dayofweek (with every: which week)"
                )));
            }
            (true, true) => {
                return Err(err(format!(
                    "{path}: day and dayofweek cannot both be given; use day for a day of the month, or dayofweek with every for a weekday of a week"
                )));
            }
            (true, false) if out.contains_key("every") => {
                return Err(err(format!(
                    "{path}.every is only allowed with dayofweek in a monthly period (it picks the week)"
                )));
            }
            (false, true) if !out.contains_key("every") => {
                // Zabbix's default, written out so that the policy sees it.
                out.insert("every".into(), Value::from(1));
            }
            _ => {}
        }
    }
    Ok(out)
}

fn plural_fields(fields: &[&str]) -> String {
    match fields {
        [one] => format!("{one} is"),
        many => format!("{} are", many.join(", ")),
    }
}

fn ranged(at: &str, raw: &Value, min: i64, max: i64, unit: &str) -> Result<i64, ArgError> {
    match integer(raw) {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(err(format!(
            "{at} must be an integer between {min} and {max}{unit}, got {raw}"
        ))),
    }
}

fn start_time(at: &str, raw: &Value) -> Result<i64, ArgError> {
    let seconds = match raw {
        Value::String(s) if s.contains(':') => time::time_of_day(s),
        _ => integer(raw),
    };
    match seconds {
        Some(n) if (0..=START_TIME_MAX).contains(&n) => Ok(n),
        _ => Err(err(format!(
            "{at} must be the time of day as seconds since midnight (0-{START_TIME_MAX}) or \"HH:MM\" (00:00-23:59), got {raw}"
        ))),
    }
}

/// Validates and normalizes a `tags` list: `operator` defaults to 2 (contains) and `value`
/// to "", as in Zabbix; a tag may not repeat.
pub fn tags(name: &str, value: &Value, allow_empty: bool) -> Result<Value, ArgError> {
    let list = list(name, value, allow_empty, "tag objects")?;
    let mut out: Vec<Value> = Vec::with_capacity(list.len());
    for (i, element) in list.iter().enumerate() {
        let path = format!("{name}[{i}]");
        let Value::Object(fields) = element else {
            return Err(err(format!(
                "{path} must be an object {{tag, operator, value}}, got {element}"
            )));
        };
        if let Some(extra) = fields
            .keys()
            .find(|k| !["tag", "operator", "value"].contains(&k.as_str()))
        {
            return Err(err(format!(
                "{path}.{extra} is not allowed; a tag has: tag, operator, value"
            )));
        }
        let tag = text(&format!("{path}.tag"), fields.get("tag"), false)?
            .ok_or_else(|| err(format!("{path}.tag is required")))?;
        let operator = match fields.get("operator").filter(|v| !v.is_null()) {
            None => 2,
            Some(raw) => match integer(raw) {
                Some(n @ (0 | 2)) => n,
                _ => {
                    return Err(err(format!(
                        "{path}.operator must be 0 (equals) or 2 (contains), got {raw}"
                    )));
                }
            },
        };
        let value = text(&format!("{path}.value"), fields.get("value"), true)?.unwrap_or_default();
        let tag = serde_json::json!({"tag": tag, "operator": operator, "value": value});
        if let Some(j) = out.iter().position(|t| t == &tag) {
            return Err(err(format!(
                "{path} repeats {name}[{j}] (the same tag, operator and value)"
            )));
        }
        out.push(tag);
    }
    Ok(Value::Array(out))
}

fn text(at: &str, raw: Option<&Value>, allow_empty: bool) -> Result<Option<String>, ArgError> {
    match raw.filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(Value::String(s)) if s.is_empty() && !allow_empty => {
            Err(err(format!("{at} must not be empty")))
        }
        Some(Value::String(s)) if s.chars().count() > TAG_MAX_LEN => Err(err(format!(
            "{at} must be at most {TAG_MAX_LEN} characters long"
        ))),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(err(format!("{at} must be a string, got {other}"))),
    }
}

fn list<'v>(
    name: &str,
    value: &'v Value,
    allow_empty: bool,
    what: &str,
) -> Result<&'v Vec<Value>, ArgError> {
    args::list_checked(name, value, what, allow_empty).map_err(|e| {
        if name == "timeperiods" && value.as_array().is_some_and(Vec::is_empty) {
            err(format!(
                "{e} (a maintenance needs at least one time period)"
            ))
        } else {
            e
        }
    })
}
