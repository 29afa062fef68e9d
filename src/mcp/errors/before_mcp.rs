//! Requests refused before MCP (the token, Host/Origin, Zabbix unable to say who the token
//! is) and refused as MCP messages (version, headers, session, body): their HTTP answers,
//! and the JSON-RPC error in a 200 that a refusal of one request becomes where an HTTP
//! error would end a client's whole transport.

use http::StatusCode;
use rmcp::ErrorData as McpError;
use rmcp::model::{ErrorCode, RequestId};
use serde_json::{Value, json};

use super::{INTERNAL, zabbix_code};
use crate::server::body::BodyError;
use crate::server::guard::GuardError;
use crate::server::in_flight::NotClaimed;
use crate::server::malformed::MalformedBody;
use crate::server::refusal::{Refused, supported_versions};
use crate::store::StoreError;
use crate::zabbix::CallerError;

/// How a request refused before MCP is answered over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    /// The `error` field of the body.
    pub code: &'static str,
    /// The `WWW-Authenticate` challenge MCP clients expect with a 401.
    pub challenge: Option<&'static str>,
    /// `Retry-After`, in seconds, with a 429.
    pub retry_after_s: Option<u64>,
}

const CHALLENGE: &str = "Bearer realm=\"zabbix-mcp-guard\"";
const CHALLENGE_INVALID: &str = "Bearer realm=\"zabbix-mcp-guard\", error=\"invalid_token\"";

/// The `message` of a request refused before MCP: the error's text, with a Zabbix
/// failure worded without what describes the sidecar's surroundings (Zabbix's address, for
/// one): the caller is not authenticated. The process log has the whole text.
pub fn refusal_message(error: &GuardError) -> String {
    match error {
        GuardError::Caller(caller) => caller.public_text(),
        // Redis' errors name commands, scripts and addresses: the log keeps them.
        GuardError::Store(StoreError::Timeout(after)) => format!(
            "cannot check the rejected-token lockout: the shared store did not answer within {after:?}"
        ),
        GuardError::Store(_) => {
            "cannot check the rejected-token lockout: the shared store failed".to_owned()
        }
        _ => error.to_string(),
    }
}

