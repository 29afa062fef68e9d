//! The write-tool call path: build the payload once, get the approval the policy asks for,
//! send exactly that payload once (never retried), and return Zabbix's result as is.

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use crate::app::App;
use crate::catalog::{self, Arguments, ToolDef};
use crate::mcp::approval::{self, Answer, ApprovalError, Route};
use crate::mcp::errors::ToolError;
use crate::mcp::gate::Subject;
use crate::mcp::page_approval;
use crate::metrics::{ApprovalOutcome, ToolOutcome};
use crate::policy::{Approval, Decision, PolicyInput};
use crate::targets::Ask;
use crate::zabbix::{Caller, Payload, ZabbixVersion};

/// Everything one write call needs besides the app.
pub struct WriteCall<'a> {
    pub context: &'a RequestContext<RoleServer>,
    pub request: &'a CallToolRequestParams,
    pub caller: &'a Caller,
    pub subject: &'a Subject,
    pub def: &'static ToolDef,
    pub arguments: &'a Arguments,
    pub decision: &'a Decision,
    /// The `call` input the decision was made on (targets included).
    pub input: &'a PolicyInput,
    pub version: ZabbixVersion,
}

/// How a write call ended, for the decision log.
pub enum Written {
    Done(CallToolResult),
    /// Waiting for the client to retry with the human's answer; nothing was sent.
    Pending(CallToolResponse),
}

impl Written {
    /// How the call ended, for `tool_calls_total`.
    pub fn outcome(&self) -> ToolOutcome {
        match self {
            Written::Done(_) => ToolOutcome::Ok,
            Written::Pending(_) => ToolOutcome::Pending,
        }
    }
}

pub async fn call(app: &App, call: WriteCall<'_>) -> Result<Written, ToolError> {
    let params = catalog::params::write_params(call.def, call.arguments, call.version)?;
    let id = call.decision.decision_id.as_str();
    if let Some(state) = call.request.request_state.as_deref() {
        // The decision of this retry is the one that counts: a yes given in the client
        // under a decision that asked for less never stands in for the page's.
        if call.decision.approval != Approval::Page {
            return redeem(app, &call, state, &params).await;
        }
        app.decisions.event(
            id,
            "approval",
            json!({"outcome": "not_accepted", "via": "input_required",
                   "reason": "the decision asks for page approval: an answer given in the client does not count"}),
        );
    }
    let payload = app.zabbix.payload(call.def.method, &params)?;
    let sha256 = approval::sha256_hex(&payload.body);
    let can_form = call.subject.client.elicitation.iter().any(|m| m == "form");
    let route = approval::route(call.decision.approval, call.context, can_form);
    match route {
        Route::Apply => {
            app.metrics.approval(ApprovalOutcome::NotRequired);
            app.decisions.event(
                id,
                "approval",
                json!({"outcome": "not_required", "approval": call.decision.approval, "sha256": sha256}),
            );
            send(app, &call, &payload).await
        }
        Route::Elicit => {
            let answer = match approval::elicit(
                call.context,
                call.def.name,
                &payload,
                app.config.limits.elicitation,
            )
            .await
            {
                Ok(answer) => answer,
                Err(error) => {
                    app.metrics.approval(ApprovalOutcome::Unavailable);
                    app.decisions.event(
                        id,
                        "approval",
                        json!({"outcome": "unavailable", "via": "elicitation", "sha256": sha256,
                               "error": error.to_string()}),
                    );
                    return Err(error.into());
                }
            };
            app.metrics.approval(answer.into());
            app.decisions.event(
                id,
                "approval",
                json!({"outcome": answer.as_str(), "via": "elicitation", "sha256": sha256}),
            );
            match answer {
                Answer::Approved => {
                    unchanged_caller(app, &call).await?;
                    unchanged_targets(app, &call).await?;
                    send(app, &call, &payload).await
                }
                other => Err(ToolError::ApprovalDeclined(other.as_str().into())),
            }
        }
        Route::InputRequired => {
            let (result, sha256) = approval::input_required(
                &app.approver,
                call.def.name,
                id,
                &call.caller.token_id,
                &payload,
            )?;
            app.metrics.approval(ApprovalOutcome::Requested);
            app.decisions.event(
                id,
                "approval",
                json!({"outcome": "requested", "via": "input_required", "sha256": sha256}),
            );
            Ok(Written::Pending(CallToolResponse::InputRequired(result)))
        }
        Route::Page => page_approval::call(app, &call, &params).await,
        Route::Unavailable => {
            app.metrics.approval(ApprovalOutcome::Unavailable);
            app.decisions.event(
                id,
                "approval",
                json!({"outcome": "unavailable", "approval": call.decision.approval}),
            );
            Err(ToolError::ApprovalUnavailable)
        }
    }
}

