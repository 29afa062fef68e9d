//! The decision log at scale, through real MCP clients against the lab: one line per
//! `tools/list` with the offered and the hidden tools, a repeated list that evaluates no
//! policy, a policy change that decides the list again, and the binary writing every
//! queued line before it exits on SIGTERM.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Lab, config_for, start_with, temp_path};
use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ReadResourceRequestParams};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use zabbix_mcp_guard::config::DecisionLogSink;

const ALLOW_ALL: &str = "package zabbix.mcp\nimport rego.v1\n\
    decision := {\"allow\": true, \"reasons\": []}\n";

/// Writes are not offered (nor allowed) in any phase.
const NO_WRITES: &str = "package zabbix.mcp\nimport rego.v1\n\
    default decision := {\"allow\": true, \"reasons\": []}\n\
    decision := {\"allow\": false, \"reasons\": [\"writes are not offered here\"]} if {\n\
    \tinput.tool.kind == \"write\"\n}\n";

fn policy_dir(text: &str) -> PathBuf {
    let dir = temp_path("policy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.rego"), text).unwrap();
    dir
}

fn config(lab: &Lab, dir: &Path) -> (zabbix_mcp_guard::config::Config, PathBuf) {
    let mut config = config_for(&lab.url);
    config.policy_dir = Some(dir.to_path_buf());
    let log = temp_path("decisions.log");
    config.decision_log = DecisionLogSink::File(log.clone());
    (config, log)
}

fn log_lines(path: &Path) -> Vec<Value> {
    common::decision_log_lines(path)
}

fn list_lines(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l["input"]["phase"] == "list")
        .collect()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn one_tools_list_is_one_line_and_a_repeated_list_evaluates_no_policy() {
    let lab = common::lab(7);
    let (config, log) = config(&lab, &policy_dir(NO_WRITES));
    let guard = start_with(config).await;
    let counters = &guard.app().list_decisions;
    let admin = common::client(&guard, &lab.token).await;

    let names = common::tool_names(&admin).await;
    assert!(names.contains(&"host_get".to_owned()), "{names:?}");
    assert!(
        !names.contains(&"maintenance_create".to_owned()),
        "{names:?}"
    );
    let lines = log_lines(&log);
    let lists = list_lines(&lines);
    assert_eq!(
        lists.len(),
        1,
        "one line for the whole tools/list: {lists:?}"
    );
    let line = lists[0];
    let mut offered = strings(&line["result"]["offered"]);
    offered.sort();
    assert_eq!(offered, names, "the line names exactly the tools offered");
    let hidden = line["result"]["hidden"].as_array().unwrap();
    let create = hidden
        .iter()
        .find(|h| h["tool"] == "maintenance_create")
        .unwrap_or_else(|| panic!("maintenance_create hidden: {line}"));
    assert_eq!(create["reasons"], json!(["writes are not offered here"]));
    assert!(hidden.iter().all(|h| h["reasons"].as_array().is_some()));
    let evaluated = offered.len() + hidden.len();
    assert_eq!(line["metrics"]["evaluations"], json!(evaluated));
    assert!(line["metrics"]["timer_eval_ns"].is_u64());
    assert!(line["decision_id"].is_string());
    assert!(line["timestamp"].is_string());
    assert_eq!(line["path"], "zabbix/mcp/decision");
    assert!(line["bundles"]["policies"]["revision"].is_string());
    assert!(line["labels"]["id"].is_string());
    assert_eq!(line["input"]["caller"]["username"], "Admin");
    assert!(line["input"]["client"].get("protocol_version").is_some());
    assert!(line["input"].get("tool").is_none(), "per tool: {line}");
    assert!(!line.to_string().contains(&lab.token));
    assert_eq!(
        (counters.evaluated(), counters.evaluations()),
        (1, evaluated as u64)
    );

    // The same caller and client again, and the tool list inside zabbix://about: the
    // decided set is reused, no policy runs and no line is written.
    assert_eq!(common::tool_names(&admin).await, names);
    let about = admin
        .read_resource(ReadResourceRequestParams::new("zabbix://about"))
        .await
        .unwrap();
    let about = serde_json::to_value(&about).unwrap().to_string();
    assert!(about.contains("host_get") && !about.contains("maintenance_create"));
    assert_eq!(
        (counters.evaluated(), counters.evaluations()),
        (1, evaluated as u64),
        "a repeated list evaluates no policy"
    );
    assert!(counters.reused() >= 2, "{}", counters.reused());
    assert_eq!(list_lines(&log_lines(&log)).len(), 1);

    // Another caller is another set, with a line of its own.
    let viewer = common::client(&guard, &lab.token_viewer).await;
    common::tool_names(&viewer).await;
    let lines = log_lines(&log);
    let lists = list_lines(&lines);
    assert_eq!(lists.len(), 2);
    assert_eq!(lists[1]["input"]["caller"]["username"], "mcp-viewer");
    assert_ne!(lists[1]["decision_id"], lists[0]["decision_id"]);
    assert_eq!(counters.evaluated(), 2);
    guard.stop().await;
}

