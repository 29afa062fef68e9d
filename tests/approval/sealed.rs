//! Sealed states forged with the sidecar's own key (as a holder of the key, or a bug in
//! sealing, could make them), retried through a real 2026-07-28 client: the request is
//! rebuilt from the retried arguments and only bytes with the sealed digest are sent.

use std::time::Duration;

use rmcp::model::{InputRequiredResult, ProtocolVersion};
use serde_json::Value;
use zabbix_mcp_guard::config::SessionMode;
use zabbix_mcp_guard::mcp::approval::{Approver, Sealed, sha256_hex};
use zabbix_mcp_guard::zabbix::ApiToken;

use crate::common::{self, Lab, recorder};
use crate::support::{
    Human, HumanClient, LAB, Reply, Sidecar, TOOL, ack_args, acknowledge_once, acknowledged_now,
    acks, applied, brief, connect, failed, new_problem, question_in, retry, saw_exactly, sidecar,
    untouched, without_auth,
};

/// 32 random bytes, as the sidecar's configuration would decode them.
const KEY: [u8; 32] = [
    0x5a, 0x1f, 0x93, 0x0c, 0x7e, 0x44, 0xd2, 0x81, 0x3b, 0xa6, 0x0f, 0xe9, 0x25, 0x78, 0xc4, 0x11,
    0x9d, 0x62, 0x37, 0xfa, 0x08, 0xbe, 0x53, 0xc1, 0x6a, 0x2e, 0x94, 0x7d, 0xe0, 0x15, 0x48, 0xb3,
];

fn reseal(state: &str, token: &str, change: impl FnOnce(&mut Sealed)) -> String {
    // On the sidecar's Redis: with the store in memory a state opens only in its process.
    let url = common::redis_url();
    let store = std::sync::Arc::new(
        zabbix_mcp_guard::store::Store::open(
            Some(&url),
            std::time::Duration::from_secs(1),
            Some(&KEY),
        )
        .unwrap(),
    );
    let approver = Approver::new(Some(&KEY), store).unwrap();
    let token_id = ApiToken::new(token.to_owned()).id();
    let mut sealed = approver
        .open(state, &token_id)
        .expect("the sidecar's own state");
    change(&mut sealed);
    approver.seal(&sealed, &token_id).unwrap()
}

/// A body with a new digest that matches it.
fn with_body(sealed: &mut Sealed, body: String) {
    sealed.sha256 = sha256_hex(body.as_bytes());
    sealed.body = body;
}

/// A sidecar asking `required` approval behind a recording proxy, and a 2026-07-28 human's
/// client that was just asked about acknowledging a new problem.
struct Asked {
    recorder: recorder::Recorder,
    side: Sidecar,
    reader: common::Client,
    event: String,
    client: HumanClient,
    pending: InputRequiredResult,
}

async fn asked(lab: &Lab) -> Asked {
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateless, Some(&KEY)).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let event = new_problem(&reader, lab).await;
    let human = Human::new(Reply::Approve, true, ProtocolVersion::V_2026_07_28);
    let client = connect(&side.guard, &lab.token, &human).await;
    let pending = acknowledge_once(&client, &event).await;
    Asked {
        recorder,
        side,
        reader,
        event,
        client,
        pending,
    }
}

