//! The MCP side of `page` approval. The first call stores a pending approval keyed by
//! (caller token, tool, payload SHA-256) and answers `approval_pending` with the link; a
//! person decides on the approval page; the retry of the same call finds the decision:
//! after a yes the stored body is sent, once (an atomic store transition), after a no
//! `approval_declined`, after the expiry `approval_expired`, before a decision
//! `approval_pending` again with the same id. Clients that declare URL elicitation
//! (`elicitation.url`) are told in URL mode: on a stateful session an `elicitation/create`
//! with the link (and `notifications/elicitation/complete` once decided); stateless, the
//! JSON-RPC error -32042 (URL elicitation required). The approval id is the
//! `elicitationId`.

use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CustomNotification, ElicitRequestParams, ErrorCode, ServerNotification,
};
use serde_json::{Value, json};

use crate::app::App;
use crate::config::SessionMode;
use crate::mcp::approval::{ApprovalError, sha256_hex};
use crate::mcp::errors::ToolError;
use crate::mcp::gate::Subject;
use crate::mcp::write::{WriteCall, Written};
use crate::metrics::ApprovalOutcome;
use crate::store::{ApprovalRecord, DecidedBy, From, Status, Store, unix_now};
use crate::zabbix::{Payload, ZabbixError};

/// A write whose decision asks for `page` approval.
pub(crate) async fn call(
    app: &App,
    call: &WriteCall<'_>,
    params: &Value,
) -> Result<Written, ToolError> {
    let decision_id = call.decision.decision_id.as_str();
    let Some(page) = app.config.approval_page.as_ref() else {
        app.metrics.approval(ApprovalOutcome::Unavailable);
        app.decisions.event(
            decision_id,
            "approval",
            json!({"outcome": "unavailable", "approval": "page", "reason": "approval page not configured"}),
        );
        return Err(ToolError::ApprovalPageOff);
    };
    let Some(approvers) = call.decision.approvers.clone() else {
        // Verdict::parse makes `page` come with approvers; a decision without is not ours to guess.
        return Err(ToolError::Denied {
            reasons: vec!["approval page without approvers".into()],
        });
    };
    // The page sends no password until it knows how many wrong ones Zabbix takes: the
    // call that asks is the first credential it sees, ahead of the approver.
    app.login_attempts.learn(app, &call.caller.token).await;
    let body = stable_body(call, params)?;
    let sha256 = sha256_hex(&body);
    let now = unix_now();
    let fresh = ApprovalRecord {
        id: uuid::Uuid::new_v4().simple().to_string(),
        decision_id: decision_id.to_owned(),
        input: call.input.clone(),
        body: String::from_utf8_lossy(&body).into_owned(),
        sha256: sha256.clone(),
        approvers,
        created_at: now,
        expires_at: now.saturating_add(app.config.approval_timeout.as_secs()),
        status: Status::Pending,
    };
    let limit = app.config.limits.max_pending_approvals;
    let (mut record, mut created) = app.store.create_or_get(fresh.clone(), limit).await?;
    if let Some((from, why)) = superseded(&record, &fresh) {
        match why {
            // The policy names other approvers now (reloaded since this was asked): a yes
            // from the old ones, or one they may still give, is not this call's approval.
            Superseded::Approvers => app.decisions.event(
                &record.decision_id,
                "approvers_changed",
                json!({"approval_id": record.id, "approvers": record.approvers,
                       "now": fresh.approvers, "retry_decision_id": decision_id}),
            ),
            // A yes is redeemed only for the caller it was asked for: left pending, the
            // approvers would decide on a caller who is no more, only for the retry after
            // to be refused and ask them again.
            Superseded::Caller => app.decisions.event(
                decision_id,
                "caller",
                json!({"outcome": "changed", "reason": CALLER_CHANGED, "approval_id": record.id,
                       "asked_anew": true}),
            ),
        }
        expire(app, &record, from, now).await?;
        (record, created) = app.store.create_or_get(fresh, limit).await?;
    }
    let url = format!("{}/approvals/{}", page.url, record.id);
    if created {
        app.metrics.approval(ApprovalOutcome::PageRequested);
        app.decisions.event(
            decision_id,
            "approval_requested",
            json!({"approval_id": record.id, "sha256": sha256, "expires_at": record.expires_at,
                   "url": url, "approvers": record.approvers}),
        );
    } else {
        // The retry's own decision line points at the approval it found.
        app.decisions.event(
            decision_id,
            "approval",
            json!({"via": "page", "approval_of": record.decision_id, "approval_id": record.id,
                   "state": record.status.as_str()}),
        );
    }
    match &record.status {
        Status::Pending if record.expires_at > now => {
            if created && url_session(app, call) {
                ask_by_url(app, call, &record, &url).await;
            }
            Err(pending(&record, url))
        }
        Status::Pending => {
            expire(app, &record, From::Pending, now).await?;
            Err(ToolError::ApprovalExpired)
        }
        Status::Expired => {
            app.store
                .forget_key(&record.dedupe_key(), &record.id)
                .await?;
            Err(ToolError::ApprovalExpired)
        }
        Status::Declined(by) => Err(ToolError::ApprovalDeclined(format!(
            "declined on the approval page by {}",
            by.username
        ))),
        Status::Withdrawn(by) => Err(withdrawn(by)),
        Status::Redeemed(_) => Err(ApprovalError::AlreadyUsed.into()),
        Status::Approved(by) => redeem(app, call, &record, by, body, now).await,
    }
}