#[tokio::test]
async fn a_policy_change_decides_the_list_again() {
    let lab = common::lab(7);
    let dir = policy_dir(ALLOW_ALL);
    let (config, log) = config(&lab, &dir);
    let guard = start_with(config).await;
    let app = guard.app().clone();
    let admin = common::client(&guard, &lab.token).await;
    assert!(
        common::tool_names(&admin)
            .await
            .contains(&"maintenance_create".to_owned())
    );
    std::fs::write(dir.join("policy.rego"), NO_WRITES).unwrap();
    app.policy.reload().expect("the new policy compiles");
    let names = common::tool_names(&admin).await;
    assert!(
        !names.contains(&"maintenance_create".to_owned()),
        "{names:?}"
    );
    let lines = log_lines(&log);
    let lists = list_lines(&lines);
    assert_eq!(lists.len(), 2, "decided again under the new revision");
    let revision = |l: &Value| l["bundles"]["policies"]["revision"].clone();
    assert_ne!(revision(lists[0]), revision(lists[1]));
    assert_eq!(
        revision(lists[1]),
        json!(app.policy.revision().unwrap().to_string())
    );
    assert!(
        lists[1]["result"]["hidden"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["tool"] == "maintenance_create")
    );
    assert_eq!(app.list_decisions.evaluated(), 2);
    guard.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_writes_every_queued_line_before_it_exits_on_sigterm() {
    common::init();
    let lab = common::lab(7);
    let dir = temp_path("binary");
    let dir = dir.parent().unwrap();
    let log = dir.join("guard.log");
    let decisions = dir.join("decisions.log");
    let port = common::free_port();
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let mut child = common::binary(&lab.url, port, &log)
        .arg("--policy-dir")
        .arg(&policies)
        .arg("--decision-log")
        .arg(&decisions)
        .spawn()
        .unwrap();
    common::eventually("the sidecar to start", Duration::from_secs(20), || {
        let started = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("listening");
        async move { started.then_some(()) }
    })
    .await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("http://127.0.0.1:{port}/mcp"))
            .auth_header(lab.token.clone()),
    );
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("zabbix-mcp-guard-tests", "1.0"),
    )
    .serve(transport)
    .await
    .expect("MCP client connects");
    common::tool_names(&client).await;
    const CALLS: usize = 40;
    for _ in 0..CALLS {
        common::read(&client, "hostgroup_get", json!({"limit": 1})).await;
    }
    let status = common::terminate(&mut child).expect("SIGTERM and exit");
    assert!(status.success(), "{status}");
    let lines: Vec<Value> = std::fs::read_to_string(&decisions)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("whole JSON lines"))
        .collect();
    let count = |phase: &str| {
        lines
            .iter()
            .filter(|l| l["input"]["phase"] == phase)
            .count()
    };
    assert_eq!(count("list"), 1);
    assert_eq!(count("call"), CALLS);
    let results = lines
        .iter()
        .filter(|l| l["event"] == "zabbix_result")
        .count();
    assert_eq!(results, CALLS, "every call's outcome");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("decision log flushed"), "{text}");
    assert!(text.contains("dropped=0"), "{text}");
    let _ = client.cancel().await;
}

/// A FIFO named `name` and a reader of it, held open read-write (which never blocks on
/// Linux), so the sidecar's open finds a reader.
fn fifo_with_reader(name: &str) -> (std::path::PathBuf, std::fs::File) {
    let fifo = temp_path(name);
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    (fifo, reader)
}

