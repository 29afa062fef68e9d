//! Per-caller limits through real MCP clients: the decision's `rate`, the `RateLimit` and
//! `MaxConcurrent` ceilings, replicas sharing one budget through the lab's Redis, fail
//! closed when Redis is away, and the `rate_limited` error as the official Python SDK
//! reads it. A recording proxy in front of the lab shows that nothing refused reaches
//! Zabbix; a gated stub Zabbix holds calls open for the concurrency caps.

#[path = "../common/mod.rs"]
mod common;
mod replicas;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rmcp::model::ReadResourceRequestParams;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use zabbix_mcp_guard::config::{Config, DecisionLogSink};
use zabbix_mcp_guard::ratelimit::CallRate;
use zabbix_mcp_guard::zabbix::ApiToken;

use common::{Guard, recorder};

const WAIT: Duration = Duration::from_secs(30);

/// A policy that allows everything and gives `host_get` this `rate` (a JSON object).
fn policy_with_rate(rate: &Value) -> PathBuf {
    let dir = common::temp_path("policies");
    std::fs::create_dir_all(&dir).unwrap();
    let rego = format!(
        r#"package zabbix.mcp

import rego.v1

decision := {{"allow": true, "reasons": [], "approval": "none", "rate": {rate}}} if {{
	input.tool.name == "host_get"
}} else := {{"allow": true, "reasons": [], "approval": "none"}}
"#
    );
    std::fs::write(dir.join("rate.rego"), rego).unwrap();
    dir
}

fn config(zabbix_url: &str, policy: Option<PathBuf>) -> Config {
    let mut config = common::config_for(zabbix_url);
    if let Some(dir) = policy {
        config.policy_dir = Some(dir);
    }
    config
}

fn decision_log(config: &Config) -> PathBuf {
    match &config.decision_log {
        DecisionLogSink::File(path) => path.clone(),
        DecisionLogSink::Stdout => panic!("tests log decisions to a file"),
    }
}

/// Calls `host_get` until the first refusal (at most `max` calls): the successes before
/// it, and the refusal's error body.
async fn until_refused(client: &common::Client, max: usize) -> (usize, Value) {
    for done in 0..max {
        let result = common::call(client, "host_get", json!({"limit": 1})).await;
        if result.is_error == Some(true) {
            return (done, common::error_body(&result));
        }
    }
    panic!("{max} calls and none refused");
}

fn rate_limited_event(log: &std::path::Path, decision_id: &str) -> Option<Value> {
    common::decision_log_lines(log)
        .into_iter()
        .find(|l| l["decision_id"] == decision_id && l["event"] == "rate_limited")
}

/// A per_seconds no earlier run used: Redis keeps budgets between runs, and a budget is
/// keyed by its value.
fn fresh_window() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    10_000 + u64::from(nanos % 70_000)
}

#[tokio::test]
async fn over_the_policy_rate_nothing_reaches_zabbix_and_the_budget_comes_back() {
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    // 2 at once, then one more every 3 s.
    let config = config(
        &proxy,
        Some(policy_with_rate(&json!({"calls": 2, "per_seconds": 6}))),
    );
    let log = decision_log(&config);
    let guard = common::start_with(config).await;
    let client = common::client(&guard, &lab.token_viewer).await;

    let (passed, body) = until_refused(&client, 10).await;
    assert!(passed >= 2, "the burst of 2 passes first ({passed})");
    assert_eq!(body["code"], "rate_limited", "{body}");
    assert_eq!(body["data"]["scope"], "policy_rate", "{body}");
    let retry = body["data"]["retry_after_seconds"].as_u64().expect("retry");
    assert!((1..=3).contains(&retry), "{body}");
    assert!(body["message"].as_str().unwrap().contains("retry after"));
    assert_eq!(
        recorder.sent("host.get"),
        passed,
        "the refused call was not sent"
    );

    let id = body["decision_id"].as_str().expect("decision_id");
    let event = rate_limited_event(&log, id).expect("a rate_limited event under the decision");
    assert_eq!(event["data"]["scope"], "policy_rate");
    assert_eq!(event["data"]["limit"], "2/6");
    assert_eq!(event["data"]["retry_after_seconds"], retry);
    assert_eq!(event["data"]["sent"], false);
    assert_eq!(
        guard
            .app()
            .limiter
            .refused(zabbix_mcp_guard::ratelimit::Scope::PolicyRate),
        1
    );
    let metrics = common::metrics::scrape(&guard.base).await;
    assert_eq!(
        metrics.get("rate_limited_total{scope=\"policy_rate\"}"),
        1.0,
        "the metric counts the refusal: {metrics:?}"
    );

    // Other tools have no budget in this policy; the limited one refills with time.
    let hosts = common::read(&client, "hostgroup_get", json!({"limit": 1})).await;
    assert!(hosts["count"].as_u64().is_some());
    common::eventually("the budget to refill", WAIT, || async {
        let result = common::call(&client, "host_get", json!({"limit": 1})).await;
        (result.is_error != Some(true)).then_some(())
    })
    .await;
    guard.stop().await;
}

