//! What a page approval is good for: never for the token that asked (whatever four eyes
//! says of the person), and only until it expires, approved or not.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::Digest;
use zabbix_mcp_guard::store::{Status, unix_now};

use crate::common::{self, recorder};
use crate::quarantine::{Asked, Group};
use crate::support::{
    self, PageClient, Setup, TOOL, ack_args, acks, event_names, eventually, pending, sidecar,
    sidecar_with,
};

/// The four_eyes example with neither `distinct_from_caller` nor its own four-eyes rule:
/// the caller's own user may approve, signed in with their own credentials.
fn same_person_may_approve() -> std::path::PathBuf {
    let dir = support::four_eyes();
    let rego = dir.join("policy.rego");
    let text = std::fs::read_to_string(&rego).unwrap();
    let changed = text
        .replace(
            "\"distinct_from_caller\": true",
            "\"distinct_from_caller\": false",
        )
        .replace("input.approver.userid == input.caller.userid", "false");
    assert_eq!(
        changed.matches("false").count(),
        text.matches("false").count() + 2
    );
    std::fs::write(&rego, changed).unwrap();
    dir
}

/// The token an agent holds cannot approve its own call on the page, even where the
/// policy lets its user approve their own calls; the same user with their password can.
#[tokio::test]
async fn the_callers_token_never_approves_its_call() {
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let setup = Setup::page(&proxy);
    let car = sidecar_with(setup, |c| c.policy_dir = Some(same_person_may_approve())).await;
    // The agent is Admin, in the approvers' group.
    let agent = common::client(&car.guard, &lab.token).await;
    let event = support::open_event(&lab, &car.guard).await;
    let args = ack_args(&event, "approved by its own token?");
    let first = common::tool_error(&agent, TOOL, args.clone()).await;
    let (id, _) = pending(&first);

    // The agent signs in to the page with its own token.
    let by_token = PageClient::new(&car.page);
    let signed_in = by_token.sign_in_with_token(&lab.token).await;
    assert_eq!(signed_in.status, 303, "{}", signed_in.body);
    let list = by_token.get("/approvals").await;
    assert!(
        !list.body.contains(&id),
        "not offered to decide: {}",
        list.body
    );
    let shown = by_token.get(&format!("/approvals/{id}")).await;
    assert!(
        shown
            .body
            .contains("asked for with the API token you signed in with"),
        "{}",
        shown.body
    );
    let (csrf, sha256) = (
        support::csrf(&shown.body),
        support::shown_sha256(&shown.body),
    );
    let forced = by_token.force(&id, &csrf, &sha256, "approve").await;
    assert_eq!(forced.status, 403, "{}", forced.body);
    let still = common::tool_error(&agent, TOOL, args.clone()).await;
    assert_eq!(pending(&still).0, id, "still pending");

    // Admin, with the password: the policy lets the same person approve.
    let person = PageClient::new(&car.page);
    assert_eq!(person.sign_in("Admin", "zabbix").await.status, 303);
    let approved = person.decide(&id, "approve").await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    let done = common::call(&agent, TOOL, args).await;
    assert_ne!(done.is_error, Some(true), "{:?}", done.content);
    assert_eq!(
        acks(&recorder, &event),
        1,
        "sent once, after the person's yes"
    );
    car.guard.stop().await;
}

