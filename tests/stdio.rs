//! `zabbix-mcp-guard stdio`: the real binary spawned by a real rmcp client over its
//! stdin/stdout, the caller's token from ZABBIX_API_TOKEN (the environment holds nothing
//! else but PATH), policies deciding, decisions on stderr and never on stdout, and
//! `notifications/tools/list_changed` when the policy set changes.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use rmcp::ServiceExt;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, ServerNotification,
    SubscriptionFilter,
};
use rmcp::service::ClientLifecycleMode;
use rmcp::service::ClientServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const DENY_HOSTGROUP_GET: &str = r#"package zabbix.mcp
import rego.v1
decision := {"allow": false, "reasons": ["hostgroup_get is off for stdio tests"]} if {
    input.phase == "call"
    input.tool.name == "hostgroup_get"
} else := {"allow": true, "reasons": [], "approval": "none"}
"#;

fn policy_dir() -> PathBuf {
    let dir = common::temp_path("stdio-policy");
    std::fs::create_dir_all(&dir).expect("policy dir");
    std::fs::write(dir.join("policy.rego"), DENY_HOSTGROUP_GET).expect("policy");
    dir
}

/// The binary with an empty environment but PATH and, when given, the token.
fn binary(lab: &common::Lab, token: Option<&str>, policies: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_zabbix-mcp-guard"));
    command.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    if let Some(token) = token {
        command.env("ZABBIX_API_TOKEN", token);
    }
    command
        .args(["--frontend-url", &lab.url])
        .arg("--policy-dir")
        .arg(policies)
        .arg("stdio");
    command
}

/// The binary with the viewer's token, its stdin and stdout piped to the test.
fn spawn_piped(lab: &common::Lab, policies: &Path, stderr: impl Into<Stdio>) -> common::Running {
    common::Running(
        binary(lab, Some(&lab.token_viewer), policies)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn the sidecar"),
    )
}

#[tokio::test]
async fn a_spawned_rmcp_client_calls_tools_over_stdio() {
    common::init();
    let lab = common::lab(7);
    let stderr_path = common::temp_path("stdio.stderr");
    let policies = policy_dir();
    let mut child = spawn_piped(
        &lab,
        &policies,
        std::fs::File::create(&stderr_path).expect("stderr file"),
    );
    let to_child = tokio::fs::File::from_std(std::fs::File::from(std::os::fd::OwnedFd::from(
        child.0.stdin.take().expect("stdin"),
    )));
    let mut from_child = tokio::fs::File::from_std(std::fs::File::from(
        std::os::fd::OwnedFd::from(child.0.stdout.take().expect("stdout")),
    ));
    // Everything the child writes to stdout is kept, then passed on to the client.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (client_side, mut relay) = tokio::io::duplex(1 << 20);
    let kept = seen.clone();
    let relay_task = tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        loop {
            let n = from_child.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            kept.lock().unwrap().extend_from_slice(&buf[..n]);
            if relay.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    });
    let (client_read, _unused_write) = tokio::io::split(client_side);
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("stdio-test-agent", "1.0"),
    );
    let client = info
        .serve((client_read, to_child))
        .await
        .expect("the MCP client initializes over stdio");

    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(names.contains(&"host_get"), "{names:?}");

    let hosts = common::read(&client, "host_get", json!({"limit": 50})).await;
    assert!(
        common::names(&hosts, "host").contains(&"mcp-web-01".to_owned()),
        "{hosts}"
    );
    let denied = common::tool_error(&client, "hostgroup_get", json!({})).await;
    assert!(
        denied["message"]
            .as_str()
            .unwrap_or_default()
            .contains("hostgroup_get is off for stdio tests"),
        "{denied}"
    );
    let decision_id = denied["decision_id"]
        .as_str()
        .expect("decision_id")
        .to_owned();

    // One session for the process's life: it hears that the tool list may have changed
    // when a policy set of another revision comes in.
    let announced = client
        .peer_info()
        .and_then(|info| info.capabilities.tools.as_ref()?.list_changed);
    assert_eq!(announced, Some(true), "tools.listChanged");
    let rego = policies.join("policy.rego");
    std::fs::write(&rego, format!("{DENY_HOSTGROUP_GET}\n# revised\n")).expect("policy changed");
    common::wait_until(
        "notifications/tools/list_changed on stdout",
        std::time::Duration::from_secs(30),
        async || {
            String::from_utf8_lossy(&seen.lock().unwrap())
                .contains(r#""method":"notifications/tools/list_changed""#)
        },
    )
    .await;

    // Closing stdin ends the session; the process exits cleanly after flushing decisions.
    client.cancel().await.expect("client closes");
    let status = tokio::task::spawn_blocking(move || child.0.wait())
        .await
        .expect("wait thread")
        .expect("child exits");
    assert!(status.success(), "{status}");
    relay_task.await.expect("relay");

    // stdout held JSON-RPC messages only.
    let stdout = String::from_utf8(seen.lock().unwrap().clone()).expect("UTF-8 stdout");
    assert!(!stdout.is_empty());
    for line in stdout.lines() {
        let message: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a non-JSON line on stdout ({e}): {line}"));
        assert_eq!(
            message["jsonrpc"], "2.0",
            "not an MCP message on stdout: {line}"
        );
        assert!(
            message.get("decision_id").is_none(),
            "a decision line on stdout: {line}"
        );
    }

    // The decisions went to stderr with the logs; the token appears nowhere.
    let stderr = std::fs::read_to_string(&stderr_path).expect("stderr");
    let decisions: Vec<Value> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("decision_id").is_some())
        .collect();
    assert!(
        decisions
            .iter()
            .any(|d| d["decision_id"] == decision_id.as_str()),
        "the denial is not in the decision log on stderr:\n{stderr}"
    );
    assert!(!stderr.contains(&lab.token_viewer) && !stdout.contains(&lab.token_viewer));
}