/// A request refused before MCP: 401 for a missing or rejected token (with the challenge),
/// 403 for a foreign Host or Origin, 503 when Zabbix could not be asked, 500 for our own
/// failures.
pub fn refusal(error: &GuardError) -> Refusal {
    let unauthorized = |challenge| Refusal {
        status: StatusCode::UNAUTHORIZED,
        code: "unauthorized",
        challenge: Some(challenge),
        retry_after_s: None,
    };
    match error {
        GuardError::MissingToken => unauthorized(CHALLENGE),
        GuardError::MalformedToken
        | GuardError::DuplicateAuthorization
        | GuardError::TokenTooLong
        | GuardError::Caller(CallerError::InvalidToken(_)) => unauthorized(CHALLENGE_INVALID),
        GuardError::TooManyRejectedTokens { retry_after_s, .. }
        | GuardError::TooManyTokenLookups { retry_after_s, .. } => Refusal {
            status: StatusCode::TOO_MANY_REQUESTS,
            code: "rate_limited",
            challenge: None,
            retry_after_s: Some(*retry_after_s),
        },
        GuardError::ForbiddenHost(_) => Refusal {
            status: StatusCode::FORBIDDEN,
            code: "forbidden",
            challenge: None,
            retry_after_s: None,
        },
        GuardError::Caller(CallerError::Upstream(z)) => {
            let code = zabbix_code(z);
            let status = if code == INTERNAL {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            Refusal {
                status,
                code,
                challenge: None,
                retry_after_s: None,
            }
        }
        // Our own failure: the lockout the replicas share could not be read.
        GuardError::Store(_) => Refusal {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: INTERNAL,
            challenge: None,
            retry_after_s: None,
        },
        // Never a partial identity: without the groups, group rules would not apply.
        GuardError::Caller(CallerError::GroupsUnavailable(_) | CallerError::Incomplete { .. }) => {
            Refusal {
                status: StatusCode::SERVICE_UNAVAILABLE,
                code: "identity_incomplete",
                challenge: None,
                retry_after_s: None,
            }
        }
    }
}

/// A request refused before MCP for a reason of the moment, not of its token: Zabbix could
/// not tell who the token is now (unreachable, slow, every `MaxZabbixConcurrency` slot
/// busy, failing), the identity came back incomplete, or the shared store failed. Its
/// JSON-RPC error (the words and `data.code` of the HTTP refusal), to answer in a 200 to
/// a request: an HTTP error ends the official Python SDK's (1.30) whole client, and a
/// token's identity is looked up again each minute inside its sessions. `None` for a
/// refusal of the token or the request itself, which keeps its HTTP answer.
pub(crate) fn refusal_rpc(error: &GuardError) -> Option<RpcRefusal> {
    const LIMIT_EXCEEDED: i32 = -32005;
    let (code, data_code) = match error {
        GuardError::MissingToken
        | GuardError::MalformedToken
        | GuardError::DuplicateAuthorization
        | GuardError::TokenTooLong
        | GuardError::TooManyRejectedTokens { .. }
        | GuardError::TooManyTokenLookups { .. }
        | GuardError::ForbiddenHost(_)
        | GuardError::Caller(CallerError::InvalidToken(_)) => return None,
        GuardError::Caller(CallerError::Upstream(z)) => match zabbix_code(z) {
            "overloaded" => (LIMIT_EXCEEDED, "overloaded"),
            code => (ErrorCode::INTERNAL_ERROR.0, code),
        },
        GuardError::Caller(CallerError::GroupsUnavailable(_) | CallerError::Incomplete { .. }) => {
            (ErrorCode::INTERNAL_ERROR.0, "identity_incomplete")
        }
        GuardError::Store(_) => (ErrorCode::INTERNAL_ERROR.0, INTERNAL),
    };
    Some(RpcRefusal {
        code,
        message: refusal_message(error),
        data_code,
    })
}

/// A refusal before MCP told as a request's JSON-RPC error ([`refusal_rpc`]).
pub(crate) struct RpcRefusal {
    code: i32,
    message: String,
    data_code: &'static str,
}

impl RpcRefusal {
    /// The error answering the request `id`.
    pub(crate) fn body(&self, id: RequestId) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": self.code, "message": self.message,
                      "data": {"code": self.data_code}},
        })
    }
}

/// The caller of a stdio session could not be resolved (there is no HTTP answer to give):
/// a token Zabbix no longer accepts, or Zabbix out of reach, as a JSON-RPC error with the
/// code the HTTP refusal would carry.
pub fn caller_rpc(error: &CallerError) -> McpError {
    match error {
        CallerError::InvalidToken(_) => {
            McpError::invalid_request(error.to_string(), Some(json!({ "code": "unauthorized" })))
        }
        CallerError::Upstream(z) => {
            McpError::internal_error(error.to_string(), Some(json!({ "code": zabbix_code(z) })))
        }
        CallerError::GroupsUnavailable(_) | CallerError::Incomplete { .. } => {
            McpError::internal_error(
                error.to_string(),
                Some(json!({ "code": "identity_incomplete" })),
            )
        }
    }
}

