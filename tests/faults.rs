//! Issue 12, fault injection: a scriptable stub Zabbix (tests/common/fault.rs) refuses,
//! stalls, fails, garbles, truncates, floods and resets. For each fault, a read and a write
//! through a real MCP client: the documented error code, no crash (the sidecar serves the
//! next call), the outcome in the decision log, and for writes exactly one request at the
//! stub. A client that hangs up mid-call still gets its call's outcome logged.
//! `FAULT_ROUNDS` (default 2) repeats every class; the README table quotes the last run.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zabbix_mcp_guard::config::DecisionLogSink;

use common::fault::{self, Fault, FaultStub};
use common::{Guard, start_with};

const WRITE: &str = "problem_acknowledge";
const WRITE_METHOD: &str = "event.acknowledge";
const READ: &str = "host_get";
const GENEROUS: Duration = Duration::from_secs(60);

struct Side {
    guard: Guard,
    log: PathBuf,
    stub: FaultStub,
}

async fn side(fault: Fault) -> Side {
    let stub = fault::start(fault).await;
    let mut config = common::config_for(&stub.url);
    config.timeout = Duration::from_secs(1);
    config.limits.max_zabbix_response_size = 1 << 20;
    let log = common::temp_path("decisions.log");
    config.decision_log = DecisionLogSink::File(log.clone());
    Side {
        guard: start_with(config).await,
        log,
        stub,
    }
}

fn log_lines(path: &Path) -> Vec<Value> {
    zabbix_mcp_guard::policy::flush_decision_logs();
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("decision log lines are JSON"))
        .collect()
}

fn outcome(lines: &[Value], id: &str) -> Option<Value> {
    lines
        .iter()
        .find(|l| l["decision_id"] == id && l["event"] == "zabbix_result")
        .map(|l| l["data"].clone())
}

/// Calls `tool`, which must fail with `code`; returns the error body after checking the
/// decision log holds the same outcome.
async fn fails_with(
    side: &Side,
    client: &common::Client,
    tool: &str,
    args: Value,
    code: &str,
) -> Value {
    let body = common::tool_error(client, tool, args).await;
    assert_eq!(body["code"], code, "{tool}: {body}");
    let id = body["decision_id"].as_str().expect("a decision id");
    let logged =
        outcome(&log_lines(&side.log), id).unwrap_or_else(|| panic!("{tool}: no outcome for {id}"));
    assert_eq!(logged["code"], code, "{tool}: {logged}");
    body
}

