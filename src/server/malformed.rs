//! Request bodies that are not a JSON-RPC message. rmcp answers them with a plain-text
//! HTTP 415 (`fail to deserialize request body …`): it reads as a Content-Type complaint,
//! and no client can read it as JSON-RPC. The MCP transport asks for an HTTP error status,
//! optionally with a JSON-RPC error without an id; this module says what is wrong with
//! such a body, and `mcp::errors::malformed_body` writes that answer.

use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Map, Value};

/// What keeps a body from being a JSON-RPC message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MalformedBody {
    /// Not JSON text, or JSON nested deeper or with numbers larger than the parser takes.
    #[error("the body is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("the body is a JSON-RPC batch (an array); send one message per request")]
    Batch,
    #[error("the body is a JSON {0}, not a JSON-RPC message object")]
    NotAnObject(&'static str),
    #[error("\"jsonrpc\" must be \"2.0\"")]
    Version,
    #[error("\"id\" must be a string or an integer")]
    Id,
    #[error("\"method\" must be a string")]
    Method,
    #[error(
        "the object has no \"method\" (a request or notification) and no \"result\" or \"error\" (a response)"
    )]
    NoMethod,
    /// Anything else rmcp refuses, in serde's words.
    #[error("the object is not a JSON-RPC message: {0}")]
    Other(String),
}

/// Why `body` is not a JSON-RPC message as rmcp reads messages; `None` if it is one.
pub(crate) fn diagnose(body: &[u8]) -> Option<MalformedBody> {
    let refused = serde_json::from_slice::<ClientJsonRpcMessage>(body).err()?;
    let value = match serde_json::from_slice::<Value>(body) {
        Ok(value) => value,
        Err(error) => return Some(MalformedBody::NotJson(error)),
    };
    Some(match value {
        Value::Object(fields) => {
            in_object(&fields).unwrap_or(MalformedBody::Other(refused.to_string()))
        }
        Value::Array(_) => MalformedBody::Batch,
        Value::String(_) => MalformedBody::NotAnObject("string"),
        Value::Number(_) => MalformedBody::NotAnObject("number"),
        Value::Bool(_) => MalformedBody::NotAnObject("boolean"),
        Value::Null => MalformedBody::NotAnObject("null"),
    })
}

/// The first of the common faults a message object has, if any.
fn in_object(fields: &Map<String, Value>) -> Option<MalformedBody> {
    if fields.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some(MalformedBody::Version);
    }
    if let Some(id) = fields.get("id")
        && !(id.is_string() || id.is_i64() || id.is_u64())
    {
        return Some(MalformedBody::Id);
    }
    match fields.get("method") {
        Some(method) if !method.is_string() => Some(MalformedBody::Method),
        None if !fields.contains_key("result") && !fields.contains_key("error") => {
            Some(MalformedBody::NoMethod)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{MalformedBody, diagnose};

    fn why(body: &str) -> String {
        diagnose(body.as_bytes())
            .map(|error| error.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn messages_rmcp_reads_are_not_malformed() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"no/such/method"}"#,
            // Params rmcp cannot read as the method's own: a request all the same.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
        ] {
            assert!(diagnose(body.as_bytes()).is_none(), "{body}");
        }
    }

    #[test]
    fn each_fault_is_named() {
        assert!(matches!(diagnose(b""), Some(MalformedBody::NotJson(_))));
        assert!(why("{").starts_with("the body is not JSON: EOF"));
        assert!(
            why(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"\ud800"}}"#)
                .starts_with("the body is not JSON")
        );
        assert!(
            why(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1e400}}"#)
                .contains("number out of range")
        );
        let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
        assert!(why(&deep).contains("recursion limit"));
        assert!(why(r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#).contains("batch"));
        assert_eq!(why("[]"), MalformedBody::Batch.to_string());
        assert_eq!(
            why(r#""x""#),
            "the body is a JSON string, not a JSON-RPC message object"
        );
        assert_eq!(
            why("null"),
            "the body is a JSON null, not a JSON-RPC message object"
        );
        assert_eq!(
            why(r#"{"id":1,"method":"tools/list"}"#),
            r#""jsonrpc" must be "2.0""#
        );
        assert_eq!(
            why(r#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#),
            r#""jsonrpc" must be "2.0""#
        );
        for id in ["null", "{}", "1.5", "true", "[1]"] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            assert_eq!(
                why(&body),
                r#""id" must be a string or an integer"#,
                "{body}"
            );
        }
        assert_eq!(
            why(r#"{"jsonrpc":"2.0","id":1,"method":7}"#),
            r#""method" must be a string"#
        );
        assert!(why(r#"{"jsonrpc":"2.0","id":1}"#).starts_with("the object has no \"method\""));
    }
}
