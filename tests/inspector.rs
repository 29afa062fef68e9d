//! The MCP Inspector CLI (TypeScript SDK), a client nobody here wrote, against the sidecar on
//! the 7.0 lab: a success and every kind of tool error must reach the person as the error
//! (code, message, reasons, decision_id), not as an output-schema validation failure.
//!
//! The CLI is installed by `deploy/lab/start-zabbix.sh` (`install_inspector`) under
//! /opt/mcp-inspector; `MCP_INSPECTOR` names another binary.

mod common;

use std::path::PathBuf;

use common::{Guard, Lab, config_for, seed_id, start_with, temp_path};
use serde_json::{Value, json};

const DEFAULT_INSPECTOR: &str = "/opt/mcp-inspector/node_modules/.bin/mcp-inspector";

fn inspector_bin() -> PathBuf {
    let path = std::env::var_os("MCP_INSPECTOR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_INSPECTOR));
    assert!(
        path.exists(),
        "the MCP Inspector CLI is not installed at {}; run `bash deploy/lab/start-zabbix.sh all` first",
        path.display()
    );
    path
}

/// What the Inspector CLI printed for one tools/call, and how it exited.
struct Printed {
    success: bool,
    stdout: String,
    stderr: String,
}

impl Printed {
    /// The tool result the CLI printed as JSON (it prints the whole CallToolResult).
    fn result(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "the Inspector printed no JSON result ({e}); stdout: {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    /// The error body a person reads: the JSON document in the result's text block.
    fn error_body(&self) -> Value {
        let result = self.result();
        assert_eq!(result["isError"], true, "{}", self.stdout);
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text block: {}", self.stdout));
        serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("the text block is not the JSON error body ({e}): {text}"))
    }
}

/// Runs `mcp-inspector --cli <url> --method tools/call` as a subprocess.
async fn call(guard: &Guard, token: &str, tool: &str, args: &[(&str, String)]) -> Printed {
    let mut command = std::process::Command::new(inspector_bin());
    command
        .arg("--cli")
        .arg(&guard.url)
        .args(["--transport", "http"])
        .arg("--header")
        .arg(format!("Authorization: Bearer {token}"))
        .args(["--method", "tools/call", "--tool-name", tool])
        // Nothing of the person's own Inspector setup may leak in.
        .env("MCP_CATALOG_PATH", temp_path("inspector-catalog.json"))
        .env("HOME", temp_path("inspector-home").parent().expect("dir"));
    for (key, value) in args {
        command.arg("--tool-arg").arg(format!("{key}={value}"));
    }
    // The sidecar serves on this runtime while the CLI runs on a blocking thread.
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("the Inspector thread")
        .expect("the Inspector CLI runs");
    Printed {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn assert_no_schema_error(printed: &Printed) {
    for text in [&printed.stdout, &printed.stderr] {
        assert!(
            !text.contains("must have required property") && !text.contains("output schema"),
            "the Inspector reported a schema violation instead of the result:\n{}\n{}",
            printed.stdout,
            printed.stderr
        );
    }
}

/// A policy directory that denies host_get calls without `hostids` (the tool stays
/// offered: the Inspector calls only listed tools) and allows everything else.
fn scoped_host_get_policy() -> PathBuf {
    let dir = temp_path("policy");
    std::fs::create_dir_all(&dir).expect("policy dir");
    let rego = r#"package zabbix.mcp
import rego.v1
decision := {"allow": false, "reasons": ["host_get needs hostids in this test"]} if {
    input.phase == "call"
    input.tool.name == "host_get"
    not input.arguments.hostids
} else := {"allow": true, "reasons": [], "approval": "none"}
"#;
    std::fs::write(dir.join("policy.rego"), rego).expect("policy file");
    dir
}

async fn start(lab: &Lab, policy_dir: Option<PathBuf>) -> Guard {
    let mut config = config_for(&lab.url);
    if let Some(dir) = policy_dir {
        config.policy_dir = Some(dir);
    }
    start_with(config).await
}

#[tokio::test]
async fn inspector_shows_a_read_result() {
    let lab = common::lab(7);
    let guard = start(&lab, None).await;
    let printed = call(
        &guard,
        &lab.token,
        "host_get",
        &[("search", "mcp-web-01".into())],
    )
    .await;
    assert_no_schema_error(&printed);
    assert!(printed.success, "{}\n{}", printed.stdout, printed.stderr);
    let result = printed.result();
    assert_ne!(result["isError"], true, "{result}");
    let envelope = &result["structuredContent"];
    assert_eq!(envelope["count"], 1, "{result}");
    assert_eq!(envelope["results"][0]["host"], "mcp-web-01", "{result}");
    guard.stop().await;
}

#[tokio::test]
async fn inspector_shows_an_argument_error() {
    let lab = common::lab(7);
    let guard = start(&lab, None).await;
    let printed = call(&guard, &lab.token, "host_get", &[("limit", "0".into())]).await;
    assert_no_schema_error(&printed);
    let body = printed.error_body();
    assert_eq!(body["code"], "invalid_arguments", "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("limit must be between 1 and 1000, got 0")),
        "{body}"
    );
    guard.stop().await;
}

#[tokio::test]
async fn inspector_shows_a_policy_denial_with_reasons_and_decision_id() {
    let lab = common::lab(7);
    let guard = start(&lab, Some(scoped_host_get_policy())).await;
    let printed = call(&guard, &lab.token, "host_get", &[("limit", "1".into())]).await;
    assert_no_schema_error(&printed);
    let body = printed.error_body();
    assert_eq!(body["code"], "denied", "{body}");
    assert_eq!(
        body["data"]["reasons"],
        json!(["host_get needs hostids in this test"]),
        "{body}"
    );
    let id = body["decision_id"].as_str().unwrap_or_default();
    assert_eq!(id.len(), 36, "a decision_id (UUID) is shown: {body}");
    assert!(printed.stdout.contains(id));
    guard.stop().await;
}

#[tokio::test]
async fn inspector_shows_zabbix_errors_of_reads_and_writes() {
    let lab = common::lab(7);
    let guard = start(&lab, Some(scoped_host_get_policy())).await;
    // A read: an ID beyond Zabbix's range is Zabbix's own error.
    let printed = call(
        &guard,
        &lab.token,
        "item_get",
        &[("hostids", r#"["99999999999999999999"]"#.into())],
    )
    .await;
    assert_no_schema_error(&printed);
    let body = printed.error_body();
    assert_eq!(body["code"], "zabbix_error", "{body}");
    assert!(body["data"]["code"].is_i64(), "{body}");
    assert!(body["data"]["message"].is_string(), "{body}");
    assert!(body["decision_id"].is_string(), "{body}");

    // A write (no output schema): Zabbix refuses a second maintenance of the same name.
    let host = seed_id(&lab, "hosts", "mcp-web-01");
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let name = format!("mcp-inspector-dup-{}-{since}", std::process::id());
    let args = [
        ("name", name),
        ("hostids", json!([host]).to_string()),
        ("active_since", since.to_string()),
        ("active_till", (since + 3600).to_string()),
    ];
    let created = call(&guard, &lab.token, "maintenance_create", &args).await;
    let id = created.result()["structuredContent"]["maintenanceids"][0]
        .as_str()
        .unwrap_or_else(|| panic!("created: {}", created.stdout))
        .to_owned();
    let printed = call(&guard, &lab.token, "maintenance_create", &args).await;
    let deleted = call(
        &guard,
        &lab.token,
        "maintenance_delete",
        &[("maintenanceids", json!([id]).to_string())],
    )
    .await;
    assert_no_schema_error(&printed);
    assert_no_schema_error(&deleted);
    let body = printed.error_body();
    assert_eq!(body["code"], "zabbix_error", "{body}");
    assert!(body["data"]["message"].is_string(), "{body}");
    guard.stop().await;
}

#[tokio::test]
async fn inspector_shows_write_results() {
    let lab = common::lab(7);
    let guard = start(&lab, Some(scoped_host_get_policy())).await;
    let web = seed_id(&lab, "hosts", "mcp-web-01");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let name = format!("mcp-inspector-{}-{now}", std::process::id());
    let printed = call(
        &guard,
        &lab.token,
        "maintenance_create",
        &[
            ("name", name.clone()),
            ("active_since", now.to_string()),
            ("active_till", (now + 3600).to_string()),
            ("hostids", json!([web]).to_string()),
        ],
    )
    .await;
    assert_no_schema_error(&printed);
    assert!(printed.success, "{}\n{}", printed.stdout, printed.stderr);
    let result = printed.result();
    assert_ne!(result["isError"], true, "{result}");
    let id = result["structuredContent"]["maintenanceids"][0]
        .as_str()
        .unwrap_or_else(|| panic!("Zabbix's result: {result}"))
        .to_owned();

    let printed = call(
        &guard,
        &lab.token,
        "maintenance_delete",
        &[("maintenanceids", json!([id]).to_string())],
    )
    .await;
    assert_no_schema_error(&printed);
    let result = printed.result();
    assert_eq!(
        result["structuredContent"]["maintenanceids"],
        json!([id]),
        "{result}"
    );
    guard.stop().await;
}

/// A policy directory whose writes need `approval` ("required" or "page").
fn write_approval_policy(approval: &str) -> PathBuf {
    let dir = temp_path("policy");
    std::fs::create_dir_all(&dir).expect("policy dir");
    let page = if approval == "page" {
        r#", "approvers": {"usrgrps": ["Zabbix administrators"], "distinct_from_caller": false}"#
    } else {
        ""
    };
    let rego = format!(
        "package zabbix.mcp\nimport rego.v1\n\
         decision := {{\"allow\": true, \"reasons\": [], \"approval\": \"{approval}\"{page}}} \
         if input.tool.kind == \"write\"\n\
         else := {{\"allow\": true, \"reasons\": [], \"approval\": \"none\"}}\n"
    );
    std::fs::write(dir.join("policy.rego"), rego).expect("policy file");
    dir
}

/// An open problem the lab's Admin can see (nothing is sent in these tests before a yes).
async fn open_event(guard: &Guard, lab: &Lab) -> String {
    let reader = common::client(guard, &lab.token).await;
    let hosts = ["mcp-web-01", "mcp-web-02", "mcp-db-01", "mcp-db-02"];
    let event = common::trapper::open_problem(&reader, lab, &hosts).await;
    let _ = reader.cancel().await;
    event
}

#[tokio::test]
async fn inspector_shows_approval_codes() {
    let lab = common::lab(7);
    // `required` and a client that cannot be asked (the CLI declares no elicitation).
    let guard = start(&lab, Some(write_approval_policy("required"))).await;
    let event = open_event(&guard, &lab).await;
    let ack = [("eventids", json!([event]).to_string())];
    let printed = call(&guard, &lab.token, "problem_acknowledge", &ack).await;
    assert_no_schema_error(&printed);
    let body = printed.error_body();
    assert_eq!(body["code"], "approval_unavailable", "{body}");
    guard.stop().await;

    // `page`: the person sees the approval link in the transcript.
    let mut config = config_for(&lab.url);
    config.policy_dir = Some(write_approval_policy("page"));
    let port = common::free_port();
    let page = format!("http://127.0.0.1:{port}");
    config.approval_page = Some(zabbix_mcp_guard::config::ApprovalPageConfig {
        listen_ip: vec!["127.0.0.1".parse().expect("ip")],
        listen_port: port,
        allowed_ip: vec!["127.0.0.1/32".parse().expect("net")],
        allowed_ip_raw: "127.0.0.1".into(),
        url: page.clone(),
    });
    let guard = start_with(config).await;
    let printed = call(&guard, &lab.token, "problem_acknowledge", &ack).await;
    assert_no_schema_error(&printed);
    let body = printed.error_body();
    assert_eq!(body["code"], "approval_pending", "{body}");
    let url = body["data"]["url"].as_str().unwrap_or_default();
    assert!(url.starts_with(&format!("{page}/approvals/")), "{body}");
    assert!(
        printed.stdout.contains(url),
        "the link is shown: {}",
        printed.stdout
    );
    guard.stop().await;
}

#[tokio::test]
async fn inspector_shows_upstream_and_internal_codes() {
    // Faults a real Zabbix cannot produce on demand: a stub slower than Timeout, and one
    // whose read result is not a list of records.
    let (slow_url, _slow) = common::stub::start(std::time::Duration::from_secs(5)).await;
    let mut config = config_for(&slow_url);
    config.timeout = std::time::Duration::from_secs(1);
    let guard = start_with(config).await;
    let printed = call(&guard, "stub-token", "host_get", &[]).await;
    assert_no_schema_error(&printed);
    assert_eq!(printed.error_body()["code"], "upstream_timeout");
    guard.stop().await;

    let (odd_url, _odd) =
        common::stub::start_answering(std::time::Duration::ZERO, json!({"not": "a list"})).await;
    let guard = start_with(config_for(&odd_url)).await;
    let printed = call(&guard, "stub-token", "host_get", &[]).await;
    assert_no_schema_error(&printed);
    assert_eq!(printed.error_body()["code"], "internal_error");
    guard.stop().await;
}

/// An `MCP-Protocol-Version` the sidecar does not serve: the Inspector shows the JSON-RPC
/// error naming the version sent and the versions served. Before, it showed rmcp's plain
/// text, `Error POSTing to endpoint: Bad Request: Unsupported MCP-Protocol-Version:
/// 1999-01-01` (stateful mode: the stateless one checks the header against `initialize`).
#[tokio::test]
async fn inspector_shows_an_unsupported_protocol_version_with_the_supported_ones() {
    let lab = common::lab(7);
    let mut config = config_for(&lab.url);
    config.session_mode = zabbix_mcp_guard::config::SessionMode::Stateful;
    let guard = start_with(config).await;
    let mut command = std::process::Command::new(inspector_bin());
    command
        .arg("--cli")
        .arg(&guard.url)
        .args(["--transport", "http"])
        .arg("--header")
        .arg(format!("Authorization: Bearer {}", lab.token))
        .args(["--header", "MCP-Protocol-Version: 1999-01-01"])
        .args(["--method", "tools/list"])
        .env("MCP_CATALOG_PATH", temp_path("inspector-catalog.json"))
        .env("HOME", temp_path("inspector-home").parent().expect("dir"));
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("the Inspector thread")
        .expect("the Inspector CLI runs");
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "{shown}");
    assert!(shown.contains("-32022"), "{shown}");
    assert!(
        shown.contains(r#"MCP-Protocol-Version \\\"1999-01-01\\\" is not supported; supported: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28"#),
        "{shown}"
    );
    guard.stop().await;
}
