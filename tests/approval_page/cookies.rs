//! The page's cookies behind a proxy that terminates TLS: `Secure` whenever people reach
//! the page over https, so a browser never sends them over plain HTTP.

use crate::common;
use crate::support::{PageClient, Setup, sidecar_with};

#[tokio::test]
async fn cookies_are_secure_when_approval_url_is_https() {
    let lab = common::lab(7);
    for (url, secure) in [(None, false), (Some("https://approvals.example.com"), true)] {
        let setup = Setup {
            zabbix_url: &lab.url,
            page: true,
            timeout_secs: 900,
            shared_store: None,
            stateful: false,
        };
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
