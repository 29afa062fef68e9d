//! A decision is taken, and pending calls are shown, as the approver is in Zabbix at that
//! moment, not as they were at sign-in: someone taken out of the approver groups, or
//! disabled, while their page session lasts (15 minutes) decides and reads nothing;
//! someone who still is an approver decides, signed in with a password or an API token.

use serde_json::json;

use crate::common::{self, Lab, recorder, zapi};
use crate::support::{self, PageClient, Setup, TOOL, ack_args, acks, open_event, pending, sidecar};

#[tokio::test]
async fn an_approver_whose_rights_were_taken_away_decides_nothing() {
    for lab in common::labs() {
        let admins = group_id(&lab, "Zabbix administrators").await;
        let user = zapi::TestUser::create(&lab, &admins, &[]).await;
        user.run(&lab, revoked(lab.clone(), user.clone(), admins))
            .await;
    }
}

async fn revoked(lab: Lab, user: zapi::TestUser, admins: String) {
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let car = sidecar(Setup::page(&proxy)).await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = open_event(&lab, &car.guard).await;
    let args = ack_args(&event, "approved by someone no longer an approver");
    let asked = common::tool_error(&agent, TOOL, args.clone()).await;
    let (id, _) = pending(&asked);
    let decision_id = asked["decision_id"].as_str().unwrap().to_owned();

    // Signed in while an approver: the page offers the buttons.
    let page = PageClient::new(&car.page);
    let signed_in = page.sign_in(&user.username, zapi::TEST_PASSWORD).await;
    assert_eq!(signed_in.status, 303, "{}", signed_in.body);
    let shown = page.get(&format!("/approvals/{id}")).await;
    assert!(shown.body.contains("id=\"approve\""), "{}", shown.body);
    let (csrf, sha256) = (
        support::csrf(&shown.body),
        support::shown_sha256(&shown.body),
    );

    // Taken out of the approver group: the page session still lasts, the right does not.
    let viewers = common::seed_id(&lab, "user_groups", "MCP Viewers");
    set_groups(&lab, &user, &[&viewers]).await;
    let forced = page.force(&id, &csrf, &sha256, "approve").await;
    assert_eq!(forced.status, 403, "Zabbix {}: {}", lab.major, forced.body);
    assert!(
        forced
            .body
            .contains("Only members of Zabbix administrators"),
        "{}",
        forced.body
    );
    // Nor does it read the pending calls any more: the list leaves this one out and its
    // page is refused (before, both were shown as at sign-in).
    let listed = page.get("/approvals").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(!listed.body.contains(&id), "{}", listed.body);
    let viewed = page.get(&format!("/approvals/{id}")).await;
    assert_eq!(viewed.status, 403, "{}", viewed.body);
    assert!(!viewed.body.contains(&event), "{}", viewed.body);

    // Back among the approvers but disabled: Zabbix refuses the sign-in's session, so the
    // page ends its own and decides nothing.
    let disabled = group_id(&lab, "Disabled").await;
    set_groups(&lab, &user, &[&admins, &disabled]).await;
    let forced = page.force(&id, &csrf, &sha256, "approve").await;
    assert_eq!(forced.status, 403, "Zabbix {}: {}", lab.major, forced.body);
    assert!(forced.body.contains("sign in again"), "{}", forced.body);
    assert_eq!(page.get("/approvals").await.status, 303, "signed out");

    // Both attempts are in the decision log under the call's decision id.
    let reasons: Vec<String> = support::events(&car.log, &decision_id)
        .iter()
        .filter(|e| e["event"] == "approval_refused")
        .map(|e| e["data"]["reason"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[1].contains("no longer accepts your sign-in"),
        "{reasons:?}"
    );

    let still = common::tool_error(&agent, TOOL, args).await;
    assert_eq!(pending(&still).0, id, "{still}");
    assert_eq!(acks(&recorder, &event), 0, "nothing reached Zabbix");

    // Enabled again, signed in with their API token: the token is checked again at the
    // decision and passes, and the approval is taken (never redeemed here).
    set_groups(&lab, &user, &[&admins]).await;
    let by_token = PageClient::new(&car.page);
    assert_eq!(by_token.sign_in_with_token(&user.token).await.status, 303);
    let approved = by_token.decide(&id, "approve").await;
    assert_eq!(
        approved.status, 200,
        "Zabbix {}: {}",
        lab.major, approved.body
    );
    assert!(
        approved.body.contains("You approved this change"),
        "{}",
        approved.body
    );
    car.guard.stop().await;
}

/// `input.approver.sign_in` says how the person signed in, so a policy can take decisions
/// only from a password (an API token can sit in a file an agent reads). The four_eyes
/// example does with `approver_sign_in: ["password"]`: Admin signed in with their token is
/// refused by the `approve` phase, and approves with their password.
#[tokio::test]
async fn a_policy_can_ask_approvers_for_their_password() {
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let dir = support::four_eyes();
    std::fs::write(
        dir.join("data.json"),
        r#"{"four_eyes": {"approver_usrgrps": ["Zabbix administrators"], "approver_sign_in": ["password"]}}"#,
    )
    .unwrap();
    let car = support::sidecar_with(Setup::page(&proxy), |c| c.policy_dir = Some(dir)).await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = open_event(&lab, &car.guard).await;
    let args = ack_args(
        &event,
        &format!("password only {}", uuid::Uuid::new_v4().simple()),
    );
    let (id, _) = pending(&common::tool_error(&agent, TOOL, args.clone()).await);

    let by_token = PageClient::new(&car.page);
    assert_eq!(by_token.sign_in_with_token(&lab.token).await.status, 303);
    let refused = by_token.decide(&id, "approve").await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused
            .body
            .contains("approvers sign in with password here, not with token"),
        "{}",
        refused.body
    );
    let by_password = PageClient::new(&car.page);
    assert_eq!(by_password.sign_in("Admin", "zabbix").await.status, 303);
    assert_eq!(by_password.decide(&id, "approve").await.status, 200);
    let done = common::call(&agent, TOOL, args).await;
    assert_ne!(done.is_error, Some(true), "{:?}", done.content);
    assert_eq!(acks(&recorder, &event), 1);

    let ways: Vec<_> = common::decision_log_lines(&car.log)
        .into_iter()
        .filter(|l| l["input"]["phase"] == "approve")
        .map(|l| {
            (
                l["input"]["approver"]["sign_in"].clone(),
                l["result"]["allow"].clone(),
            )
        })
        .collect();
    assert_eq!(
        ways,
        [
            (json!("token"), json!(false)),
            (json!("password"), json!(true))
        ],
        "the approve phase as logged"
    );
    car.guard.stop().await;
}

async fn group_id(lab: &Lab, name: &str) -> String {
    let groups = zapi::admin(
        lab,
        "usergroup.get",
        json!({"filter": {"name": [name]}, "output": ["usrgrpid"]}),
    )
    .await;
    groups[0]["usrgrpid"]
        .as_str()
        .unwrap_or_else(|| panic!("user group {name}: {groups}"))
        .to_owned()
}

async fn set_groups(lab: &Lab, user: &zapi::TestUser, groups: &[&str]) {
    let usrgrps: Vec<_> = groups.iter().map(|g| json!({"usrgrpid": g})).collect();
    zapi::admin(
        lab,
        "user.update",
        json!({"userid": user.userid, "usrgrps": usrgrps}),
    )
    .await;
}