async fn forged_states_on(lab: &Lab) {
    let Asked {
        recorder,
        side,
        reader,
        event,
        client,
        pending,
    } = asked(lab).await;
    let question = question_in(&pending);
    let state = pending.request_state.clone().expect("sealed request state");

    let refused = async |forged: String, case: &str, text: &str| {
        let result = retry(&client, TOOL, ack_args(&event), &forged, Reply::Approve).await;
        let body = failed(&result, "invalid_arguments");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(text), "{case}: {}", brief(&body));
        assert!(acks(&recorder).is_empty(), "{case}: nothing sent");
        assert!(recorder.bodies.lock().unwrap().iter().all(|b| {
            serde_json::from_str::<Value>(b).is_ok_and(|v| v["method"] != "maintenance.delete")
        }));
    };

    // The same params under another method.
    let forged = reseal(&state, &lab.token, |s| {
        let body = s.body.replace("event.acknowledge", "maintenance.delete");
        with_body(s, body);
    });
    refused(
        forged,
        "another method",
        "holds a maintenance.delete request",
    )
    .await;

    // Same method and params, something else around them (another token's `auth`).
    let forged = reseal(&state, &lab.token, |s| {
        let auth = serde_json::to_string(&lab.token_operator).unwrap();
        let body = format!("{},\"auth\":{auth}}}", s.body.strip_suffix('}').unwrap());
        with_body(s, body);
    });
    refused(forged, "extra field", "arguments changed").await;

    // A digest that is not the body's.
    let forged = reseal(&state, &lab.token, |s| s.sha256 = sha256_hex(b"other"));
    refused(forged, "digest", "approval request state").await;

    untouched(&reader, &event).await;
    // Re-sealed unchanged, the state works: the refusals above were the checks. What
    // reaches Zabbix (token aside) is exactly what the human was shown.
    let resealed = reseal(&state, &lab.token, |_| {});
    let result = retry(&client, TOOL, ack_args(&event), &resealed, Reply::Approve).await;
    applied(&result, &event);
    let sent = acks(&recorder);
    assert_eq!(sent.len(), 1, "sent once");
    saw_exactly(&question, &without_auth(lab, &sent[0]), lab);
    acknowledged_now(&reader, &event).await;
    side.guard.stop().await;
}

#[tokio::test]
async fn forged_sealed_states_are_refused() {
    let _turn = LAB.lock().await;
    forged_states_on(&common::lab(7)).await;
    forged_states_on(&common::lab(6)).await;
}

/// A yes given in the client stands only where the retry's own decision asks for no more:
/// once the policy asks for the page (a reload here; a policy that depends on the time, the
/// targets or the client would do the same), a sealed state with the human's yes is not
/// redeemed, and the call goes the page's way (here: no page, so unavailable). Nothing is sent.
async fn page_after_the_question_on(lab: &Lab) {
    let Asked {
        recorder,
        side,
        reader,
        event,
        client,
        pending,
    } = asked(lab).await;
    let state = pending.request_state.clone().expect("sealed request state");

    let app = side.guard.app();
    let before = app.policy.status().revision;
    let dir = app.config.policy_dir.clone().expect("a policy directory");
    std::fs::write(
        dir.join("policy.rego"),
        "package zabbix.mcp\nimport rego.v1\n\
         decision := {\"allow\": true, \"reasons\": [], \"approval\": \"page\", \
         \"approvers\": {\"usrgrps\": [\"Zabbix administrators\"], \"distinct_from_caller\": true}} \
         if input.tool.kind == \"write\"\n\
         else := {\"allow\": true, \"reasons\": [], \"approval\": \"none\"}\n",
    )
    .unwrap();
    common::wait_until(
        "the page policy to load",
        Duration::from_secs(30),
        async || app.policy.status().revision != before,
    )
    .await;

    let result = retry(&client, TOOL, ack_args(&event), &state, Reply::Approve).await;
    let body = failed(&result, "approval_unavailable");
    assert!(acks(&recorder).is_empty(), "nothing sent: {}", brief(&body));
    untouched(&reader, &event).await;
    let decision_id = body["decision_id"].as_str().unwrap();
    common::wait_until(
        "the not_accepted event",
        Duration::from_secs(10),
        async || {
            common::decision_log_lines(&side.log).into_iter().any(|l| {
                l["decision_id"] == decision_id
                    && l["event"] == "approval"
                    && l["data"]["outcome"] == "not_accepted"
            })
        },
    )
    .await;
    side.guard.stop().await;
}

#[tokio::test]
async fn a_yes_in_the_client_does_not_stand_in_for_the_page() {
    let _turn = LAB.lock().await;
    page_after_the_question_on(&common::lab(7)).await;
}
