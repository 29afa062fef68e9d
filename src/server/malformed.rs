//! Request bodies that are not a JSON-RPC message. rmcp answers them with a plain-text
//! HTTP 415 (`fail to deserialize request body …`): it reads as a Content-Type complaint,
//! and no client can read it as JSON-RPC. The MCP transport asks for an HTTP error status,
//! optionally with a JSON-RPC error without an id; this module says what is wrong with
//! such a body, and `mcp::errors::refused` writes that answer.

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
    #[error("\"id\" must be a string or an integer from -2^63 to 2^63-1")]
    Id,
    #[error("\"method\" must be a string")]
    Method,
    #[error(
        "the object has no \"method\" (a request or notification) and no \"result\" or \"error\" (a response)"
    )]
    NoMethod,
    #[error(
        "the object has both \"method\" and \"{0}\": a message is a request, a notification or a response, not two"
    )]
    MethodAndAnswer(&'static str),
    #[error("\"params\" must be an object (or left out)")]
    Params,
    /// serde_json's value keeps the last of a repeated member; rmcp's typed read refuses it.
    #[error("a member of the message object is given more than once")]
    Repeated,
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
        Value::Object(fields) => match in_object(&fields) {
            Some(fault) => fault,
            None if serde_json::from_value::<ClientJsonRpcMessage>(Value::Object(fields))
                .is_ok() =>
            {
                MalformedBody::Repeated
            }
            None => MalformedBody::Other(refused.to_string()),
        },
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
        && !(id.is_string() || id.is_i64() || id.as_f64().is_some_and(integral))
    {
        return Some(MalformedBody::Id);
    }
    let answer = ["result", "error"]
        .into_iter()
        .find(|key| fields.contains_key(*key));
    match (fields.get("method"), answer) {
        (Some(method), _) if !method.is_string() => return Some(MalformedBody::Method),
        (Some(_), Some(answer)) => return Some(MalformedBody::MethodAndAnswer(answer)),
        (None, None) => return Some(MalformedBody::NoMethod),
        _ => {}
    }
    match fields.get("params") {
        Some(params)
            if fields.contains_key("method") && !(params.is_object() || params.is_null()) =>
        {
            Some(MalformedBody::Params)
        }
        _ => None,
    }
}

/// An integer written in float form (`1.0`, `1e2`) that rmcp takes as an id: one an `f64`
/// holds exactly.
fn integral(f: f64) -> bool {
    f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0
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
        for id in [
            "null",
            "{}",
            "1.5",
            "true",
            "[1]",
            "9223372036854775808",
            "1e300",
        ] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            assert_eq!(
                why(&body),
                r#""id" must be a string or an integer from -2^63 to 2^63-1"#,
                "{body}"
            );
        }
        assert_eq!(
            why(r#"{"jsonrpc":"2.0","id":1,"method":7}"#),
            r#""method" must be a string"#
        );
        assert!(why(r#"{"jsonrpc":"2.0","id":1}"#).starts_with("the object has no \"method\""));
    }

    /// Before, each of these was "the object is not a JSON-RPC message: unrecognized
    /// JSON-RPC message": rmcp's words for a message that fits none of its shapes.
    #[test]
    fn params_answers_and_repeated_members_are_named() {
        for params in ["\"x\"", "7", "[]", "[1]", "true"] {
            for method in [
                "tools/call",
                "tools/list",
                "ping",
                "notifications/initialized",
            ] {
                let body =
                    format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}"#);
                assert_eq!(
                    why(&body),
                    r#""params" must be an object (or left out)"#,
                    "{body}"
                );
            }
        }
        assert_eq!(
            why(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","result":{}}"#),
            "the object has both \"method\" and \"result\": a message is a request, a notification or a response, not two"
        );
        assert!(
            why(r#"{"jsonrpc":"2.0","id":1,"method":"ping","error":{"code":1,"message":"x"}}"#)
                .contains(r#"and "error""#)
        );
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        ] {
            assert_eq!(
                why(body),
                "a member of the message object is given more than once",
                "{body}"
            );
        }
        // Ids rmcp takes in float form stay messages.
        for id in ["1.0", "1e2", "-3.0"] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            assert!(diagnose(body.as_bytes()).is_none(), "{body}");
        }
    }
}
