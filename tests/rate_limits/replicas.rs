//! Replicas on one Redis: one budget and one set of concurrency slots between them, and
//! sidecars of two Zabbix installations on the same Redis keeping to their own.

use std::sync::atomic::Ordering;

use serde_json::json;

use crate::common::{self, recorder};
use crate::{WAIT, config, fresh_window, gated_stub, hold_one, policy_with_rate};

#[tokio::test]
async fn replicas_sharing_redis_share_one_budget() {
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let rate = json!({"calls": 3, "per_seconds": fresh_window()});
    let policy = policy_with_rate(&rate);
    let a = common::start_with(common::on_redis(
        config(&proxy, Some(policy.clone())),
        &common::redis_url(),
    ))
    .await;
    let b = common::start_with(common::on_redis(
        config(&proxy, Some(policy)),
        &common::redis_url(),
    ))
    .await;
    let via_a = common::client(&a, &lab.token_viewer).await;
    let via_b = common::client(&b, &lab.token_viewer).await;

    for client in [&via_a, &via_b, &via_a] {
        common::read(client, "host_get", json!({"limit": 1})).await;
    }
    let body = common::tool_error(&via_b, "host_get", json!({"limit": 1})).await;
    assert_eq!(
        body["code"], "rate_limited",
        "the 4th call, on the other replica: {body}"
    );
    assert_eq!(body["data"]["scope"], "policy_rate");
    assert!(
        body["data"]["retry_after_seconds"].as_u64().unwrap() > 1000,
        "{body}"
    );
    assert_eq!(recorder.sent("host.get"), 3);
    a.stop().await;
    b.stop().await;
}

/// The 7.0 and 6.0 labs on one Redis database, each with its own `ApprovalSealKey`: each
/// keeps to its own key space. Before, both kept `zmg:rate:…` per Zabbix userid, and one
/// call of 7.0's Admin (userid 1) spent 6.0's Admin's budget too.
#[tokio::test]
async fn sidecars_of_two_zabbix_on_one_redis_keep_their_own_budgets() {
    let (seven, six) = (common::lab(7), common::lab(6));
    let rate = json!({"calls": 1, "per_seconds": fresh_window()});
    let policy = policy_with_rate(&rate);
    let a = common::start_with(common::on_redis(
        config(&seven.url, Some(policy.clone())),
        &common::redis_url(),
    ))
    .await;
    let mut other = common::on_redis(config(&six.url, Some(policy)), &common::redis_url());
    other.approval_seal_key = Some(zabbix_mcp_guard::config::Secret::new(vec![0x6a; 32]));
    let b = common::start_with(other).await;
    let (via_a, via_b) = (
        common::client(&a, &seven.token).await,
        common::client(&b, &six.token).await,
    );
    common::read(&via_a, "host_get", json!({"limit": 1})).await;
    common::read(&via_b, "host_get", json!({"limit": 1})).await;
    let body = common::tool_error(&via_a, "host_get", json!({"limit": 1})).await;
    assert_eq!(
        body["code"], "rate_limited",
        "7.0's Admin spent theirs: {body}"
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn replicas_sharing_redis_share_concurrency_slots() {
    let stub = gated_stub().await;
    let replica = || {
        let mut config = common::on_redis(config(&stub.url, None), &common::redis_url());
        config.caller_limits.max_concurrent = std::num::NonZeroU32::new(1);
        common::start_with(config)
    };
    let (a, b) = (replica().await, replica().await);
    let held = hold_one(&a, &stub).await;
    let client = common::client(&b, "other-token").await;
    let body = common::tool_error(&client, "host_get", json!({})).await;
    assert_eq!(body["code"], "rate_limited", "{body}");
    assert_eq!(body["data"]["scope"], "max_concurrent", "{body}");
    assert_eq!(stub.held.load(Ordering::SeqCst), 1);
    stub.gate.add_permits(1);
    assert!(held.await.unwrap());
    stub.gate.add_permits(100);
    common::eventually("the lease to be given back", WAIT, || async {
        let result = common::call(&client, "host_get", json!({})).await;
        (result.is_error != Some(true)).then_some(())
    })
    .await;
    a.stop().await;
    b.stop().await;
}
