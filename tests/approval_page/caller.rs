//! A pending approval is for the caller as they were when it was asked: a retry by the
//! same token whose user, role or user groups changed meanwhile does not wait on it.

use serde_json::json;

use crate::common::{self, Lab, zapi};
use crate::redeem::QUARANTINE;
use crate::support::{PageClient, Setup, event_names, events, pending, sidecar_with};

/// A retry that finds its call still pending for a caller who has changed withdraws that
/// approval at once (`approval_expired`, a `caller` event) and asks anew, on the caller as
/// they are: the approvers are asked once, about the caller they decide on. Before, the
/// retry got the old approval's id again, an approver approved the caller as they were,
/// and only the retry after that was refused and asked them a second time (7.0 lab).
#[tokio::test]
async fn a_pending_approval_of_a_changed_caller_is_asked_anew() {
    let lab = common::lab(7);
    let operators = common::seed_id(&lab, "user_groups", "MCP Operators");
    let name = zapi::unique("mcp-quarantine");
    let created = zapi::admin(&lab, "usergroup.create", json!({"name": name})).await;
    let quarantine = created["usrgrpids"][0].as_str().unwrap().to_owned();
    let user = zapi::TestUser::create(&lab, &operators, &[]).await;
    let checked = tokio::spawn(changed_while_pending(
        lab.clone(),
        user.clone(),
        (name, quarantine.clone()),
    ))
    .await;
    user.delete(&lab).await;
    zapi::admin(&lab, "usergroup.delete", json!([quarantine])).await;
    if let Err(error) = checked {
        std::panic::resume_unwind(error.into_panic());
    }
}

async fn changed_while_pending(
    lab: Lab,
    user: zapi::TestUser,
    (name, quarantine): (String, String),
) {
    let dir = common::temp_path("policy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.rego"), QUARANTINE).unwrap();
    let data = json!({"quarantine": {"usrgrp": name}});
    std::fs::write(dir.join("data.json"), data.to_string()).unwrap();
    let car = sidecar_with(Setup::page(&lab.url), |c| c.policy_dir = Some(dir)).await;
    let agent = common::client(&car.guard, &user.token).await;
    let event = common::seed_id(&lab, "problems", "MCP uint too high");
    let message = zapi::unique("mcp-changed-while-pending");
    let args = json!({"eventids": [event], "message": message});
    let first = common::tool_error(&agent, "problem_annotate", args.clone()).await;
    let (id, _) = pending(&first);
    let operators = common::seed_id(&lab, "user_groups", "MCP Operators");
    let both = json!([{"usrgrpid": operators}, {"usrgrpid": quarantine}]);
    zapi::admin(
        &lab,
        "user.update",
        json!({"userid": user.userid, "usrgrps": both}),
    )
    .await;

    let retry = common::tool_error(&agent, "problem_annotate", args).await;
    let (again, _) = pending(&retry);
    assert_ne!(again, id, "the old approval was handed out again: {retry}");
    let retry_id = retry["decision_id"].as_str().unwrap();
    let caller: Vec<_> = events(&car.log, retry_id)
        .into_iter()
        .filter(|e| e["event"] == "caller")
        .collect();
    assert_eq!(caller.len(), 1, "{caller:?}");
    assert_eq!(caller[0]["data"]["outcome"], "changed");
    assert_eq!(caller[0]["data"]["approval_id"], id.as_str());
    let first_id = first["decision_id"].as_str().unwrap();
    assert!(event_names(&car.log, first_id).contains(&"approval_expired".to_owned()));

    // The old one is no longer waiting; the new one is decided on the caller as they are
    // (so the list, which shows what a person may decide, leaves it out too).
    let admin = PageClient::new(&car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    let list = admin.get("/approvals").await;
    assert!(!list.body.contains(&id), "{}", list.body);
    let refused = admin.decide(&again, "approve").await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.body.contains("the caller is quarantined"),
        "{}",
        refused.body
    );
    assert!(
        !zapi::acknowledgements(&lab, &event)
            .await
            .contains(&message),
        "sent"
    );
    let _ = agent.cancel().await;
    car.guard.stop().await;
}
