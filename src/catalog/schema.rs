//! JSON Schemas of tool arguments and of the read-tool response, generated from the
//! catalog so that what an agent is told and what is validated cannot drift apart.

use serde_json::{Map, Value, json};

use crate::catalog::structured::{PERIOD_MAX, PERIOD_MIN, START_TIME_MAX, TAG_MAX_LEN};
use crate::catalog::time::MAX_TIMESTAMP;
use crate::catalog::{ArgType, DEFAULT_LIMIT, IntChoice, MAX_LIMIT, ToolDef};
use crate::zabbix::ZabbixVersion;

/// The input schema of a tool on this Zabbix version.
pub fn input_schema(tool: &ToolDef, version: ZabbixVersion) -> Map<String, Value> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for def in tool.args {
        let mut schema = match &def.ty {
            ArgType::Ids => json!({
                "type": "array", "minItems": 1, "maxItems": 1000,
                "items": {"type": ["string", "integer"], "pattern": "^[0-9]+$", "minimum": 0}
            }),
            ArgType::Strings { max_len } => json!({
                "type": "array", "minItems": 1, "maxItems": 1000,
                "items": {"type": "string", "minLength": 1, "maxLength": max_len}
            }),
            ArgType::Text { max_len } => {
                json!({"type": "string", "minLength": 1, "maxLength": max_len})
            }
            ArgType::Limit => json!({
                "type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT
            }),
            ArgType::Bool => json!({"type": "boolean"}),
            ArgType::IntList { min, max } => json!({
                "type": "array", "minItems": 1,
                "items": {"type": "integer", "minimum": min, "maximum": max}
            }),
            ArgType::Enum(values) => {
                let names: Vec<&str> = values
                    .iter()
                    .filter(|e| version >= e.since)
                    .map(|e| e.name)
                    .collect();
                json!({"type": "string", "enum": names})
            }
            ArgType::UnixTime => {
                json!({"type": "integer", "minimum": 0, "maximum": MAX_TIMESTAMP})
            }
            ArgType::Id => id_schema(),
            ArgType::IdSet { allow_empty } => json!({
                "type": "array", "minItems": if *allow_empty { 0 } else { 1 }, "maxItems": 1000,
                "uniqueItems": true, "items": id_schema()
            }),
            ArgType::Int { min, max } => {
                json!({"type": "integer", "minimum": min, "maximum": max})
            }
            ArgType::IntChoice(choices) => int_choice(choices),
            ArgType::Timestamp => timestamp_schema(),
            ArgType::FreeText { max_len } => json!({"type": "string", "maxLength": max_len}),
            ArgType::Timeperiods => timeperiods_schema(),
            ArgType::Tags { allow_empty } => tags_schema(*allow_empty),
        };
        if let Some(object) = schema.as_object_mut() {
            let description = match &def.ty {
                ArgType::IntChoice(choices) => {
                    format!("{} ({})", def.description, meanings(choices))
                }
                _ => def.description.to_owned(),
            };
            object.insert("description".into(), Value::String(description));
        }
        properties.insert(def.name.into(), schema);
        if def.required {
            required.push(def.name);
        }
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), json!(required));
    }
    schema.insert("additionalProperties".into(), Value::Bool(false));
    schema
}

fn id_schema() -> Value {
    json!({"type": ["string", "integer"], "pattern": "^[0-9]+$", "minimum": 0})
}

fn int_choice(choices: &[IntChoice]) -> Value {
    let values: Vec<i64> = choices.iter().map(|c| c.value).collect();
    json!({"type": "integer", "enum": values})
}

fn meanings(choices: &[IntChoice]) -> String {
    choices
        .iter()
        .map(|c| format!("{} = {}", c.value, c.meaning))
        .collect::<Vec<_>>()
        .join("; ")
}

fn timestamp_schema() -> Value {
    json!({"anyOf": [
        {"type": "integer", "minimum": 0, "maximum": MAX_TIMESTAMP,
         "description": "Unix time in seconds."},
        {"type": "string", "format": "date-time",
         "description": "RFC 3339 date-time with Z or an offset, e.g. 2026-10-15T22:00:00+02:00; a time without a zone is refused."}
    ]})
}

