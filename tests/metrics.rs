//! `/metrics` end to end against the 7.0 lab: known calls through rmcp's client, then the
//! exact change of every series they touch, read from the text exposition over HTTP; and the
//! status listener (`StatusListenIP`/`StatusListenPort`), which takes `/metrics` off the MCP
//! listener while `AllowedIP` keeps guarding the MCP listener.

mod common;

use std::path::{Path, PathBuf};

use common::metrics::scrape;
use common::{Guard, config_for, read, seed_id, start_with, temp_path, tool_error};
use rmcp::model::{
    CallToolRequestParams, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
};
use rmcp::service::RequestContext;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::json;
use zabbix_mcp_guard::config::{DecisionLogSink, SessionMode, StatusListenerConfig};

/// Every tool allowed, except `hostgroup_get` calls (the list phase still offers it);
/// `maintenance_create` only with an approval the test client cannot give.
const POLICY: &str = r#"package zabbix.mcp
import rego.v1
decision := {"allow": false, "reasons": ["hostgroup_get is switched off"]} if {
    input.tool.name == "hostgroup_get"
    input.phase == "call"
} else := {"allow": true, "reasons": [], "approval": "required"} if {
    input.tool.name == "maintenance_create"
    input.phase == "call"
} else := {"allow": true, "reasons": []}
"#;

fn policy_dir(rego: &str) -> PathBuf {
    let dir = temp_path("policy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.rego"), rego).unwrap();
    dir
}

fn log_lines(path: &Path) -> usize {
    common::decision_log_text(path).lines().count()
}

