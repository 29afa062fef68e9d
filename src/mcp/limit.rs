//! The per-caller limits on the request path: after the policy allowed a call (or a
//! resource read) and before anything is sent to Zabbix; for a write, the configured
//! limits before its targets are looked up. A refusal is logged as a `rate_limited` event
//! under the call's `decision_id`.

use serde_json::json;

use crate::app::App;
use crate::catalog::args::Arguments;
use crate::mcp::errors::ToolError;
use crate::mcp::gate;
use crate::mcp::tools::Call;
use crate::policy::Decision;
use crate::ratelimit::{Admission, Applied, RateLimitError};
use crate::zabbix::Caller;

/// Admits the call under the caller's limits; the admission is held until the call ends.
/// `configured_taken`: the configured limits were taken before the decision
/// ([`admit_configured`]), so only the decision's own `rate` is left.
pub async fn admit(
    app: &App,
    caller: &Caller,
    decision: &Decision,
    configured_taken: bool,
) -> Result<Admission, ToolError> {
    let applied = app.limiter.applied(decision.rate.as_ref());
    let applied = if configured_taken {
        applied.policy_only()
    } else {
        applied
    };
    admit_under(app, caller, &decision.decision_id, &applied).await
}

/// For a write, whose targets are looked up in Zabbix before it is decided: takes the
/// configured limits (`RateLimit`, `MaxConcurrent`), which need no decision, first, so a
/// caller over them causes no lookup. A refusal is logged as a call the sidecar denied
/// before asking the policy, with its `rate_limited` event.
pub async fn admit_configured(
    app: &App,
    call: &Call<'_>,
    arguments: &Arguments,
) -> Result<Admission, (ToolError, Decision)> {
    let applied = app.limiter.applied(None);
    match app
        .limiter
        .admit(&call.caller.identity.userid, &applied)
        .await
    {
        Ok(admission) => Ok(admission),
        Err(error) => {
            let decision = gate::refused_before_decision(app, call, arguments, error.to_string());
            log_refusal(app, call.caller, &decision.decision_id, &applied, &error);
            Err((ToolError::RateLimited(error), decision))
        }
    }
}

async fn admit_under(
    app: &App,
    caller: &Caller,
    id: &str,
    applied: &Applied,
) -> Result<Admission, ToolError> {
    // Keyed by userid: all tokens of one Zabbix user share the budget (see ratelimit).
    match app.limiter.admit(&caller.identity.userid, applied).await {
        Ok(admission) => Ok(admission),
        Err(error) => {
            log_refusal(app, caller, id, applied, &error);
            Err(ToolError::RateLimited(error))
        }
    }
}

fn log_refusal(app: &App, caller: &Caller, id: &str, applied: &Applied, error: &RateLimitError) {
    match error {
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
}
