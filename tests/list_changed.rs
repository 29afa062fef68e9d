//! `notifications/tools/list_changed` from the real binary against the 7.0 lab, heard by
//! the official MCP Python SDK holding a stateful session: announced as a capability,
//! sent when a reload changes the tool rules and when a policy set of another revision is
//! installed, and after it the new list is what the client lists; the client's `DELETE`
//! at the end reads as success. A stateless sidecar does not announce it. A session that
//! repeats `notifications/initialized` is listed, and told, once.

mod common;

use std::io::{BufRead, BufReader, Lines};
use std::path::{Path, PathBuf};
use std::process::{ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use zabbix_mcp_guard::config::SessionMode;

/// The real binary from a file of its own, against the 7.0 lab.
struct Sidecar {
    lab: common::Lab,
    dir: PathBuf,
    policies: PathBuf,
    conf: PathBuf,
    port: u16,
    process: common::Running,
}

impl Sidecar {
    /// Started with `extra` lines in its file, and listening.
    fn start(name: &str, extra: &str) -> Sidecar {
        let lab = common::lab(7);
        let dir = common::scratch_dir(name);
        let policies = common::policy_copy(&dir);
        let conf = dir.join("guard.conf");
        let port = common::free_port();
        write_config(&conf, &lab, port, &policies, extra);
        let child = Command::new(env!("CARGO_BIN_EXE_zabbix-mcp-guard"))
            .arg("--config")
            .arg(&conf)
            .env_remove("RUST_LOG")
            .spawn()
            .expect("the binary starts");
        let process = common::Running(child);
        common::wait_until_blocking("the sidecar to listen", Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Sidecar {
            lab,
            dir,
            policies,
            conf,
            port,
            process,
        }
    }

    /// Its file rewritten with `extra` lines instead.
    fn configure(&self, extra: &str) {
        write_config(&self.conf, &self.lab, self.port, &self.policies, extra);
    }
}

/// The sidecar's file: the lab, loopback, logs to files, `PolicyDir`, plus `extra` lines.
fn write_config(path: &Path, lab: &common::Lab, port: u16, policies: &Path, extra: &str) {
    let dir = path.parent().expect("a directory");
    let text = format!(
        "FrontendURL={url}\nListenIP=127.0.0.1\nListenPort={port}\nAllowedIP=127.0.0.1\n\
         LogType=file\nLogFile={dir}/guard.log\nDecisionLog={dir}/decisions.log\n\
         PolicyDir={policies}\n{extra}",
        url = lab.url,
        dir = dir.display(),
        policies = policies.display(),
    );
    std::fs::write(path, text).expect("config written");
}

/// The Python SDK holding one session that waits for `notifications` notifications; its
/// lines as they come.
fn python_session(
    port: u16,
    token: &str,
    notifications: u32,
    stderr: &Path,
) -> (common::Running, Lines<BufReader<ChildStdout>>) {
    let python =
        std::env::var("MCP_PYTHON").unwrap_or_else(|_| "/opt/mcp-python/bin/python".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/deploy/list_changed_python.py");
    let mut child = Command::new(&python)
        .arg(script)
        .args([
            &format!("http://127.0.0.1:{port}/mcp"),
            token,
            &notifications.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr).expect("stderr file"))
        .spawn()
        .unwrap_or_else(|e| panic!("{python} runs ({e}); run deploy/lab/start-zabbix.sh all"));
    let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    (common::Running(child), lines)
}

/// The client's next line (it waits for the server at most 60 s itself, then fails).
fn next(lines: &mut Lines<BufReader<ChildStdout>>) -> Value {
    let line = lines
        .next()
        .expect("the client ended early (its stderr says why)")
        .expect("a line");
    serde_json::from_str(&line).expect("JSON")
}

#[test]
fn a_stateful_session_is_told_when_its_tool_list_changes() {
    let guard = Sidecar::start("list-changed", "SessionMode=stateful\n");
    let stderr = guard.dir.join("client.stderr");
    let (mut client, mut lines) = python_session(guard.port, &guard.lab.token, 2, &stderr);
    let first = next(&mut lines);
    assert_eq!(first["list_changed"], true, "{first}");
    assert!(
        common::listed_tools(&first).contains(&"host_get"),
        "{first}"
    );

    // A reload that withdraws a tool: the session is told, and lists it no more.
    guard.configure("SessionMode=stateful\nDenyTool=host_get\n");
    common::signal(&guard.process.0, "HUP");
    let second = next(&mut lines);
    assert_eq!(second["notified"], 1, "{second}");
    assert!(
        !common::listed_tools(&second).contains(&"host_get"),
        "{second}"
    );

    // A policy set of another revision, picked up by the directory watcher.
    let rego = guard.policies.join("default.rego");
    let text = std::fs::read_to_string(&rego).expect("policy");
    std::fs::write(&rego, format!("{text}\n# revised\n")).expect("policy changed");
    let third = next(&mut lines);
    assert_eq!(third["notified"], 2, "{third}");
    assert_eq!(
        common::listed_tools(&third),
        common::listed_tools(&second),
        "the same tools, told again"
    );

    let status = client.0.wait().expect("the client ends");
    assert!(status.success(), "{status}");
    // It ended its session (DELETE) and read the answer as success.
    let stderr = std::fs::read_to_string(&stderr).expect("stderr");
    assert!(!stderr.contains("Session termination failed"), "{stderr}");
    let log = std::fs::read_to_string(guard.dir.join("guard.log")).expect("log");
    assert_eq!(
        log.matches("tool list change announced").count(),
        2,
        "one announcement per change: {log}"
    );
}

#[test]
fn a_stateless_sidecar_does_not_announce_list_changes() {
    let guard = Sidecar::start("list-changed-stateless", "SessionMode=stateless\n");
    let stderr = guard.dir.join("client.stderr");
    let (mut client, mut lines) = python_session(guard.port, &guard.lab.token, 0, &stderr);
    let first = next(&mut lines);
    assert_eq!(first["list_changed"], false, "{first}");
    assert!(client.0.wait().expect("the client ends").success());
}

/// A session that sends `notifications/initialized` again and again is listed once, and an
/// announcement tells it once. Before, each notification listed it again: the list grew
/// without bound and an announcement started one send per entry.
#[tokio::test]
async fn a_session_initialized_again_and_again_is_listed_and_told_once() {
    let (zabbix, _stub) = common::stub::start(Duration::ZERO).await;
    let mut config = common::config_for(&zabbix);
    config.session_mode = SessionMode::Stateful;
    let guard = common::start_with(config).await;
    let http = reqwest::Client::new();
    let post = |session: Option<&str>, body: Value| {
        let mut request = http
            .post(&guard.url)
            .bearer_auth("stub-token")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body);
        if let Some(id) = session {
            request = request.header("mcp-session-id", id);
        }
        request.send()
    };
    let created = post(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "list-changed-test", "version": "1"}}}),
    )
    .await
    .expect("initialize");
    assert_eq!(created.status(), 200);
    let session = created.headers()["mcp-session-id"]
        .to_str()
        .expect("a session id")
        .to_owned();
    drop(created);
    let list = &guard.app().list_changed;
    for _ in 0..50 {
        let sent = post(
            Some(&session),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await
        .expect("initialized");
        assert_eq!(sent.status(), 202);
    }
    common::wait_until(
        "the session to be listed",
        Duration::from_secs(10),
        async || list.sessions_listed() >= 1,
    )
    .await;
    // A request answered after them: the session has taken in every notification sent
    // before it (each is handled in a task of its own, started in order).
    let pong = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    )
    .await
    .expect("ping");
    assert_eq!(pong.status(), 200);
    pong.text().await.expect("the ping answered");
    assert_eq!(list.sessions_listed(), 1, "listed once");
    // The session's stream, then an announcement (what a policy change starts).
    let stream = http
        .get(&guard.url)
        .bearer_auth("stub-token")
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("the session's stream");
    assert_eq!(stream.status(), 200);
    assert_eq!(list.announce().await, 1, "told once");
    guard.stop().await;
}
