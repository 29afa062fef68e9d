//! Page approval against the real lab (Zabbix 6.0 and 7.0), through real MCP clients: the agent's
//! call waits for a person who signs in to the approval page with their own Zabbix
//! credentials (in a headless Chromium, or over plain HTTP for the refusals), and the
//! agent's retry sends the approved body once.

mod approver;
mod caller;
#[path = "../common/mod.rs"]
mod common;
mod cookies;
mod limits;
mod lockout;
mod quarantine;
mod redeem;
mod summary;
mod support;
mod url_elicitation;
mod withdraw;

use std::time::Duration;

use fantoccini::Locator;
use serde_json::json;

use common::recorder;
use common::trapper::{fresh_problem, wait_problem};
use support::{
    HOST, PageClient, Setup, TOOL, TRIGGER, ack_args, acks, counted, event_names, eventually,
    page_approvals, pending, sidecar,
};

/// The tests share one lab trigger; they take turns.
static LAB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn new_problem(reader: &common::Client, lab: &common::Lab) -> String {
    fresh_problem(reader, lab, HOST, "mcp.uint", TRIGGER, "1", "5000").await
}

#[tokio::test]
async fn approved_in_a_browser_then_sent_once() {
    let _turn = LAB.lock().await;
    for lab in common::labs() {
        approved_in_a_browser(&lab).await;
    }
}

