//! Rego policies end to end: real users with different tokens and groups, argument-level
//! denial, history limits per caller, denied resources, hot reload, dry-run, fail-closed,
//! and the decision log.

mod agent_text;
#[path = "../common/mod.rs"]
mod common;
mod reload;

use std::path::{Path, PathBuf};

use common::{Lab, config_for, read, seed_id, start_with, temp_path, tool_error};
use rmcp::model::ReadResourceRequestParams;
use serde_json::{Value, json};
use zabbix_mcp_guard::config::{Config, DecisionLogSink, PolicyMode};

fn shipped(example: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("policies/examples")
        .join(example)
}

/// A policy directory of its own: the files of `from` (if any), then `files` over them.
fn policy_dir(from: Option<&Path>, files: &[(&str, String)]) -> PathBuf {
    let dir = temp_path("policy");
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(from) = from {
        for entry in std::fs::read_dir(from).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

fn config(lab: &Lab, dir: &Path) -> (Config, PathBuf) {
    let mut config = config_for(&lab.url);
    config.policy_dir = Some(dir.to_path_buf());
    let log = temp_path("decisions.log");
    config.decision_log = DecisionLogSink::File(log.clone());
    (config, log)
}

fn log_lines(path: &Path) -> Vec<Value> {
    common::decision_log_lines(path)
}

#[tokio::test]
async fn two_users_see_different_tools_and_decisions() {
    for lab in common::labs() {
        let linux = seed_id(&lab, "host_groups", "MCP/Linux servers");
        let db = seed_id(&lab, "host_groups", "MCP/Databases");
        let data = json!({"tier1": {"usrgrps": ["MCP Operators"], "groupids": [linux], "strict_event_scope": false}});
        let dir = policy_dir(
            Some(&shipped("tier1_operations")),
            &[("data.json", data.to_string())],
        );
        let (config, log) = config(&lab, &dir);
        let guard = start_with(config).await;
        let admin = common::client(&guard, &lab.token).await;
        let operator = common::client(&guard, &lab.token_operator).await;

        assert_eq!(
            common::tool_names(&operator).await,
            ["problem_acknowledge", "problem_annotate", "problem_get"]
        );
        assert!(common::tool_names(&admin).await.len() >= 11);

        // The same call, two decisions.
        let args = json!({"groupids": [db]});
        read(&admin, "problem_get", args.clone()).await;
        let err = tool_error(&operator, "problem_get", args).await;
        assert_eq!(err["code"], "denied", "{err}");
        let reasons = err["data"]["reasons"].as_array().unwrap();
        assert!(
            reasons
                .iter()
                .any(|r| r.as_str().unwrap().contains("outside the tier 1 scope")),
            "{err}"
        );
        let id = err["decision_id"].as_str().unwrap().to_owned();
        // Argument-level: the operator's own group is fine; a tool outside tier 1 does not
        // exist for the operator (tests/scope.rs).
        read(&operator, "problem_get", json!({"groupids": [linux]})).await;
        let hidden = operator
            .call_tool(rmcp::model::CallToolRequestParams::new("host_get"))
            .await
            .unwrap_err();
        assert!(
            hidden.to_string().contains("unknown tool: host_get"),
            "{hidden}"
        );

        let lines = log_lines(&log);
        let denied = lines
            .iter()
            .find(|l| l["decision_id"] == id.as_str())
            .expect("logged");
        assert_eq!(denied["input"]["caller"]["username"], "mcp-operator");
        assert_eq!(
            denied["input"]["caller"]["usrgrps"],
            json!(["MCP Operators"])
        );
        assert_eq!(denied["input"]["phase"], "call");
        assert_eq!(denied["input"]["arguments"]["groupids"], json!([db]));
        guard.stop().await;
    }
}

#[tokio::test]
async fn argument_rules_from_the_shipped_example() {
    let lab = common::lab(7);
    let (config, _) = config(&lab, &shipped("deny_by_argument"));
    let guard = start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    read(&client, "host_get", json!({"search": "mcp-web"})).await;
    let err = tool_error(&client, "host_get", json!({"search": "mcp-*"})).await;
    assert_eq!(err["code"], "denied");
    assert!(err["message"].as_str().unwrap().contains("wildcard"));
    let many: Vec<String> = (1..=21).map(|i| i.to_string()).collect();
    let err = tool_error(&client, "host_get", json!({"hostids": many})).await;
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("at most 20 hostids per call (got 21)"),
        "{err}"
    );
    guard.stop().await;
}

/// A range over an agent's arguments is one VM instruction, past the instruction and time
/// limits: `0..2147483647` asked for 51 GB and aborted the sidecar (every caller's
/// connection gone); 27 million seconds held the runtime for 3.4 s. Now it is a named
/// denial and the next call is served.
#[tokio::test]
async fn history_limits_per_caller() {
    for lab in common::labs() {
        let (config, _) = config(&lab, &shipped("history_by_group"));
        let guard = start_with(config).await;
        let admin = common::client(&guard, &lab.token).await;
        let viewer = common::client(&guard, &lab.token_viewer).await;
        let item = lab.seed["items"]["mcp-web-01"]["mcp.float"]
            .as_str()
            .unwrap()
            .to_owned();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let three_days = json!({"itemids": [item], "type": "float", "time_from": now - 3 * 86400, "time_till": now});
        read(&admin, "history_get", three_days.clone()).await;
        let err = tool_error(&viewer, "history_get", three_days).await;
        assert_eq!(err["code"], "invalid_arguments");
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("at most 86400 seconds (1 day)"),
            "{err}"
        );
        assert!(
            err["decision_id"].is_string(),
            "limit errors after a decision carry its id"
        );
        // Without a window the viewer gets the last 24 hours, which hold the seeded values.
        let env = read(
            &viewer,
            "history_get",
            json!({"itemids": [item], "type": "float"}),
        )
        .await;
        assert!(env["count"].as_u64().unwrap() >= 10, "{}", env["count"]);
        guard.stop().await;
    }
}

