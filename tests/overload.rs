//! Issue 12, overload: a call that waits for one of the `MaxZabbixConcurrency` slots is
//! bounded by `Timeout` apart from its Zabbix round trip, and running out of that wait is
//! `overloaded` (the sidecar's own limit, nothing sent to Zabbix), never `upstream_timeout`
//! (which stays Zabbix's slowness). Against a fault stub through real MCP clients.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;
use zabbix_mcp_guard::config::{DecisionLogSink, SessionMode};

use common::fault::{self, Fault};

const CALLS: usize = 8;
const GENEROUS: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_call_that_cannot_get_a_zabbix_slot_in_time_is_overloaded_not_a_zabbix_timeout() {
    let stub = fault::start(Fault::Answer(json!([]))).await;
    let mut config = common::config_for(&stub.url);
    config.limits.max_zabbix_concurrency = 1;
    config.timeout = Duration::from_secs(1);
    let log = common::temp_path("decisions.log");
    config.decision_log = DecisionLogSink::File(log.clone());
    let guard = common::start_with(config).await;
    // Every client connects (and the token's identity is cached) before Zabbix slows down.
    let mut clients = Vec::new();
    for _ in 0..CALLS {
        clients.push(common::client(&guard, "overload-token").await);
    }
    common::read(&clients[0], "host_get", json!({"limit": 1})).await;
    let sent_before = stub.seen("host.get");
    // Each call holds the one slot 300 ms, well inside Timeout; eight in a row need 2.4 s,
    // so the last ones wait for a slot longer than Timeout.
    stub.set(Fault::Slow(Duration::from_millis(300)));
    let mut calls = tokio::task::JoinSet::new();
    for client in clients {
        calls.spawn(async move {
            let result = common::call(&client, "host_get", json!({"limit": 1})).await;
            let code = if result.is_error == Some(true) {
                let body = common::error_body(&result);
                if body["code"] == "overloaded" {
                    let message = body["message"].as_str().unwrap_or("");
                    assert!(message.contains("MaxZabbixConcurrency"), "{message}");
                    assert!(message.contains("not sent"), "{message}");
                }
                body["code"].as_str().unwrap_or("").to_owned()
            } else {
                "ok".to_owned()
            };
            let _ = client.cancel().await;
            code
        });
    }
    let mut codes = Vec::new();
    while let Some(code) = calls.join_next().await {
        codes.push(code.unwrap());
    }
    let count = |code: &str| codes.iter().filter(|c| *c == code).count();
    assert_eq!(count("ok") + count("overloaded"), CALLS, "{codes:?}");
    assert!(count("ok") >= 1, "{codes:?}");
    assert!(count("overloaded") >= 1, "{codes:?}");
    // An overloaded call never reached Zabbix.
    assert_eq!(
        stub.seen("host.get") - sent_before,
        count("ok"),
        "{codes:?}"
    );
    guard.stop().await;
    let logged = common::decision_log_lines(&log)
        .into_iter()
        .filter(|e| e["event"] == "zabbix_result" && e["data"]["code"] == "overloaded")
        .count();
    assert_eq!(
        logged,
        count("overloaded"),
        "one outcome event per overloaded call"
    );
}

/// The official Python SDK reads `overloaded` as a tool error it can show, like rmcp.
#[tokio::test]
async fn the_python_sdk_reads_overloaded() {
    let stub = fault::start(Fault::Answer(json!([]))).await;
    let mut config = common::config_for(&stub.url);
    config.limits.max_zabbix_concurrency = 1;
    config.timeout = Duration::from_secs(1);
    let guard = common::start_with(config).await;
    // The token's identity and the Zabbix version are cached before Zabbix slows down.
    let warm = common::client(&guard, "overload-token").await;
    common::read(&warm, "host_get", json!({"limit": 1})).await;
    stub.set(Fault::Slow(Duration::from_millis(300)));
    let sent_before = stub.seen("host.get");
    let seen = common::python_sdk(
        "overload_python.py",
        vec![
            guard.url.clone(),
            "overload-token".into(),
            CALLS.to_string(),
        ],
    )
    .await;
    let ok = seen["codes"]["ok"].as_u64().unwrap_or(0);
    let overloaded = seen["codes"]["overloaded"].as_u64().unwrap_or(0);
    assert_eq!(ok + overloaded, CALLS as u64, "{seen}");
    assert!(overloaded >= 1, "{seen}");
    let message = seen["overloaded_message"].as_str().unwrap_or("");
    assert!(message.contains("MaxZabbixConcurrency"), "{seen}");
    assert_eq!(stub.seen("host.get") - sent_before, ok as usize, "{seen}");
    let _ = warm.cancel().await;
    guard.stop().await;
}

