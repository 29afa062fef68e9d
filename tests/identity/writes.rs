//! A write is judged on its caller as Zabbix has them now, not as the identity cache
//! (60 s) remembers them; a caller Zabbix refuses or gives without groups sends nothing.

use serde_json::{Value, json};
use zabbix_mcp_guard::config::DecisionLogSink;

use crate::common::zapi::TestUser;
use crate::common::{self, Lab, config_for, seed_id, start_with};

/// Writes only for members of `data.writers.usrgrp`, with an approval the test's client
/// cannot give: an allowed write ends `approval_unavailable` with nothing sent, a denied
/// one `denied`; problem_acknowledge does not even exist for others (the list phase). Reads go.
const WRITERS_POLICY: &str = r#"package zabbix.mcp
import rego.v1
default writer := false
writer if data.writers.usrgrp in input.caller.usrgrps
hidden if {
    input.phase == "list"
    input.tool.name == "problem_acknowledge"
}
default allowed := false
allowed if input.tool.kind == "read"
allowed if input.phase == "list"
allowed if writer
decision := {"allow": allowed, "reasons": ["writes only for the writers' group"], "approval": "required"} if not hidden
decision := {"allow": writer, "reasons": ["writes only for the writers' group"]} if hidden
"#;

/// A user taken out of the group a policy trusts is judged without it at their next write,
/// though their identity is cached for reads (60 s): a write looks the caller up again, and
/// the answer is cached for the reads after it. Before, the write was decided on the cached
/// groups (on the 7.0 lab, through the Python SDK, a problem_annotate 0.04 s after the
/// removal was allowed and applied).
#[tokio::test]
async fn a_write_is_judged_on_the_callers_groups_as_they_are_now() {
    for lab in common::labs() {
        let operators = seed_id(&lab, "user_groups", "MCP Operators");
        let name = common::zapi::unique("mcp-writers");
        let created = common::zapi::admin(&lab, "usergroup.create", json!({"name": name})).await;
        let writers = created["usrgrpids"][0].as_str().unwrap().to_owned();
        let user = TestUser::create(&lab, &operators, &[]).await;
        let both = json!([{"usrgrpid": operators}, {"usrgrpid": writers}]);
        common::zapi::admin(
            &lab,
            "user.update",
            json!({"userid": user.userid, "usrgrps": both}),
        )
        .await;
        let checked =
            tokio::spawn(judged_now(lab.clone(), user.clone(), name, writers.clone())).await;
        user.delete(&lab).await;
        common::zapi::admin(&lab, "usergroup.delete", json!([writers])).await;
        if let Err(error) = checked {
            std::panic::resume_unwind(error.into_panic());
        }
    }
}

async fn judged_now(lab: Lab, user: TestUser, writers: String, writers_id: String) {
    let dir = common::temp_path("policy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.rego"), WRITERS_POLICY).unwrap();
    let data = json!({"writers": {"usrgrp": writers}});
    std::fs::write(dir.join("data.json"), data.to_string()).unwrap();
    let mut config = config_for(&lab.url);
    config.policy_dir = Some(dir);
    let guard = start_with(config).await;
    let client = common::client(&guard, &user.token).await;
    let event = seed_id(&lab, "problems", "MCP uint too high");
    let annotate = json!({"eventids": [event], "message": "never sent"});
    let groups = |about: Value| about["identity"]["usrgrps"].clone();
    assert!(
        groups(common::about(&client).await)
            .as_array()
            .unwrap()
            .contains(&json!(writers)),
        "Zabbix {}: the identity is cached with the writers' group",
        lab.major
    );
    let allowed = common::tool_error(&client, "problem_annotate", annotate.clone()).await;
    assert_eq!(allowed["code"], "approval_unavailable", "{allowed}");

    let operators = seed_id(&lab, "user_groups", "MCP Operators");
    let only = json!([{"usrgrpid": operators}]);
    let both = json!([{"usrgrpid": operators}, {"usrgrpid": writers_id}]);
    common::zapi::admin(
        &lab,
        "user.update",
        json!({"userid": user.userid, "usrgrps": only}),
    )
    .await;
    // The list phase of a write is decided on the caller as they are now too (first: the
    // lookup of any write refreshes the identity the next requests find).
    let mut params = rmcp::model::CallToolRequestParams::new("problem_acknowledge");
    params = params.with_arguments(annotate.as_object().unwrap().clone());
    let unknown = client.call_tool(params).await.map(|r| r.content);
    let unknown = format!("{unknown:?}");
    assert!(
        unknown.contains("unknown tool"),
        "Zabbix {}: {unknown}",
        lab.major
    );
    common::zapi::admin(
        &lab,
        "user.update",
        json!({"userid": user.userid, "usrgrps": both}),
    )
    .await;
    assert_eq!(
        common::tool_error(&client, "problem_annotate", annotate.clone()).await["code"],
        "approval_unavailable"
    );
    common::zapi::admin(
        &lab,
        "user.update",
        json!({"userid": user.userid, "usrgrps": only}),
    )
    .await;
    let denied = common::tool_error(&client, "problem_annotate", annotate.clone()).await;
    assert_eq!(denied["code"], "denied", "Zabbix {}: {denied}", lab.major);
    // The write's lookup is cached: the next read sees the user as Zabbix has them now.
    assert_eq!(
        groups(common::about(&client).await),
        json!(["MCP Operators"]),
        "Zabbix {}",
        lab.major
    );
    let _ = client.cancel().await;
    guard.stop().await;
}

