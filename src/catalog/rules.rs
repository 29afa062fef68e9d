//! Constraints across arguments (`ArgRule`), applied after each argument was validated on
//! its own. Rules may also fill in defaults, so that the policy sees what will be sent.

use serde_json::{Map, Number, Value, json};

use crate::catalog::args::ArgError;
use crate::catalog::structured::{PERIOD_MAX, PERIOD_MIN};
use crate::catalog::{
    ArgRule, DEFAULT_HISTORY_MAX_AGE_SECONDS, DEFAULT_HISTORY_MAX_WINDOW_SECONDS,
};

fn err(message: String) -> ArgError {
    ArgError::new(message)
}

fn non_empty_list(args: &Map<String, Value>, name: &str) -> bool {
    args.get(name)
        .and_then(Value::as_array)
        .is_some_and(|l| !l.is_empty())
}

pub(crate) fn apply(
    rule: &ArgRule,
    args: &mut Map<String, Value>,
    now: i64,
) -> Result<(), ArgError> {
    match rule {
        ArgRule::ExactlyOne(names) => {
            let given: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| args.get(*n).is_some_and(|v| v != &Value::Bool(false)))
                .collect();
            if given.len() != 1 {
                return Err(err(format!(
                    "exactly one of {} must be given",
                    names.join(", ")
                )));
            }
            // `global: false` beside hostids means nothing; do not send it.
            args.retain(|k, v| !(names.contains(&k.as_str()) && v == &Value::Bool(false)));
        }
        ArgRule::HistoryWindow { from, till } => {
            if !args.contains_key(*till) {
                args.insert((*till).to_owned(), Value::Number(Number::from(now)));
            }
            // The catalog's widest window ending at `till`; the decision may narrow it
            // (`args::fit_defaults`).
            if !args.contains_key(*from) {
                let till = args.get(*till).and_then(Value::as_i64).unwrap_or(now);
                let from_value = (till - DEFAULT_HISTORY_MAX_WINDOW_SECONDS)
                    .max(now - DEFAULT_HISTORY_MAX_AGE_SECONDS);
                args.insert((*from).to_owned(), Value::from(from_value));
            }
        }
        ArgRule::Default { arg, value } => {
            if !args.contains_key(*arg) {
                args.insert((*arg).to_owned(), Value::from(*value));
            }
        }
        ArgRule::Before { earlier, later } => {
            let first = args.get(*earlier).and_then(Value::as_i64);
            let second = args.get(*later).and_then(Value::as_i64);
            if let (Some(first), Some(second)) = (first, second)
                && first >= second
            {
                return Err(err(format!(
                    "{earlier} ({first}) must be before {later} ({second})"
                )));
            }
        }
        ArgRule::GroupsOrHosts {
            groups,
            hosts,
            required,
        } => {
            let any = non_empty_list(args, groups) || non_empty_list(args, hosts);
            if *required && !any {
                return Err(err(format!(
                    "at least one of {groups}, {hosts} must be given: a maintenance covers host groups, hosts or both"
                )));
            }
            if !required && !any && args.contains_key(*groups) && args.contains_key(*hosts) {
                return Err(err(format!(
                    "{groups} and {hosts} cannot both be empty: a maintenance must keep at least one host group or host"
                )));
            }
        }
        ArgRule::TagsNeedDataCollection {
            maintenance_type,
            tags,
            tags_evaltype,
        } => {
            if args.get(*maintenance_type).and_then(Value::as_i64) == Some(1) {
                let given: Vec<&str> = [*tags, *tags_evaltype]
                    .into_iter()
                    .filter(|n| args.contains_key(*n))
                    .collect();
                if !given.is_empty() {
                    return Err(err(format!(
                        "{} only apply to {maintenance_type} 0 (with data collection); a maintenance without data collection ({maintenance_type} 1) takes no problem tags: remove {}",
                        [*tags, *tags_evaltype].join(" and "),
                        given.join(" and ")
                    )));
                }
            }
        }
        ArgRule::FutureOrIndefinite(arg) => match args.get(*arg).and_then(Value::as_i64) {
            None => {
                args.insert((*arg).to_owned(), Value::from(0));
            }
            Some(0) => {}
            Some(t) if t <= now => {
                return Err(err(format!(
                    "{arg} ({t}) is not in the future (now is {now}); give a later time, or omit {arg} to suppress indefinitely"
                )));
            }
            Some(_) => {}
        },
        ArgRule::DefaultTimeperiod {
            periods,
            since,
            till,
        } => {
            if args.contains_key(*periods) {
                return Ok(());
            }
            let start = args.get(*since).and_then(Value::as_i64);
            let end = args.get(*till).and_then(Value::as_i64);
            let (Some(start), Some(end)) = (start, end) else {
                return Ok(());
            };
            let period = end - start;
            if !(PERIOD_MIN..=PERIOD_MAX).contains(&period) {
                return Err(err(format!(
                    "without {periods}, the maintenance gets one one-time period from {since} to {till}, which must last between {PERIOD_MIN} seconds and {PERIOD_MAX} seconds (999 days 23:59); it lasts {period} seconds: give {periods} explicitly or change the window"
                )));
            }
            args.insert(
                (*periods).to_owned(),
                json!([{"timeperiod_type": 0, "start_date": start, "period": period}]),
            );
        }
    }
    Ok(())
}