#[tokio::test]
async fn the_rate_limit_parameter_beats_a_generous_policy() {
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    // The shipped default policy (10000 reads a second) under RateLimit=2/3600.
    let mut config = config(&proxy, None);
    config.caller_limits.rate_limit = Some(CallRate::parse("2/3600").unwrap());
    let log = decision_log(&config);
    let guard = common::start_with(config).await;
    let client = common::client(&guard, &lab.token).await;

    let (passed, body) = until_refused(&client, 5).await;
    assert_eq!(passed, 2);
    assert_eq!(body["code"], "rate_limited", "{body}");
    assert_eq!(body["data"]["scope"], "rate_limit", "{body}");
    let retry = body["data"]["retry_after_seconds"].as_u64().unwrap();
    assert!(
        (1700..=1800).contains(&retry),
        "one call back every 1800 s: {body}"
    );
    assert_eq!(recorder.sent("host.get"), 2);

    // One budget per caller whatever the tool, resource reads included.
    let other = common::tool_error(&client, "hostgroup_get", json!({})).await;
    assert_eq!(other["code"], "rate_limited", "{other}");
    let host = common::seed_id(&lab, "hosts", "mcp-web-01");
    let error = client
        .read_resource(ReadResourceRequestParams::new(format!(
            "zabbix://host/{host}"
        )))
        .await
        .expect_err("a rate limited read fails");
    let text = format!("{error:?}");
    assert!(
        text.contains("rate_limited") && text.contains("retry_after_seconds"),
        "{text}"
    );
    assert_eq!(recorder.sent("host.get"), 2, "nothing more reached Zabbix");

    // A write looks its caller and its targets up in Zabbix before it is decided: over
    // `RateLimit`, it is refused first, so no lookup reaches Zabbix either (before, each
    // one did).
    let identity_lookups = recorder.sent("usergroup.get");
    for n in 0..5 {
        let ids = json!([format!("99999{n}1"), format!("99999{n}2")]);
        let args = json!({"eventids": ids, "message": "over budget"});
        let refused = common::tool_error(&client, "problem_annotate", args).await;
        assert_eq!(refused["code"], "rate_limited", "{refused}");
        assert_eq!(refused["data"]["scope"], "rate_limit", "{refused}");
        let id = refused["decision_id"].as_str().expect("a decision_id");
        let line = common::decision_log_lines(&log)
            .into_iter()
            .find(|l| l["decision_id"] == id && l["event"].is_null())
            .expect("the refusal is logged as a decision");
        assert_eq!(line["decision"]["allow"], false, "{line}");
        assert!(rate_limited_event(&log, id).is_some());
    }
    assert_eq!(
        recorder.sent("event.get"),
        0,
        "no target lookup reached Zabbix"
    );
    assert_eq!(
        recorder.sent("usergroup.get"),
        identity_lookups,
        "no caller lookup reached Zabbix"
    );
    let metrics = common::metrics::scrape(&guard.base).await;
    assert_eq!(
        metrics.get("policy_decisions_total{phase=\"call\",result=\"deny\"}"),
        0.0,
        "the policy was not asked, and no denial of its is counted: {metrics:?}"
    );
    guard.stop().await;
}

/// A stub Zabbix whose data calls wait until the test lets them go (identity calls answer
/// at once): a call held open for as long as the test needs, with no timing involved.
struct Gated {
    url: String,
    held: Arc<AtomicUsize>,
    gate: Arc<Semaphore>,
}

async fn gated_stub() -> Gated {
    common::init();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/api_jsonrpc.php", listener.local_addr().unwrap());
    let held = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let (h, g) = (held.clone(), gate.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (h, g) = (h.clone(), g.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (h, g) = (h.clone(), g.clone());
                    async move {
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let request: Value = serde_json::from_slice(&body).unwrap();
                        let result = match request["method"].as_str().unwrap_or("") {
                            "apiinfo.version" => json!("7.0.22"),
                            "user.checkAuthentication" => {
                                json!({"userid": "1", "username": "Admin", "type": 3, "roleid": "3"})
                            }
                            "usergroup.get" => json!([{"name": "Zabbix administrators"}]),
                            _ => {
                                h.fetch_add(1, Ordering::SeqCst);
                                g.acquire().await.unwrap().forget();
                                json!([{"hostid": "1", "host": "held", "name": "held"}])
                            }
                        };
                        let answer =
                            json!({"jsonrpc": "2.0", "result": result, "id": request["id"]});
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                            Bytes::from(answer.to_string()),
                        )))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Gated { url, held, gate }
}

