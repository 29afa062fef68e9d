//! The structured content of a read result, written into rmcp's JSON response as the
//! envelope text it already is, so rmcp does not serialize the same document a second time
//! from a `serde_json::Value` tree (and no tree is built).
//!
//! Stateless HTTP only: the route puts a [`Splice`] into the request; the read path puts
//! a placeholder object (random per response) where the structured content goes and
//! leaves the envelope text in the slot; the route replaces the placeholder's JSON text
//! in the finished response body with that text. Where no slot exists (stateful sessions,
//! stdio) the structured content is the parsed `Value`, as before.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::StatusCode;
use http::header::CONTENT_LENGTH;
use http_body_util::{BodyExt, Full};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use crate::server::routes::{Body, json_response};

/// The key the placeholder is looked for under: `"structuredContent":{"…` cannot occur
/// inside a JSON string (its quotes would be escaped), only as rmcp's field.
const FIELD: &[u8] = b"\"structuredContent\":";

const PLACEHOLDER_KEY: &str = "zabbix-mcp-guard-structured";

/// One response's slot for its structured content.
#[derive(Clone, Default)]
pub struct Splice {
    slot: Arc<Mutex<Option<Filled>>>,
}

struct Filled {
    /// The placeholder's JSON text, as rmcp serializes it.
    placeholder: String,
    text: String,
}

impl Splice {
    /// The request's slot, if its route splices.
    pub fn of(context: &RequestContext<RoleServer>) -> Option<Splice> {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Splice>())
            .cloned()
    }

    /// Keeps `text` (a complete JSON object) for the response; returns the placeholder to
    /// put where it goes: an object too, so rmcp keeps it for every protocol version (it
    /// drops non-object structured content for older ones). `None` if the slot is
    /// unusable (the caller then builds the value).
    pub fn fill(&self, text: String) -> Option<Value> {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let placeholder = json!({ PLACEHOLDER_KEY: nonce });
        let mut slot = self.slot.lock().ok()?;
        *slot = Some(Filled {
            placeholder: placeholder.to_string(),
            text,
        });
        Some(placeholder)
    }

    /// Writes the kept text over the placeholder in `response`'s body. A response whose
    /// slot was not filled, or that has no structured content (rmcp leaves it out for
    /// protocol versions before 2025-06-18), passes unchanged; a placeholder anywhere else
    /// is our failure: an internal error, never a response carrying it.
    pub async fn apply(&self, response: http::Response<Body>) -> http::Response<Body> {
        let filled = match self.slot.lock() {
            Ok(mut slot) => slot.take(),
            Err(_) => return splice_failed(),
        };
        let Some(filled) = filled else {
            return response;
        };
        let (mut parts, body) = response.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(never) => match never {},
        };
        let body = match splice(&body, &filled) {
            Some(spliced) => spliced,
            None if !contains(&body, filled.placeholder.as_bytes()) => body,
            None => return splice_failed(),
        };
        parts.headers.remove(CONTENT_LENGTH);
        http::Response::from_parts(parts, Full::new(body).boxed())
    }
}

/// `body` with `"structuredContent":<placeholder>` turned into `"structuredContent":<text>`.
fn splice(body: &[u8], filled: &Filled) -> Option<Bytes> {
    let mut pattern = Vec::with_capacity(FIELD.len() + filled.placeholder.len());
    pattern.extend_from_slice(FIELD);
    pattern.extend_from_slice(filled.placeholder.as_bytes());
    // rmcp writes the structured content after the (large) text content: search from the end.
    let at = body.windows(pattern.len()).rposition(|w| w == pattern)?;
    let value_at = at + FIELD.len();
    let rest = value_at + filled.placeholder.len();
    let mut out = Vec::with_capacity(body.len() + filled.text.len());
    out.extend_from_slice(&body[..value_at]);
    out.extend_from_slice(filled.text.as_bytes());
    out.extend_from_slice(&body[rest..]);
    Some(Bytes::from(out))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn splice_failed() -> http::Response<Body> {
    tracing::error!(
        "read result not completed: its structured content has no place in the response"
    );
    json_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        &json!({"error": "internal_error", "message": "the response could not be completed"}),
    )
}

#[cfg(test)]
mod tests {
    use super::{Filled, splice};

    #[test]
    fn placeholder_is_replaced_by_the_text() {
        let filled = Filled {
            placeholder: r#"{"p":"1"}"#.into(),
            text: r#"{"results":[],"count":0}"#.into(),
        };
        let body = br#"{"result":{"content":[{"type":"text","text":"{\"structuredContent\":{\"p\":\"1\"}}"}],"structuredContent":{"p":"1"},"isError":false}}"#;
        let out = splice(body, &filled).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["result"]["structuredContent"]["count"], 0);
        assert_eq!(
            v["result"]["content"][0]["text"],
            r#"{"structuredContent":{"p":"1"}}"#
        );
        assert!(splice(br#"{"structuredContent":{"p":"2"}}"#, &filled).is_none());
    }
}