async fn approved_in_a_browser(lab: &common::Lab) {
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let car = sidecar(Setup::page(&proxy)).await;
    let counted_before = page_approvals(&car.guard).await;
    let reader = common::client(&car.guard, &lab.token).await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = new_problem(&reader, lab).await;
    let args = ack_args(&event, "acknowledged after page approval");

    let first = common::tool_error(&agent, TOOL, args.clone()).await;
    let (id, url) = pending(&first);
    assert_eq!(url, format!("{}/approvals/{id}", car.page));
    let decision_id = first["decision_id"].as_str().unwrap().to_owned();
    let again = common::tool_error(&agent, TOOL, args.clone()).await;
    assert_eq!(
        pending(&again).0,
        id,
        "no second approval for the same payload"
    );
    assert_eq!(acks(&recorder, &event), 0, "nothing sent before a decision");

    let browser = support::Browser::start().await;
    browser.sign_in(&url, "Admin", "zabbix").await;
    let b = &browser.client;
    let summary = match b.wait().for_element(Locator::Id("summary")).await {
        Ok(summary) => summary,
        Err(error) => panic!(
            "no summary ({error}) at {:?}: {}",
            b.current_url().await.map(|u| u.to_string()),
            b.source().await.unwrap_or_default()
        ),
    };
    let summary = summary.text().await.unwrap();
    assert!(summary.contains(TRIGGER), "{summary}");
    assert!(summary.contains(HOST), "{summary}");
    let shown = b
        .find(Locator::Id("body"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        shown.contains("\"method\": \"event.acknowledge\""),
        "{shown}"
    );
    assert!(shown.contains(&event), "{shown}");
    let caller = b
        .find(Locator::Id("caller"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(caller.contains("mcp-operator"), "{caller}");
    // The README's screenshot: `APPROVAL_SCREENSHOT=docs/approval-page.png cargo test --test
    // approval_page` refreshes it; otherwise it goes to a temporary file (tests never
    // change the checkout).
    let png = b.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let shot = std::env::var_os("APPROVAL_SCREENSHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| common::temp_path("approval-page.png"));
    std::fs::write(shot, png).unwrap();
    b.find(Locator::Id("approve"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let notice = b.wait().for_element(Locator::Id("notice")).await.unwrap();
    let notice = notice.text().await.unwrap();
    assert!(notice.contains("approved"), "{notice}");
    browser.stop().await;

    let done = common::call(&agent, TOOL, args.clone()).await;
    assert_ne!(done.is_error, Some(true), "{:?}", done.structured_content);
    assert_eq!(acks(&recorder, &event), 1);
    wait_problem(&reader, &event, |p| {
        p.is_some_and(|p| p["acknowledged"] == "1")
    })
    .await;
    let second = common::tool_error(&agent, TOOL, args).await;
    assert_ne!(second["code"], "approval_pending", "{second}");
    assert_eq!(acks(&recorder, &event), 1, "a second retry sends nothing");

    let names = event_names(&car.log, &decision_id);
    for expected in ["approval_requested", "approved", "redeemed"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    let approved = support::events(&car.log, &decision_id)
        .into_iter()
        .find(|e| e["event"] == "approved")
        .unwrap();
    assert_eq!(approved["data"]["approver"]["username"], "Admin");
    assert_eq!(approved["data"]["approve_decision"]["allow"], true);
    // The approve phase decides on the pending call's own input: its targets included.
    let approve = common::decision_log_lines(&car.log)
        .into_iter()
        .rfind(|l| l["input"]["phase"] == "approve" && l["input"]["tool"]["name"] == TOOL)
        .expect("the approve-phase decision is logged");
    assert_eq!(
        approve["input"]["targets"]["hosts"][0]["host"], HOST,
        "{approve}"
    );
    assert_eq!(
        approve["input"]["approver"]["username"], "Admin",
        "{approve}"
    );
    // One approval asked (the second pending answer found it), approved once, redeemed once.
    let after = page_approvals(&car.guard).await;
    assert_eq!(
        counted(&counted_before, &after),
        [
            ("page_requested", 1.0),
            ("page_approved", 1.0),
            ("page_redeemed", 1.0)
        ],
        "approvals_total by page outcome"
    );
    car.guard.stop().await;
}

#[tokio::test]
async fn refusals_on_the_page() {
    let _turn = LAB.lock().await;
    for lab in common::labs() {
        refusals(&lab).await;
    }
}

async fn refusals(lab: &common::Lab) {
    let password = lab.seed["user_password"].as_str().unwrap().to_owned();
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let car = sidecar(Setup::page(&proxy)).await;
    let counted_before = page_approvals(&car.guard).await;
    let reader = common::client(&car.guard, &lab.token).await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = new_problem(&reader, lab).await;
    support::knows_login_attempts(&car.page, &lab.token_viewer).await;

    // Wrong password: refused, the same answer as an unknown user, and not logged.
    let page = PageClient::new(&car.page);
    let wrong = page.sign_in("Admin", "not-the-password-4711").await;
    let unknown = PageClient::new(&car.page)
        .sign_in("no-such-user-4711", "not-the-password-4711")
        .await;
    assert_eq!((wrong.status, unknown.status), (401, 401));
    assert!(wrong.body.contains("Sign-in failed") && unknown.body.contains("Sign-in failed"));
    let csp = wrong.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    let log = common::decision_log_text(&car.log);
    assert!(!log.contains("not-the-password-4711"));

    // Declined: the retry is told so, nothing reaches Zabbix.
    let args = ack_args(&event, "declined on the page");
    let first = common::tool_error(&agent, TOOL, args.clone()).await;
    let (id, _) = pending(&first);
    let admin = PageClient::new(&car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    let cookie = admin.get("/approvals").await;
    assert!(
        cookie.body.contains(&id),
        "the list shows it: {}",
        cookie.body
    );
    // A POST without the CSRF token changes nothing.
    let forged = admin
        .post(&format!("/approvals/{id}"), &[("decision", "approve")])
        .await;
    assert_eq!(forged.status, 403);
    let declined = admin.decide(&id, "decline").await;
    assert_eq!(declined.status, 200, "{}", declined.body);
    let answer = common::tool_error(&agent, TOOL, args).await;
    assert_eq!(answer["code"], "approval_declined", "{answer}");
    let asked = first["decision_id"].as_str().unwrap();
    assert!(event_names(&car.log, asked).contains(&"declined".to_owned()));
    assert_eq!(acks(&recorder, &event), 0);

    // Four eyes: Admin's own call cannot be approved by Admin.
    let own_agent = common::client(&car.guard, &lab.token).await;
    let own = common::tool_error(&own_agent, TOOL, ack_args(&event, "my own")).await;
    let (own_id, _) = pending(&own);
    let refused = admin.get(&format!("/approvals/{own_id}")).await;
    assert_eq!(refused.status, 200, "shown without buttons");
    assert!(
        refused.body.contains("another person must approve"),
        "{}",
        refused.body
    );
    assert!(!refused.body.contains("id=\"approve\""));
    let (csrf, sha256) = (
        support::csrf(&refused.body),
        support::shown_sha256(&refused.body),
    );
    let forced = admin.force(&own_id, &csrf, &sha256, "approve").await;
    assert_eq!(forced.status, 403, "{}", forced.body);

    // Outside approvers.usrgrps: mcp-viewer may not decide the operator's call.
    let other = common::tool_error(&agent, TOOL, ack_args(&event, "viewer tries")).await;
    let (other_id, _) = pending(&other);
    let viewer = PageClient::new(&car.page);
    assert_eq!(viewer.sign_in("mcp-viewer", &password).await.status, 303);
    let list = viewer.get("/approvals").await;
    assert!(!list.body.contains(&other_id), "not listed for an outsider");
    let page_of = viewer.get(&format!("/approvals/{other_id}")).await;
    assert_eq!(page_of.status, 403);
    assert!(
        page_of
            .body
            .contains("Only members of Zabbix administrators"),
        "{}",
        page_of.body
    );
    assert!(
        !page_of.body.contains("viewer tries"),
        "the call is not shown to outsiders"
    );
    // Even with its own CSRF token and the right SHA-256 (read from an approver's view).
    let admin_view = admin.get(&format!("/approvals/{other_id}")).await;
    let (csrf, sha256) = (
        support::csrf(&list.body),
        support::shown_sha256(&admin_view.body),
    );
    let forced = viewer.force(&other_id, &csrf, &sha256, "approve").await;
    assert_eq!(forced.status, 403, "{}", forced.body);
    assert!(
        forced
            .body
            .contains("Only members of Zabbix administrators"),
        "{}",
        forced.body
    );
    let still = common::tool_error(&agent, TOOL, ack_args(&event, "viewer tries")).await;
    assert_eq!(pending(&still).0, other_id);
    assert_eq!(acks(&recorder, &event), 0);

    // A right-to-left override in a maintenance name is shown escaped.
    let now = common_now();
    let name = format!("zmg page rlo {now} \u{202E}txt.exe");
    let hostid = common::seed_id(lab, "hosts", HOST);
    let maint = common::tool_error(
        &agent,
        "maintenance_create",
        json!({"name": name, "hostids": [hostid], "active_since": now, "active_till": now + 3600}),
    )
    .await;
    if maint["code"] == "approval_pending" {
        let (mid, _) = pending(&maint);
        let shown = admin.get(&format!("/approvals/{mid}")).await;
        assert!(!shown.body.contains('\u{202E}'), "raw RLO on the page");
        assert!(
            shown.body.contains("\\u202e") || shown.body.contains("\\u{202E}"),
            "{}",
            shown.body
        );
        assert!(shown.body.contains("zmg page rlo"));
    } else {
        // Text validation may refuse bidirectional characters before any approval.
        assert_eq!(maint["code"], "invalid_arguments", "{maint}");
    }

    // Sign-out ends the Zabbix session the sign-in opened; the page then asks to sign in.
    let csrf = support::csrf(&admin.get("/approvals").await.body);
    let out = admin.post("/approvals/logout", &[("csrf", &csrf)]).await;
    assert_eq!(out.status, 303);
    eventually("user.logout at Zabbix", Duration::from_secs(10), || {
        let logged_out = recorder
            .bodies
            .lock()
            .unwrap()
            .iter()
            .any(|b| b.contains("\"user.logout\""));
        async move { logged_out.then_some(()) }
    })
    .await;
    let after = admin.get("/approvals").await;
    assert_eq!(after.status, 303, "signed out");
    // Declined once; nothing refused here was approved or sent.
    let moved = counted(&counted_before, &page_approvals(&car.guard).await);
    assert!(moved.contains(&("page_declined", 1.0)), "{moved:?}");
    assert!(
        moved
            .iter()
            .all(|(o, _)| !["page_approved", "page_redeemed"].contains(o)),
        "{moved:?}"
    );
    car.guard.stop().await;
}

#[tokio::test]
async fn failed_sign_ins_are_rate_limited() {
    let _default = support::LOGIN_ATTEMPTS_SETTING.read().await;
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let car = sidecar(Setup::page(&proxy)).await;
    support::knows_login_attempts(&car.page, &lab.token_viewer).await;
    let user = "zmg-no-such-user-ratelimit";
    // Held one short of Zabbix's login_attempts (5), whether or not the user exists.
    for n in 0..7 {
        let answer = PageClient::new(&car.page).sign_in(user, "wrong-4711").await;
        let (status, text) = if n < 4 {
            (401, "Sign-in failed")
        } else {
            (429, "Too many wrong passwords for this username")
        };
        assert_eq!(answer.status, status, "{}", answer.body);
        assert!(answer.body.contains(text), "{}", answer.body);
    }
    let asked = recorder
        .bodies
        .lock()
        .unwrap()
        .iter()
        .filter(|b| b.contains("user.login") && b.contains(user))
        .count();
    assert_eq!(asked, 4, "after 4 failures Zabbix is not asked any more");
    // Twenty at once: each takes its place before Zabbix is asked, so no more than four
    // are (before, all twenty read the count before any had failed, and all were asked).
    let burst = "zmg-no-such-user-burst";
    let mut attempts = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let page = car.page.clone();
        attempts.spawn(async move {
            PageClient::new(&page)
                .sign_in(burst, "wrong-4711")
                .await
                .status
        });
    }
    while let Some(status) = attempts.join_next().await {
        assert!([401, 429].contains(&status.unwrap()));
    }
    let asked = recorder
        .bodies
        .lock()
        .unwrap()
        .iter()
        .filter(|b| b.contains("user.login") && b.contains(burst))
        .count();
    assert!(asked <= 4, "{asked} sign-ins reached Zabbix at once");
    let log = common::decision_log_text(&car.log);
    assert!(!log.contains("wrong-4711"));
    // A token longer than any Zabbix issues is refused without asking Zabbix.
    let long = "7".repeat(300);
    let page = PageClient::new(&car.page);
    let csrf = support::csrf(&page.get("/approvals/login").await.body);
    let answer = page
        .post("/approvals/login", &[("csrf", &csrf), ("token", &long)])
        .await;
    assert_eq!(answer.status, 401);
    let asked = recorder
        .bodies
        .lock()
        .unwrap()
        .iter()
        .any(|b| b.contains(&long));
    assert!(!asked, "the overlong token reached Zabbix");
    car.guard.stop().await;
}

#[tokio::test]
async fn expired_approval_is_refused_and_asked_anew() {
    let lab = common::lab(7);
    let car = sidecar(Setup {
        timeout_secs: 5,
        ..Setup::page(&lab.url)
    })
    .await;
    let counted_before = page_approvals(&car.guard).await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = support::open_event(&lab, &car.guard).await;
    let args = ack_args(&event, "expires");
    let first = common::tool_error(&agent, TOOL, args.clone()).await;
    let (id, _) = pending(&first);
    let decision_id = first["decision_id"].as_str().unwrap().to_owned();
    let expired = eventually("the approval to expire", Duration::from_secs(30), || {
        let agent = &agent;
        let args = args.clone();
        async move {
            let body = common::tool_error(agent, TOOL, args).await;
            (body["code"] != "approval_pending").then_some(body)
        }
    })
    .await;
    assert_eq!(expired["code"], "approval_expired", "{expired}");
    assert!(event_names(&car.log, &decision_id).contains(&"approval_expired".to_owned()));
    let anew = common::tool_error(&agent, TOOL, args).await;
    assert_ne!(
        pending(&anew).0,
        id,
        "after the expiry a new approval is asked"
    );
    assert_eq!(
        counted(&counted_before, &page_approvals(&car.guard).await),
        [("page_requested", 2.0), ("page_expired", 1.0)],
        "approvals_total by page outcome"
    );
    car.guard.stop().await;
}

#[tokio::test]
async fn page_off_means_unavailable() {
    let lab = common::lab(7);
    let car = sidecar(Setup {
        page: false,
        ..Setup::page(&lab.url)
    })
    .await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = support::open_event(&lab, &car.guard).await;
    let body = common::tool_error(&agent, TOOL, ack_args(&event, "no page")).await;
    assert_eq!(body["code"], "approval_unavailable", "{body}");
    car.guard.stop().await;
}

#[tokio::test]
async fn replicas_share_approvals_through_redis() {
    let _turn = LAB.lock().await;
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let replica = || {
        sidecar(Setup {
            shared_store: Some(common::redis_url()),
            ..Setup::page(&proxy)
        })
    };
    let (a, b) = (replica().await, replica().await);
    let reader = common::client(&a.guard, &lab.token).await;
    let agent_a = common::client(&a.guard, &lab.token_operator).await;
    let agent_b = common::client(&b.guard, &lab.token_operator).await;

    // Asked through A, approved on B's page, redeemed through B, once.
    let event = new_problem(&reader, &lab).await;
    let args = ack_args(&event, "approved across replicas");
    let (id, _) = pending(&common::tool_error(&agent_a, TOOL, args.clone()).await);
    assert_eq!(
        pending(&common::tool_error(&agent_b, TOOL, args.clone()).await).0,
        id
    );
    let admin_b = PageClient::new(&b.page);
    assert_eq!(admin_b.sign_in("Admin", "zabbix").await.status, 303);
    assert_eq!(admin_b.decide(&id, "approve").await.status, 200);
    let done = common::call(&agent_b, TOOL, args.clone()).await;
    assert_ne!(done.is_error, Some(true), "{:?}", done.structured_content);
    let again = common::tool_error(&agent_a, TOOL, args).await;
    assert_ne!(again["code"], "approval_pending");
    assert_eq!(acks(&recorder, &event), 1);

    // A concurrent double redeem through both replicas sends once.
    let args = ack_args(&event, "double redeem");
    let (id, _) = pending(&common::tool_error(&agent_a, TOOL, args.clone()).await);
    let admin_a = PageClient::new(&a.page);
    assert_eq!(admin_a.sign_in("Admin", "zabbix").await.status, 303);
    assert_eq!(admin_a.decide(&id, "approve").await.status, 200);
    let (x, y) = tokio::join!(
        common::call(&agent_a, TOOL, args.clone()),
        common::call(&agent_b, TOOL, args.clone())
    );
    let sent = [x, y].iter().filter(|r| r.is_error != Some(true)).count();
    assert_eq!(sent, 1);
    let double = recorder
        .bodies
        .lock()
        .unwrap()
        .iter()
        .filter(|body| body.contains("double redeem"))
        .count();
    assert_eq!(double, 1, "counted at the recording proxy");
    a.guard.stop().await;
    b.guard.stop().await;
}

/// Redis restarted empty (here flushed) between the yes and its redemption forgets the
/// approval: the retry, through the replica that asked, is asked anew and nothing reaches
/// Zabbix, never the write sent on a yes the store no longer holds.
#[tokio::test]
async fn an_approval_redis_forgot_is_asked_anew() {
    let _turn = LAB.lock().await;
    let lab = common::lab(7);
    let redis = common::redis_server::RedisServer::start().await;
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let replica = || {
        sidecar(Setup {
            shared_store: Some(redis.url()),
            ..Setup::page(&proxy)
        })
    };
    let (a, b) = (replica().await, replica().await);
    let reader = common::client(&a.guard, &lab.token).await;
    let agent = common::client(&a.guard, &lab.token_operator).await;
    let event = new_problem(&reader, &lab).await;
    let args = ack_args(&event, "approved then forgotten");
    let (id, _) = pending(&common::tool_error(&agent, TOOL, args.clone()).await);
    let admin_b = PageClient::new(&b.page);
    assert_eq!(admin_b.sign_in("Admin", "zabbix").await.status, 303);
    assert_eq!(admin_b.decide(&id, "approve").await.status, 200);
    redis.flush_all().await;
    let (again, _) = pending(&common::tool_error(&agent, TOOL, args).await);
    assert_ne!(again, id);
    assert_eq!(acks(&recorder, &event), 0);
    a.guard.stop().await;
    b.guard.stop().await;
}

pub(crate) fn common_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}
