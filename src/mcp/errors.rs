//! The one mapping from internal errors to what a client sees, in its three forms:
//! - a failed tool call is a tool result with `isError: true` whose text block is the JSON
//!   error body `{code, message, data?, decision_id?}` and that carries no
//!   `structuredContent` (a read tool's output schema describes its success envelope, and
//!   TypeScript-SDK clients validate any structured content against it);
//! - a failed request that is not a tool call (tools/list, resources/*) is a JSON-RPC error
//!   with `data: {code}`; unknown tools and unknown resources are JSON-RPC errors too, and
//!   so are requests whose params are not the method's (`-32602`);
//! - a request refused before MCP (token, Host/Origin) is an HTTP answer `{error, message}`;
//!   a request refused as an MCP message (its version, headers, session or body) is an HTTP
//!   error status carrying a JSON-RPC error ([`refused`]).
//!
//! Our own failures are `internal_error`, never dressed as Zabbix's.

use http::StatusCode;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequest, CallToolResult, ContentBlock, CustomRequest, ErrorCode, InitializeRequest,
    ListResourceTemplatesRequest, ListResourcesRequest, ListToolsRequest, PingRequest,
    ReadResourceRequest, RequestId,
};
use serde_json::{Map, Value, json};

use crate::catalog::ArgError;
use crate::mcp::approval::ApprovalError;
use crate::ratelimit::RateLimitError;
use crate::response::ResponseError;
use crate::server::body::BodyError;
use crate::server::guard::GuardError;
use crate::server::in_flight::NotClaimed;
use crate::server::malformed::MalformedBody;
use crate::server::refusal::{Refused, supported_versions};
use crate::store::StoreError;
use crate::zabbix::{CallerError, Method, ZabbixError};

/// Why a tool call (or another MCP request) failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    InvalidArguments(#[from] ArgError),
    #[error(transparent)]
    Zabbix(#[from] ZabbixError),
    /// A write was sent, and no result came back that says whether it was applied
    /// ([`ZabbixError::outcome_unknown`]): the agent must look before calling again.
    #[error(
        "{0}; the write was sent and may have been applied: check its state in Zabbix before calling again"
    )]
    WriteOutcomeUnknown(ZabbixError),
    #[error(transparent)]
    Response(#[from] ResponseError),
    /// Zabbix answered a read with something other than a list of records.
    #[error("{method} did not return a list of records")]
    NotAList { method: Method },
    #[error("the request reached the tool without a resolved caller")]
    NoCaller,
    /// A write's caller, looked up again before it is decided, could not be established:
    /// no write is judged on an identity Zabbix did not just confirm.
    #[error(
        "the caller's identity could not be checked with Zabbix before the write: {}; nothing was sent to Zabbix",
        .0.public_text()
    )]
    Caller(CallerError),
    #[error("the request's task ended without an answer")]
    TaskFailed,
    #[error("denied by policy: {}", .reasons.join("; "))]
    Denied { reasons: Vec<String> },
    #[error("the change was not approved ({0}); nothing was sent to Zabbix")]
    ApprovalDeclined(String),
    #[error(
        "the policy requires a human approval and this client cannot ask for one (it needs form elicitation, on a stateful session or protocol 2026-07-28); nothing was sent to Zabbix"
    )]
    ApprovalUnavailable,
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    #[error(
        "a person must approve this call on the approval page: {url} (until {expires}); call again with the same arguments once it is decided; nothing was sent to Zabbix"
    )]
    ApprovalPending {
        approval_id: String,
        url: String,
        expires: String,
    },
    #[error(
        "the approval of this call expired before it was used; call again to ask anew; nothing was sent to Zabbix"
    )]
    ApprovalExpired,
    #[error(
        "the policy requires approval on the approval page, and the page is not configured (ApprovalListenPort, ApprovalAllowedIP, ApprovalURL); nothing was sent to Zabbix"
    )]
    ApprovalPageOff,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    RateLimited(#[from] crate::ratelimit::RateLimitError),
    /// A write's decision line was not written: the log's queue is full, or its
    /// destination failed or did not take it in time; no change goes to Zabbix unlogged.
    #[error(
        "the decision log is not keeping up (its destination is slow, stuck or failing: a pipe whose reader is gone, a full disk), and no write is sent without its decision logged; try again later; nothing was sent to Zabbix"
    )]
    Unlogged,
}

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

const INTERNAL: &str = "internal_error";
const CHALLENGE: &str = "Bearer realm=\"zabbix-mcp-guard\"";
const CHALLENGE_INVALID: &str = "Bearer realm=\"zabbix-mcp-guard\", error=\"invalid_token\"";

