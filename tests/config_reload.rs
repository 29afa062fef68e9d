//! `systemctl reload` (SIGHUP) of the real binary against the 7.0 lab: the configuration
//! file is read again; `AllowedIP`, the exposure rules, `DebugLevel` and `RateLimit` take
//! effect without a restart, for the official MCP Python SDK and for rmcp on a connection opened before;
//! a parameter that needs a restart is named; a file that does not load changes nothing.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const WAIT: Duration = Duration::from_secs(20);

/// The sidecar's file: the lab, loopback listeners, logs to files, plus `extra` lines.
fn write_config(path: &Path, lab: &common::Lab, ports: (u16, u16), dir: &Path, extra: &str) {
    let text = format!(
        "FrontendURL={url}\nListenIP=127.0.0.1\nListenPort={mcp}\n\
         StatusListenIP=127.0.0.1\nStatusListenPort={status}\n\
         LogType=file\nLogFile={dir}/guard.log\nDecisionLog={dir}/decisions.log\n{extra}",
        url = lab.url,
        mcp = ports.0,
        status = ports.1,
        dir = dir.display(),
    );
    // Written aside and renamed, as an editor or a configuration manager does.
    let aside = path.with_extension("new");
    std::fs::write(&aside, text).expect("config written");
    std::fs::rename(&aside, path).expect("config in place");
}

fn log_count(dir: &Path, what: &str) -> usize {
    std::fs::read_to_string(dir.join("guard.log"))
        .unwrap_or_default()
        .matches(what)
        .count()
}

/// The binary on the configuration file `conf`.
fn start(conf: &Path) -> common::Running {
    common::Running(
        std::process::Command::new(env!("CARGO_BIN_EXE_zabbix-mcp-guard"))
            .arg("-c")
            .arg(conf)
            .env_remove("RUST_LOG")
            .spawn()
            .expect("the binary starts"),
    )
}

/// Waits for the `n`th log line saying `what`.
async fn logged(dir: &Path, what: &str, n: usize) {
    common::wait_until(&format!("{what} (#{n}) in the log"), WAIT, async || {
        log_count(dir, what) >= n
    })
    .await;
}

/// One HTTP/1.1 `tools/list` on `stream` (kept open); the status code.
async fn list_over(stream: &mut TcpStream, port: u16, token: &str) -> Option<u16> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer);
        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .and_then(|v| v.trim().parse().ok())?;
            if rest.len() >= length {
                return head.split(' ').nth(1)?.parse().ok();
            }
        }
    }
}

/// A connection from `source` (a loopback address) to the MCP port.
async fn connect_from(source: &str, port: u16) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(source.parse().expect("ip"), 0))
        .expect("bind the source address");
    socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .expect("connect")
}

/// Whether the peer closed `stream` (EOF or reset) without sending anything, within 5 s:
/// well before the sidecar would close a quiet connection itself (`HeaderTimeout`, 10 s).
async fn closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

