//! Caller identity fails closed: a token whose owner's user groups cannot be read (a role
//! that denies usergroup.get, or a Zabbix that does not answer in time) is refused with
//! HTTP 503 and a message that says why, and the refusal is not remembered. One address
//! cannot make the sidecar ask Zabbix about token after token, and while it is refused,
//! the tokens Zabbix accepted lately keep working from there (a revoked one does not).

#[path = "../common/mod.rs"]
mod common;
mod writes;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::zapi::TestUser;
use common::{Lab, config_for, seed_id, start_with};
use serde_json::Value;
use zabbix_mcp_guard::zabbix::ApiToken;

/// One raw `initialize` POST: the identity is resolved before MCP sees the request.
async fn initialize(url: &str, token: &str) -> (u16, Value) {
    common::raw_initialize(&reqwest::Client::new(), url, token).await
}

#[tokio::test]
async fn a_role_that_denies_usergroup_get_is_refused_not_groupless() {
    for lab in common::labs() {
        let viewers = seed_id(&lab, "user_groups", "MCP Viewers");
        let user = TestUser::create(&lab, &viewers, &["usergroup.get"]).await;
        user.run(&lab, refused_for(lab.clone(), user.token.clone()))
            .await;
    }
}

async fn refused_for(lab: Lab, token: String) {
    let guard = start_with(config_for(&lab.url)).await;
    let (status, body) = initialize(&guard.url, &token).await;
    assert_eq!(status, 503, "Zabbix {}: {body}", lab.major);
    assert_eq!(body["error"], "identity_incomplete", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("usergroup.get"), "{message}");
    assert!(!message.contains(&token), "the token is never echoed");
    // The same again: a refusal is not cached as an identity either way.
    let (status, _) = initialize(&guard.url, &token).await;
    assert_eq!(status, 503);
    // A user whose role allows it is unaffected.
    let (status, body) = initialize(&guard.url, &lab.token_viewer).await;
    assert_eq!(status, 200, "{body}");
    guard.stop().await;
}

/// Zabbix 7.0 lets a user be in no group, and their token works there; the sidecar refuses
/// it (a policy would see `usrgrps: []`) and says so, rather than that usergroup.get
/// answered badly.
#[tokio::test]
async fn a_user_in_no_group_is_refused_as_such() {
    let lab = common::lab(7);
    let viewers = seed_id(&lab, "user_groups", "MCP Viewers");
    let user = TestUser::create(&lab, &viewers, &[]).await;
    common::zapi::admin(
        &lab,
        "user.update",
        serde_json::json!({"userid": user.userid, "usrgrps": []}),
    )
    .await;
    user.run(&lab, refused_groupless(lab.clone(), user.token.clone()))
        .await;
}

async fn refused_groupless(lab: Lab, token: String) {
    let guard = start_with(config_for(&lab.url)).await;
    let (status, body) = initialize(&guard.url, &token).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "identity_incomplete", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("in no user group"), "{message}");
    guard.stop().await;
}

#[tokio::test]
async fn a_usergroup_get_timeout_is_refused_and_not_cached() {
    let (url, stub) = common::stub::start_with(Duration::ZERO, Duration::from_secs(30), 1).await;
    let mut config = config_for(&url);
    config.timeout = Duration::from_secs(1);
    let guard = start_with(config).await;

    let (status, body) = initialize(&guard.url, "stub-token").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "identity_incomplete", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("usergroup.get") && message.contains("did not answer"),
        "{message}"
    );
    // The next request asks Zabbix again (nothing partial was cached) and gets in.
    let (status, body) = initialize(&guard.url, "stub-token").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(stub.group_calls.load(Ordering::SeqCst), 2);
    guard.stop().await;
}