/// The class, the fault, the code and what the message must name.
fn classes() -> Vec<(&'static str, Fault, &'static str, &'static str)> {
    vec![
        (
            "connection refused",
            Fault::Answer(json!([])),
            "upstream_unavailable",
            "reach",
        ),
        (
            "slower than Timeout",
            Fault::Slow(Duration::from_secs(3)),
            "upstream_timeout",
            "within 1s",
        ),
        (
            "HTTP 502",
            Fault::Status(502),
            "upstream_unavailable",
            "HTTP 502",
        ),
        (
            "HTML error page",
            Fault::Html,
            "upstream_unavailable",
            "invalid response",
        ),
        (
            "invalid JSON",
            Fault::InvalidJson,
            "upstream_unavailable",
            "invalid response",
        ),
        (
            "unpaired surrogate",
            Fault::Malformed(
                r#"{"jsonrpc":"2.0","result":[{"hostid":"1","name":"a\udc00"}],"id":1}"#,
            ),
            "upstream_unavailable",
            "invalid response",
        ),
        (
            "number beyond f64",
            Fault::Malformed(r#"{"jsonrpc":"2.0","result":[{"hostid":"1","n":1e400}],"id":1}"#),
            "upstream_unavailable",
            "invalid response",
        ),
        (
            // A tree of tiny values: a read is cut at the records it asked for (the scan), a
            // write's answer (like an identity's, a target lookup's or a resource's) at
            // 200000 values, before its tree grows with the body (was 50-60 times the body).
            "250000 values",
            Fault::Answer(Value::Array(vec![json!(0); 250_000])),
            "upstream_unavailable",
            "invalid response",
        ),
        (
            "truncated body",
            Fault::Truncated,
            "upstream_unavailable",
            "reading the response",
        ),
        (
            "oversized body",
            Fault::Oversized(2 << 20),
            "upstream_unavailable",
            "MaxZabbixResponseSize",
        ),
        (
            "another request's answer",
            Fault::OtherId,
            "upstream_unavailable",
            "the id of the request sent",
        ),
        (
            "reset after the write was read",
            Fault::Reset,
            "upstream_unavailable",
            "reach",
        ),
    ]
}

#[tokio::test]
async fn every_fault_class_gets_its_code_a_log_event_and_one_write() {
    let rounds: usize = std::env::var("FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let mut table = Vec::new();
    for (class, fault, code, names) in classes() {
        let started = Instant::now();
        for round in 0..rounds {
            let refused = class == "connection refused";
            let side = side(Fault::Answer(json!([]))).await;
            let client = common::client(&side.guard, "fault-token").await;
            // Identity and version are cached now; then the fault starts.
            let primed = common::call(&client, READ, json!({"limit": 1})).await;
            assert_ne!(
                primed.is_error,
                Some(true),
                "{class}: {:?} host.get seen {}",
                primed.content,
                side.stub.seen("host.get")
            );
            if refused {
                side.stub.refuse();
            } else {
                side.stub.set(fault.clone());
            }
            let read = fails_with(&side, &client, READ, json!({"limit": 1}), code).await;
            let message = read["message"].as_str().unwrap_or_default();
            assert!(message.contains(names), "{class}: {message}");
            if refused {
                // A write's caller is looked up again before it is decided; with Zabbix out
                // of reach that fails, and the write is refused (fail closed), never sent.
                let body = common::tool_error(&client, WRITE, json!({"eventids": ["42"]})).await;
                assert_eq!(body["code"], "upstream_unavailable", "{class}: {body}");
                let message = body["message"].as_str().unwrap_or_default();
                assert!(
                    message.contains("cannot reach") && message.contains("nothing was sent"),
                    "{class}: {message}"
                );
            } else {
                // Sent, and nothing came back that says whether it was applied: the agent
                // is told to look before calling again.
                let body =
                    fails_with(&side, &client, WRITE, json!({"eventids": ["42"]}), code).await;
                let message = body["message"].as_str().unwrap_or_default();
                assert!(
                    message.contains("may have been applied"),
                    "{class}: {message}"
                );
                assert_eq!(
                    body["data"],
                    json!({"sent": true, "outcome": "unknown"}),
                    "{class}: {body}"
                );
            }
            let writes = side.stub.seen(WRITE_METHOD);
            let expected = if refused { 0 } else { 1 };
            assert_eq!(writes, expected, "{class}: write requests at the stub");
            // No crash: the sidecar still answers.
            let health = reqwest::get(format!("{}/healthz", side.guard.base))
                .await
                .unwrap();
            assert_eq!(health.status(), 200, "{class} round {round}");
            client.cancel().await.unwrap();
            side.guard.stop().await;
        }
        table.push(format!(
            "| {class} | {} reads + {} writes | `{code}`, logged, {} | {:.1}s |",
            rounds,
            rounds,
            if class == "connection refused" {
                "write refused (its caller not looked up again), not sent"
            } else {
                "write sent once"
            },
            started.elapsed().as_secs_f64()
        ));
    }
    println!("FAULT TABLE\n{}", table.join("\n"));
}

#[tokio::test]
async fn a_client_that_hangs_up_mid_call_gets_the_outcome_logged() {
    for (tool, args, method) in [
        (READ, json!({"limit": 1}), "host.get"),
        (WRITE, json!({"eventids": ["42"]}), WRITE_METHOD),
    ] {
        let side = side(Fault::Answer(json!([]))).await;
        let client = common::client(&side.guard, "hangup-token").await;
        common::read(&client, READ, json!({"limit": 1})).await;
        let before = side.stub.seen(method);
        side.stub.set(Fault::Slow(Duration::from_millis(700)));
        // A client of its own, so that hanging up closes only this call's connection.
        let leaving = common::client(&side.guard, "hangup-token").await;
        let call = tokio::spawn(async move { common::call(&leaving, tool, args).await });
        let deadline = Instant::now() + GENEROUS;
        while side.stub.seen(method) == before {
            assert!(
                Instant::now() < deadline,
                "{tool}: the call never reached the stub"
            );
            tokio::task::yield_now().await;
        }
        call.abort();
        // The call finishes without its client; its outcome is logged as a success.
        let result = common::eventually(&format!("{tool}: its outcome logged"), GENEROUS, || {
            let lines = log_lines(&side.log);
            let decided = lines
                .iter()
                .rev()
                .find(|l| l["input"]["phase"] == "call" && l["input"]["tool"]["name"] == tool);
            let id = decided
                .and_then(|l| l["decision_id"].as_str())
                .unwrap_or_default();
            let done = outcome(&lines, id).filter(|_| {
                lines.iter().filter(|l| l["decision_id"] == id).count() > 1
                    && decided.is_some()
                    && side.stub.seen(method) == before + 1
            });
            async move { done }
        })
        .await;
        assert_eq!(result["ok"], true, "{tool}: {result}");
        assert_eq!(side.stub.seen(method), before + 1, "{tool}: sent once");
        // The sidecar serves on.
        common::read(&client, READ, json!({"limit": 1})).await;
        side.guard.stop().await;
    }
}

#[tokio::test]
async fn zabbix_calls_wait_for_one_of_max_zabbix_concurrency_slots() {
    let stub = fault::start(Fault::Answer(json!([]))).await;
    let mut config = common::config_for(&stub.url);
    config.limits.max_zabbix_concurrency = 2;
    let guard = start_with(config).await;
    let client = common::client(&guard, "slots-token").await;
    common::read(&client, READ, json!({"limit": 1})).await;
    stub.set(Fault::Slow(Duration::from_millis(200)));
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..6 {
        let client = common::client(&guard, "slots-token").await;
        calls.spawn(async move { common::read(&client, READ, json!({"limit": 1})).await });
    }
    while let Some(done) = calls.join_next().await {
        done.unwrap();
    }
    assert_eq!(stub.seen("host.get"), 7);
    assert!(
        stub.max_in_flight() <= 2,
        "{} at once",
        stub.max_in_flight()
    );
    guard.stop().await;
}