/// Why an approval a retry found is not this call's to wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Superseded {
    /// Its decision names other approvers.
    Approvers,
    /// Its caller (user, role or user groups) is not as Zabbix gives them now.
    Caller,
}

/// The caller changed while the call waited: the `caller` event's reason.
const CALLER_CHANGED: &str =
    "the caller's user, role or user groups are no longer those the approval was asked for";

/// Whether a retry found an open approval it must not wait on: one (pending, or approved
/// and not redeemed) asked for other approvers than its own decision names, or one still
/// pending for the caller as they were. `Some((from, why))` to expire it from. An approved
/// one of another caller is refused where it would be redeemed, telling the agent why.
fn superseded(found: &ApprovalRecord, fresh: &ApprovalRecord) -> Option<(From, Superseded)> {
    if found.id == fresh.id {
        return None;
    }
    match found.status {
        Status::Pending if found.approvers != fresh.approvers => {
            Some((From::Pending, Superseded::Approvers))
        }
        Status::Approved(_) if found.approvers != fresh.approvers => {
            Some((From::Approved, Superseded::Approvers))
        }
        Status::Pending if found.input.caller != fresh.input.caller => {
            Some((From::Pending, Superseded::Caller))
        }
        _ => None,
    }
}

/// The answer to a retry after an approver took the yes back: declined, as a no would be.
fn withdrawn(by: &DecidedBy) -> ToolError {
    ToolError::ApprovalDeclined(format!(
        "the approval was withdrawn on the approval page by {}",
        by.username
    ))
}