/// A call keeps its place in the MCP gate until it ends, also when its client hangs up:
/// the call goes on (its outcome reaches the decision log), and so does what it holds.
/// Before, the place was given back with the HTTP request, so a client that sent calls and
/// hung up at once had any number of them going on past the gate (a reviewer had 930 calls
/// in flight behind a gate of 32 within 12 s, each waiting for a Zabbix slot).
#[tokio::test]
async fn a_call_whose_client_hung_up_keeps_its_place_in_the_gate_until_it_ends() {
    const HUNG_UP: usize = 4;
    let stub = fault::start(Fault::Answer(json!([]))).await;
    let mut config = common::config_for(&stub.url);
    config.timeout = Duration::from_secs(5);
    let guard = common::start_with(config).await;
    let http = reqwest::Client::new();
    let post = |body: serde_json::Value| {
        http.post(&guard.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", "Bearer gate-token")
            .body(body.to_string())
            .send()
    };
    let ping = post(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .await
        .unwrap();
    assert_eq!(ping.status(), 200, "the identity is cached");
    stub.set(Fault::Slow(Duration::from_secs(30)));
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "host_get", "arguments": {"limit": 1}}});
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..HUNG_UP {
        calls.spawn(post(call.clone()));
    }
    let metric = async |name: &str| common::metrics::scrape(&guard.base).await.get(name);
    common::wait_until("the calls to be in flight", GENEROUS, async || {
        metric("calls_in_flight").await == HUNG_UP as f64
    })
    .await;
    calls.abort_all();
    common::wait_until(
        "the clients' connections to be closed",
        GENEROUS,
        async || metric("connections_open").await <= 1.0,
    )
    .await;
    assert_eq!(metric("calls_in_flight").await, HUNG_UP as f64);
    assert_eq!(metric("mcp_requests_in_progress").await, HUNG_UP as f64);
    common::wait_until(
        "the calls to end (upstream_timeout)",
        GENEROUS,
        async || metric("mcp_requests_in_progress").await == 0.0,
    )
    .await;
    guard.stop().await;
}

/// The official Python SDK (1.30) reads the request bodies at their 64 MiB budget as that
/// call's error (`-32005`, `data.code: overloaded`) in a 200, and its session goes on. It
/// was a 503, which the SDK raises in its transport's task group: the whole client ended,
/// with every call in flight. Against the 7.0 lab, both session modes; the script holds
/// the budget with 64 connections that announce 1 MiB bodies and send none.
#[tokio::test]
async fn the_python_sdk_reads_full_request_bodies_as_the_calls_error() {
    let lab = common::lab(7);
    for mode in [SessionMode::Stateless, SessionMode::Stateful] {
        let mut config = common::config_for(&lab.url);
        config.session_mode = mode;
        let guard = common::start_with(config).await;
        let summary = common::python_sdk(
            "refused_call_python.py",
            vec![guard.url.clone(), lab.token.clone(), "budget".into()],
        )
        .await;
        assert_eq!(summary["refused"], true, "{mode:?}: {summary}");
        assert_eq!(summary["code"], -32005, "{mode:?}: {summary}");
        assert_eq!(
            summary["data"],
            json!({"code": "overloaded", "scope": "request_bodies", "retry_after_seconds": 1}),
            "{mode:?}: {summary}"
        );
        assert_eq!(summary["after_ok"], true, "{mode:?}: {summary}");
        guard.stop().await;
    }
}

