//! The page's sessions: their cookies are `Secure` whenever people reach the page over
//! https (behind a proxy that terminates TLS too), and one user cannot hold more than ten,
//! so one token signing in again and again does not fill what every approver shares.

use crate::common;
use crate::support::{PageClient, Setup, sidecar, sidecar_with};

#[tokio::test]
async fn cookies_are_secure_when_approval_url_is_https() {
    let lab = common::lab(7);
    for (url, secure) in [(None, false), (Some("https://approvals.example.com"), true)] {
        let setup = Setup::page(&lab.url);
        let car = sidecar_with(setup, |c| {
            if let (Some(url), Some(page)) = (url, c.approval_page.as_mut()) {
                page.url = url.to_owned();
            }
        })
        .await;
        let form = PageClient::new(&car.page).get("/approvals/login").await;
        assert_eq!(form.status, 200, "{}", form.body);
        let cookies: Vec<&str> = form
            .headers
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert!(!cookies.is_empty());
        for cookie in cookies {
            assert_eq!(cookie.ends_with("; Secure"), secure, "{url:?}: {cookie}");
        }
        car.guard.stop().await;
    }
}

#[tokio::test]
async fn one_user_holds_at_most_ten_page_sessions() {
    let lab = common::lab(7);
    let car = sidecar(Setup::page(&lab.url)).await;
    let mut signed_in = Vec::new();
    for _ in 0..12 {
        let page = PageClient::new(&car.page);
        let answer = page.sign_in_with_token(&lab.token_viewer).await;
        assert_eq!(answer.status, 303, "{}", answer.body);
        signed_in.push(page);
    }
    let mut states = Vec::new();
    for page in &signed_in {
        states.push(page.get("/approvals").await.status);
    }
    assert_eq!(
        states[..2],
        [303, 303],
        "the two oldest were ended: {states:?}"
    );
    assert!(
        states[2..].iter().all(|s| *s == 200),
        "the ten newest live: {states:?}"
    );
    // Another user is not affected by them.
    let admin = PageClient::new(&car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    assert_eq!(admin.get("/approvals").await.status, 200);
    car.guard.stop().await;
}