/// What a token keeps open (a session, a listen stream) is looked at again through
/// `refusal`: a usergroup.get that times out is no verdict on the token and ends nothing.
/// Before, it was taken for a refusal, and a Zabbix slow for one sweep closed every session
/// and stream of the token.
#[tokio::test]
async fn a_usergroup_get_timeout_ends_nothing_a_token_keeps_open() {
    let (url, stub) = common::stub::start_with(Duration::ZERO, Duration::from_secs(30), 1).await;
    let mut config = config_for(&url);
    config.timeout = Duration::from_secs(1);
    let guard = start_with(config).await;
    let app = guard.app();
    let token = ApiToken::new("stub-token".to_owned());
    let verdict = app.callers.refusal(&app.zabbix, &token).await;
    assert_eq!(stub.group_calls.load(Ordering::SeqCst), 1, "the slow call");
    assert!(verdict.is_none(), "{verdict:?}");
    guard.stop().await;
}

/// The guard's `/metrics` text.
async fn metrics(guard: &common::Guard) -> String {
    let response = reqwest::get(format!("{}/metrics", guard.base)).await;
    response.unwrap().text().await.unwrap()
}

/// 64 hex digits, shaped as a Zabbix API token, that no Zabbix issued.
fn made_up_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[tokio::test]
async fn an_address_sending_rejected_tokens_is_refused_before_zabbix_is_asked() {
    let lab = common::lab(7);
    let mut config = config_for(&lab.url);
    config.limits.max_rejected_tokens = 5;
    let guard = start_with(config).await;
    // A client let in before the guessing starts.
    let (status, body) = initialize(&guard.url, &lab.token).await;
    assert_eq!(status, 200, "{body}");
    // One rejected token sent again (a client retrying a revoked token): the same 401,
    // Zabbix asked once, counted once.
    let revoked = made_up_token();
    let (status, first) = initialize(&guard.url, &revoked).await;
    assert_eq!(status, 401, "{first}");
    for _ in 0..30 {
        let (status, again) = initialize(&guard.url, &revoked).await;
        assert_eq!((status, &again), (401, &first));
    }
    for n in 1..5 {
        let (status, body) = initialize(&guard.url, &made_up_token()).await;
        assert_eq!(status, 401, "made-up token {n}: {body}");
    }
    let response = reqwest::Client::new()
        .post(&guard.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(made_up_token())
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    let wait: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "Retry-After: {wait}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], "rate_limited", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "5 tokens from 127.0.0.1 were rejected by Zabbix within 60 s (MaxRejectedTokens)"
        ),
        "{message}"
    );
    // The token already accepted keeps working; one not yet seen waits like any other.
    let (status, body) = initialize(&guard.url, &lab.token).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = initialize(&guard.url, &lab.token_viewer).await;
    assert_eq!(status, 429);
    // Still so once the identity cache has forgotten it (its entry lapses a minute after
    // the acceptance, far sooner than a lockout ends): Zabbix accepted it lately, so it is
    // looked up in Zabbix again rather than refused.
    guard
        .app()
        .callers
        .forget(&ApiToken::new(lab.token.clone()))
        .await;
    let (status, body) = initialize(&guard.url, &lab.token).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = initialize(&guard.url, &lab.token_viewer).await;
    assert_eq!(status, 429);
    let metrics = metrics(&guard).await;
    assert!(
        metrics.contains(r#"zabbix_mcp_guard_identity_cache_lookups_total{result="refused"} 3"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"zabbix_mcp_guard_identity_cache_lookups_total{result="miss"} 7"#),
        "{metrics}"
    );
    guard.stop().await;
}

/// Being accepted once only spares a token the lockout, it does not let it in: a token
/// revoked since is looked up, rejected by Zabbix, and refused.
#[tokio::test]
async fn a_token_revoked_since_its_acceptance_is_rejected_through_a_lockout() {
    let lab = common::lab(7);
    let viewers = seed_id(&lab, "user_groups", "MCP Viewers");
    let user = TestUser::create(&lab, &viewers, &[]).await;
    user.run(&lab, revoked_through_a_lockout(lab.clone(), user.clone()))
        .await;
}

