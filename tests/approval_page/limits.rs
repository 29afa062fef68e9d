//! Shares of the approval store: one Zabbix user's approvals waiting on the page are
//! capped (`MaxPendingApprovals`), so one caller cannot fill the store or bury the
//! approvers' list.

use crate::common;
use crate::support::{self, PageClient, Setup, TOOL, ack_args, pending, sidecar_with};

/// One user cannot fill the approval store (or bury the approvers' list): past
/// `MaxPendingApprovals` waiting, the user's next write is refused as `rate_limited`,
/// nothing sent, while another user's write is still asked for; once one of the waiting
/// ones is decided, there is room again.
#[tokio::test]
async fn one_user_cannot_fill_the_approval_store() {
    let lab = common::lab(7);
    let setup = Setup::page(&lab.url);
    let car = sidecar_with(setup, |config| config.limits.max_pending_approvals = 2).await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = support::open_event(&lab, &car.guard).await;
    let first = common::tool_error(&agent, TOOL, ack_args(&event, "waiting 1")).await;
    let (first_id, _) = pending(&first);
    let second = common::tool_error(&agent, TOOL, ack_args(&event, "waiting 2")).await;
    pending(&second);
    let third = ack_args(&event, "waiting 3");
    let refused = common::tool_error(&agent, TOOL, third.clone()).await;
    assert_eq!(refused["code"], "rate_limited", "{refused}");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message
            .contains("2 approvals of this Zabbix user are waiting already (MaxPendingApprovals)")
            && message.contains("nothing was sent to Zabbix"),
        "{refused}"
    );
    // Another user is not held back by this one.
    let admin_agent = common::client(&car.guard, &lab.token).await;
    let admins = common::tool_error(&admin_agent, TOOL, ack_args(&event, "Admin's")).await;
    pending(&admins);
    // Declined on the page, the first no longer waits: the third is asked for now.
    let admin = PageClient::new(&car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    assert_eq!(admin.decide(&first_id, "decline").await.status, 200);
    let asked = common::tool_error(&agent, TOOL, third).await;
    assert_eq!(asked["code"], "approval_pending", "{asked}");
    car.guard.stop().await;
}