#[tokio::test]
async fn known_calls_change_exactly_their_series() {
    let lab = common::lab(7);
    let mut config = config_for(&lab.url);
    config.policy_dir = Some(policy_dir(POLICY));
    let log = temp_path("decisions.log");
    config.decision_log = DecisionLogSink::File(log.clone());
    let guard = start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    let revision = guard.app().policy.status().revision.expect("policy loaded");

    let lines_before = log_lines(&log);
    let before = scrape(&guard.base).await;
    // Four MCP requests, each resolving the caller from the identity cache.
    let tools = client.list_all_tools().await.unwrap();
    read(&client, "host_get", json!({"limit": 1})).await;
    let invalid = tool_error(&client, "macro_get", json!({})).await;
    assert_eq!(invalid["code"], "invalid_arguments");
    let denied = tool_error(&client, "hostgroup_get", json!({"search": "MCP/"})).await;
    assert_eq!(denied["code"], "denied");
    let lines_written = log_lines(&log) - lines_before;
    let after = scrape(&guard.base).await;

    let d = |series: &str| after.delta(&before, series);
    let tool = |name: &str, outcome: &str, code: &str| {
        format!("tool_calls_total{{tool=\"{name}\",outcome=\"{outcome}\",code=\"{code}\"}}")
    };
    assert_eq!(d(&tool("host_get", "ok", "none")), 1.0);
    assert_eq!(d(&tool("macro_get", "error", "invalid_arguments")), 1.0);
    assert_eq!(d(&tool("hostgroup_get", "error", "denied")), 1.0);
    assert_eq!(
        after.sum("tool_calls_total{") - before.sum("tool_calls_total{"),
        3.0
    );

    // tools/list decides every offered tool once; the calls reuse that set. The invalid
    // call is refused before the policy; host_get is allowed, hostgroup_get denied.
    let phase =
        |p: &str, r: &str| format!("policy_decisions_total{{phase=\"{p}\",result=\"{r}\"}}");
    let offered = tools.len() as f64;
    assert!(offered >= 11.0, "{offered} tools offered");
    assert_eq!(d(&phase("list", "allow")), offered);
    assert_eq!(d(&phase("list", "deny")), 0.0);
    assert_eq!(d(&phase("call", "allow")), 1.0);
    assert_eq!(d(&phase("call", "deny")), 1.0);
    assert_eq!(d(&phase("call", "dry_run_deny")), 0.0);
    assert_eq!(
        d("policy_evaluation_seconds_count{phase=\"list\"}"),
        offered
    );
    assert_eq!(d("policy_evaluation_seconds_count{phase=\"call\"}"), 2.0);
    assert_eq!(
        d("policy_evaluation_seconds_bucket{phase=\"call\",le=\"+Inf\"}"),
        2.0
    );
    assert!(d("policy_evaluation_seconds_sum{phase=\"call\"}") > 0.0);
    assert_eq!(d("list_decision_sets_total{result=\"evaluated\"}"), 1.0);
    assert_eq!(d("list_decision_sets_total{result=\"reused\"}"), 3.0);

    // Only the allowed call reached Zabbix; the denied one sent nothing.
    assert_eq!(
        d("zabbix_requests_total{method=\"host.get\",result=\"ok\"}"),
        1.0
    );
    assert_eq!(
        d("zabbix_request_duration_seconds_count{method=\"host.get\"}"),
        1.0
    );
    assert!(d("zabbix_request_duration_seconds_sum{method=\"host.get\"}") > 0.0);
    assert_eq!(
        after.sum("zabbix_requests_total{method=\"hostgroup.get\""),
        0.0
    );
    assert_eq!(
        after.sum("zabbix_requests_total{method=\"usermacro.get\""),
        0.0
    );

    assert_eq!(d("identity_cache_lookups_total{result=\"hit\"}"), 4.0);
    assert_eq!(d("identity_cache_lookups_total{result=\"miss\"}"), 0.0);
    // list set, host_get's decision and its outcome event, hostgroup_get's denial.
    assert_eq!(lines_written, 4);
    assert_eq!(
        d("decision_log_lines_total{result=\"written\"}"),
        lines_written as f64
    );
    assert_eq!(d("decision_log_lines_total{result=\"dropped\"}"), 0.0);
    assert_eq!(d("approvals_total{outcome=\"not_required\"}"), 0.0);

    // Point-in-time values.
    assert_eq!(after.get("calls_in_flight"), 0.0);
    assert!(after.get("connections_open") >= 1.0);
    assert_eq!(after.get("sessions_open"), 0.0);
    assert_eq!(after.get("connections_refused_total"), 0.0);
    assert_eq!(after.get("policy_reloads_total{result=\"ok\"}"), 1.0);
    assert_eq!(after.get("policy_reloads_total{result=\"failed\"}"), 0.0);
    assert_eq!(
        after.get(&format!("policy_info{{revision=\"{revision}\"}}")),
        1.0
    );
    assert!(after.has("rate_limited_total{scope=\"policy_rate\"}"));
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        after.get(&format!("build_info{{version=\"{version}\"}}")),
        1.0
    );
    // The process's own figures, under the standard names.
    let process = |name| {
        after
            .process(name)
            .unwrap_or_else(|| panic!("process_{name}"))
    };
    assert!(process("resident_memory_bytes") > 1_000_000.0);
    assert!(process("virtual_memory_bytes") >= process("resident_memory_bytes"));
    assert!(process("open_fds") >= 3.0);
    assert!(process("cpu_seconds_total") > 0.0);
    let started = process("start_time_seconds");
    assert!(started <= unix_now() as f64 + 1.0 && started > unix_now() as f64 - 86_400.0);
    // No label carries a token, a user or an argument.
    let text = reqwest::get(format!("{}/metrics", guard.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for secret in [lab.token.as_str(), "Admin", "MCP/"] {
        assert!(!text.contains(secret), "{secret} in /metrics");
    }

    // A write whose approval this client cannot give: counted, and nothing sent.
    let before = after;
    let now = unix_now();
    let host = seed_id(&lab, "hosts", "mcp-web-01");
    let args = json!({"name": format!("metrics test {now}"), "hostids": [host],
                      "active_since": now, "active_till": now + 3600});
    let refused = tool_error(&client, "maintenance_create", args).await;
    assert_eq!(refused["code"], "approval_unavailable");
    let after = scrape(&guard.base).await;
    let d = |series: &str| after.delta(&before, series);
    assert_eq!(d("approvals_total{outcome=\"unavailable\"}"), 1.0);
    assert_eq!(
        d(&tool("maintenance_create", "error", "approval_unavailable")),
        1.0
    );
    assert_eq!(
        after.sum("zabbix_requests_total{method=\"maintenance.create\""),
        0.0
    );
    guard.stop().await;
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A stateful sidecar with the status listener on 127.0.0.1 and `AllowedIP` as given.
async fn with_status_listener(lab: &common::Lab, allowed: &str) -> (Guard, String) {
    let mut config = config_for(&lab.url);
    config.session_mode = SessionMode::Stateful;
    config.allowed_ip = vec![allowed.parse().unwrap()];
    config.allowed_ip_raw = allowed.to_owned();
    config.status_listener = Some(StatusListenerConfig {
        listen_ip: vec!["127.0.0.1".parse().unwrap()],
        listen_port: 0,
    });
    let guard = start_with(config).await;
    let status = format!("http://{}", guard.status_addrs()[0]);
    (guard, status)
}

#[tokio::test]
async fn the_status_listener_takes_metrics_off_the_mcp_listener() {
    let lab = common::lab(7);

    // Loopback allowed: MCP works, /metrics is not on its listener but on the status one,
    // and counts what went through MCP.
    let (guard, status) = with_status_listener(&lab, "127.0.0.1/32").await;
    let client = common::client(&guard, &lab.token).await;
    let before = scrape(&status).await;
    assert_eq!(before.get("sessions_open"), 1.0);
    read(&client, "host_get", json!({"limit": 1})).await;
    let after = scrape(&status).await;
    let ok = "tool_calls_total{tool=\"host_get\",outcome=\"ok\",code=\"none\"}";
    assert_eq!(after.delta(&before, ok), 1.0);
    let on_mcp = reqwest::get(format!("{}/metrics", guard.base))
        .await
        .unwrap();
    assert_eq!(on_mcp.status(), 404);
    for path in ["/healthz", "/readyz"] {
        let response = reqwest::get(format!("{status}{path}")).await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
    let unknown = reqwest::get(format!("{status}/mcp")).await.unwrap();
    assert_eq!(unknown.status(), 404);
    guard.stop().await;

    // Loopback not in AllowedIP: the MCP listener drops the connection, the status listener
    // (which AllowedIP does not cover) still serves.
    let (guard, status) = with_status_listener(&lab, "192.0.2.1/32").await;
    let refused = reqwest::get(format!("{}/healthz", guard.base)).await;
    assert!(refused.is_err(), "the MCP listener answered: {refused:?}");
    let scraped = scrape(&status).await;
    assert_eq!(scraped.get("connections_open"), 0.0);
    guard.stop().await;
}

/// An MCP client that can answer form elicitations, and declines every approval.
#[derive(Clone)]
struct Decliner;

impl ClientHandler for Decliner {
    fn get_info(&self) -> ClientConfig {
        common::form_elicitation_client("metrics-tests")
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }
}

#[tokio::test]
async fn a_declined_approval_is_counted_and_nothing_is_sent() {
    let lab = common::lab(7);
    let mut config = config_for(&lab.url);
    config.policy_dir = Some(policy_dir(POLICY));
    config.session_mode = SessionMode::Stateful;
    let guard = start_with(config).await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(guard.url.as_str()).auth_header(&lab.token),
    );
    let client = Decliner.serve(transport).await.expect("client connects");
    let before = scrape(&guard.base).await;
    let now = unix_now();
    let host = seed_id(&lab, "hosts", "mcp-web-01");
    let args = json!({"name": format!("metrics decline {now}"), "hostids": [host],
                      "active_since": now, "active_till": now + 3600});
    let mut params = CallToolRequestParams::new("maintenance_create");
    if let serde_json::Value::Object(map) = args {
        params = params.with_arguments(map);
    }
    let result = client.call_tool(params).await.expect("tools/call");
    assert_eq!(common::error_body(&result)["code"], "approval_declined");
    let after = scrape(&guard.base).await;
    let d = |series: &str| after.delta(&before, series);
    assert_eq!(d("approvals_total{outcome=\"declined\"}"), 1.0);
    assert_eq!(
        after.sum("approvals_total{") - before.sum("approvals_total{"),
        1.0
    );
    let declined = "tool_calls_total{tool=\"maintenance_create\",outcome=\"error\",code=\"approval_declined\"}";
    assert_eq!(d(declined), 1.0);
    assert_eq!(
        after.sum("zabbix_requests_total{method=\"maintenance.create\""),
        0.0
    );
    drop(client);
    guard.stop().await;
}