#[tokio::test]
async fn denied_resources_do_not_exist() {
    let lab = common::lab(7);
    let rego = r#"package zabbix.mcp
import rego.v1
viewer if "MCP Viewers" in input.caller.usrgrps
decision := {"allow": false, "reasons": ["viewers may not read host records"]} if {
    input.phase == "resource"
    viewer
} else := {"allow": true, "reasons": []}
"#;
    let dir = policy_dir(None, &[("policy.rego", rego.into())]);
    let (config, log) = config(&lab, &dir);
    let guard = start_with(config).await;
    let web = seed_id(&lab, "hosts", "mcp-web-01");
    let uri = format!("zabbix://host/{web}");
    let admin = common::client(&guard, &lab.token).await;
    admin
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap();
    let viewer = common::client(&guard, &lab.token_viewer).await;
    let err = viewer
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("resource not found"), "{err}");
    // The tool itself is still usable; only the resource phase is denied.
    read(&viewer, "host_get", json!({"hostids": [web]})).await;
    let lines = log_lines(&log);
    let line = lines
        .iter()
        .find(|l| {
            l["input"]["phase"] == "resource" && l["input"]["caller"]["username"] == "mcp-viewer"
        })
        .expect("resource decision logged");
    assert_eq!(line["input"]["resource"]["uri"], uri.as_str());
    assert_eq!(line["input"]["tool"]["name"], "host_get");
    guard.stop().await;
}

const ALLOW_ALL: &str =
    "package zabbix.mcp\nimport rego.v1\ndecision := {\"allow\": true, \"reasons\": []}\n";
const DENY_HOST_GET: &str = r#"package zabbix.mcp
import rego.v1
# Calls only: a tool denied in the list phase would not exist for the caller at all.
decision := {"allow": false, "reasons": ["host_get is switched off"]} if {
    input.tool.name == "host_get"
    input.phase == "call"
} else := {"allow": true, "reasons": []}
"#;