async fn python(url: &str, token: &str, tools: &[&str]) -> Value {
    let mut args = vec![url.to_owned(), token.to_owned()];
    args.extend(tools.iter().map(|t| (*t).to_owned()));
    common::python_sdk("reload_python.py", args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_applies_allowed_ip_tool_rules_and_rate_limit_without_a_restart() {
    common::init();
    let lab = common::lab(7);
    let dir = common::scratch_dir("config-reload");
    let conf = dir.join("guard.conf");
    let ports = (common::free_port(), common::free_port());
    let write = |extra: &str| write_config(&conf, &lab, ports, &dir, extra);
    write("AllowedIP=127.0.0.1,127.0.0.2\nTimeout=10\n");
    let mut child = start(&conf);
    logged(&dir, "listening", 2).await;
    let base = format!("http://127.0.0.1:{}", ports.0);
    let status = format!("http://127.0.0.1:{}", ports.1);
    let url = format!("{base}/mcp");

    // Before: every tool, calls go through.
    let before = python(&url, &lab.token, &["host_get", "problem_get"]).await;
    assert!(
        common::listed_tools(&before).contains(&"host_get"),
        "{before}"
    );
    assert_eq!(before["calls"][0]["ok"], true, "{before}");
    let guard = common::Guard::external(&base);
    let rmcp = common::client(&guard, &lab.token).await;
    common::read(&rmcp, "host_get", json!({"limit": 1})).await;
    let mut kept = connect_from("127.0.0.2", ports.0).await;
    assert_eq!(list_over(&mut kept, ports.0, &lab.token).await, Some(200));

    // The reload: 127.0.0.2 out, host_get denied, one call a minute, debug lines, and a
    // Timeout that waits for a restart.
    write("AllowedIP=127.0.0.1\nDenyTool=host_get\nRateLimit=1/60\nTimeout=20\nDebugLevel=4\n");
    common::signal(&child.0, "HUP");
    logged(&dir, "configuration reloaded", 1).await;
    let text = std::fs::read_to_string(dir.join("guard.log")).expect("log");
    assert!(
        text.contains("applied=AllowedIP,DenyTool,DebugLevel,RateLimit")
            && text.contains("restart_required=Timeout"),
        "{text}"
    );
    assert!(
        text.contains("configuration changes that take effect only at a restart"),
        "{text}"
    );

    // The connection from 127.0.0.2 opened before is closed, a new one refused at accept.
    assert!(closed(&mut kept).await, "the kept connection is closed");
    let mut fresh = connect_from("127.0.0.2", ports.0).await;
    assert_eq!(list_over(&mut fresh, ports.0, &lab.token).await, None);
    logged(
        &dir,
        "connection closed: its address is no longer allowed",
        1,
    )
    .await;

    // The Python SDK: host_get is gone from the list and unknown by name; problem_get's
    // first call goes through, its second is over RateLimit.
    let after = python(
        &url,
        &lab.token,
        &["host_get", "problem_get", "problem_get"],
    )
    .await;
    assert!(
        !common::listed_tools(&after).contains(&"host_get"),
        "{after}"
    );
    assert!(
        common::listed_tools(&after).contains(&"problem_get"),
        "{after}"
    );
    assert_eq!(after["calls"][0]["rpc_error"], -32602, "{after}");
    assert_eq!(
        after["calls"][0]["message"], "unknown tool: host_get",
        "{after}"
    );
    assert_eq!(after["calls"][1]["ok"], true, "{after}");
    assert_eq!(after["calls"][2]["code"], "rate_limited", "{after}");
    // rmcp, on the connection it opened before the reload: the same rules.
    let tools = rmcp.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().all(|t| t.name != "host_get"));
    let error = rmcp
        .call_tool(rmcp::model::CallToolRequestParams::new("host_get"))
        .await
        .expect_err("host_get is unknown now");
    assert!(
        error.to_string().contains("unknown tool: host_get"),
        "{error}"
    );

    // DebugLevel=4: debug lines from the reload on (none before it).
    let text = std::fs::read_to_string(dir.join("guard.log")).expect("log");
    let (before_reload, after_reload) = text
        .split_once("configuration reloaded")
        .expect("the reload's line");
    assert!(!before_reload.contains(" DEBUG "), "{before_reload}");
    assert!(after_reload.contains(" DEBUG "), "{after_reload}");

    let metrics = common::metrics::scrape(&status).await;
    assert_eq!(metrics.get("config_reloads_total{result=\"ok\"}"), 1.0);
    assert_eq!(metrics.get("config_restart_required"), 1.0);

    // A file that does not load: nothing of it applies, not even its valid AllowedIP.
    write("AllowedIP=127.0.0.1,127.0.0.2\nDenyToolRegexp=(unclosed\n");
    common::signal(&child.0, "HUP");
    logged(&dir, "configuration reload failed", 1).await;
    let text = std::fs::read_to_string(dir.join("guard.log")).expect("log");
    assert!(text.contains("DenyToolRegexp"), "{text}");
    let mut refused = connect_from("127.0.0.2", ports.0).await;
    assert_eq!(list_over(&mut refused, ports.0, &lab.token).await, None);
    let tools = rmcp.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().all(|t| t.name != "host_get"));
    let metrics = common::metrics::scrape(&status).await;
    assert_eq!(metrics.get("config_reloads_total{result=\"failed\"}"), 1.0);

    // Back to the first file: everything as at start, nothing waiting for a restart.
    write("AllowedIP=127.0.0.1,127.0.0.2\nTimeout=10\n");
    common::signal(&child.0, "HUP");
    logged(&dir, "configuration reloaded", 2).await;
    let mut back = connect_from("127.0.0.2", ports.0).await;
    assert_eq!(list_over(&mut back, ports.0, &lab.token).await, Some(200));
    common::read(&rmcp, "host_get", json!({"limit": 1})).await;
    let metrics = common::metrics::scrape(&status).await;
    assert_eq!(metrics.get("config_restart_required"), 0.0);

    let _ = rmcp.cancel().await;
    let exited = common::terminate(&mut child.0).expect("SIGTERM and exit");
    assert!(exited.success(), "{exited}");
    let text = std::fs::read_to_string(dir.join("guard.log")).expect("log");
    assert!(!text.contains(&lab.token));
}