#[test]
fn without_a_usable_token_stdio_does_not_start() {
    let lab = common::lab(7);
    let policies = policy_dir();
    let out = binary(&lab, None, &policies)
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ZABBIX_API_TOKEN is not set"), "{stderr}");

    let out = binary(&lab, Some(&"0".repeat(64)), &policies)
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not accepted by Zabbix"), "{stderr}");
}

/// The official MCP Python SDK (PyPI `mcp`, installed under /opt/mcp-python by
/// `start-zabbix.sh all`; `MCP_PYTHON` names another interpreter) spawns the binary.
#[test]
fn the_python_sdk_spawns_stdio_and_calls_a_tool() {
    let lab = common::lab(7);
    let summary = common::python_sdk_blocking(
        "stdio_python.py",
        &[
            env!("CARGO_BIN_EXE_zabbix-mcp-guard"),
            &lab.url,
            &lab.token_viewer,
        ],
    );
    assert_eq!(summary["server"], "zabbix-mcp-guard");
    assert!(
        summary["hosts"]
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h == "mcp-web-01")),
        "{summary}"
    );
}

/// A request whose params are not the method's, written as raw lines: the same `-32602`
/// naming the fault as over HTTP, not "method not found".
#[test]
fn unreadable_params_are_invalid_params_over_stdio() {
    use std::io::{BufRead, BufReader, Write};

    let lab = common::lab(7);
    let policies = policy_dir();
    let mut child = spawn_piped(&lab, &policies, Stdio::null());
    let mut stdin = child.0.stdin.take().expect("stdin");
    let stdout = child.0.stdout.take().expect("stdout");
    for line in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-lines", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call"}),
    ] {
        writeln!(stdin, "{line}").expect("written");
    }
    // Read on a thread of its own: a missing answer fails the test instead of hanging it.
    let (answers, arrived) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] == 2 {
                let _ = answers.send(message);
                return;
            }
        }
    });
    let answer = arrived
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("an answer to id 2");
    drop(stdin);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "invalid params for tools/call: missing field `params`"
    );
}