#[tokio::test]
async fn dry_run_logs_but_does_not_block() {
    let lab = common::lab(6);
    let dir = policy_dir(None, &[("policy.rego", DENY_HOST_GET.into())]);
    let (mut config, log) = config(&lab, &dir);
    config.policy_mode = PolicyMode::DryRun;
    let guard = start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    assert!(
        common::tool_names(&client)
            .await
            .contains(&"host_get".to_owned())
    );
    let env = read(&client, "host_get", json!({"search": "mcp-web-01"})).await;
    assert_eq!(env["count"], 1);
    let lines = log_lines(&log);
    let call = lines
        .iter()
        .find(|l| l["input"]["phase"] == "call" && l["input"]["tool"]["name"] == "host_get")
        .expect("call decision logged");
    let text = call.to_string();
    assert!(text.contains("host_get is switched off"), "{text}");
    assert!(text.contains("dry_run") || text.contains("would"), "{text}");
    guard.stop().await;
}

#[tokio::test]
async fn fail_closed() {
    let lab = common::lab(7);
    let http = reqwest::Client::new();
    let cases: [(&str, Option<&str>, &str); 4] = [
        ("no policy", None, "no policy"),
        // Well-formed for every other tool (so the set loads: its smoke test asks host_get),
        // not for hostgroup_get.
        (
            "undefined decision",
            Some(
                "package zabbix.mcp\nimport rego.v1\ndecision := {\"allow\": true, \"reasons\": []} if input.tool.name != \"hostgroup_get\"\n",
            ),
            "undefined",
        ),
        (
            "wrong types",
            Some(
                "package zabbix.mcp\nimport rego.v1\ndecision := {\"allow\": \"yes\", \"reasons\": []} if input.tool.name == \"hostgroup_get\"\nelse := {\"allow\": true, \"reasons\": []}\n",
            ),
            "allow",
        ),
        (
            "misspelt key",
            Some(
                "package zabbix.mcp\nimport rego.v1\ndecision := {\"allow\": true, \"aproval\": \"page\"} if input.tool.name == \"hostgroup_get\"\nelse := {\"allow\": true, \"reasons\": []}\n",
            ),
            "unknown key \\\"aproval\\\"",
        ),
    ];
    for (case, rego, reason) in cases {
        let files: Vec<(&str, String)> = rego
            .map(|r| ("policy.rego", r.to_owned()))
            .into_iter()
            .collect();
        let dir = policy_dir(None, &files);
        let (config, log) = config(&lab, &dir);
        let guard = start_with(config).await;
        let client = common::client(&guard, &lab.token).await;
        let offered = common::tool_names(&client).await;
        assert!(
            !offered.contains(&"hostgroup_get".to_owned()),
            "{case}: hostgroup_get is not offered"
        );
        assert_eq!(offered.is_empty(), rego.is_none(), "{case}: {offered:?}");
        // Not offered means unknown to calls too; the reason is in the decision log.
        let err = client
            .call_tool(rmcp::model::CallToolRequestParams::new("hostgroup_get"))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("unknown tool: hostgroup_get"),
            "{case}: {err}"
        );
        // The list line names each hidden tool with its reasons.
        let lines = log_lines(&log);
        let hidden = lines
            .iter()
            .filter_map(|l| l["result"]["hidden"].as_array())
            .flatten()
            .rfind(|h| h["tool"] == "hostgroup_get")
            .expect("the decision is logged");
        let message = hidden.to_string().to_lowercase();
        assert!(message.contains(reason), "{case}: {message}");
        if rego.is_none() {
            let ready = http
                .get(format!("{}/readyz", guard.base))
                .send()
                .await
                .unwrap();
            assert_eq!(ready.status(), 503, "{case}");
        }
        guard.stop().await;
    }
}