/// Starts a `host_get` call in the background and waits until Zabbix holds it.
async fn hold_one(guard: &Guard, stub: &Gated) -> tokio::task::JoinHandle<bool> {
    let before = stub.held.load(Ordering::SeqCst);
    let client = common::client(guard, "held-token").await;
    let task = tokio::spawn(async move {
        let result = common::call(&client, "host_get", json!({})).await;
        result.is_error != Some(true)
    });
    let held = stub.held.clone();
    common::eventually("the call to be held at Zabbix", WAIT, || {
        let held = held.clone();
        async move { (held.load(Ordering::SeqCst) > before).then_some(()) }
    })
    .await;
    task
}

#[tokio::test]
async fn a_concurrency_cap_refuses_while_a_call_is_in_flight() {
    let stub = gated_stub().await;
    let config = config(&stub.url, Some(policy_with_rate(&json!({"concurrent": 1}))));
    let log = decision_log(&config);
    let guard = common::start_with(config).await;
    let held = hold_one(&guard, &stub).await;

    let client = common::client(&guard, "another-token-same-user").await;
    let body = common::tool_error(&client, "host_get", json!({})).await;
    assert_eq!(body["code"], "rate_limited", "{body}");
    assert_eq!(body["data"]["scope"], "policy_concurrent", "{body}");
    assert_eq!(body["data"]["retry_after_seconds"], 1, "{body}");
    assert_eq!(
        stub.held.load(Ordering::SeqCst),
        1,
        "nothing sent to Zabbix"
    );
    let id = body["decision_id"].as_str().unwrap();
    assert!(rate_limited_event(&log, id).is_some());

    stub.gate.add_permits(1);
    assert!(held.await.unwrap(), "the held call completes");
    stub.gate.add_permits(100);
    common::eventually("the slot to come back", WAIT, || async {
        let result = common::call(&client, "host_get", json!({})).await;
        (result.is_error != Some(true)).then_some(())
    })
    .await;
    assert_eq!(guard.app().limiter.slots_in_use(), 0);
    guard.stop().await;
}

/// A Redis that answers slowly (every command held by `CLIENT PAUSE`) is waited for up to
/// `Timeout`, not the Redis crate's own 500 ms; and a call that gave up on it leaves no
/// concurrency slot behind: Redis takes the lease once it runs the script, and the lease
/// is given back right behind it. Before, a slot taken so was held for its 30 s lease and
/// refused the user's every call meanwhile.
#[tokio::test]
async fn a_slow_redis_is_waited_for_and_a_call_that_gave_up_holds_no_slot() {
    let redis = common::redis_server::RedisServer::start().await;
    let (url, _stub) = common::stub::start(Duration::ZERO).await;
    let sidecar = |timeout: u64| {
        let mut config = common::on_redis(config(&url, None), &redis.url());
        config.timeout = Duration::from_secs(timeout);
        config.caller_limits.max_concurrent = std::num::NonZeroU32::new(1);
        common::start_with(config)
    };
    let patient = sidecar(3).await;
    let client = common::client(&patient, "slow-redis").await;
    common::read(&client, "host_get", json!({"limit": 1})).await;
    no_slot_held(&redis).await;
    redis.pause(Duration::from_millis(1500)).await;
    let waited = common::call(&client, "host_get", json!({"limit": 1})).await;
    assert_ne!(waited.is_error, Some(true), "{waited:?}");

    let hasty = sidecar(1).await;
    let client = common::client(&hasty, "slow-redis").await;
    common::read(&client, "host_get", json!({"limit": 1})).await;
    no_slot_held(&redis).await;
    redis.pause(Duration::from_millis(2500)).await;
    let gave_up = common::tool_error(&client, "host_get", json!({"limit": 1})).await;
    assert_eq!(gave_up["code"], "internal_error", "{gave_up}");
    assert!(
        gave_up["message"]
            .as_str()
            .unwrap()
            .contains("did not answer within 1s"),
        "{gave_up}"
    );
    // Once Redis answers again, the next call has the user's one slot.
    let ping = redis::Client::open(redis.url()).unwrap();
    common::eventually("Redis to answer again", WAIT, || async {
        let mut connection = ping.get_multiplexed_async_connection().await.ok()?;
        let pong: Option<String> = redis::cmd("PING").query_async(&mut connection).await.ok();
        pong.map(|_| ())
    })
    .await;
    let after = common::call(&client, "host_get", json!({"limit": 1})).await;
    assert_ne!(after.is_error, Some(true), "{after:?}");
    hasty.stop().await;
    patient.stop().await;
}