/// The retry of a 2026-07-28 round trip: the request is rebuilt from the retried
/// arguments with the sealed request id and sent only if its bytes have the sealed digest
/// (what the human was shown), the human said yes, and the state is intact, for this
/// caller, this tool and this tool's method. The rebuilt bytes are sent, not the stored ones.
async fn redeem(
    app: &App,
    call: &WriteCall<'_>,
    state: &str,
    params: &Value,
) -> Result<Written, ToolError> {
    let sealed = app.approver.open(state, &call.caller.token_id)?;
    if sealed.tool != call.def.name {
        return Err(ApprovalError::WrongTool {
            sealed: sealed.tool,
            called: call.def.name.to_owned(),
        }
        .into());
    }
    let id = approval::sealed_request_id(&sealed, call.def.method)?;
    // The body without the token (6.0 gets `auth` spliced in transport), as shown.
    let payload = app.zabbix.payload_with_id(call.def.method, params, id)?;
    if approval::sha256_hex(&payload.body) != sealed.sha256 {
        return Err(ApprovalError::Changed.into());
    }
    let answer = approval::answer_from_responses(call.request.input_responses.as_ref());
    app.metrics.approval(answer.into());
    app.decisions.event(
        &call.decision.decision_id,
        "approval",
        json!({"outcome": answer.as_str(), "via": "input_required", "sha256": sealed.sha256,
               "approval_of": sealed.decision_id}),
    );
    if answer != Answer::Approved {
        return Err(ToolError::ApprovalDeclined(answer.as_str().into()));
    }
    // One human yes sends once: a replayed (or resent) state is refused from here on.
    app.approver.redeem(&sealed).await?;
    send(app, call, &payload).await
}

/// The caller looked up again once the client answered, as the targets are: the answer
/// may come minutes after the decision (`ElicitationTimeout`), and a user taken out of the
/// group the policy trusts meanwhile is no longer the caller it decided on. Other approvals
/// decide again, on the caller as they are then, when the call is retried.
async fn unchanged_caller(app: &App, call: &WriteCall<'_>) -> Result<(), ToolError> {
    let (outcome, error) = match app.callers.current(&app.zabbix, &call.caller.token).await {
        Ok(now) if now == call.caller.identity => return Ok(()),
        Ok(_) => ("changed", ToolError::Approval(ApprovalError::CallerChanged)),
        Err(error) => ("unchecked", ToolError::Caller(error)),
    };
    app.decisions.event(
        &call.decision.decision_id,
        "caller",
        json!({"outcome": outcome, "reason": error.to_string()}),
    );
    Err(error)
}

/// The targets looked up again once the client answered: the decision holds for what it saw,
/// and the answer may come minutes later (`ElicitationTimeout`), when the caller itself, in
/// another call, may have moved what this one touches (the maintenance it deletes out of the
/// policy's scope). Other approvals decide again when the call is retried.
async fn unchanged_targets(app: &App, call: &WriteCall<'_>) -> Result<(), ToolError> {
    let (Some(decided), Some(ask)) = (
        call.input.targets.as_ref(),
        Ask::of(call.def, &call.arguments.0),
    ) else {
        return Ok(());
    };
    let why = match app
        .targets
        .resolve(&app.zabbix, &call.caller.token, call.version, ask)
        .await
    {
        Ok(now) if &now == decided => return Ok(()),
        Ok(_) => "its hosts or host groups are no longer those the policy decided on".to_owned(),
        Err(error) => error.to_string(),
    };
    app.decisions.event(
        &call.decision.decision_id,
        "targets",
        json!({"outcome": "changed", "reason": why}),
    );
    Err(ApprovalError::TargetsChanged(why).into())
}

async fn send(app: &App, call: &WriteCall<'_>, payload: &Payload) -> Result<Written, ToolError> {
    let result = app
        .zabbix
        .send(payload, Some((&call.caller.token, call.version)))
        .await
        .map_err(ToolError::of_write)?;
    // structuredContent must be an object; Zabbix's write results are ({eventids: [...]}).
    let value = match result {
        Value::Object(_) => result,
        other => json!({ "result": other }),
    };
    Ok(Written::Done(CallToolResult::structured(value)))
}
