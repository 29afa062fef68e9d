//! Tests of the policy test runner, including every shipped policy directory.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::{eval_input, run_tests};
use crate::policy::source::tests::temp_dir;

/// The shipped `policies/` directory of the crate.
pub(crate) fn shipped_policies() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("policies")
}

/// `policies/` and every `policies/examples/<name>/`.
pub(crate) fn shipped_policy_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![shipped_policies()];
    let examples = shipped_policies().join("examples");
    let mut found: Vec<PathBuf> = fs::read_dir(&examples)
        .expect("policies/examples exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    dirs.extend(found);
    dirs
}

#[test]
fn every_shipped_policy_directory_passes_its_tests() {
    let dirs = shipped_policy_dirs();
    assert!(dirs.len() >= 6, "default + 5 examples, got {dirs:?}");
    for dir in dirs {
        let report = run_tests(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        assert_eq!(report.failed, 0, "{}:\n{report}", dir.display());
        assert!(
            report.passed >= 4,
            "{}: only {} tests",
            dir.display(),
            report.passed
        );
    }
}

#[test]
fn failures_are_reported_by_name_and_reason() {
    let dir = temp_dir("runner");
    fs::write(
        dir.join("p.rego"),
        "package zabbix.mcp\nimport rego.v1\ndefault allow := false\n\
         allow if input.ok\ndecision := {\"allow\": allow}\n",
    )
    .expect("write");
    fs::write(
        dir.join("p_test.rego"),
        "package zabbix.mcp_test\nimport rego.v1\nimport data.zabbix.mcp\n\
         test_allows if mcp.allow with input as {\"ok\": true}\n\
         test_allows if mcp.allow with input as {\"ok\": 1}\n\
         test_denies if not mcp.allow with input as {\"ok\": false}\n\
         test_wrong if mcp.allow with input as {\"ok\": false}\n\
         test_not_bool := 7\n\
         test_helper(x) if x\n",
    )
    .expect("write");
    let report = run_tests(&dir).expect("runs");
    assert_eq!(report.summary(), "2 passed, 2 failed");
    let names: Vec<&str> = report.failures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "data.zabbix.mcp_test.test_wrong",
            "data.zabbix.mcp_test.test_not_bool"
        ]
    );
    assert!(report.failures[0].reason.starts_with("undefined"));
    assert!(report.failures[1].reason.contains("expected true"));
    let text = report.to_string();
    assert!(text.ends_with("2 passed, 2 failed"), "{text}");
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn eval_input_reports_result_and_enforced_decision() {
    let input = json!({
        "version": 1, "phase": "call",
        "tool": {"name": "maintenance_delete", "exposed_name": "maintenance_delete",
                 "kind": "write", "method": "maintenance.delete",
                 "destructive": true, "idempotent": true},
        "arguments": {"maintenanceids": ["3"]},
        "caller": {"userid": "1", "username": "Admin", "type": 3, "roleid": "3",
                   "usrgrps": ["Zabbix administrators"], "token_id": "abc"},
        "client": {"address": "127.0.0.1", "name": null, "version": null,
                   "protocol_version": "2025-11-25", "elicitation": []},
        "zabbix": {"version": "7.0.22"},
        "now": 1767225600
    });
    let out = eval_input(&shipped_policies(), &input).expect("evaluates");
    assert_eq!(out["vm"], json!(true));
    assert_eq!(out["result"]["allow"], json!(true));
    assert_eq!(out["decision"]["approval"], json!("if_supported"));
    assert_eq!(out["revision"].as_str().map(str::len), Some(16));

    // A partial input still evaluates; the default policy denies an unknown version.
    let partial =
        eval_input(&shipped_policies(), &json!({"tool": {"kind": "read"}})).expect("evaluates");
    assert_eq!(partial["decision"]["allow"], json!(false));
}

/// Every shipped example that ships data must deny everything, with a reason, when its
/// `data.json` is missing (a deployment that forgot the file), never lift its limits.
#[test]
fn every_example_fails_closed_without_its_data() {
    use crate::policy::input::tests::sample_input;
    use crate::policy::input::{Phase, ToolKind};
    use crate::policy::{PolicyEngine, PolicyMode};

    let examples: Vec<PathBuf> = shipped_policy_dirs()
        .into_iter()
        .filter(|d| d.join("data.json").is_file())
        .filter(|d| fs::read_to_string(d.join("data.json")).is_ok_and(|t| t.trim() != "{}"))
        .collect();
    assert!(examples.len() >= 4, "{examples:?}");
    for example in examples {
        let dir = temp_dir("no-data");
        for entry in fs::read_dir(&example).expect("read example") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "rego") {
                fs::copy(&path, dir.join(path.file_name().expect("name"))).expect("copy");
            }
        }
        let engine = PolicyEngine::load(&dir, PolicyMode::Enforce)
            .unwrap_or_else(|e| panic!("{}: {e}", example.display()));
        for (kind, phase, name) in [
            (ToolKind::Read, Phase::List, "host_get"),
            (ToolKind::Read, Phase::Call, "problem_get"),
            (ToolKind::Read, Phase::Call, "history_get"),
            (ToolKind::Write, Phase::Call, "maintenance_create"),
            (ToolKind::Write, Phase::List, "problem_acknowledge"),
        ] {
            let mut input = sample_input();
            input.tool.kind = kind;
            input.phase = phase;
            input.tool.name = name.into();
            let d = engine.decide(&input);
            assert!(!d.allow, "{} allows {name} without data", example.display());
            assert!(
                d.reasons
                    .iter()
                    .any(|r| r.starts_with("policy data missing: ")),
                "{}: {:?}",
                example.display(),
                d.reasons
            );
        }
        fs::remove_dir_all(&dir).ok();
    }
}