/// Redis restarted empty while a call runs (`FLUSHALL` on a Redis of the test's own): the
/// call's next lease renewal (every 10 s) puts its slots back, and the user's next call is
/// refused while it runs. Before, a renewal extended only a lease still there, and the
/// user's next call was admitted beside the running one under `MaxConcurrent=1`.
#[tokio::test]
async fn a_lease_redis_lost_is_put_back_while_its_call_runs() {
    let redis = common::redis_server::RedisServer::start().await;
    let stub = gated_stub().await;
    let mut config = common::on_redis(config(&stub.url, None), &redis.url());
    config.caller_limits.max_concurrent = std::num::NonZeroU32::new(1);
    // The held call outlives a renewal (every 10 s): Zabbix is waited for a minute.
    config.timeout = Duration::from_secs(60);
    let guard = common::start_with(config).await;
    let held = hold_one(&guard, &stub).await;
    redis.flush_all().await;
    let client = redis::Client::open(redis.url()).unwrap();
    common::eventually("the running call's lease to be put back", WAIT, || async {
        (!slot_sets(&client).await?.is_empty()).then_some(())
    })
    .await;
    let other = common::client(&guard, "another-token-same-user").await;
    let body = common::tool_error(&other, "host_get", json!({})).await;
    assert_eq!(body["code"], "rate_limited", "{body}");
    assert_eq!(body["data"]["scope"], "max_concurrent", "{body}");
    assert_eq!(
        stub.held.load(Ordering::SeqCst),
        1,
        "nothing sent to Zabbix"
    );

    stub.gate.add_permits(100);
    assert!(held.await.unwrap(), "the held call completes");
    guard.stop().await;
}

/// Waits until the calls so far gave their concurrency slots back (a slot set is deleted
/// with its last lease), so that a pause holds nothing of theirs.
async fn no_slot_held(redis: &common::redis_server::RedisServer) {
    let client = redis::Client::open(redis.url()).unwrap();
    common::eventually("the slots to be given back", WAIT, || async {
        slot_sets(&client).await?.is_empty().then_some(())
    })
    .await;
}

/// The concurrency slot sets in Redis now; `None` when Redis could not be asked.
async fn slot_sets(client: &redis::Client) -> Option<Vec<String>> {
    let mut connection = client.get_multiplexed_async_connection().await.ok()?;
    redis::cmd("KEYS")
        .arg(common::redis_key("slots:*"))
        .query_async(&mut connection)
        .await
        .ok()
}

#[tokio::test]
async fn without_redis_calls_are_refused() {
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    // Nothing listens on the discard port.
    let config = common::on_redis(config(&proxy, None), "redis://127.0.0.1:9/");
    let log = decision_log(&config);
    let guard = common::start_with(config).await;
    // A caller whose identity was cached before Redis went away: a new one is refused
    // before MCP (the rejected-token lockout cannot be checked, tests/lockout_shared.rs).
    let app = guard.app();
    app.callers
        .resolve(&app.zabbix, &ApiToken::new(lab.token_viewer.clone()))
        .await
        .expect("the identity from Zabbix");
    let client = common::client(&guard, &lab.token_viewer).await;
    let body = common::tool_error(&client, "host_get", json!({})).await;
    assert_eq!(body["code"], "internal_error", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("per-caller limits could not be checked"),
        "{message}"
    );
    assert!(message.contains("nothing was sent to Zabbix"), "{message}");
    assert_eq!(recorder.sent("host.get"), 0);
    let id = body["decision_id"].as_str().unwrap();
    let failed = common::decision_log_lines(&log)
        .into_iter()
        .any(|l| l["decision_id"] == id && l["event"] == "rate_limit_failed");
    assert!(failed, "the refusal is in the decision log");
    guard.stop().await;
}

/// The official MCP Python SDK over streamable HTTP reads the error body.
#[tokio::test]
async fn the_python_sdk_reads_rate_limited() {
    let lab = common::lab(7);
    let policy = policy_with_rate(&json!({"calls": 1, "per_seconds": 3600}));
    let guard = common::start_with(config(&lab.url, Some(policy))).await;
    let seen = common::python_sdk(
        "rate_limited_python.py",
        vec![guard.url.clone(), lab.token_viewer.clone()],
    )
    .await;
    assert_eq!(seen["first_ok"], true, "{seen}");
    assert_eq!(seen["code"], "rate_limited", "{seen}");
    assert!(
        seen["retry_after_seconds"].as_u64().unwrap() > 1000,
        "{seen}"
    );
    assert!(
        seen["decision_id"]
            .as_str()
            .is_some_and(|id| id.len() == 36),
        "{seen}"
    );
    guard.stop().await;
}
