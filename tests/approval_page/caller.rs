//! A pending approval is for the caller as they were when it was asked: a retry by the
//! same token whose user, role or user groups changed meanwhile does not wait on it.

use crate::common::{self, Lab, zapi};
use crate::quarantine::{Asked, Group};
use crate::support::{PageClient, event_names, events, pending};

/// A retry that finds its call still pending for a caller who has changed withdraws that
/// approval at once (`approval_expired`, a `caller` event) and asks anew, on the caller as
/// they are: the approvers are asked once, about the caller they decide on. Before, the
/// retry got the old approval's id again, an approver approved the caller as they were,
/// and only the retry after that was refused and asked them a second time (7.0 lab).
#[tokio::test]
async fn a_pending_approval_of_a_changed_caller_is_asked_anew() {
    crate::quarantine::run(&common::lab(7), changed_while_pending).await;
}

async fn changed_while_pending(lab: Lab, user: zapi::TestUser, group: Group) {
    let Asked {
        car,
        agent,
        event,
        message,
        args,
        first,
        id,
    } = Asked::then_quarantined(&lab, &user, &group, "mcp-changed-while-pending").await;

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