/// No change reaches Zabbix without its decision in the log. A decision log file that is a
/// FIFO whose reader stopped reading (a log shipper that hung) fills the pipe, then the
/// writer's queue; from then on a write is refused as `overloaded` and nothing is sent,
/// while reads go on (their lines counted as dropped). Once the reader drains the pipe,
/// writes go through again.
#[tokio::test]
async fn writes_are_refused_while_the_decision_log_cannot_keep_up() {
    let lab = common::lab(7);
    let (proxy, recorder) = common::recorder::start(&lab.url).await;
    // Never read: the stuck reader.
    let (fifo, reader) = fifo_with_reader("stuck.fifo");
    let dir = policy_dir(
        "package zabbix.mcp\nimport rego.v1\n\
         decision := {\"allow\": false, \"reasons\": [\"host_get is switched off\"]} if {\n\
         \tinput.tool.name == \"host_get\"\n\tinput.phase == \"call\"\n\
         } else := {\"allow\": true, \"reasons\": []}\n",
    );
    let mut config = config_for(&proxy);
    config.policy_dir = Some(dir);
    config.decision_log = DecisionLogSink::File(fifo.clone());
    let guard = start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    let event = common::trapper::open_problem(&client, &lab, &["mcp-web-01"]).await;
    let ack = |n: u32| json!({"eventids": [event], "message": format!("unlogged? {n}")});

    // Denied reads, one line each and nothing asked of Zabbix, from eight clients at once
    // until lines are dropped (the queue holds 8192).
    let mut flood = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let app = guard.app().clone();
        let client = common::client(&guard, &lab.token).await;
        flood.spawn(async move {
            for _ in 0..5000 {
                if app.decisions.dropped() > 0 {
                    return true;
                }
                common::call(&client, "host_get", json!({"limit": 1})).await;
            }
            false
        });
    }
    while let Some(filled) = flood.join_next().await {
        assert!(filled.unwrap(), "the decision log's queue never filled");
    }
    let refused = common::tool_error(&client, "problem_acknowledge", ack(1)).await;
    assert_eq!(refused["code"], "overloaded", "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("decision log is not keeping up"),
        "{refused}"
    );
    assert_eq!(
        recorder.sent("event.acknowledge"),
        0,
        "nothing was sent to Zabbix"
    );
    common::read(&client, "problem_get", json!({"limit": 1})).await;

    // The reader drains the pipe: the queue empties and writes are taken again.
    std::thread::spawn(move || std::io::copy(&mut &reader, &mut std::io::sink()));
    let mut n = 1;
    common::wait_until(
        "a write to go through again",
        Duration::from_secs(60),
        async || {
            n += 1;
            common::call(&client, "problem_acknowledge", ack(n))
                .await
                .is_error
                != Some(true)
        },
    )
    .await;
    assert_eq!(recorder.sent("event.acknowledge"), 1);
    guard.stop().await;
}

/// A destination that takes no line at all (a pipe whose reader exited: a log shipper that
/// crashed, `| head -1`; a full disk) refuses every write, at once, as `overloaded`, with
/// nothing sent, and makes the sidecar not ready; the writer tries the destination again by
/// itself, so once a reader is back the sidecar is ready without any call, the gap is a
/// `decision_log_unwritten` line, and writes go through. Before, every line was lost to
/// EPIPE, `/readyz` said ready, and writes were sent unlogged.
#[tokio::test]
async fn writes_are_refused_while_the_decision_log_destination_fails() {
    let lab = common::lab(7);
    let (proxy, recorder) = common::recorder::start(&lab.url).await;
    let (fifo, first_reader) = fifo_with_reader("gone.fifo");
    let mut config = config_for(&proxy);
    config.decision_log = DecisionLogSink::File(fifo.clone());
    let guard = start_with(config).await;
    // The reader exits: every write to the pipe is EPIPE from now on.
    drop(first_reader);
    let client = common::client(&guard, &lab.token).await;
    let event = common::trapper::open_problem(&client, &lab, &["mcp-web-01"]).await;
    let http = reqwest::Client::new();
    let readyz = format!("{}/readyz", guard.base);
    let ready = async |http: &reqwest::Client| {
        common::status_and_body(http.get(&readyz).send().await.unwrap()).await
    };
    common::wait_until(
        "the decision log failing",
        Duration::from_secs(30),
        async || ready(&http).await.0 == 503,
    )
    .await;
    let (_, body) = ready(&http).await;
    assert_eq!(body["decision_log"]["failing"], true, "{body}");

    let ack = json!({"eventids": [event], "message": "unlogged while the log fails?"});
    let refused = common::tool_error(&client, "problem_acknowledge", ack.clone()).await;
    assert_eq!(refused["code"], "overloaded", "{refused}");
    assert_eq!(
        recorder.sent("event.acknowledge"),
        0,
        "nothing was sent to Zabbix"
    );
    let failed = guard.app().decisions.write_errors();
    common::read(&client, "host_get", json!({"limit": 1})).await;
    // Its two lines (decision, result) were tried and failed: nothing is left queued.
    common::wait_until(
        "the read's lines failed",
        Duration::from_secs(10),
        async || guard.app().decisions.write_errors() >= failed + 2,
    )
    .await;

    // A reader comes back: the writer's own retry finds it, no call needed.
    let reader = std::fs::File::open(&fifo).unwrap();
    let (tx, drained) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut reader = reader;
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    common::wait_until("ready again", Duration::from_secs(30), async || {
        ready(&http).await.0 == 200
    })
    .await;
    let ok = common::call(&client, "problem_acknowledge", ack).await;
    assert_ne!(ok.is_error, Some(true), "{ok:?}");
    assert_eq!(recorder.sent("event.acknowledge"), 1);
    zabbix_mcp_guard::policy::flush_decision_logs();
    let mut bytes = Vec::new();
    common::wait_until("the gap's line read", Duration::from_secs(10), async || {
        bytes.extend(drained.try_iter().flatten());
        String::from_utf8_lossy(&bytes).contains("decision_log_unwritten")
    })
    .await;
    let text = String::from_utf8_lossy(&bytes);
    let gap: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["event"] == "decision_log_unwritten")
        .unwrap_or_else(|| panic!("no decision_log_unwritten line in {text}"));
    assert!(gap["data"]["lines"].as_u64().unwrap() >= 2, "{gap}");
    guard.stop().await;
}

