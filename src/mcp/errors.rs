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
//! Our own failures are `internal_error`, never dressed as Zabbix's. Requests refused
//! before MCP or as MCP messages are answered in [`before_mcp`].

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequest, CallToolResult, ContentBlock, CustomRequest, ErrorCode, InitializeRequest,
    ListResourceTemplatesRequest, ListResourcesRequest, ListToolsRequest, PingRequest,
    ReadResourceRequest,
};
use serde_json::{Map, Value, json};

use crate::catalog::ArgError;
use crate::mcp::approval::ApprovalError;
use crate::ratelimit::RateLimitError;
use crate::response::ResponseError;
use crate::store::StoreError;
use crate::zabbix::{CallerError, Method, ZabbixError};

mod before_mcp;

pub use before_mcp::{Refusal, caller_rpc, refusal, refusal_message};
pub(crate) use before_mcp::{refusal_rpc, refused};

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

const INTERNAL: &str = "internal_error";
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

/// A tool name that is not offered to this caller: the same answer as a tool that does
/// not exist, so denied tools cannot be discovered by probing.
pub fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(format!("unknown tool: {name}"), None)
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

/// As [`resource_not_found`] for a URI that holds the caller's own token: the message (which
/// rmcp also logs, at warn) does not quote it.
pub fn resource_not_found_unquoted() -> McpError {
    McpError::resource_not_found(
        "resource not found: its URI holds the caller's own API token, which is never logged",
        None,
    )
}

#[cfg(test)]
#[path = "errors_tests.rs"]
mod tests;
