//! Write approval end to end, through real MCP clients against the real lab: a human (a
//! client handler) sees the exact JSON-RPC payload and its SHA-256 and answers `approve`;
//! a recording proxy in front of Zabbix shows what actually reached it. Elicitation during
//! the call (2025-11-25, stateful sessions), the 2026-07-28 input-required round trip
//! (stateless, across replicas sharing ApprovalSealKey), refusals, tampered state, the
//! decision log, and writes that are never retried.

mod caller;
#[path = "../common/mod.rs"]
mod common;
mod question;
mod sealed;
mod support;
mod targets;
mod timeout;

use common::Lab;
use common::recorder::{self};
use rmcp::model::{CallToolResult, ProtocolVersion};
use serde_json::{Value, json};
use std::time::Duration;
use support::{
    Human, LAB, Reply, TOOL, ack_args, acknowledge, acknowledge_once, acknowledged_now, acks,
    applied, approval_logged, brief, call_ids, connect, event_of, failed, log_lines, new_problem,
    open_problem_other_than, question_in, retry, saw_exactly, sha256, sidecar, sidecar_in_memory,
    untouched, without_auth,
};
use zabbix_mcp_guard::config::SessionMode;
// ---------------------------------------------------------------------------------------
// 1. Elicitation during the call (2025-11-25, stateful session): approve.

async fn elicitation_approve_on(lab: &Lab) {
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateful, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let event = new_problem(&reader, lab).await;
    let human = Human::new(Reply::Approve, true, ProtocolVersion::V_2025_11_25);
    let client = connect(&side.guard, &lab.token, &human).await;

    let result = acknowledge(&client, &event).await;
    applied(&result, &event);
    let asked = human.asked();
    assert_eq!(asked.len(), 1, "asked once");
    let sent = acks(&recorder);
    assert_eq!(sent.len(), 1, "one event.acknowledge reached Zabbix");
    let body = without_auth(lab, &sent[0]);
    let json: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["params"]["eventids"], json!([event]));
    saw_exactly(&asked[0], &body, lab);
    acknowledged_now(&reader, &event).await;

    // The decision log: the call's decision, approved through elicitation, applied.
    let lines = log_lines(&side.log);
    let ids = call_ids(&lines, &event);
    assert_eq!(ids.len(), 1, "one call decision");
    let approval = approval_logged(&lines, &ids[0], "approved");
    assert_eq!(approval["data"]["via"], "elicitation");
    assert_eq!(approval["data"]["sha256"], sha256(&body));
    // Stateful sessions hold an SSE stream open; closing them first keeps stop() short.
    client.cancel().await.unwrap();
    reader.cancel().await.unwrap();
    side.guard.stop().await;
}

#[tokio::test]
async fn elicitation_approve_sends_exactly_what_was_shown() {
    let _turn = LAB.lock().await;
    elicitation_approve_on(&common::lab(7)).await;
    elicitation_approve_on(&common::lab(6)).await;
}

// ---------------------------------------------------------------------------------------
// 2. Elicitation: decline, cancel, accept with approve=false; a client whose elicitation
//    fails.