/// Sends the approved body if this retry is the one that redeems it: the bytes this retry
/// built, which must be the ones the person was shown (the store's copy is only compared,
/// so a store that lies cannot change what is sent).
async fn redeem(
    app: &App,
    call: &WriteCall<'_>,
    record: &ApprovalRecord,
    by: &DecidedBy,
    body: Vec<u8>,
    now: u64,
) -> Result<Written, ToolError> {
    if record.expires_at <= now {
        // Approved but not redeemed in time: expired for good, and the next call asks anew.
        expire(app, record, From::Approved, now).await?;
        return Err(ToolError::ApprovalExpired);
    }
    holds(record, &body)?;
    if record.input.targets != call.input.targets {
        // The person approved this body for what it touched when approval was asked; the
        // retry touches something else (moved meanwhile, maybe by the caller itself): the
        // approval is spent, and the next call asks anew.
        expire(app, record, From::Approved, now).await?;
        let why = "its hosts or host groups are no longer those the approval was asked for";
        app.decisions.event(
            &call.decision.decision_id,
            "targets",
            json!({"outcome": "changed", "reason": why, "approval_id": record.id}),
        );
        return Err(ApprovalError::TargetsChanged(why.to_owned()).into());
    }
    if record.input.caller != call.input.caller {
        // The approver and the `approve` phase judged the caller as they were when approval
        // was asked (the page holds no credential to look them up with); the retry's caller
        // is as Zabbix gives them now. Only that same caller's call is sent.
        expire(app, record, From::Approved, now).await?;
        app.decisions.event(
            &call.decision.decision_id,
            "caller",
            json!({"outcome": "changed", "reason": CALLER_CHANGED, "approval_id": record.id}),
        );
        return Err(ApprovalError::CallerChanged.into());
    }
    let redeemed = app
        .store
        .transition(
            &record.id,
            From::Approved,
            Status::Redeemed(by.clone()),
            now,
        )
        .await?;
    let Some(redeemed) = redeemed else {
        // Another retry (maybe on another replica) won, an approver took the yes back, or
        // the time ran out meanwhile.
        return match app.store.get(&record.id).await? {
            Some(r) if matches!(r.status, Status::Approved(_)) => {
                expire(app, &r, From::Approved, now).await?;
                Err(ToolError::ApprovalExpired)
            }
            Some(ApprovalRecord {
                status: Status::Withdrawn(by),
                ..
            }) => Err(withdrawn(&by)),
            _ => Err(ApprovalError::AlreadyUsed.into()),
        };
    };
    holds(&redeemed, &body)?;
    app.metrics.approval(ApprovalOutcome::PageRedeemed);
    app.decisions.event(
        &record.decision_id,
        "redeemed",
        json!({"approval_id": record.id, "sha256": redeemed.sha256,
               "approved_by": {"userid": by.userid, "username": by.username},
               "retry_decision_id": call.decision.decision_id}),
    );
    let payload = Payload {
        method: call.def.method,
        body: Bytes::from(body),
        id: STABLE_ID,
    };
    let result = app
        .zabbix
        .send(&payload, Some((&call.caller.token, call.version)))
        .await
        .map_err(ToolError::of_write)?;
    let value = match result {
        Value::Object(_) => result,
        other => json!({ "result": other }),
    };
    Ok(Written::Done(rmcp::model::CallToolResult::structured(
        value,
    )))
}

/// Whether `record` holds exactly `body`, the request this retry built: checked before the
/// record is redeemed and again on what the redeeming transition returned.
fn holds(record: &ApprovalRecord, body: &[u8]) -> Result<(), ToolError> {
    if record.body.as_bytes() == body && record.sha256 == sha256_hex(body) {
        return Ok(());
    }
    Err(ToolError::from(crate::store::StoreError::Corrupt(format!(
        "approval {} does not hold the request this call builds",
        record.id
    ))))
}

/// Marks a pending or approved approval expired (once, logged) and forgets its key, so the
/// next call with the same arguments asks anew.
async fn expire(app: &App, record: &ApprovalRecord, from: From, now: u64) -> Result<(), ToolError> {
    let expired = app
        .store
        .transition(&record.id, from, Status::Expired, now)
        .await?;
    if expired.is_some() {
        app.metrics.approval(ApprovalOutcome::PageExpired);
        app.decisions.event(
            &record.decision_id,
            "approval_expired",
            json!({"approval_id": record.id, "sha256": record.sha256}),
        );
    }
    app.store
        .forget_key(&record.dedupe_key(), &record.id)
        .await?;
    Ok(())
}

fn pending(record: &ApprovalRecord, url: String) -> ToolError {
    ToolError::ApprovalPending {
        approval_id: record.id.clone(),
        url,
        expires: rfc3339(record.expires_at),
    }
}

/// The JSON-RPC body with a fixed id, so that the same arguments give the same bytes and
/// hash on every retry and every replica (the id only pairs a response with its request).
fn stable_body(call: &WriteCall<'_>, params: &Value) -> Result<Vec<u8>, ToolError> {
    let body = json!({
        "jsonrpc": "2.0",
        "method": call.def.method.as_str(),
        "params": params,
        "id": STABLE_ID,
    });
    serde_json::to_vec(&body).map_err(|e| {
        ToolError::Zabbix(ZabbixError::BadResponse(format!(
            "cannot serialize request: {e}"
        )))
    })
}

/// The JSON-RPC id of every approved body (see [`stable_body`]).
const STABLE_ID: u64 = 1;