#[tokio::test]
async fn a_2026_client_over_stdio_hears_changes_on_its_listen_stream() {
    common::init();
    let lab = common::lab(7);
    let policies = policy_dir();
    let mut child = spawn_piped(&lab, &policies, Stdio::null());
    let to_child = tokio::fs::File::from_std(std::fs::File::from(std::os::fd::OwnedFd::from(
        child.0.stdin.take().expect("stdin"),
    )));
    let from_child = tokio::fs::File::from_std(std::fs::File::from(std::os::fd::OwnedFd::from(
        child.0.stdout.take().expect("stdout"),
    )));
    let client = common::client_info(ProtocolVersion::V_2026_07_28)
        .serve_with_lifecycle(
            (from_child, to_child),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("the MCP client discovers over stdio");
    let mut subscription = client
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("listen");
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));

    let rego = policies.join("policy.rego");
    std::fs::write(&rego, format!("{DENY_HOSTGROUP_GET}\n# revised\n")).expect("policy changed");
    let heard = tokio::time::timeout(std::time::Duration::from_secs(30), subscription.next())
        .await
        .expect("a notification within 30 s")
        .expect("the stream reads");
    assert!(
        matches!(
            heard,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{heard:?}"
    );
    subscription
        .cancel()
        .await
        .expect("the client ends its stream");
    client.cancel().await.expect("client closes");
    let status = tokio::task::spawn_blocking(move || child.0.wait())
        .await
        .expect("join")
        .expect("wait");
    assert!(status.success(), "{status}");
}

/// `DecisionLog` and `LogFile` paths that name stdout (`/dev/stdout`, as a file shared with
/// `serve` in a container often says) must not write into the MCP stream: under stdio they
/// go to stderr, as `DecisionLog=stdout` does. Before, decision and log lines were
/// interleaved with the JSON-RPC messages on stdout (stub Zabbix, no lab).
#[tokio::test]
async fn log_paths_naming_stdout_stay_out_of_the_mcp_stream() {
    let (stub_url, _stub) = common::stub::start(std::time::Duration::ZERO).await;
    for (args, on_stderr) in [
        (
            ["--decision-log", "/dev/stdout"].as_slice(),
            "\"decision_id\"",
        ),
        (
            ["--log-type", "file", "--log-file", "/dev/stdout"].as_slice(),
            "policy set loaded",
        ),
    ] {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let url = stub_url.clone();
        // Blocking pipe work off the runtime, which serves the stub meanwhile.
        let (stdout, stderr) =
            tokio::task::spawn_blocking(move || host_get_over_stdio(&url, &args))
                .await
                .expect("the exchange");
        assert!(
            stdout.iter().any(|l| l.contains("\"id\":2")),
            "no answer: {stdout:?}\n{stderr}"
        );
        for line in &stdout {
            let message: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a non-JSON line on stdout ({e}): {line}"));
            assert_eq!(message["jsonrpc"], "2.0", "not an MCP message: {line}");
        }
        assert!(
            stderr.contains(on_stderr),
            "{on_stderr} on stderr: {stderr}"
        );
    }
}

/// Runs the binary under stdio against `url` with `args`, makes one `host_get` call as
/// raw lines, closes stdin and returns stdout's lines and stderr once it exits.
fn host_get_over_stdio(url: &str, args: &[String]) -> (Vec<String>, String) {
    use std::io::{BufRead, BufReader, Read, Write};

    let mut command = Command::new(env!("CARGO_BIN_EXE_zabbix-mcp-guard"));
    command.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
        .env("ZABBIX_API_TOKEN", "stub-token")
        .args(["--frontend-url", url])
        .args(args)
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = common::Running(command.spawn().expect("spawn the sidecar"));
    let mut stdin = child.0.stdin.take().expect("stdin");
    let stdout = child.0.stdout.take().expect("stdout");
    let mut stderr = child.0.stderr.take().expect("stderr");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    for line in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-lines", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "host_get", "arguments": {}}}),
    ] {
        // A sidecar that refused to start has closed its stdin: stderr says why.
        let _ = writeln!(stdin, "{line}");
    }
    let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let answered = line.contains("\"id\":2");
        seen.push(line);
        if answered {
            break;
        }
    }
    // Closing stdin ends the session; the decision log is flushed at the exit.
    drop(stdin);
    seen.extend(lines);
    (seen, errors.join().expect("stderr reader"))
}
