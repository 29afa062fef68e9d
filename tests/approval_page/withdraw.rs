//! Taking a yes back before the agent's retry sends it, and the page refusing a POST its
//! browser says came from another origin.

use fantoccini::Locator;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{self, recorder};
use crate::support::{
    self, PageClient, Setup, TOOL, ack_args, acks, counted, event_names, page_approvals, pending,
    sidecar,
};

/// An approver withdraws a yes no retry has redeemed: the retry is told it was declined and
/// nothing reaches Zabbix; the agent's own token cannot withdraw; a yes already redeemed
/// cannot be withdrawn.
#[tokio::test]
async fn an_approval_is_withdrawn_before_a_retry_sends_it() {
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let car = sidecar(Setup::page(&proxy)).await;
    let before = page_approvals(&car.guard).await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = support::open_event(&lab, &car.guard).await;
    let args = ack_args(
        &event,
        &format!("withdrawn {}", uuid::Uuid::new_v4().simple()),
    );
    let first = common::tool_error(&agent, TOOL, args.clone()).await;
    let (id, _) = pending(&first);
    let decision_id = first["decision_id"].as_str().unwrap().to_owned();

    let admin = PageClient::new(&car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    let approved = admin.decide(&id, "approve").await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert!(
        approved.body.contains("id=\"withdraw\""),
        "{}",
        approved.body
    );

    // The token that asked cannot take it back (nor give it).
    let agent_page = PageClient::new(&car.page);
    assert_eq!(
        agent_page
            .sign_in_with_token(&lab.token_operator)
            .await
            .status,
        303
    );
    let shown = agent_page.get(&format!("/approvals/{id}")).await;
    assert!(!shown.body.contains("id=\"withdraw\""), "{}", shown.body);
    let forced = agent_page
        .force(
            &id,
            &support::csrf(&shown.body),
            &support::shown_sha256(&shown.body),
            "withdraw",
        )
        .await;
    assert_eq!(forced.status, 403, "{}", forced.body);

    let withdrawn = admin.decide(&id, "withdraw").await;
    assert_eq!(withdrawn.status, 200, "{}", withdrawn.body);
    assert!(
        withdrawn.body.contains("You withdrew the approval"),
        "{}",
        withdrawn.body
    );
    assert!(
        withdrawn.body.contains("This change is withdrawn."),
        "{}",
        withdrawn.body
    );
    for _ in 0..2 {
        let retry = common::tool_error(&agent, TOOL, args.clone()).await;
        assert_eq!(retry["code"], "approval_declined", "{retry}");
        let message = retry["message"].as_str().unwrap();
        assert!(
            message.contains("withdrawn on the approval page by Admin"),
            "{retry}"
        );
    }
    assert_eq!(acks(&recorder, &event), 0, "nothing reached Zabbix");
    let names = event_names(&car.log, &decision_id);
    assert!(names.iter().any(|n| n == "approval_withdrawn"), "{names:?}");

    // A yes the retry redeemed is spent: there is nothing left to withdraw.
    let sent = ack_args(&event, &format!("sent {}", uuid::Uuid::new_v4().simple()));
    let (sent_id, _) = pending(&common::tool_error(&agent, TOOL, sent.clone()).await);
    assert_eq!(admin.decide(&sent_id, "approve").await.status, 200);
    let done = common::call(&agent, TOOL, sent).await;
    assert_ne!(done.is_error, Some(true), "{:?}", done.content);
    let late = admin.get(&format!("/approvals/{sent_id}")).await;
    assert!(
        late.body.contains("This change is redeemed."),
        "{}",
        late.body
    );
    let refused = admin
        .force(
            &sent_id,
            &support::csrf(&late.body),
            &support::shown_sha256(&late.body),
            "withdraw",
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(acks(&recorder, &event), 1, "only the second, once");

    assert_eq!(
        counted(&before, &page_approvals(&car.guard).await),
        [
            ("page_requested", 2.0),
            ("page_approved", 2.0),
            ("page_redeemed", 1.0),
            ("page_withdrawn", 1.0)
        ]
    );
    car.guard.stop().await;
}

/// A page on another port of the same host is the same site, so the browser sends the
/// `SameSite=Strict` session cookie along with its form. Even holding the approver's CSRF
/// token (leaked, say), its POST decides nothing: the browser says `Sec-Fetch-Site:
/// same-site`, and the page takes decisions only from its own origin.
#[tokio::test]
async fn a_form_on_another_origin_decides_nothing() {
    let lab = common::lab(7);
    let car = sidecar(Setup::page(&lab.url)).await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = support::open_event(&lab, &car.guard).await;
    let args = ack_args(
        &event,
        &format!("cross-origin {}", uuid::Uuid::new_v4().simple()),
    );
    let (id, url) = pending(&common::tool_error(&agent, TOOL, args.clone()).await);

    let browser = support::Browser::start().await;
    browser.sign_in(&url, "Admin", "zabbix").await;
    let b = &browser.client;
    b.wait().for_element(Locator::Id("approve")).await.unwrap();
    let source = b.source().await.unwrap();
    let (csrf, sha256) = (support::csrf(&source), support::shown_sha256(&source));

    let other = another_origin(&format!(
        "<!DOCTYPE html><form method=\"post\" action=\"{url}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <input type=\"hidden\" name=\"sha256\" value=\"{sha256}\">\
         <button name=\"decision\" value=\"approve\" id=\"go\">Go</button></form>"
    ))
    .await;
    b.goto(&other).await.unwrap();
    b.find(Locator::Id("go"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The page's answer (every page of it has an h1; the other origin's has none).
    b.wait().for_element(Locator::Css("h1")).await.unwrap();
    let answer = b.source().await.unwrap();
    assert!(
        answer.contains("another site or origin") && !answer.contains("You approved"),
        "{answer}"
    );
    browser.stop().await;

    let still = common::tool_error(&agent, TOOL, args).await;
    assert_eq!(pending(&still).0, id, "still pending: {still}");
    car.guard.stop().await;
}

/// Serves `html` to every request on another port of 127.0.0.1; returns its URL.
async fn another_origin(html: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://127.0.0.1:{}/",
        listener.local_addr().unwrap().port()
    );
    let reply = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{html}",
        html.len()
    );
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let reply = reply.clone();
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let _ = stream.write_all(reply.as_bytes()).await;
            });
        }
    });
    url
}