async fn revoked_through_a_lockout(lab: Lab, user: TestUser) {
    let token = user.token.clone();
    let mut config = config_for(&lab.url);
    config.limits.max_rejected_tokens = 2;
    let guard = start_with(config).await;
    let (status, body) = initialize(&guard.url, &token).await;
    assert_eq!(status, 200, "{body}");
    // Revoked in Zabbix, and lapsed from the identity cache as it would a minute later.
    common::revoke_now(&guard, &lab, &user).await;
    for n in 1..=2 {
        let (status, body) = initialize(&guard.url, &made_up_token()).await;
        assert_eq!(status, 401, "made-up token {n}: {body}");
    }
    let (status, _) = initialize(&guard.url, &made_up_token()).await;
    assert_eq!(status, 429, "the address is locked out");
    let (status, body) = initialize(&guard.url, &token).await;
    assert_eq!(status, 401, "Zabbix asked, and said no: {body}");
    let message = body["message"].as_str().unwrap();
    assert!(!message.contains(&token), "the token is never echoed");
    // From now on refused without Zabbix being asked, as any rejected token.
    let (status, again) = initialize(&guard.url, &token).await;
    assert_eq!((status, &again), (401, &body));
    let metrics = metrics(&guard).await;
    assert!(
        metrics.contains(r#"zabbix_mcp_guard_identity_cache_lookups_total{result="miss"} 4"#),
        "{metrics}"
    );
    guard.stop().await;
}

#[tokio::test]
async fn two_authorization_headers_and_overlong_tokens_are_refused_without_zabbix() {
    let lab = common::lab(7);
    let guard = start_with(config_for(&lab.url)).await;
    let post = |headers: Vec<(&'static str, String)>| {
        let mut request = reqwest::Client::new()
            .post(&guard.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };
    let response = post(vec![
        ("authorization", format!("Bearer {}", lab.token)),
        ("authorization", format!("Bearer {}", lab.token_viewer)),
    ])
    .await
    .unwrap();
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["message"],
        "more than one Authorization header: send one Bearer token"
    );
    let response = post(vec![(
        "authorization",
        format!("Bearer {}", "a".repeat(257)),
    )])
    .await
    .unwrap();
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("longer than 256"),
        "{body}"
    );
    let metrics = metrics(&guard).await;
    assert!(
        metrics.contains(r#"zabbix_mcp_guard_identity_cache_lookups_total{result="miss"} 0"#),
        "Zabbix was asked: {metrics}"
    );
    guard.stop().await;
}

/// Zabbix failing while it checks tokens (its database down: -32500 "Application error.",
/// or any exception: -32603 "Internal error.") is no verdict on them: each request gets 503
/// `zabbix_error`, nothing is remembered as rejected, no address is locked out, and once
/// Zabbix answers again every token gets in at once. Only its verdicts (-32602, and
/// -32500 "API token expired.") reject.
#[tokio::test]
async fn a_zabbix_failing_to_check_tokens_rejects_none() {
    let (url, stub) = common::stub::start(Duration::ZERO).await;
    let mut config = config_for(&url);
    config.limits.max_rejected_tokens = 3;
    let guard = start_with(config).await;
    let failures = [
        serde_json::json!({"code": -32500, "message": "Application error.",
                           "data": "SQL statement execution has failed."}),
        serde_json::json!({"code": -32603, "message": "Internal error.",
                           "data": "Error connecting to database."}),
    ];
    let tokens: Vec<String> = (0..8).map(|_| made_up_token()).collect();
    for failure in &failures {
        *stub.auth_error.lock().unwrap() = Some(failure.clone());
        for token in &tokens {
            let (status, body) = initialize(&guard.url, token).await;
            assert_eq!(status, 503, "{failure}: {body}");
            assert_eq!(body["error"], "zabbix_error", "{body}");
        }
    }
    assert_eq!(
        stub.auth_calls.load(Ordering::SeqCst),
        16,
        "asked every time: nothing remembered"
    );
    *stub.auth_error.lock().unwrap() = None;
    for token in &tokens {
        let (status, body) = initialize(&guard.url, token).await;
        assert_eq!(status, 200, "{body}");
    }
    // Zabbix's verdicts still reject, and lock the address out past MaxRejectedTokens.
    let verdicts = [
        serde_json::json!({"code": -32602, "message": "Invalid params.", "data": "Not authorized."}),
        serde_json::json!({"code": -32500, "message": "Application error.", "data": "API token expired."}),
        serde_json::json!({"code": -32602, "message": "Invalid params.", "data": "Not authorized."}),
    ];
    for verdict in &verdicts {
        *stub.auth_error.lock().unwrap() = Some(verdict.clone());
        let (status, body) = initialize(&guard.url, &made_up_token()).await;
        assert_eq!(status, 401, "{verdict}: {body}");
    }
    let (status, _) = initialize(&guard.url, &made_up_token()).await;
    assert_eq!(status, 429, "locked out after three verdicts");
    guard.stop().await;
}

/// Tokens sent at once count as they come, not as Zabbix answers them: with
/// `MaxRejectedTokens=5`, 60 distinct tokens from one address sent together, Zabbix holding
/// its answers so that every lookup overlaps, get 5 lookups; the others get 429 at once,
/// Zabbix not asked. Once Zabbix answers, the 5 are rejected and the address is locked out.
/// Before, all 60 were asked of Zabbix.
#[tokio::test]
async fn tokens_sent_at_once_get_no_more_lookups_than_max_rejected_tokens() {
    let (url, stub) = common::stub::start(Duration::ZERO).await;
    *stub.auth_error.lock().unwrap() = Some(serde_json::json!(
        {"code": -32602, "message": "Invalid params.", "data": "Not authorized."}
    ));
    stub.auth_held.send_replace(true);
    let mut config = config_for(&url);
    config.limits.max_rejected_tokens = 5;
    let guard = start_with(config).await;

    let http = reqwest::Client::new();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..60 {
        let (http, url, answered) = (http.clone(), guard.url.clone(), answered.clone());
        requests.spawn(async move {
            let answer = common::raw_initialize(&http, &url, &made_up_token()).await;
            answered.fetch_add(1, Ordering::SeqCst);
            answer
        });
    }
    // Every request has reached Zabbix (held there) or been answered.
    common::wait_until(
        "every request to reach Zabbix or be answered",
        Duration::from_secs(30),
        async || stub.auth_calls.load(Ordering::SeqCst) + answered.load(Ordering::SeqCst) >= 60,
    )
    .await;
    let asked = stub.auth_calls.load(Ordering::SeqCst);
    assert_eq!(asked, 5, "lookups that reached Zabbix at once");

    stub.auth_held.send_replace(false);
    let mut statuses = std::collections::BTreeMap::new();
    while let Some(answer) = requests.join_next().await {
        let (status, body) = answer.expect("the request task");
        if status == 429 {
            assert_eq!(body["error"], "rate_limited", "{body}");
            let message = body["message"].as_str().unwrap_or_default();
            assert!(
                message.starts_with(
                    "5 tokens from 127.0.0.1 are being checked by Zabbix or were rejected by it within 60 s (MaxRejectedTokens)"
                ),
                "{message}"
            );
        }
        *statuses.entry(status).or_insert(0) += 1;
    }
    assert_eq!(
        statuses,
        std::collections::BTreeMap::from([(401, 5), (429, 55)])
    );
    // The five rejections lock the address out, Zabbix not asked.
    let (status, body) = initialize(&guard.url, &made_up_token()).await;
    assert_eq!(status, 429, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("5 tokens from 127.0.0.1 were rejected by Zabbix within 60 s"),
        "{message}"
    );
    assert_eq!(stub.auth_calls.load(Ordering::SeqCst), 5);
    guard.stop().await;
}

/// With Zabbix unreachable, a caller not yet authenticated (any Bearer string) learns that
/// Zabbix cannot be reached, not where it is: the address stays in the process log.
/// Before, the answer was `cannot reach the Zabbix API: connecting to 127.0.0.1:PORT:
/// Connection refused`.
#[tokio::test]
async fn an_unreachable_zabbix_is_not_located_for_callers_not_yet_let_in() {
    let port = common::free_port();
    let guard = start_with(config_for(&format!(
        "http://127.0.0.1:{port}/api_jsonrpc.php"
    )))
    .await;
    let (status, body) = initialize(&guard.url, "any-bearer-string").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "upstream_unavailable", "{body}");
    assert_eq!(body["message"], "cannot reach the Zabbix API", "{body}");
    assert!(!body.to_string().contains(&port.to_string()), "{body}");
    guard.stop().await;
}