/// The official Python SDK (1.30) reads a full MCP gate (stateless, where every request
/// passes it) as that call's error (`-32005`, `data.code: overloaded`) in a 200, and its
/// session goes on; the 503 it was ended the whole client. The gate of a sidecar with
/// `MaxZabbixConcurrency=16` holds 32; the script fills it with calls to a stub that does
/// not answer within `Timeout`, queues 16 more ahead of its own, and its call is refused
/// once `Timeout` has passed, while the gate is still full.
#[tokio::test]
async fn the_python_sdk_reads_a_full_mcp_gate_as_the_calls_error() {
    let stub = fault::start(Fault::Answer(json!([]))).await;
    let mut config = common::config_for(&stub.url);
    config.limits.max_zabbix_concurrency = 16;
    config.timeout = Duration::from_secs(3);
    let guard = common::start_with(config).await;
    // The token's identity and the Zabbix version are cached before Zabbix goes silent.
    let warm = common::client(&guard, "gate-token").await;
    common::read(&warm, "host_get", json!({"limit": 1})).await;
    let _ = warm.cancel().await;
    stub.set(Fault::Slow(Duration::from_secs(60)));
    let summary = common::python_sdk(
        "refused_call_python.py",
        vec![guard.url.clone(), "gate-token".into(), "gate".into()],
    )
    .await;
    assert_eq!(summary["refused"], true, "{summary}");
    assert_eq!(summary["code"], -32005, "{summary}");
    assert!(
        summary["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("the sidecar is overloaded: 32 MCP requests")),
        "{summary}"
    );
    assert_eq!(
        summary["data"],
        json!({"code": "overloaded", "scope": "mcp_requests", "retry_after_seconds": 1}),
        "{summary}"
    );
    assert_eq!(summary["after_ok"], true, "{summary}");
    guard.stop().await;
}

/// A TCP relay to `upstream` (host:port) that, once broken, closes each connection it
/// accepts: Zabbix unreachable. Returns its URL for the API.
async fn breakable_relay(upstream: String) -> (String, Arc<AtomicBool>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/api_jsonrpc.php", listener.local_addr().unwrap());
    let broken = Arc::new(AtomicBool::new(false));
    let state = broken.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            if state.load(Ordering::SeqCst) {
                continue;
            }
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (url, broken)
}

/// Inside a session, a token's identity is looked up again once its cached one lapses (a
/// minute). When Zabbix cannot be asked just then, the official Python SDK (1.30) reads the
/// refusal as that call's error (`-32603`, `data.code: upstream_unavailable`) in a 200 and
/// its session goes on once Zabbix answers again; the 503 it was ended the whole client
/// with every call in flight. A relay in front of the stub stands for Zabbix unreachable.
#[tokio::test]
async fn the_python_sdk_reads_an_identity_zabbix_cannot_give_now_as_the_calls_error() {
    const TOKEN: &str = "identity-moment-token";
    let stub = fault::start(Fault::Answer(json!([]))).await;
    let upstream = common::host_port(&stub.url);
    let (url, broken) = breakable_relay(upstream).await;
    let mut config = common::config_for(&url);
    config.timeout = Duration::from_secs(2);
    config.session_mode = SessionMode::Stateful;
    let guard = common::start_with(config).await;
    let signals = common::temp_path("signals");
    std::fs::create_dir_all(&signals).unwrap();
    let args = vec![
        guard.url.clone(),
        TOKEN.into(),
        "identity".into(),
        signals.display().to_string(),
    ];
    let python = tokio::spawn(common::python_sdk("refused_call_python.py", args));
    let exists = |name: &str| signals.join(name).exists();
    common::wait_until("the session to start", GENEROUS, async || exists("ready")).await;
    broken.store(true, Ordering::SeqCst);
    guard
        .app()
        .callers
        .forget(&zabbix_mcp_guard::zabbix::ApiToken::new(TOKEN.into()))
        .await;
    std::fs::write(signals.join("go"), "").unwrap();
    common::wait_until("the call refused", GENEROUS, async || exists("refused")).await;
    broken.store(false, Ordering::SeqCst);
    std::fs::write(signals.join("again"), "").unwrap();
    let summary = python.await.unwrap();
    assert_eq!(summary["refused"], true, "{summary}");
    assert_eq!(summary["code"], -32603, "{summary}");
    assert_eq!(summary["data"]["code"], "upstream_unavailable", "{summary}");
    // The caller is not authenticated: the words do not describe Zabbix's whereabouts.
    let message = summary["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("Zabbix API") && !message.contains("127.0.0.1"),
        "{summary}"
    );
    assert_eq!(summary["after_ok"], true, "{summary}");
    guard.stop().await;
}
