//! Requests to `/mcp` refused for their form as MCP messages: the protocol version, the
//! `Accept` and `Content-Type` headers, the HTTP method, the session, the body. Each is a
//! JSON-RPC error body (`mcp::errors::refused` words it) with the HTTP status the MCP
//! transport asks for, and the request's own id when its body is a request: a
//! TypeScript-SDK client hands a 400 whose JSON-RPC error carries its request's id to the
//! caller as that request's error (and reads `-32022` to pick a version it shares).
//!
//! rmcp answers most of these itself, in plain text (`Bad Request: Unsupported
//! MCP-Protocol-Version: 1999-01-01`, `Method Not Allowed`): [`from_rmcp`] reads such an
//! answer by its status and says what is wrong with the request, in our words.
//!
//! Admission refusals (a token, Host/Origin, the session caps) keep their `{error,
//! message}` shape: they are not about the message. The MCP gate's refusal concerns one
//! request and is its error, as `MaxRequestsPerSession`'s is.

use std::time::Duration;

use bytes::Bytes;
use http::header::{ALLOW, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Method, Response, StatusCode};
use http_body_util::BodyExt;
use rmcp::model::{ProtocolVersion, RequestId};
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::mcp::errors;
use crate::server::body::BodyError;
use crate::server::direct;
use crate::server::gate::GateFull;
use crate::server::in_flight::NotClaimed;
use crate::server::malformed::{self, MalformedBody};
use crate::server::routes::{Body, json_response};

/// The MCP protocol version header.
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const SESSION_ID: &str = "mcp-session-id";
/// rmcp's plain-text answers are a line; a longer body is not one of them.
const RMCP_TEXT_MAX: usize = 4096;

/// Why a request to `/mcp` was refused as an MCP message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    #[error(
        "MCP-Protocol-Version {sent:?} is not supported; supported: {}",
        supported_versions().join(", ")
    )]
    UnsupportedVersion { sent: String },
    #[error("the Accept header must list {needs}")]
    NotAcceptable { needs: &'static str },
    #[error("Content-Type must be application/json{}", sent_as(.sent.as_deref()))]
    ContentType { sent: Option<String> },
    #[error("HTTP method {method} is not served on /mcp; use {allow}")]
    Method { method: Method, allow: String },
    #[error(
        "this request needs the Mcp-Session-Id header of a session of this token; start one with initialize"
    )]
    SessionRequired,
    #[error(
        "no such session (ended, idled out, or not this token's); start a new one with initialize"
    )]
    SessionNotFound,
    #[error(transparent)]
    Malformed(#[from] MalformedBody),
    #[error(transparent)]
    Body(#[from] BodyError),
    /// The MCP gate stayed full for `Timeout`.
    #[error(transparent)]
    Overloaded(#[from] GateFull),
    /// A reused id, or a session at `MaxRequestsPerSession`.
    #[error(transparent)]
    InSession(#[from] NotClaimed),
    /// Another refusal of rmcp's, in its words, with its status.
    #[error("{text}")]
    Rmcp { status: StatusCode, text: String },
    /// rmcp failed to serve the session (its 500).
    #[error("the MCP session could not take the request: {0}")]
    Internal(String),
}

/// What a refusal of rmcp's is explained from: the request's method and the headers it
/// checks, kept (cheap copies) while rmcp has the request.
pub(crate) struct RefusalContext {
    method: Method,
    version: Option<HeaderValue>,
    content_type: Option<HeaderValue>,
    has_session: bool,
}

impl RefusalContext {
    pub(crate) fn of(parts: &http::request::Parts) -> RefusalContext {
        RefusalContext {
            method: parts.method.clone(),
            version: parts.headers.get(PROTOCOL_VERSION).cloned(),
            content_type: parts.headers.get(CONTENT_TYPE).cloned(),
            has_session: parts.headers.contains_key(SESSION_ID),
        }
    }

    /// A JSON Content-Type, as rmcp checks it before reading the body.
    fn json_body(&self) -> bool {
        self.content_type.as_ref().is_some_and(direct::is_json_type)
    }
}

/// What the request sent instead of JSON.
fn sent_as(sent: Option<&str>) -> String {
    match sent {
        Some(sent) => format!(", not {sent:?}"),
        None => "; the request has none".to_owned(),
    }
}

/// The versions rmcp serves (it refuses any other in the header).
pub(crate) fn supported_versions() -> Vec<&'static str> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .map(ProtocolVersion::as_str)
        .collect()
}

impl Refused {
    /// The answer: `id` is the refused request's (none for a body that is no request).
    pub(crate) fn response(&self, id: Option<RequestId>) -> Response<Body> {
        let (status, body) = errors::refused(self, id);
        // The gate logs its own refusal.
        if !matches!(self, Refused::Overloaded(_)) {
            let reason = crate::display::escape_text(&self.to_string());
            tracing::info!(
                http.response.status_code = status.as_u16(),
                %reason,
                "request refused: not a valid MCP request"
            );
        }
        let mut response = json_response(status, &body);
        let headers = response.headers_mut();
        match self {
            Refused::Method { allow, .. } => {
                if let Ok(allow) = HeaderValue::from_str(allow) {
                    headers.insert(ALLOW, allow);
                }
            }
            // A session at its limit says it in its 200's body (`retry_after_seconds`).
            Refused::Body(BodyError::OverBudget(_)) | Refused::Overloaded(_) => {
                headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
            }
            _ => {}
        }
        response
    }
}

/// The id of the request in `body`, if it is one (a `method` and an `id`, read as rmcp
/// reads ids); the rest of the body is skipped.
pub(crate) fn request_id(body: &[u8]) -> Option<RequestId> {
    #[derive(Deserialize)]
    struct Head {
        #[serde(default)]
        id: Option<RequestId>,
        #[serde(default)]
        method: Option<IgnoredAny>,
    }
    match serde_json::from_slice::<Head>(body) {
        Ok(Head {
            id: Some(id),
            method: Some(_),
        }) => Some(id),
        _ => None,
    }
}

/// The id of the request in `body` unless it is `initialize`: a client still connecting,
/// whose refusal is its connection's and keeps its HTTP status.
pub(crate) fn request_id_after_initialize(body: &[u8]) -> Option<RequestId> {
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(default)]
        id: Option<RequestId>,
        #[serde(default, borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    match serde_json::from_slice::<Head>(body) {
        Ok(Head {
            id: Some(id),
            method: Some(method),
        }) if method != "initialize" => Some(id),
        _ => None,
    }
}