/// An agent's arguments that hold the caller's own token are refused before anything else
/// (`invalid_arguments`, the token not quoted), on both labs through rmcp: a read's search
/// and IDs, and a write's message, which Zabbix would have shown every user who sees the
/// problem; and a resource URI holding it is not found without being quoted. Nothing of them
/// reaches the decision log or Zabbix; a read without the token is answered as ever. Before,
/// the decision log kept the search whole, `invalid_arguments` quoted the token back in an
/// ID, "resource not found" in the URI (and rmcp logged it at warn), and the message was sent.
#[tokio::test]
async fn arguments_holding_the_callers_token_are_refused_and_not_logged() {
    for lab in common::labs() {
        let (config, log) = config(&lab, &policy_dir(ALLOW_ALL));
        let guard = start_with(config).await;
        let client = common::client(&guard, &lab.token).await;
        let token = lab.token.as_str();
        // Failure messages show the token as <token>: test output is read by many.
        let hide = |text: String| text.replace(token, "<token>");
        let calls = [
            ("host_get", json!({"search": token})),
            (
                "host_get",
                json!({"search": format!("x {token} y"), "limit": 1}),
            ),
            ("host_get", json!({"hostids": [token]})),
            (
                "problem_annotate",
                json!({"eventids": ["1"], "message": format!("token: {token}")}),
            ),
        ];
        for (tool, args) in calls {
            let result = common::call(&client, tool, args.clone()).await;
            let shown = hide(format!("{tool} {args}: {result:?}"));
            assert_eq!(result.is_error, Some(true), "{shown}");
            let body = common::error_body(&result);
            assert_eq!(body["code"], "invalid_arguments", "{shown}");
            assert!(
                body["message"]
                    .as_str()
                    .unwrap()
                    .contains("caller's own API token"),
                "{shown}"
            );
            assert!(!body.to_string().contains(token), "{shown}");
        }
        let uri = format!("zabbix://host/{token}");
        let refused = client
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .expect_err("no such resource");
        let refused = refused.to_string();
        let shown = hide(refused.clone());
        assert!(!refused.contains(token), "{shown}");
        assert!(refused.contains("caller's own API token"), "{shown}");
        let read = common::read(
            &client,
            "host_get",
            json!({"search": "zzz-none", "limit": 1}),
        )
        .await;
        assert_eq!(read["count"], 0, "{read}");
        let text = common::decision_log_text(&log);
        assert!(
            text.contains("zzz-none"),
            "the read without the token is logged: {}",
            hide(text.clone())
        );
        assert!(!text.contains(token), "{}", hide(text.clone()));
        let calls: Vec<Value> = log_lines(&log)
            .into_iter()
            .filter(|l| l["input"]["phase"] == "call")
            .collect();
        assert_eq!(
            calls.len(),
            1,
            "only the read without the token: {}",
            hide(format!("{calls:?}"))
        );
        let _ = client.cancel().await;
        guard.stop().await;
    }
}
