//! Hot reload of a policy directory: a valid set replaces the running one, a set that
//! does not load (broken, recursive) never does, and `/readyz` says why.

use std::time::Duration;

use serde_json::{Value, json};

use super::{ALLOW_ALL, DENY_HOST_GET, config, policy_dir};
use crate::common::{self, read, start_with, tool_error};

async fn wait_for<F: AsyncFnMut() -> bool>(done: F) {
    common::wait_until("the condition", Duration::from_secs(15), done).await;
}

#[tokio::test]
async fn hot_reload_applies_valid_sets_and_keeps_the_old_on_errors() {
    let Running { dir, guard, client } = allowing_all().await;

    std::fs::write(dir.join("policy.rego"), DENY_HOST_GET).unwrap();
    wait_for(async || {
        common::call(&client, "host_get", json!({"limit": 1}))
            .await
            .is_error
            == Some(true)
    })
    .await;
    let err = tool_error(&client, "host_get", json!({"limit": 1})).await;
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("host_get is switched off")
    );

    // A broken set never replaces the running one; readiness says so.
    std::fs::write(
        dir.join("policy.rego"),
        "package zabbix.mcp\ndecision := {{{ broken",
    )
    .unwrap();
    let body = readiness_after_a_failed_reload(&guard).await;
    assert_eq!(body["status"], "ready", "the old set still runs: {body}");
    assert!(body["policy"]["reloads_failed"].as_u64().unwrap() >= 1);
    let err = tool_error(&client, "host_get", json!({"limit": 1})).await;
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("host_get is switched off"),
        "old set kept"
    );
    read(&client, "hostgroup_get", json!({"limit": 1})).await;
    guard.stop().await;
}

/// Rego has no recursion, and regorus' VM calls rules on the native stack: a reloaded set
/// with `a if b` and `b if a` compiled, and its smoke evaluation overflowed the stack and
/// aborted the sidecar. It is refused at load now, and the running set stays.
#[tokio::test]
async fn a_recursive_set_is_refused_and_the_running_one_stays() {
    let Running { dir, guard, client } = allowing_all().await;
    std::fs::write(
        dir.join("policy.rego"),
        "package zabbix.mcp\nimport rego.v1\na if b\nb if a\ndecision := {\"allow\": a}\n",
    )
    .unwrap();
    let body = readiness_after_a_failed_reload(&guard).await;
    let error = body["policy"]["last_error"].as_str().unwrap();
    assert!(
        error.contains("recursive rules (Rego has no recursion): data.zabbix.mcp.a -> data.zabbix.mcp.b -> data.zabbix.mcp.a"),
        "{error}"
    );
    assert_eq!(body["status"], "ready", "{body}");
    read(&client, "host_get", json!({"limit": 1})).await;
    // The agent is told which set decides, not the policy's text, place or mode.
    let about = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "zabbix://about",
        ))
        .await
        .unwrap();
    let text = match &about.contents[0] {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("{other:?}"),
    };
    let about: Value = serde_json::from_str(&text).unwrap();
    let mut keys: Vec<_> = about["policy"].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["loaded", "revision", "source"], "{about}");
    for secret in ["recursive", "b if a", &dir.display().to_string()] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    guard.stop().await;
}

/// `/readyz` once it reports a reload that failed (`policy.last_error`).
async fn readiness_after_a_failed_reload(guard: &common::Guard) -> Value {
    let http = reqwest::Client::new();
    let url = format!("{}/readyz", guard.base);
    let mut body = Value::Null;
    wait_for(async || {
        body = http.get(&url).send().await.unwrap().json().await.unwrap();
        body["policy"]["last_error"].is_string()
    })
    .await;
    body
}

/// A sidecar on the 7.0 lab running an allow-all set from a directory of its own, and a
/// client whose read went through.
struct Running {
    dir: std::path::PathBuf,
    guard: common::Guard,
    client: common::Client,
}

async fn allowing_all() -> Running {
    let lab = common::lab(7);
    let dir = policy_dir(None, &[("policy.rego", ALLOW_ALL.into())]);
    let (config, _) = config(&lab, &dir);
    let guard = start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    read(&client, "host_get", json!({"limit": 1})).await;
    Running { dir, guard, client }
}