#[tokio::test]
async fn elicitation_refusals_send_nothing() {
    let _turn = LAB.lock().await;
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateful, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let event = new_problem(&reader, &lab).await;
    for (reply, outcome) in [
        (Reply::Decline, "declined"),
        (Reply::Cancel, "cancelled"),
        (Reply::ApproveFalse, "declined"),
    ] {
        let human = Human::new(reply, true, ProtocolVersion::V_2025_11_25);
        let client = connect(&side.guard, &lab.token, &human).await;
        let result = acknowledge(&client, &event).await;
        let body = failed(&result, "approval_declined");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("({outcome})")) && message.contains("nothing was sent"),
            "{reply:?}: {message}"
        );
        assert_eq!(human.asked().len(), 1, "{reply:?}: asked once");
        assert!(acks(&recorder).is_empty(), "{reply:?}: nothing sent");
        // The denial's decision_id leads to the approval outcome in the log.
        let lines = log_lines(&side.log);
        let id = body["decision_id"].as_str().unwrap();
        let approval = approval_logged(&lines, id, outcome);
        assert_eq!(approval["data"]["via"], "elicitation", "{reply:?}");
        client.cancel().await.unwrap();
    }

    // The client answers the elicitation with a JSON-RPC error: no approval, nothing sent.
    let broken = Human::new(Reply::Fail, true, ProtocolVersion::V_2025_11_25);
    let client = connect(&side.guard, &lab.token, &broken).await;
    let body = failed(&acknowledge(&client, &event).await, "approval_unavailable");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("elicitation failed"),
        "{}",
        brief(&body)
    );
    assert_eq!(broken.asked().len(), 1, "asked once");
    assert!(acks(&recorder).is_empty(), "nothing sent");
    let lines = log_lines(&side.log);
    let id = body["decision_id"].as_str().unwrap();
    let outcome = &event_of(&lines, id, "zabbix_result")["data"];
    assert_eq!(outcome["code"], "approval_unavailable");
    let approval = &event_of(&lines, id, "approval")["data"];
    assert_eq!(approval["outcome"], "unavailable");
    client.cancel().await.unwrap();

    untouched(&reader, &event).await;
    reader.cancel().await.unwrap();
    side.guard.stop().await;
}

// ---------------------------------------------------------------------------------------
// 3. Clients that cannot ask, and policies that do not.