/// An approval a person gave that no retry redeemed in time expires like a pending one:
/// the retry after the expiry is told so, and the one after that asks anew (before, every
/// retry was told `approval_expired` until the record itself went, an hour later).
#[tokio::test]
async fn approved_but_not_redeemed_in_time_is_asked_anew() {
    let lab = common::lab(7);
    let car = sidecar(Setup {
        timeout_secs: 5,
        ..Setup::page(&lab.url)
    })
    .await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = support::open_event(&lab, &car.guard).await;
    let args = ack_args(&event, "approved, then left");
    let first = common::tool_error(&agent, TOOL, args.clone()).await;
    let (id, _) = pending(&first);
    let decision_id = first["decision_id"].as_str().unwrap().to_owned();
    let admin = PageClient::new(&car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    assert_eq!(admin.decide(&id, "approve").await.status, 200);
    let record = car
        .guard
        .app()
        .store
        .get(&id)
        .await
        .unwrap()
        .expect("the record");
    assert!(
        matches!(record.status, Status::Approved(_)),
        "{:?}",
        record.status
    );
    // No retry meanwhile: the time runs out on an approved record.
    eventually(
        "the approval to expire",
        Duration::from_secs(30),
        || async { (unix_now() > record.expires_at).then_some(()) },
    )
    .await;
    let expired = common::tool_error(&agent, TOOL, args.clone()).await;
    assert_eq!(expired["code"], "approval_expired", "{expired}");
    let anew = common::tool_error(&agent, TOOL, args).await;
    assert_ne!(pending(&anew).0, id, "a new approval is asked");
    assert!(event_names(&car.log, &decision_id).contains(&"approval_expired".to_owned()));
    car.guard.stop().await;
}

/// A write waiting on the page of a sidecar sharing the lab's Redis, asked by the agent.
struct OnRedis {
    recorder: recorder::Recorder,
    car: support::Sidecar,
    agent: common::Client,
    event: String,
    args: Value,
    id: String,
}

async fn asked_on_redis(message: &str) -> OnRedis {
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let car = sidecar(Setup {
        shared_store: Some(common::redis_url()),
        ..Setup::page(&proxy)
    })
    .await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = support::open_event(&lab, &car.guard).await;
    let args = ack_args(
        &event,
        &format!("{message} {}", uuid::Uuid::new_v4().simple()),
    );
    let (id, _) = pending(&common::tool_error(&agent, TOOL, args.clone()).await);
    OnRedis {
        recorder,
        car,
        agent,
        event,
        args,
        id,
    }
}

impl OnRedis {
    /// The retry is refused as our own failure, and nothing reached Zabbix.
    async fn refused_and_nothing_sent(&self) {
        let refused = common::tool_error(&self.agent, TOOL, self.args.clone()).await;
        assert_eq!(refused["code"], "internal_error", "{refused}");
        assert_eq!(
            acks(&self.recorder, &self.event),
            0,
            "nothing reached Zabbix"
        );
    }
}

/// What is sent after a yes is the request this retry builds, the one the person was
/// shown, from a record signed with `ApprovalSealKey`: anyone who can write to Redis and
/// rewrites the approved record's body and digest (behind its signature, which they cannot
/// make anew) cannot change it. The retry is refused as our own failure; nothing is sent.
#[tokio::test]
async fn a_store_that_lies_cannot_change_what_is_sent() {
    let asked = asked_on_redis("as shown").await;
    let admin = PageClient::new(&asked.car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    assert_eq!(admin.decide(&asked.id, "approve").await.status, 200);

    let text = redis_field(&asked.id, "record").await;
    let (tag, json) = text.split_at(64);
    let mut record: Value = serde_json::from_str(json).unwrap();
    let body = record["body"]
        .as_str()
        .unwrap()
        .replace("as shown", "NOT as shown");
    record["sha256"] = Value::from(hex::encode(sha2::Sha256::digest(body.as_bytes())));
    record["body"] = Value::from(body);
    set_redis_field(&asked.id, "record", &format!("{tag}{record}")).await;

    asked.refused_and_nothing_sent().await;
    asked.car.guard.stop().await;
}

/// Nobody decided, but Redis says approved: written by whoever can reach Redis, the status
/// is not signed with `ApprovalSealKey`. The retry is refused, nothing is sent, and the
/// page does not list what it cannot read.
#[tokio::test]
async fn an_approval_written_into_redis_approves_nothing() {
    let asked = asked_on_redis("forged").await;
    let approved = serde_json::json!({"state": "approved", "userid": "1", "username": "Admin", "at": unix_now()});
    // In the stored form (a tag, then the JSON), under a tag made up.
    let forged = format!("{}{approved}", "0".repeat(64));
    set_redis_field(&asked.id, "status", &forged).await;
    set_redis_field(&asked.id, "state", "approved").await;

    asked.refused_and_nothing_sent().await;
    let admin = PageClient::new(&asked.car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    let listing = admin.get("/approvals").await;
    assert_eq!(listing.status, 200);
    assert!(!listing.body.contains(&asked.id), "{}", listing.body);
    asked.car.guard.stop().await;
}

async fn redis() -> redis::aio::MultiplexedConnection {
    redis::Client::open(common::redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn redis_field(id: &str, field: &str) -> String {
    redis::cmd("HGET")
        .arg(common::redis_key(&format!("approval:{id}")))
        .arg(field)
        .query_async(&mut redis().await)
        .await
        .unwrap()
}

async fn set_redis_field(id: &str, field: &str, value: &str) {
    let () = redis::cmd("HSET")
        .arg(common::redis_key(&format!("approval:{id}")))
        .arg(field)
        .arg(value)
        .query_async(&mut redis().await)
        .await
        .unwrap();
}

/// Maintenance deletes need a person on the page; everything else goes without.
const DELETE_ON_PAGE: &str = r#"package zabbix.mcp
import rego.v1
decision := {"allow": true, "reasons": [], "approval": "page",
             "approvers": {"usrgrps": ["Zabbix administrators"], "distinct_from_caller": false}}
    if input.tool.name == "maintenance_delete"
else := {"allow": true, "reasons": [], "approval": "none"}
"#;

/// A person approves a delete for what it touched when approval was asked: a maintenance
/// moved to other host groups before the retry is not deleted on that approval.
#[tokio::test]
async fn an_approval_is_not_redeemed_for_targets_moved_since() {
    let lab = common::lab(7);
    let names = [
        common::zapi::unique("mcp-keep"),
        common::zapi::unique("mcp-free"),
    ];
    let mut ids = Vec::new();
    for name in &names {
        let created = common::zapi::admin(&lab, "hostgroup.create", json!({"name": name})).await;
        ids.push(created["groupids"][0].as_str().unwrap().to_owned());
    }
    let maintenance = common::zapi::maintenance_on_group(&lab, &names[1], &ids[1]).await;
    let dir = common::temp_path("policy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.rego"), DELETE_ON_PAGE).unwrap();
    let car = sidecar_with(Setup::page(&lab.url), |c| c.policy_dir = Some(dir)).await;
    let agent = common::client(&car.guard, &lab.token).await;
    let delete = json!({"maintenanceids": [maintenance]});
    let first = common::tool_error(&agent, "maintenance_delete", delete.clone()).await;
    let (id, _) = pending(&first);
    let person = PageClient::new(&car.page);
    assert_eq!(person.sign_in("Admin", "zabbix").await.status, 303);
    assert_eq!(person.decide(&id, "approve").await.status, 200);

    // Approved; the agent moves the maintenance to another group, then retries.
    let moved = common::call(
        &agent,
        "maintenance_update",
        json!({"maintenanceid": maintenance, "groupids": [ids[0]]}),
    )
    .await;
    assert_ne!(moved.is_error, Some(true), "{:?}", moved.structured_content);
    let retry = common::tool_error(&agent, "maintenance_delete", delete.clone()).await;
    assert_eq!(retry["code"], "invalid_arguments", "deleted? {retry}");
    assert!(
        retry["message"]
            .as_str()
            .unwrap()
            .contains("changed while it waited for approval"),
        "{retry}"
    );
    common::zapi::assert_maintenance_kept(&lab, &maintenance).await;
    // The approval is spent: the next call asks a person anew, about what it touches now.
    let again = common::tool_error(&agent, "maintenance_delete", delete).await;
    let (again_id, _) = pending(&again);
    assert_ne!(again_id, id);
    car.guard.stop().await;
    common::zapi::admin(&lab, "maintenance.delete", json!([maintenance])).await;
    common::zapi::admin(&lab, "hostgroup.delete", json!(ids)).await;
}

/// A yes is good for the approvers the policy named when it was asked. Once a reloaded
/// policy names others, the retry finds the old approval superseded: it is spent
/// (`approvers_changed`, `approval_expired`), nothing is sent, and the new approvers are
/// asked. Before, a yes given before the reload was redeemed after it.
#[tokio::test]
async fn a_yes_is_redeemed_only_for_the_approvers_it_was_asked_of() {
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let dir = support::four_eyes();
    let policy_dir = dir.clone();
    let car = sidecar_with(Setup::page(&proxy), |c| c.policy_dir = Some(policy_dir)).await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = support::open_event(&lab, &car.guard).await;
    let args = ack_args(
        &event,
        &format!("approvers changed {}", uuid::Uuid::new_v4().simple()),
    );
    let first = common::tool_error(&agent, TOOL, args.clone()).await;
    let (id, _) = pending(&first);
    let decision_id = first["decision_id"].as_str().unwrap().to_owned();
    let admin = PageClient::new(&car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    assert_eq!(admin.decide(&id, "approve").await.status, 200);

    let before = car.guard.app().policy.revision();
    std::fs::write(
        dir.join("data.json"),
        r#"{"four_eyes": {"approver_usrgrps": ["Zabbix administrators", "Guests"]}}"#,
    )
    .unwrap();
    common::wait_until(
        "the policy to reload",
        Duration::from_secs(15),
        async || car.guard.app().policy.revision() != before,
    )
    .await;

    let retry = common::tool_error(&agent, TOOL, args.clone()).await;
    let (anew, _) = pending(&retry);
    assert_ne!(anew, id, "asked anew: {retry}");
    assert_eq!(acks(&recorder, &event), 0, "the old yes sent nothing");
    let names = event_names(&car.log, &decision_id);
    for expected in ["approvers_changed", "approval_expired"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    assert_eq!(admin.decide(&anew, "approve").await.status, 200);
    let done = common::call(&agent, TOOL, args).await;
    assert_ne!(done.is_error, Some(true), "{:?}", done.content);
    assert_eq!(
        acks(&recorder, &event),
        1,
        "sent once, on the new approvers' yes"
    );
    car.guard.stop().await;
}

/// The `approve` phase judges the caller as they were when approval was asked: the page
/// holds no credential of theirs to look them up with. So a yes is redeemed only for that
/// same caller: one put in the quarantine group while the call waited is refused at the
/// retry (the approval spent, nothing sent, a `caller` event), and the next call is asked
/// anew, where the `approve` phase sees the quarantine. Before, the yes given on the old
/// groups was redeemed and the annotation sent (the binary, the Python SDK, 7.0 lab).
#[tokio::test]
async fn a_yes_is_redeemed_only_for_the_caller_it_was_asked_for() {
    for lab in common::labs() {
        crate::quarantine::run(&lab, quarantined_meanwhile).await;
    }
}

async fn quarantined_meanwhile(lab: common::Lab, user: common::zapi::TestUser, group: Group) {
    let Asked {
        car,
        agent,
        event,
        message,
        args,
        first,
        id,
    } = Asked::then_quarantined(&lab, &user, &group, "mcp-quarantined").await;
    // Judged on the caller as asked: the approve phase lets Admin approve.
    let admin = PageClient::new(&car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    let approved = admin.decide(&id, "approve").await;
    assert_eq!(
        approved.status, 200,
        "Zabbix {}: {}",
        lab.major, approved.body
    );

    let retry = common::tool_error(&agent, "problem_annotate", args.clone()).await;
    assert_eq!(
        retry["code"], "invalid_arguments",
        "Zabbix {}: sent? {retry}",
        lab.major
    );
    assert!(
        retry["message"]
            .as_str()
            .unwrap()
            .contains("the caller's user, role or user groups changed"),
        "{retry}"
    );
    let retry_id = retry["decision_id"].as_str().unwrap();
    let caller_events: Vec<Value> = support::events(&car.log, retry_id)
        .into_iter()
        .filter(|e| e["event"] == "caller")
        .collect();
    assert_eq!(caller_events.len(), 1, "{caller_events:?}");
    assert_eq!(caller_events[0]["data"]["outcome"], "changed");
    let first_id = first["decision_id"].as_str().unwrap();
    assert!(event_names(&car.log, first_id).contains(&"approval_expired".to_owned()));

    // Asked anew: the approve phase now sees the quarantine, and nothing is ever sent.
    let again = common::tool_error(&agent, "problem_annotate", args).await;
    let (again_id, _) = pending(&again);
    assert_ne!(again_id, id);
    let refused = admin.decide(&again_id, "approve").await;
    assert_eq!(
        refused.status, 403,
        "Zabbix {}: {}",
        lab.major, refused.body
    );
    assert!(
        refused.body.contains("the caller is quarantined"),
        "{}",
        refused.body
    );
    assert!(
        !common::zapi::acknowledgements(&lab, &event)
            .await
            .contains(&message),
        "Zabbix {}: sent",
        lab.major
    );
    let _ = agent.cancel().await;
    car.guard.stop().await;
}