/// A write whose caller Zabbix now gives without groups (their role denies usergroup.get
/// since the identity was cached) is refused before the policy is asked or anything is
/// sent, and the cached identity goes with it: the next request asks Zabbix and is refused
/// too. The refusal is a denial in the decision log, its id given to the agent; before, it
/// had no line at all, so an auditor counting refusals there missed it.
#[tokio::test]
async fn a_write_whose_caller_zabbix_now_refuses_sends_nothing() {
    for lab in common::labs() {
        let operators = seed_id(&lab, "user_groups", "MCP Operators");
        let user = TestUser::create(&lab, &operators, &[]).await;
        user.run(&lab, refused_now(lab.clone(), user.clone())).await;
    }
}

async fn refused_now(lab: Lab, user: TestUser) {
    let denied = json!({"api.access": 1, "api.mode": 0, "api": ["usergroup.get"]});
    let change = common::zapi::admin(
        &lab,
        "role.update",
        json!({"roleid": user.roleid, "rules": denied}),
    );
    let refused = write_refused_after(&lab, &user, async {
        change.await;
    })
    .await;
    let answer = &refused.answer;
    assert_eq!(
        answer["code"], "identity_incomplete",
        "Zabbix {}: {answer}",
        lab.major
    );
    let text = answer["message"].as_str().unwrap();
    assert!(
        text.contains("usergroup.get") && text.ends_with("nothing was sent to Zabbix"),
        "{text}"
    );
    assert_refusal_logged(&refused.log, answer, "usergroup.get");
    // The identity cached for reads went with the refusal.
    let (status, body) =
        common::raw_initialize(&reqwest::Client::new(), &refused.guard.url, &user.token).await;
    assert_eq!(status, 503, "Zabbix {}: {body}", lab.major);
    assert_eq!(body["error"], "identity_incomplete", "{body}");
    refused.stop().await;
}

/// A write refused after `change` was made in Zabbix, with nothing sent: a sidecar logging
/// decisions to a file, a session of `user` that read once (its identity cached for reads),
/// `change`, then a `problem_annotate` whose message Zabbix never gets.
struct Refused {
    guard: common::Guard,
    client: common::Client,
    log: std::path::PathBuf,
    answer: Value,
}

impl Refused {
    async fn stop(self) {
        let _ = self.client.cancel().await;
        self.guard.stop().await;
    }
}

async fn write_refused_after(
    lab: &Lab,
    user: &TestUser,
    change: impl Future<Output = ()>,
) -> Refused {
    let config = config_for(&lab.url);
    let DecisionLogSink::File(log) = config.decision_log.clone() else {
        unreachable!("config_for logs to a file")
    };
    let guard = start_with(config).await;
    let client = common::client(&guard, &user.token).await;
    common::read(&client, "host_get", json!({"limit": 1})).await;
    change.await;
    let event = seed_id(lab, "problems", "MCP uint too high");
    let message = common::zapi::unique("mcp-never-sent");
    let args = json!({"eventids": [event], "message": message});
    let answer = common::tool_error(&client, "problem_annotate", args).await;
    assert!(
        !common::zapi::acknowledgements(lab, &event)
            .await
            .contains(&message),
        "Zabbix {}: sent",
        lab.major
    );
    Refused {
        guard,
        client,
        log,
        answer,
    }
}

/// The refused write's own line in the decision log: a denial of the call, under the id the
/// agent was given, whose reason names the caller's lookup and `names` (the policy was not
/// asked: no evaluation time), and nothing after it.
fn assert_refusal_logged(log: &std::path::Path, refused: &Value, names: &str) {
    let id = refused["decision_id"].as_str().expect("a decision_id");
    let lines: Vec<Value> = common::decision_log_lines(log)
        .into_iter()
        .filter(|line| line["decision_id"] == id)
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(line["input"]["tool"]["name"], "problem_annotate", "{line}");
    assert_eq!(line["input"]["phase"], "call", "{line}");
    assert_eq!(line["decision"]["allow"], false, "{line}");
    assert_eq!(line["metrics"]["timer_eval_ns"], 0, "{line}");
    let reason = line["decision"]["reasons"][0].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("the caller could not be looked up again: ") && reason.contains(names),
        "{line}"
    );
}

/// A write whose token was revoked after a read (the identity cached for reads still holds
/// it for up to 60 s) is refused as unauthorized with nothing sent, and the refusal is in
/// the decision log. Before, the agent got `unauthorized` and the log had no line of it
/// (the binary, the Python SDK, 7.0 lab).
#[tokio::test]
async fn a_write_whose_token_was_revoked_is_a_denial_in_the_decision_log() {
    for lab in common::labs() {
        let operators = seed_id(&lab, "user_groups", "MCP Operators");
        let user = TestUser::create(&lab, &operators, &[]).await;
        user.run(&lab, revoked_now(lab.clone(), user.clone())).await;
    }
}

async fn revoked_now(lab: Lab, user: TestUser) {
    let refused = write_refused_after(&lab, &user, user.revoke_token(&lab)).await;
    assert_eq!(
        refused.answer["code"], "unauthorized",
        "Zabbix {}: {}",
        lab.major, refused.answer
    );
    assert_refusal_logged(&refused.log, &refused.answer, "not accepted by Zabbix");
    refused.stop().await;
}