#[tokio::test]
async fn approval_unavailable_and_not_required() {
    let _turn = LAB.lock().await;
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let mute = Human::new(Reply::Approve, false, ProtocolVersion::V_2025_11_25);
    let human = Human::new(Reply::Approve, true, ProtocolVersion::V_2025_11_25);

    // `required`, a client without elicitation: refused, nothing sent.
    let side = sidecar(&proxy, "required", SessionMode::Stateful, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let event = new_problem(&reader, &lab).await;
    let client = connect(&side.guard, &lab.token, &mute).await;
    let body = failed(&acknowledge(&client, &event).await, "approval_unavailable");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("nothing was sent"),
        "{}",
        brief(&body)
    );
    assert!(mute.asked().is_empty(), "not asked");
    assert!(acks(&recorder).is_empty(), "nothing sent");
    let lines = log_lines(&side.log);
    let id = body["decision_id"].as_str().unwrap();
    let approval = approval_logged(&lines, id, "unavailable");
    assert_eq!(approval["data"]["approval"], "required");
    untouched(&reader, &event).await;
    client.cancel().await.unwrap();
    reader.cancel().await.unwrap();
    side.guard.stop().await;

    // `required`, a client WITH form elicitation, but a stateless sidecar: a legacy
    // (initialize) client's capabilities do not reach a stateless request, so the policy
    // input shows no elicitation and the call is refused the same way; never asked.
    let side = sidecar(&proxy, "required", SessionMode::Stateless, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let client = connect(&side.guard, &lab.token, &human).await;
    let body = failed(&acknowledge(&client, &event).await, "approval_unavailable");
    assert!(human.asked().is_empty(), "not asked");
    assert!(acks(&recorder).is_empty(), "nothing sent");
    let lines = log_lines(&side.log);
    let id = body["decision_id"].as_str().unwrap();
    approval_logged(&lines, id, "unavailable");
    let decision = lines
        .iter()
        .find(|l| l["decision_id"] == id && l["input"].is_object())
        .expect("the call decision");
    let seen = &decision["input"]["client"];
    assert_eq!(seen["elicitation"], json!([]), "stateless: {seen}");
    assert_eq!(seen["protocol_version"], "2025-11-25");
    untouched(&reader, &event).await;
    side.guard.stop().await;

    // `if_supported`, a client without elicitation: applied without asking.
    let side = sidecar(&proxy, "if_supported", SessionMode::Stateful, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let client = connect(&side.guard, &lab.token, &mute).await;
    applied(&acknowledge(&client, &event).await, &event);
    assert!(mute.asked().is_empty(), "not asked");
    assert_eq!(acks(&recorder).len(), 1, "sent once");
    acknowledged_now(&reader, &event).await;
    let lines = log_lines(&side.log);
    let ids = call_ids(&lines, &event);
    assert_eq!(ids.len(), 1);
    let approval = approval_logged(&lines, &ids[0], "not_required");
    assert_eq!(approval["data"]["approval"], "if_supported");
    assert_eq!(
        event_of(&lines, &ids[0], "zabbix_result")["data"]["ok"],
        true
    );
    client.cancel().await.unwrap();

    // `none`, a client that could elicit: applied without asking.
    let side2 = sidecar(&proxy, "none", SessionMode::Stateful, None).await;
    let event = new_problem(&reader, &lab).await;
    let client = connect(&side2.guard, &lab.token, &human).await;
    applied(&acknowledge(&client, &event).await, &event);
    assert!(human.asked().is_empty(), "not asked");
    assert_eq!(acks(&recorder).len(), 2, "sent once more");
    acknowledged_now(&reader, &event).await;
    let lines = log_lines(&side2.log);
    let ids = call_ids(&lines, &event);
    assert_eq!(ids.len(), 1);
    let approval = approval_logged(&lines, &ids[0], "not_required");
    assert_eq!(approval["data"]["approval"], "none");
    assert_eq!(
        event_of(&lines, &ids[0], "zabbix_result")["data"]["ok"],
        true
    );
    client.cancel().await.unwrap();
    reader.cancel().await.unwrap();
    side2.guard.stop().await;
    side.guard.stop().await;
}

// ---------------------------------------------------------------------------------------
// 4. The 2026-07-28 round trip: stateless, across replicas sharing ApprovalSealKey.

#[tokio::test]
async fn input_required_round_trip_across_replicas() {
    let _turn = LAB.lock().await;
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    // Keys as ApprovalSealKey decodes them: 32 random bytes each (`openssl rand -hex 32`).
    let key =
        hex::decode("0f5c2a8e91d34b7a6e0c58f2a1b9d4e73c6a05f8e2d19b4c7a3e6f0d5b8c2a91").unwrap();
    let key = key.as_slice();
    let a = sidecar(&proxy, "required", SessionMode::Stateless, Some(key)).await;
    let reader = common::client(&a.guard, &lab.token).await;
    let modern = ProtocolVersion::V_2026_07_28;

    // Driven by the client: asked once, applied, exactly the sealed payload sent.
    let event = new_problem(&reader, &lab).await;
    let human = Human::new(Reply::Approve, true, modern.clone());
    let client = connect(&a.guard, &lab.token, &human).await;
    applied(&acknowledge(&client, &event).await, &event);
    let asked = human.asked();
    assert_eq!(asked.len(), 1, "asked once");
    let sent = acks(&recorder);
    assert_eq!(sent.len(), 1, "one event.acknowledge reached Zabbix");
    saw_exactly(&asked[0], &sent[0], &lab);
    acknowledged_now(&reader, &event).await;
    let lines = log_lines(&a.log);
    let ids = call_ids(&lines, &event);
    assert_eq!(ids.len(), 2, "the call and its retry are two decisions");
    let requested = approval_logged(&lines, &ids[0], "requested");
    assert_eq!(requested["data"]["via"], "input_required");
    assert_eq!(requested["data"]["sha256"], sha256(&sent[0]));
    let approved = approval_logged(&lines, &ids[1], "approved");
    assert_eq!(approved["data"]["approval_of"], ids[0].as_str());
    assert_eq!(approved["data"]["sha256"], sha256(&sent[0]));

    // Declined in the round trip: nothing sent.
    let event = new_problem(&reader, &lab).await;
    let no = Human::new(Reply::Decline, true, modern.clone());
    let client = connect(&a.guard, &lab.token, &no).await;
    let body = failed(&acknowledge(&client, &event).await, "approval_declined");
    assert_eq!(no.asked().len(), 1, "asked once");
    assert_eq!(acks(&recorder).len(), 1, "nothing more sent");
    let lines = log_lines(&a.log);
    let declined = approval_logged(&lines, body["decision_id"].as_str().unwrap(), "declined");
    let first = declined["data"]["approval_of"]
        .as_str()
        .expect("approval_of");
    approval_logged(&lines, first, "requested");
    untouched(&reader, &event).await;

    // Asked by replica A, finished by replica B (same key, same Redis); a replica with
    // another key cannot open the state, nor can one with the key but its store in memory
    // (it could not know the state was used elsewhere: before, each such replica applied
    // it once more).
    let b = sidecar(&proxy, "required", SessionMode::Stateless, Some(key)).await;
    let other_key =
        hex::decode("b71e04c9d28a5f3e60c1a7d94e2b8f05a3c6d91e7b240f8a5c3e9d16f0a7b42c").unwrap();
    let other_key = other_key.as_slice();
    let c = sidecar(&proxy, "required", SessionMode::Stateless, Some(other_key)).await;
    let silent = Human::new(Reply::Approve, true, modern.clone());
    let on_a = connect(&a.guard, &lab.token, &silent).await;
    let on_b = connect(&b.guard, &lab.token, &silent).await;
    let on_c = connect(&c.guard, &lab.token, &silent).await;
    let pending = acknowledge_once(&on_a, &event).await;
    let question = question_in(&pending);
    let state = pending.request_state.clone().expect("sealed request state");
    let result = retry(&on_c, TOOL, ack_args(&event), &state, Reply::Approve).await;
    let body = failed(&result, "invalid_arguments");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("approval request state"),
        "{}",
        brief(&body)
    );
    assert_eq!(acks(&recorder).len(), 1, "replica C sent nothing");
    let d = sidecar_in_memory(&proxy, "required", SessionMode::Stateless, Some(key)).await;
    let on_d = connect(&d.guard, &lab.token, &silent).await;
    let result = retry(&on_d, TOOL, ack_args(&event), &state, Reply::Approve).await;
    failed(&result, "invalid_arguments");
    assert_eq!(acks(&recorder).len(), 1, "replica D sent nothing");
    let result = retry(&on_b, TOOL, ack_args(&event), &state, Reply::Approve).await;
    applied(&result, &event);
    // Used through B: A, sharing the Redis, refuses it too.
    let again = retry(&on_a, TOOL, ack_args(&event), &state, Reply::Approve).await;
    let body = failed(&again, "invalid_arguments");
    assert!(
        body["message"].as_str().unwrap().contains("already used"),
        "{}",
        brief(&body)
    );
    assert!(silent.asked().is_empty(), "call_tool_once drives no rounds");
    let sent = acks(&recorder);
    assert_eq!(sent.len(), 2, "replica B sent it once");
    saw_exactly(&question, &sent[1], &lab);
    acknowledged_now(&reader, &event).await;
    // B logged the approval of A's decision.
    let lines_b = log_lines(&b.log);
    let ids_b = call_ids(&lines_b, &event);
    assert_eq!(ids_b.len(), 1);
    let approved = approval_logged(&lines_b, &ids_b[0], "approved");
    let asked_by_a = approved["data"]["approval_of"].as_str().unwrap();
    approval_logged(&log_lines(&a.log), asked_by_a, "requested");
    for side in [a, b, c, d] {
        side.guard.stop().await;
    }
}

// ---------------------------------------------------------------------------------------
// 5. Sealed state that was tampered with, replayed by another caller, or reused for other
//    arguments or another tool.

#[tokio::test]
async fn tampered_or_misused_state_is_refused() {
    let _turn = LAB.lock().await;
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateless, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let event = new_problem(&reader, &lab).await;
    let modern = ProtocolVersion::V_2026_07_28;
    let human = Human::new(Reply::Approve, true, modern.clone());
    let client = connect(&side.guard, &lab.token, &human).await;
    let pending = acknowledge_once(&client, &event).await;
    let state = pending.request_state.clone().expect("sealed request state");

    let refused = |result: CallToolResult, case: &str, text: &str| {
        let body = failed(&result, "invalid_arguments");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(text), "{case}: {message}");
        assert!(acks(&recorder).is_empty(), "{case}: nothing sent");
    };

    // One character flipped.
    let mut tampered: Vec<char> = state.chars().collect();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();
    let result = retry(&client, TOOL, ack_args(&event), &tampered, Reply::Approve).await;
    refused(result, "tampered", "approval request state");

    // Replayed by another caller (the operator's token).
    let operator_human = Human::new(Reply::Approve, true, modern.clone());
    let operator = connect(&side.guard, &lab.token_operator, &operator_human).await;
    let result = retry(&operator, TOOL, ack_args(&event), &state, Reply::Approve).await;
    refused(result, "another caller", "approval request state");

    // Other arguments on the retry (another problem the caller can see, so that its targets
    // resolve and the state is what refuses it).
    let another = open_problem_other_than(&reader, &event).await;
    let other =
        json!({"eventids": [event, another], "message": "approved through zabbix-mcp-guard tests"});
    let result = retry(&client, TOOL, other, &state, Reply::Approve).await;
    refused(result, "other eventids", "arguments changed");
    let result = retry(
        &client,
        TOOL,
        json!({"eventids": [event], "message": "another message"}),
        &state,
        Reply::Approve,
    )
    .await;
    refused(result, "other message", "arguments changed");

    // Another tool.
    let result = retry(
        &client,
        "problem_close",
        json!({"eventids": [event]}),
        &state,
        Reply::Approve,
    )
    .await;
    refused(result, "another tool", "approval request state is for");

    untouched(&reader, &event).await;
    // The intact state, from its own caller, still works: the refusals were the checks.
    let result = retry(&client, TOOL, ack_args(&event), &state, Reply::Approve).await;
    applied(&result, &event);
    assert_eq!(acks(&recorder).len(), 1, "sent once");
    acknowledged_now(&reader, &event).await;
    assert!(human.asked().is_empty() && operator_human.asked().is_empty());
    side.guard.stop().await;
}

