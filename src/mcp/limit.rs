//! The per-caller limits on the request path: after the policy allowed a call (or a
//! resource read) and before anything is sent to Zabbix. A refusal is logged as a
//! `rate_limited` event under the call's `decision_id`.

use serde_json::json;

use crate::app::App;
use crate::mcp::errors::ToolError;
use crate::policy::Decision;
use crate::ratelimit::{Admission, RateLimitError};
use crate::zabbix::Caller;

/// Admits the call under the caller's limits; the admission is held until the call ends.
pub async fn admit(
    app: &App,
    caller: &Caller,
    decision: &Decision,
) -> Result<Admission, ToolError> {
    let applied = app.limiter.applied(decision.rate.as_ref());
    // Keyed by userid: all tokens of one Zabbix user share the budget (see ratelimit).
    let error = match app.limiter.admit(&caller.identity.userid, &applied).await {
        Ok(admission) => return Ok(admission),
        Err(error) => error,
    };
    let id = decision.decision_id.as_str();
    match &error {
        RateLimitError::Limited { scope, .. } => {
            app.decisions.event(
                id,
                "rate_limited",
                json!({
                    "scope": scope.as_str(),
                    "limit": applied.limit_text(*scope),
                    "retry_after_seconds": error.retry_after_seconds(),
                    "sent": false,
                }),
            );
            tracing::info!(decision_id = %id, user.id = %caller.identity.userid, scope = scope.as_str(), "rate limited");
        }
        RateLimitError::Store(_) | RateLimitError::TooManyBudgets => {
            app.decisions.event(
                id,
                "rate_limit_failed",
                json!({"code": "internal_error", "message": error.to_string(), "sent": false}),
            );
            tracing::warn!(decision_id = %id, error = %error, "rate limits not checked: call refused");
        }
    }
    Err(ToolError::RateLimited(error))
}