/// A reload changes the configuration only if the policy set loads: a `DenyTool` dropped
/// together with a policy change that does not compile keeps the tool denied, and the
/// configuration applies once the policy is fixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_whose_policy_does_not_load_applies_no_configuration() {
    common::init();
    let lab = common::lab(7);
    let dir = common::scratch_dir("config-reload-held");
    let policies = dir.join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    let allow_all = "package zabbix.mcp\nimport rego.v1\n\
                     decision := {\"allow\": true, \"reasons\": [], \"approval\": \"none\"}\n";
    std::fs::write(policies.join("policy.rego"), allow_all).unwrap();
    let conf = dir.join("guard.conf");
    let ports = (common::free_port(), common::free_port());
    let policy_dir = format!("AllowedIP=127.0.0.1\nPolicyDir={}\n", policies.display());
    let write =
        |extra: &str| write_config(&conf, &lab, ports, &dir, &format!("{policy_dir}{extra}"));
    write("DenyTool=host_get\n");
    let mut child = start(&conf);
    logged(&dir, "listening", 2).await;
    let guard = common::Guard::external(&format!("http://127.0.0.1:{}", ports.0));
    let rmcp = common::client(&guard, &lab.token).await;
    let listed = async || {
        let tools = rmcp.list_all_tools().await.expect("tools/list");
        tools.iter().any(|t| t.name == "host_get")
    };
    assert!(!listed().await, "denied by DenyTool");

    // DenyTool dropped, and a policy that does not compile.
    std::fs::write(
        policies.join("policy.rego"),
        "package zabbix.mcp\ndecision := {",
    )
    .unwrap();
    write("");
    common::signal(&child.0, "HUP");
    logged(&dir, "configuration reload failed", 1).await;
    let text = std::fs::read_to_string(dir.join("guard.log")).expect("log");
    assert!(
        text.contains("not applied: the policy set does not load"),
        "{text}"
    );
    assert!(
        !listed().await,
        "still denied: nothing of the reload applied"
    );

    // The policy fixed: the same configuration applies.
    std::fs::write(policies.join("policy.rego"), allow_all).unwrap();
    common::signal(&child.0, "HUP");
    logged(&dir, "configuration reloaded", 1).await;
    assert!(listed().await, "DenyTool gone");

    let _ = rmcp.cancel().await;
    let exited = common::terminate(&mut child.0).expect("SIGTERM and exit");
    assert!(exited.success(), "{exited}");
}