fn timeperiods_schema() -> Value {
    let mut start_date = timestamp_schema();
    if let Some(object) = start_date.as_object_mut() {
        object.insert(
            "description".into(),
            json!("Type 0 only (required): when the one-time period starts."),
        );
    }
    json!({
        "type": "array", "minItems": 1, "maxItems": 1000,
        "items": {
            "type": "object",
            "description": "Fields by timeperiod_type: 0 one time: start_date, period. 2 daily: every, start_time, period. 3 weekly: every, dayofweek, start_time, period. 4 monthly: month, start_time, period and either day, or dayofweek with every. Other fields are refused.",
            "properties": {
                "timeperiod_type": {"type": "integer", "enum": [0, 2, 3, 4],
                    "description": "0 = one time, 2 = daily, 3 = weekly, 4 = monthly."},
                "period": {"type": "integer", "minimum": PERIOD_MIN, "maximum": PERIOD_MAX,
                    "description": "Duration in seconds (at least 300; Zabbix rounds down to the minute)."},
                "start_date": start_date,
                "start_time": {"type": ["integer", "string"], "minimum": 0, "maximum": START_TIME_MAX,
                    "pattern": "^[0-9]{1,2}:[0-9]{2}$",
                    "description": "Types 2, 3, 4 (required): time of day the period starts, seconds since midnight (0-86340) or \"HH:MM\"."},
                "every": {"type": "integer", "minimum": 1,
                    "description": "Type 2: every N days (1-999); type 3: every N weeks (1-99); type 4 with dayofweek: week of the month (1-4 = first-fourth, 5 = last; default 1)."},
                "dayofweek": {"type": "integer", "minimum": 1, "maximum": 127,
                    "description": "Types 3 (required) and 4: bitmask of weekdays: 1 Monday, 2 Tuesday, 4 Wednesday, 8 Thursday, 16 Friday, 32 Saturday, 64 Sunday."},
                "month": {"type": "integer", "minimum": 1, "maximum": 4095,
                    "description": "Type 4 (required): bitmask of months: 1 January, 2 February, 4 March ... 2048 December (4095 = all)."},
                "day": {"type": "integer", "minimum": 1, "maximum": 31,
                    "description": "Type 4: day of the month (instead of dayofweek)."}
            },
            "required": ["timeperiod_type", "period"],
            "additionalProperties": false
        }
    })
}

fn tags_schema(allow_empty: bool) -> Value {
    json!({
        "type": "array", "minItems": if allow_empty { 0 } else { 1 }, "maxItems": 1000,
        "items": {
            "type": "object",
            "properties": {
                "tag": {"type": "string", "minLength": 1, "maxLength": TAG_MAX_LEN,
                    "description": "Problem tag name."},
                "operator": {"type": "integer", "enum": [0, 2], "default": 2,
                    "description": "0 = value equals, 2 = value contains (default)."},
                "value": {"type": "string", "maxLength": TAG_MAX_LEN, "default": "",
                    "description": "Tag value to compare (default \"\": with operator 2, any value)."}
            },
            "required": ["tag"],
            "additionalProperties": false
        }
    })
}

/// The output schema shared by all read tools: the response envelope.
pub fn read_output_schema() -> Map<String, Value> {
    let schema = json!({
        "type": "object",
        "properties": {
            "results": {"type": "array", "items": {"type": "object"},
                        "description": "The records, in the tool's fixed sort order."},
            "count": {"type": "integer", "description": "Number of records in results."},
            "truncated": {"type": "boolean",
                          "description": "True when more records exist than were returned."},
            "truncated_by": {"type": ["string", "null"], "enum": ["count", "size", null],
                             "description": "Which limit cut the response: the limit argument (count) or the response size limit (size)."},
            "limit": {"type": "integer", "description": "The result count limit in effect."},
            "note": {"type": ["string", "null"],
                     "description": "How to get the remaining records when truncated."}
        },
        "required": ["results", "count", "truncated", "limit"]
    });
    match schema {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