#[tokio::test]
async fn decision_log_has_a_line_per_decision_and_never_a_token() {
    let lab = common::lab(7);
    let (config, log) = config(
        &lab,
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("policies"),
    );
    let guard = start_with(config).await;
    let admin = common::client(&guard, &lab.token).await;
    let viewer = common::client(&guard, &lab.token_viewer).await;
    for client in [&admin, &viewer] {
        common::tool_names(client).await;
        read(client, "host_get", json!({"limit": 2})).await;
        read(client, "hostgroup_get", json!({"limit": 2})).await;
    }
    // A call that fails at Zabbix still has its outcome under the same decision_id.
    let err = tool_error(
        &admin,
        "host_get",
        json!({"hostids": ["99999999999999999999"]}),
    )
    .await;
    let failed_id = err["decision_id"].as_str().unwrap().to_owned();
    zabbix_mcp_guard::policy::flush_decision_logs();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains(&lab.token),
        "admin token in the decision log"
    );
    assert!(
        !text.contains(&lab.token_viewer),
        "viewer token in the decision log"
    );
    let lines = log_lines(&log);
    let calls: Vec<&Value> = lines
        .iter()
        .filter(|l| l["input"]["phase"] == "call")
        .collect();
    assert_eq!(calls.len(), 5, "one line per call decision");
    for line in &calls {
        assert!(line["decision_id"].is_string());
        assert!(line["timestamp"].is_string());
        assert_eq!(line["path"], "zabbix/mcp/decision");
        assert!(line["bundles"]["policies"]["revision"].is_string());
        assert!(line["metrics"]["timer_eval_ns"].is_u64());
        assert!(line["labels"]["id"].is_string());
        assert_eq!(line["result"]["allow"], true);
        assert_eq!(
            line["input"]["caller"]["token_id"].as_str().unwrap().len(),
            16
        );
        let id = line["decision_id"].as_str().unwrap();
        let outcome = lines
            .iter()
            .find(|l| l["decision_id"] == id && l.get("event").is_some())
            .unwrap_or_else(|| panic!("no outcome for {id}"));
        assert_eq!(outcome["event"], "zabbix_result");
    }
    let failed = lines
        .iter()
        .find(|l| l["decision_id"] == failed_id.as_str() && l.get("event").is_some())
        .expect("outcome of the failed call");
    assert!(failed.to_string().contains("zabbix_error"), "{failed}");
    let lists = lines
        .iter()
        .filter(|l| l["input"]["phase"] == "list")
        .count();
    assert_eq!(lists, 2, "one line per tools/list, each caller listed once");
    guard.stop().await;
}

#[test]
fn policy_cli_tests_and_evaluates() {
    let bin = env!("CARGO_BIN_EXE_zabbix-mcp-guard");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let mut dirs = vec![root.clone()];
    for entry in std::fs::read_dir(root.join("examples")).unwrap() {
        dirs.push(entry.unwrap().path());
    }
    for dir in dirs {
        let out = std::process::Command::new(bin)
            .args(["policy", "test"])
            .arg(&dir)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {text}{}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let summary = text.lines().last().unwrap_or_default();
        assert!(
            summary.ends_with(" passed, 0 failed"),
            "{}: {summary}",
            dir.display()
        );
    }
    // A failing test exits non-zero and names the rule.
    let dir = policy_dir(
        None,
        &[
            ("policy.rego", ALLOW_ALL.into()),
            ("policy_test.rego", "package zabbix.mcp_test\nimport rego.v1\ntest_denies if not data.zabbix.mcp.decision.allow\n".into()),
        ],
    );
    let out = std::process::Command::new(bin)
        .args(["policy", "test"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("test_denies") && text.contains("0 passed, 1 failed"),
        "{text}"
    );

    let input = temp_path("input.json");
    std::fs::write(&input, json!({"version": 1, "phase": "call",
        "tool": {"name": "history_get", "exposed_name": "history_get", "kind": "read", "method": "history.get", "destructive": false, "idempotent": true},
        "arguments": {}, "caller": {"userid": "2", "username": "u", "type": 1, "roleid": "1", "usrgrps": [], "token_id": "x"},
        "client": {"address": "127.0.0.1", "name": null, "version": null, "protocol_version": null, "elicitation": []},
        "zabbix": {"version": "7.0.22"}, "now": 0}).to_string()).unwrap();
    let out = std::process::Command::new(bin)
        .args(["policy", "eval", "--input"])
        .arg(&input)
        .arg("--dir")
        .arg(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decision: Value =
        serde_json::from_slice(&out.stdout).expect("eval prints the decision as JSON");
    assert_eq!(decision["decision"]["allow"], true, "{decision}");
    assert_eq!(decision["result"]["history"]["max_window_seconds"], 604800);
    assert!(decision["revision"].is_string());
}