// ---------------------------------------------------------------------------------------
// 7. A write whose connection drops after the request was read is not sent again.

#[tokio::test]
async fn writes_are_never_retried() {
    let (url, stub) = common::hangup::start().await;
    let side = sidecar(&url, "none", SessionMode::Stateless, None).await;
    let client = common::client(&side.guard, "stub-token").await;
    let result = common::call(&client, TOOL, json!({"eventids": ["42"]})).await;
    let body = failed(&result, "upstream_unavailable");
    assert_eq!(stub.acknowledges(), 1, "sent once");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(stub.acknowledges(), 1, "and never again");
    let lines = log_lines(&side.log);
    let id = body["decision_id"].as_str().unwrap();
    approval_logged(&lines, id, "not_required");
    let outcome = &event_of(&lines, id, "zabbix_result")["data"];
    assert_eq!(outcome["code"], "upstream_unavailable");
    side.guard.stop().await;
}

// ---------------------------------------------------------------------------------------
// Two gaps found while writing these tests, now closed.

#[tokio::test]
async fn elicitation_failure_logs_an_approval_event() {
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateful, None).await;
    let broken = Human::new(Reply::Fail, true, ProtocolVersion::V_2025_11_25);
    let client = connect(&side.guard, &lab.token, &broken).await;
    // Nothing is sent, so any open problem will do (its targets must resolve).
    let reader = common::client(&side.guard, &lab.token).await;
    let event = open_problem_other_than(&reader, "").await;
    let body = failed(&acknowledge(&client, &event).await, "approval_unavailable");
    assert!(acks(&recorder).is_empty(), "nothing sent");
    let lines = log_lines(&side.log);
    let id = body["decision_id"].as_str().unwrap();
    let approval = event_of(&lines, id, "approval");
    assert_eq!(approval["data"]["via"], "elicitation");
    assert_eq!(approval["data"]["outcome"], "unavailable");
    client.cancel().await.unwrap();
    side.guard.stop().await;
}

#[tokio::test]
async fn approved_state_is_redeemed_once() {
    let _turn = LAB.lock().await;
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateless, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let event = new_problem(&reader, &lab).await;
    let human = Human::new(Reply::Approve, true, ProtocolVersion::V_2026_07_28);
    let client = connect(&side.guard, &lab.token, &human).await;
    let state = acknowledge_once(&client, &event)
        .await
        .request_state
        .expect("sealed request state");
    let first = retry(&client, TOOL, ack_args(&event), &state, Reply::Approve).await;
    applied(&first, &event);
    // The same retry again (a client resending after a dropped connection, or a replay):
    // one human yes, so at most one write.
    let again = retry(&client, TOOL, ack_args(&event), &state, Reply::Approve).await;
    assert_eq!(
        acks(&recorder).len(),
        1,
        "the approved payload was sent twice"
    );
    failed(&again, "invalid_arguments");
    side.guard.stop().await;
}