impl ToolError {
    /// A write's failure at Zabbix: said as possibly applied where it may have been.
    pub fn of_write(error: ZabbixError) -> ToolError {
        if error.outcome_unknown() {
            ToolError::WriteOutcomeUnknown(error)
        } else {
            ToolError::Zabbix(error)
        }
    }

    /// The stable error code agents and SIEM rules match on.
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::InvalidArguments(_) => "invalid_arguments",
            ToolError::Zabbix(z) | ToolError::WriteOutcomeUnknown(z) => zabbix_code(z),
            ToolError::Denied { .. } => "denied",
            ToolError::ApprovalDeclined(_) => "approval_declined",
            ToolError::ApprovalUnavailable | ToolError::ApprovalPageOff => "approval_unavailable",
            ToolError::ApprovalPending { .. } => "approval_pending",
            ToolError::ApprovalExpired => "approval_expired",
            // Limits, not failures: the caller may retry later.
            ToolError::Store(StoreError::CallerFull { .. }) => "rate_limited",
            ToolError::Store(StoreError::Full) | ToolError::Unlogged => "overloaded",
            ToolError::Store(_) => INTERNAL,
            ToolError::RateLimited(r) => match r.scope() {
                Some(_) => "rate_limited",
                None => INTERNAL,
            },
            ToolError::Approval(a) => match a {
                ApprovalError::BadState
                | ApprovalError::WrongTool { .. }
                | ApprovalError::WrongMethod { .. }
                | ApprovalError::Changed
                | ApprovalError::TargetsChanged(_)
                | ApprovalError::CallerChanged
                | ApprovalError::AlreadyUsed => "invalid_arguments",
                ApprovalError::Elicitation(_) => "approval_unavailable",
                ApprovalError::Store(StoreError::UsedFull(_)) => "overloaded",
                ApprovalError::Key(_) | ApprovalError::Schema(_) | ApprovalError::Store(_) => {
                    INTERNAL
                }
            },
            ToolError::Caller(caller) => match caller {
                CallerError::InvalidToken(_) => "unauthorized",
                CallerError::Upstream(z) => zabbix_code(z),
                CallerError::GroupsUnavailable(_) | CallerError::Incomplete { .. } => {
                    "identity_incomplete"
                }
            },
            ToolError::Response(_)
            | ToolError::NotAList { .. }
            | ToolError::NoCaller
            | ToolError::TaskFailed => INTERNAL,
        }
    }

    /// The error body `{code, message, data?, decision_id?}`.
    pub fn body(&self, decision_id: Option<&str>) -> Value {
        let mut body = Map::new();
        body.insert("code".into(), json!(self.code()));
        body.insert("message".into(), json!(self.public_message()));
        match self {
            ToolError::Zabbix(ZabbixError::Api {
                code,
                message,
                data,
            }) => {
                // Zabbix's own error, unchanged.
                body.insert(
                    "data".into(),
                    json!({"code": code, "message": message, "data": data}),
                );
            }
            ToolError::ApprovalPending {
                approval_id,
                url,
                expires,
            } => {
                body.insert(
                    "data".into(),
                    json!({"approval_id": approval_id, "url": url, "expires": expires}),
                );
            }
            ToolError::Denied { reasons } => {
                body.insert("data".into(), json!({ "reasons": reasons }));
            }
            // The code is that of the failure, shared with calls that sent nothing: this
            // says, for a program to read, that the write may have been applied.
            ToolError::WriteOutcomeUnknown(_) => {
                body.insert("data".into(), json!({"sent": true, "outcome": "unknown"}));
            }
            ToolError::RateLimited(r) => {
                if let Some(data) = rate_limited_data(r) {
                    body.insert("data".into(), data);
                }
            }
            _ => {}
        }
        if let Some(id) = decision_id {
            body.insert("decision_id".into(), json!(id));
        }
        Value::Object(body)
    }

    /// The failed tool call as a tool result: the body as JSON text, no structured content,
    /// so that it is valid under any tool's output schema for every client.
    pub fn into_result(self, decision_id: Option<&str>) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(self.body(decision_id).to_string())])
    }

    /// The message the agent reads: the error's own text, but never Redis' words, which
    /// name commands, scripts and keys (the decision log and the process log keep them).
    fn public_message(&self) -> String {
        const STORE_FAILED: &str = "the shared store failed (its error is in the sidecar's log)";
        match self {
            ToolError::InvalidArguments(e) => e.to_string(),
            ToolError::Store(StoreError::Backend(_) | StoreError::Corrupt(_)) => {
                STORE_FAILED.to_owned()
            }
            ToolError::RateLimited(RateLimitError::Store(StoreError::Backend(_))) => format!(
                "the per-caller limits could not be checked ({STORE_FAILED}); nothing was sent to Zabbix"
            ),
            other => other.to_string(),
        }
    }

    /// The failure of a request that is not a tool call, as a JSON-RPC error.
    pub fn into_rpc(self) -> McpError {
        let mut data = json!({ "code": self.code() });
        if let ToolError::RateLimited(r) = &self
            && let (Some(extra), Some(map)) = (rate_limited_data(r), data.as_object_mut())
        {
            map.extend(extra.as_object().cloned().unwrap_or_default());
        }
        let data = Some(data);
        let message = self.public_message();
        match self {
            ToolError::InvalidArguments(_) => McpError::invalid_params(message, data),
            _ => McpError::internal_error(message, data),
        }
    }
}