/// rmcp's answer, unless it is a refusal in plain text: then ours, saying what is wrong
/// with the request (`parts` and `body` are the request's).
pub(crate) async fn from_rmcp(
    response: Response<Body>,
    request: &RefusalContext,
    body: &Bytes,
) -> Response<Body> {
    let status = response.status();
    let json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return response;
    }
    let allow = response
        .headers()
        .get(ALLOW)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("POST")
        .to_owned();
    let text = rmcp_text(response.into_body()).await;
    let refused = diagnose(status, request, body, allow, text);
    let id = match refused {
        Refused::Malformed(_) => None,
        _ => request_id(body),
    };
    refused.response(id)
}

/// What rmcp's refusal with `status` says about this request.
fn diagnose(
    status: StatusCode,
    request: &RefusalContext,
    body: &[u8],
    allow: String,
    text: String,
) -> Refused {
    match status {
        StatusCode::BAD_REQUEST => match unsupported_version(request.version.as_ref()) {
            Some(sent) => Refused::UnsupportedVersion { sent },
            // rmcp's only other plain 400 (`Bad Request: Session ID is required`).
            None if !request.has_session && text.contains("Session ID") => Refused::SessionRequired,
            None => Refused::Rmcp { status, text },
        },
        StatusCode::NOT_FOUND => Refused::SessionNotFound,
        StatusCode::METHOD_NOT_ALLOWED => Refused::Method {
            method: request.method.clone(),
            allow,
        },
        StatusCode::NOT_ACCEPTABLE => Refused::NotAcceptable {
            needs: if request.method == Method::GET {
                "text/event-stream"
            } else {
                "both application/json and text/event-stream"
            },
        },
        // rmcp's 415 for a JSON Content-Type is its refusal of the body itself.
        StatusCode::UNSUPPORTED_MEDIA_TYPE if request.json_body() => {
            match malformed::diagnose(body) {
                Some(error) => Refused::Malformed(error),
                None => Refused::Rmcp { status, text },
            }
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => Refused::ContentType {
            sent: request
                .content_type
                .as_ref()
                .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()),
        },
        status if status.is_server_error() => Refused::Internal(text),
        _ => Refused::Rmcp { status, text },
    }
}

/// The request's protocol version, as sent, if rmcp does not serve it.
fn unsupported_version(sent: Option<&HeaderValue>) -> Option<String> {
    let sent = sent?;
    match sent.to_str() {
        Ok(version) if supported_versions().contains(&version) => None,
        Ok(version) => Some(version.to_owned()),
        Err(_) => Some(String::from_utf8_lossy(sent.as_bytes()).into_owned()),
    }
}

/// rmcp's words, for a refusal this module does not name itself (a line of text; its
/// bodies are in memory already).
async fn rmcp_text(body: Body) -> String {
    let read = tokio::time::timeout(Duration::from_secs(1), body.collect()).await;
    match read {
        Ok(Ok(collected)) => {
            let bytes = collected.to_bytes();
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(RMCP_TEXT_MAX)]);
            text.trim().to_owned()
        }
        Ok(Err(never)) => match never {},
        Err(_) => String::from("(no text)"),
    }
}

#[cfg(test)]
#[path = "refusal_tests.rs"]
mod tests;
