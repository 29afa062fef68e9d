//! Who may decide a pending call, and taking the decision: the approver's groups and four
//! eyes (by userid) from the call's `approvers`, then the policy's `approve` phase; the
//! transition is atomic in the store, and the outcome goes to the decision log under the
//! call's `decision_id`.

use serde_json::json;

use super::session::Session;
use crate::app::App;
use crate::metrics::ApprovalOutcome;
use crate::policy::{ApproverInfo, CallerInfo, Decision, Phase, PolicyInput};
use crate::store::{ApprovalRecord, DecidedBy, From, Status, unix_now};
use crate::zabbix::{ApiToken, Identity};

/// The approver's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    Approve,
    Decline,
    /// Takes a yes back before a retry redeemed it.
    Withdraw,
}

/// How a decision attempt ended.
pub(crate) enum Decided {
    Done(Box<ApprovalRecord>),
    Refused(String),
}

/// The checks that need no policy evaluation: not the token that asked, group membership
/// and four eyes.
pub(crate) fn may_decide(
    record: &ApprovalRecord,
    approver: &Identity,
    token: &ApiToken,
) -> Result<(), String> {
    // The agent holds that token: signed in with it, the agent would approve its own call,
    // whatever `distinct_from_caller` says of the person behind it.
    if token.id() == record.input.caller.token_id {
        return Err(
            "This change was asked for with the API token you signed in with: sign in with your own credentials.".into(),
        );
    }
    let approvers = &record.approvers;
    if approvers.distinct_from_caller && approver.userid == record.input.caller.userid {
        return Err("You asked for this change yourself: another person must approve it.".into());
    }
    if !approver
        .usrgrps
        .iter()
        .any(|g| approvers.usrgrps.contains(g))
    {
        return Err(format!(
            "Only members of {} may decide this change.",
            approvers.usrgrps.join(", ")
        ));
    }
    Ok(())
}

/// The `approve`-phase input: the pending call's input plus the approver, as Zabbix sees
/// them now and as they signed in.
pub(crate) fn approve_input(
    record: &ApprovalRecord,
    approver: &Identity,
    session: &Session,
) -> PolicyInput {
    let mut input = record.input.clone();
    input.phase = Phase::Approve;
    input.now = unix_now();
    input.resource = None;
    input.approver = Some(ApproverInfo {
        person: CallerInfo {
            userid: approver.userid.clone(),
            username: approver.username.clone(),
            user_type: u32::try_from(approver.user_type).unwrap_or(0),
            roleid: approver.roleid.clone(),
            usrgrps: approver.usrgrps.clone(),
            token_id: session.token.id(),
        },
        sign_in: session.sign_in,
    });
    input
}

/// Whether the policy lets this person decide (no decision log line: for listing).
pub(crate) fn policy_allows(
    app: &App,
    record: &ApprovalRecord,
    approver: &Identity,
    session: &Session,
) -> bool {
    let decision = app.policy.decide(&approve_input(record, approver, session));
    decision.allow && !decision.dry_run_would_deny
}

/// Takes the decision if this person may, exactly once. Whoever may decide a change may
/// also take their or anyone's yes back until a retry redeems it.
pub(crate) async fn decide(
    app: &App,
    record: &ApprovalRecord,
    approver: &Identity,
    session: &Session,
    choice: Choice,
) -> Result<Decided, crate::store::StoreError> {
    let now = unix_now();
    let from = match choice {
        Choice::Approve | Choice::Decline => From::Pending,
        Choice::Withdraw => From::Approved,
    };
    if !record.status.is(from) {
        return Ok(Decided::Refused(format!(
            "This change is {}.",
            record.status.as_str()
        )));
    }
    if record.expires_at <= now {
        if from == From::Pending {
            expire(app, record, now).await?;
        }
        return Ok(Decided::Refused("This approval request expired.".into()));
    }
    if let Err(reason) = may_decide(record, approver, &session.token) {
        log_refusal(app, record, approver, &reason, None);
        return Ok(Decided::Refused(reason));
    }
    let input = approve_input(record, approver, session);
    let decision = app.policy.decide(&input);
    let logged = app.decisions.record_written(&decision, &input);
    app.metrics.policy_decision(Phase::Approve, &decision);
    if !logged.written().await {
        // As for a write: nothing is decided that the log cannot hold.
        return Ok(Decided::Refused(
            "The decision log is not keeping up, so nothing was decided; try again in a moment."
                .into(),
        ));
    }
    // Dry-run lets calls through, but never makes a person an approver the policy refuses.
    if !decision.allow || decision.dry_run_would_deny {
        let reason = format!(
            "The policy does not let you decide this change: {}",
            decision.reasons.join("; ")
        );
        log_refusal(app, record, approver, &reason, Some(&decision));
        return Ok(Decided::Refused(reason));
    }
    let by = DecidedBy {
        userid: approver.userid.clone(),
        username: approver.username.clone(),
        at: now,
    };
    let (to, event, counted) = match choice {
        Choice::Approve => (
            Status::Approved(by),
            "approved",
            ApprovalOutcome::PageApproved,
        ),
        Choice::Decline => (
            Status::Declined(by),
            "declined",
            ApprovalOutcome::PageDeclined,
        ),
        Choice::Withdraw => (
            Status::Withdrawn(by),
            "approval_withdrawn",
            ApprovalOutcome::PageWithdrawn,
        ),
    };
    let Some(decided) = app.store.transition(&record.id, from, to, now).await? else {
        return Ok(Decided::Refused(match from {
            From::Pending => "Someone else decided this change first, or it expired.".into(),
            From::Approved => {
                "A retry sent it or someone withdrew the approval first, or it expired.".into()
            }
        }));
    };
    app.metrics.approval(counted);
    app.decisions.event(
        &record.decision_id,
        event,
        json!({"approval_id": record.id, "sha256": record.sha256,
               "approver": {"userid": approver.userid, "username": approver.username},
               "approve_decision": {"decision_id": decision.decision_id, "allow": decision.allow,
                                    "reasons": decision.reasons}}),
    );
    tracing::info!(
        decision_id = %record.decision_id,
        user.id = %approver.userid,
        outcome = event,
        "page approval decided"
    );
    Ok(Decided::Done(Box::new(decided)))
}

/// Marks an expired pending approval (once) and logs it.
pub(crate) async fn expire(
    app: &App,
    record: &ApprovalRecord,
    now: u64,
) -> Result<(), crate::store::StoreError> {
    if app
        .store
        .transition(&record.id, From::Pending, Status::Expired, now)
        .await?
        .is_some()
    {
        app.metrics.approval(ApprovalOutcome::PageExpired);
        app.decisions.event(
            &record.decision_id,
            "approval_expired",
            json!({"approval_id": record.id, "sha256": record.sha256}),
        );
    }
    Ok(())
}

/// `approval_refused` in the decision log, under the call's `decision_id`.
pub(crate) fn log_refusal(
    app: &App,
    record: &ApprovalRecord,
    approver: &Identity,
    reason: &str,
    decision: Option<&Decision>,
) {
    app.decisions.event(
        &record.decision_id,
        "approval_refused",
        json!({"approval_id": record.id,
               "approver": {"userid": approver.userid, "username": approver.username},
               "reason": reason,
               "approve_decision_id": decision.map(|d| d.decision_id.clone())}),
    );
}
