//! The one mapping from internal errors to what an MCP client sees: tool failures are tool
//! results with `isError: true` and a structured body `{code, message, data?, decision_id?}`;
//! protocol-level problems are JSON-RPC errors.

use rmcp::ErrorData as McpError;
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

use crate::catalog::ArgError;
use crate::mcp::approval::ApprovalError;
use crate::response::ResponseError;
use crate::zabbix::ZabbixError;

/// Why a tool call failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    InvalidArguments(#[from] ArgError),
    #[error(transparent)]
    Zabbix(#[from] ZabbixError),
    #[error(transparent)]
    Response(#[from] ResponseError),
    #[error("{message}")]
    Unsupported { message: String },
    #[error("the request reached the tool without a resolved caller")]
    NoCaller,
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
    Store(#[from] crate::store::StoreError),
}

impl ToolError {
    /// The stable error code agents and SIEM rules match on.
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::InvalidArguments(_) => "invalid_arguments",
            ToolError::Zabbix(z) => match z {
                ZabbixError::Api { .. } => "zabbix_error",
                ZabbixError::Timeout(_) => "upstream_timeout",
                ZabbixError::Unavailable(_)
                | ZabbixError::HttpStatus(_)
                | ZabbixError::BadResponse(_) => "upstream_unavailable",
                ZabbixError::Unsupported { .. } => "unsupported_version",
                ZabbixError::BadUrl { .. } | ZabbixError::Tls(_) => "internal_error",
            },
            ToolError::Unsupported { .. } => "unsupported_version",
            ToolError::Denied { .. } => "denied",
            ToolError::ApprovalDeclined(_) => "approval_declined",
            ToolError::ApprovalUnavailable | ToolError::ApprovalPageOff => "approval_unavailable",
            ToolError::ApprovalPending { .. } => "approval_pending",
            ToolError::ApprovalExpired => "approval_expired",
            ToolError::Store(_) => "internal_error",
            ToolError::Approval(a) => match a {
                ApprovalError::BadState
                | ApprovalError::WrongTool { .. }
                | ApprovalError::Changed
                | ApprovalError::AlreadyUsed => "invalid_arguments",
                ApprovalError::Elicitation(_) => "approval_unavailable",
                ApprovalError::Key(_) | ApprovalError::Schema(_) | ApprovalError::Store(_) => {
                    "internal_error"
                }
            },
            ToolError::Response(_) | ToolError::NoCaller => "internal_error",
        }
    }

    /// The structured error body.
    pub fn body(&self, decision_id: Option<&str>) -> Value {
        let mut body = Map::new();
        body.insert("code".into(), json!(self.code()));
        let message = match self {
            ToolError::InvalidArguments(e) => e.to_string(),
            other => other.to_string(),
        };
        body.insert("message".into(), json!(message));
        if let ToolError::Zabbix(ZabbixError::Api {
            code,
            message,
            data,
        }) = self
        {
            // Zabbix's own error, unchanged.
            body.insert(
                "data".into(),
                json!({"code": code, "message": message, "data": data}),
            );
        }
        if let ToolError::ApprovalPending {
            approval_id,
            url,
            expires,
        } = self
        {
            body.insert(
                "data".into(),
                json!({"approval_id": approval_id, "url": url, "expires": expires}),
            );
        }
        if let ToolError::Denied { reasons } = self {
            body.insert("data".into(), json!({ "reasons": reasons }));
        }
        if let Some(id) = decision_id {
            body.insert("decision_id".into(), json!(id));
        }
        Value::Object(body)
    }

    pub fn into_result(self, decision_id: Option<&str>) -> CallToolResult {
        CallToolResult::structured_error(self.body(decision_id))
    }
}

/// A tool name that is not offered to this caller: the same answer as a tool that does
/// not exist, so denied tools cannot be discovered by probing.
pub fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(format!("unknown tool: {name}"), None)
}

/// A resource that does not exist or that the caller may not see (deliberately the same).
pub fn resource_not_found(uri: &str) -> McpError {
    McpError::resource_not_found(format!("resource not found: {uri}"), None)
}

pub fn internal(message: impl std::fmt::Display) -> McpError {
    McpError::internal_error(message.to_string(), None)
}