/// `2026-12-01T15:04:05Z` for Unix seconds.
pub(crate) fn rfc3339(seconds: u64) -> String {
    let (year, month, day) = crate::calendar::civil_from_days(seconds / 86_400);
    let rest = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// -32042, "URL elicitation required" (MCP 2025-11-25).
const URL_ELICITATION_REQUIRED: ErrorCode = ErrorCode(-32042);

/// How long the client may take to answer the URL elicitation (it only says whether the
/// person was shown the link; the decision comes from the page).
const URL_ELICITATION_WAIT: Duration = Duration::from_secs(60);
/// How often a stateful session's watcher looks for the decision.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);
const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

fn url_session(app: &App, call: &WriteCall<'_>) -> bool {
    app.config.session_mode == SessionMode::Stateful
        && call.subject.client.elicitation.iter().any(|m| m == "url")
}

/// Stateful session, URL-elicitation client: shows the link through `elicitation/create`
/// in url mode, and sends `notifications/elicitation/complete` once the approval is decided
/// or expired (a watcher bounded by the expiry).
async fn ask_by_url(app: &App, call: &WriteCall<'_>, record: &ApprovalRecord, url: &str) {
    let params = ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: format!(
            "A person must approve {} on the approval page; call again with the same arguments once it is decided.",
            record.input.tool.name
        ),
        url: url.to_owned(),
        elicitation_id: record.id.clone(),
    };
    let peer = call.context.peer.clone();
    match tokio::time::timeout(URL_ELICITATION_WAIT, peer.create_elicitation(params)).await {
        Ok(Ok(answer)) => tracing::debug!(action = ?answer.action, "url elicitation answered"),
        // rmcp's text holds the client's own error message: escaped, so it cannot forge lines.
        Ok(Err(error)) => {
            let error = crate::display::escape_text(&error.to_string());
            tracing::info!(%error, "url elicitation failed");
        }
        Err(_) => tracing::info!("url elicitation not answered in time"),
    }
    tokio::spawn(watch(
        app.store.clone(),
        peer,
        record.id.clone(),
        record.expires_at,
    ));
}

async fn watch(store: Arc<Store>, peer: rmcp::Peer<rmcp::RoleServer>, id: String, expires_at: u64) {
    loop {
        tokio::time::sleep(WATCH_INTERVAL).await;
        let now = unix_now();
        match store.get(&id).await {
            Ok(Some(r)) if r.status == Status::Pending && now < expires_at => {}
            // A store hiccup: look again, but never past the expiry.
            Err(_) if now < expires_at => {}
            _ => break,
        }
    }
    let complete =
        CustomNotification::new(ELICITATION_COMPLETE, Some(json!({"elicitationId": id})));
    if let Err(error) = peer
        .send_notification(ServerNotification::CustomNotification(complete))
        .await
    {
        let error = crate::display::escape_text(&error.to_string());
        tracing::info!(%error, "elicitation complete notification not delivered");
    }
}

/// The `approval_pending` answer as -32042, for a stateless client that declared URL
/// elicitation (stateful sessions were asked with `elicitation/create`).
pub(crate) fn url_elicitation(
    app: &App,
    subject: &Subject,
    response: &CallToolResponse,
) -> Option<McpError> {
    if app.config.session_mode == SessionMode::Stateful
        || !subject.client.elicitation.iter().any(|m| m == "url")
    {
        return None;
    }
    let CallToolResponse::Complete(result) = response else {
        return None;
    };
    if result.is_error != Some(true) {
        return None;
    }
    // A failed call's body is its text block (errors::ToolError::into_result).
    let text = result.content.first().and_then(|c| c.as_text())?;
    let body: Value = serde_json::from_str(&text.text).ok()?;
    if body["code"] != "approval_pending" {
        return None;
    }
    let data = &body["data"];
    Some(McpError::new(
        URL_ELICITATION_REQUIRED,
        "a person must approve this call on the approval page",
        Some(json!({
            "elicitations": [{
                "mode": "url",
                "elicitationId": data["approval_id"],
                "url": data["url"],
                "message": body["message"],
            }],
            "decision_id": body["decision_id"],
        })),
    ))
}
