//! JSON Schemas of tool arguments and of the read-tool response, generated from the
//! catalog so that what an agent is told and what is validated cannot drift apart.

use serde_json::{Map, Value, json};

use crate::catalog::{ArgType, DEFAULT_LIMIT, MAX_LIMIT, ToolDef};
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
            ArgType::Strings => json!({
                "type": "array", "minItems": 1, "maxItems": 1000,
                "items": {"type": "string", "minLength": 1}
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
            ArgType::UnixTime => json!({"type": "integer", "minimum": 0}),
        };
        if let Some(object) = schema.as_object_mut() {
            object.insert("description".into(), Value::String(def.description.into()));
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