/// A request refused as an MCP message (its version, headers, HTTP method, session or body):
/// the HTTP status the MCP transport asks for, and a JSON-RPC error with the request's id
/// (`null` when its body is no request) whose message names the fault. A body that is not
/// JSON is `-32700`; a protocol version not served is `-32022` with the versions served in
/// `data`, as 2026-07-28 clients read it to pick one; an unknown session is `-32001` with
/// 404, as the official SDKs answer it; a session at `MaxRequestsPerSession`, the MCP gate
/// and the body budget are `-32005` (with 200 when the id is known, as it is for a body too
/// large); a failure of our own is `-32603`; anything else
/// about the request is `-32600`. Other than `-32022`, `data.code` is a stable code.
pub(crate) fn refused(error: &Refused, id: Option<RequestId>) -> (StatusCode, Value) {
    const SESSION_NOT_FOUND: ErrorCode = ErrorCode(-32001);
    // Implementation-defined (-32000..-32019 in 2026-07-28, which keeps -32020..-32099 for
    // the spec); -32000 and -32001 are the SDKs' own, -32005 is JSON-RPC's usual "limit
    // exceeded" (EIP-1474). Not -32603: a limit is no failure of the server.
    const LIMIT_EXCEEDED: ErrorCode = ErrorCode(-32005);
    let invalid = (ErrorCode::INVALID_REQUEST, "invalid_request");
    let (status, (code, data_code)) = match error {
        Refused::UnsupportedVersion { sent } => {
            let data = json!({"requested": sent, "supported": supported_versions()});
            return (
                StatusCode::BAD_REQUEST,
                rpc_error(id, ErrorCode::UNSUPPORTED_PROTOCOL_VERSION, error, data),
            );
        }
        Refused::Malformed(MalformedBody::NotJson(_)) => (
            StatusCode::BAD_REQUEST,
            (ErrorCode::PARSE_ERROR, "invalid_request"),
        ),
        Refused::Malformed(
            MalformedBody::Batch
            | MalformedBody::NotAnObject(_)
            | MalformedBody::Version
            | MalformedBody::Id
            | MalformedBody::Method
            | MalformedBody::NoMethod
            | MalformedBody::MethodAndAnswer(_)
            | MalformedBody::Params
            | MalformedBody::Repeated
            | MalformedBody::Other(_),
        )
        | Refused::SessionRequired
        | Refused::InSession(NotClaimed::IdInFlight(_))
        | Refused::Body(BodyError::Unreadable) => (StatusCode::BAD_REQUEST, invalid),
        Refused::Rmcp { status, .. } => (*status, invalid),
        Refused::NotAcceptable { .. } => (StatusCode::NOT_ACCEPTABLE, invalid),
        Refused::ContentType { .. } | Refused::Body(BodyError::Encoded(_)) => {
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, invalid)
        }
        Refused::Method { .. } => (StatusCode::METHOD_NOT_ALLOWED, invalid),
        Refused::SessionNotFound => (
            StatusCode::NOT_FOUND,
            (SESSION_NOT_FOUND, "session_not_found"),
        ),
        // One request's refusal, told as that request's error in a 200 once its id is known
        // (its body read to its end: `server::drain`): an HTTP error ends the official
        // Python SDK's (1.30) whole client, with every call in flight.
        Refused::Body(BodyError::TooLarge(_)) => match id {
            Some(_) => (StatusCode::OK, invalid),
            None => (StatusCode::PAYLOAD_TOO_LARGE, invalid),
        },
        Refused::Body(BodyError::Timeout(_)) => (StatusCode::REQUEST_TIMEOUT, invalid),
        // Limits, not failures: retry (`Retry-After`). The same 200 once the id is known.
        Refused::Body(BodyError::OverBudget(_)) | Refused::Overloaded(_) => {
            let scope = match error {
                Refused::Overloaded(_) => "mcp_requests",
                _ => "request_bodies",
            };
            let status = match id {
                Some(_) => StatusCode::OK,
                None => StatusCode::SERVICE_UNAVAILABLE,
            };
            let data = json!({"code": "overloaded", "scope": scope, "retry_after_seconds": 1});
            return (status, rpc_error(id, LIMIT_EXCEEDED, error, data));
        }
        // A limit of the caller's, as the per-caller limits are told: that request's error,
        // in a 200, so every SDK reads it as such. The official Python SDK (1.30) raises on
        // any other status in its transport's task group, and a 429 ended the whole client
        // with every call in flight.
        Refused::InSession(NotClaimed::SessionFull(_)) => {
            let data = json!({"code": "rate_limited", "scope": "max_requests_per_session",
                              "retry_after_seconds": 1});
            return (StatusCode::OK, rpc_error(id, LIMIT_EXCEEDED, error, data));
        }
        Refused::Internal(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            (ErrorCode::INTERNAL_ERROR, INTERNAL),
        ),
    };
    let body = rpc_error(id, code, error, json!({ "code": data_code }));
    (status, body)
}

fn rpc_error(id: Option<RequestId>, code: ErrorCode, error: &Refused, data: Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code.0, "message": public_refusal(error), "data": data},
    })
}

/// The message of a refusal: its text, but for the body budget said as an overload.
fn public_refusal(error: &Refused) -> String {
    match error {
        Refused::Body(BodyError::OverBudget(_)) => {
            format!("the sidecar is overloaded: {error}; nothing was done, retry later")
        }
        _ => error.to_string(),
    }
}