/// `{retry_after_seconds, scope}` of a call over a per-caller limit.
fn rate_limited_data(error: &crate::ratelimit::RateLimitError) -> Option<Value> {
    let scope = error.scope()?;
    Some(json!({"retry_after_seconds": error.retry_after_seconds(), "scope": scope.as_str()}))
}

/// The code of a Zabbix client failure: Zabbix's answer, Zabbix out of reach, or ours.
fn zabbix_code(error: &ZabbixError) -> &'static str {
    match error {
        ZabbixError::Api { .. } => "zabbix_error",
        ZabbixError::Timeout(_) => "upstream_timeout",
        // The sidecar's own limit, retryable: 503 when it refuses a request before MCP.
        ZabbixError::Overloaded { .. } => "overloaded",
        ZabbixError::Unavailable(_)
        | ZabbixError::AnswerLost(_)
        | ZabbixError::HttpStatus(_)
        | ZabbixError::BadResponse(_)
        | ZabbixError::ResponseTooLarge(_) => "upstream_unavailable",
        ZabbixError::Request(_) | ZabbixError::BadUrl { .. } | ZabbixError::Tls(_) => INTERNAL,
    }
}

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

/// A tool name that is not offered to this caller: the same answer as a tool that does
/// not exist, so denied tools cannot be discovered by probing.
pub fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(format!("unknown tool: {name}"), None)
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

/// A request rmcp could not read as the method it names hands the handler that method as a
/// custom request. For a method this server answers, that means its params were wrong:
/// invalid params, in serde's words (`missing field \`name\``); any other method is
/// not found, as rmcp answers it.
pub(crate) fn unreadable_request(request: &CustomRequest) -> McpError {
    let method = request.method.as_str();
    let why = match method {
        "tools/call" => params_error::<CallToolRequest>(request),
        "tools/list" => params_error::<ListToolsRequest>(request),
        "resources/read" => params_error::<ReadResourceRequest>(request),
        "resources/list" => params_error::<ListResourcesRequest>(request),
        "resources/templates/list" => params_error::<ListResourceTemplatesRequest>(request),
        "initialize" => params_error::<InitializeRequest>(request),
        "ping" => params_error::<PingRequest>(request),
        _ => return method_not_found(method),
    };
    let message = match why {
        Some(why) => format!("invalid params for {method}: {why}"),
        // Read again from the value rmcp kept, they pass: what failed is only in the text,
        // such as a key given twice (the value kept the last).
        None => format!("invalid params for {method}: a key is given more than once"),
    };
    McpError::invalid_params(message, None)
}

/// A method this server does not answer (rmcp's own words are the bare method name).
pub(crate) fn method_not_found(method: &str) -> McpError {
    McpError::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("method not found: {method}"),
        None,
    )
}

/// Why `request` is not a `R`: rmcp's own reading of the method and params, redone.
fn params_error<R: serde::de::DeserializeOwned>(request: &CustomRequest) -> Option<String> {
    let mut message = Map::new();
    message.insert("method".into(), Value::from(request.method.as_str()));
    if let Some(params) = &request.params {
        message.insert("params".into(), params.clone());
    }
    serde_json::from_value::<R>(Value::Object(message))
        .err()
        .map(|error| error.to_string())
}

/// A resource that does not exist or that the caller may not see (deliberately the same).
pub fn resource_not_found(uri: &str) -> McpError {
    McpError::resource_not_found(format!("resource not found: {uri}"), None)
}

#[cfg(test)]
#[path = "errors_tests.rs"]
mod tests;
