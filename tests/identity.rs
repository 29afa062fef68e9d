//! Caller identity fails closed: a token whose owner's user groups cannot be read (a role
//! that denies usergroup.get, or a Zabbix that does not answer in time) is refused with
//! HTTP 503 and a message that says why, and the refusal is not remembered.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::zapi::TestUser;
use common::{Lab, config_for, seed_id, start_with};
use serde_json::{Value, json};

/// One raw `initialize` POST: the identity is resolved before MCP sees the request.
async fn initialize(url: &str, token: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(token)
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "identity-test", "version": "1"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn a_role_that_denies_usergroup_get_is_refused_not_groupless() {
    for lab in common::labs() {
        let viewers = seed_id(&lab, "user_groups", "MCP Viewers");
        let user = TestUser::create(&lab, &viewers, &["usergroup.get"]).await;
        // Checked in a task of its own so that the user and role are deleted even when an
        // assertion fails.
        let checked = tokio::spawn(refused_for(lab.clone(), user.token.clone())).await;
        user.delete(&lab).await;
        if let Err(error) = checked {
            std::panic::resume_unwind(error.into_panic());
        }
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
