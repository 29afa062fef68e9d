//! Tests of the decision log writer.

use std::fs;
use std::thread;

use regorus::Value as RegoValue;
use serde_json::{Value, json};

use super::list::{HiddenTool, ListRecord};
use super::{DecisionLog, DecisionLogOptions, DecisionLogSink};
use crate::policy::decision::{Approval, Decision};
use crate::policy::input::tests::sample_input;
use crate::policy::source::tests::temp_dir;

fn lines(path: &std::path::Path) -> Vec<Value> {
    fs::read_to_string(path)
        .expect("read log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
        .collect()
}

fn sample_decision() -> Decision {
    let mut d = Decision::deny("caller not in tier 1");
    d.revision = "0123456789abcdef".into();
    d.eval_ns = 4200;
    d.raw = RegoValue::from_json_str(r#"{"allow": false, "reasons": ["caller not in tier 1"]}"#)
        .expect("json");
    d
}

#[test]
fn record_writes_the_opa_shape() {
    let dir = temp_dir("log");
    let path = dir.join("decisions.jsonl");
    let options = DecisionLogOptions {
        instance_id: Some("guard-1".into()),
        erase: vec!["/arguments/name".into(), "/arguments/absent".into()],
        ..DecisionLogOptions::default()
    };
    let log = DecisionLog::open_with(DecisionLogSink::File(path.clone()), options).expect("open");
    let decision = sample_decision();
    let input = sample_input();
    log.record(&decision, &input);
    log.event(
        &decision.decision_id,
        "zabbix_result",
        json!({"code": -32500, "message": "No permissions"}),
    );
    assert!(log.flush());

    let got = lines(&path);
    assert_eq!(got.len(), 2);
    let line = &got[0];
    let keys: Vec<&str> = line
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "decision_id",
            "timestamp",
            "path",
            "input",
            "result",
            "decision",
            "erased",
            "bundles",
            "metrics",
            "labels"
        ]
    );
    assert_eq!(line["decision_id"], json!(decision.decision_id));
    assert_eq!(line["path"], json!("zabbix/mcp/decision"));
    let ts = line["timestamp"].as_str().expect("timestamp");
    assert!(
        ts.len() == 30 && ts.ends_with('Z') && ts.as_bytes()[19] == b'.',
        "{ts}"
    );
    assert_eq!(line["result"]["reasons"], json!(["caller not in tier 1"]));
    assert_eq!(
        line["decision"],
        json!({"allow": false, "reasons": ["caller not in tier 1"], "approval": "none"})
    );
    assert_eq!(line["erased"], json!(["/input/arguments/name"]));
    assert_eq!(line["input"]["arguments"], json!({"groupids": ["2"]}));
    assert_eq!(
        line["input"]["caller"]["token_id"],
        json!("5e8f0c1d2a3b4c5d")
    );
    assert_eq!(
        line["bundles"]["policies"]["revision"],
        json!("0123456789abcdef")
    );
    assert_eq!(line["metrics"]["timer_eval_ns"], json!(4200));
    assert_eq!(line["labels"]["id"], json!("guard-1"));
    assert_eq!(line["labels"]["version"], json!(env!("CARGO_PKG_VERSION")));

    let event = &got[1];
    assert_eq!(event["decision_id"], line["decision_id"]);
    assert_eq!(event["event"], json!("zabbix_result"));
    assert_eq!(event["data"]["code"], json!(-32500));
    assert_eq!(log.write_errors(), 0);
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn undefined_result_is_omitted_and_dry_run_is_marked() {
    let dir = temp_dir("log-dry");
    let path = dir.join("d.jsonl");
    let log = DecisionLog::open(DecisionLogSink::File(path.clone())).expect("open");
    let mut decision = Decision::deny("no policy loaded");
    decision.raw = RegoValue::Undefined;
    decision.allow = true;
    decision.dry_run_would_deny = true;
    decision.approval = Approval::IfSupported;
    log.record(&decision, &sample_input());
    assert!(log.flush());
    let line = &lines(&path)[0];
    assert!(line.get("result").is_none());
    assert!(line.get("erased").is_none());
    assert_eq!(line["decision"]["dry_run_would_deny"], json!(true));
    assert_eq!(line["decision"]["approval"], json!("if_supported"));
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn concurrent_writers_never_interleave_and_append() {
    let dir = temp_dir("log-threads");
    let path = dir.join("d.jsonl");
    fs::write(&path, "{\"existing\":true}\n").expect("seed");
    let log = DecisionLog::open(DecisionLogSink::File(path.clone())).expect("open");
    let mut input = sample_input();
    // Long lines make torn writes likely if writes were not whole lines.
    input
        .arguments
        .insert("description".into(), json!("x".repeat(20_000)));
    thread::scope(|s| {
        for _ in 0..4 {
            let log = log.clone();
            let input = input.clone();
            s.spawn(move || {
                for _ in 0..50 {
                    let d = sample_decision();
                    log.record(&d, &input);
                    log.event(&d.decision_id, "approval", json!({"outcome": "accepted"}));
                }
            });
        }
    });
    assert!(log.flush());
    let got = lines(&path);
    assert_eq!(got.len(), 1 + 4 * 50 * 2);
    assert_eq!(got[0], json!({"existing": true}));
}

#[test]
fn unwritable_file_fails_at_open() {
    let dir = temp_dir("log-bad");
    let err = DecisionLog::open(DecisionLogSink::File(dir.join("missing").join("d.jsonl")));
    assert!(err.is_err());
    let discard = DecisionLog::open(DecisionLogSink::Discard).expect("discard");
    discard.record(&sample_decision(), &sample_input());
    assert_eq!(discard.write_errors(), 0);
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_list_is_one_line_with_offered_and_hidden_tools() {
    let dir = temp_dir("log-list");
    let path = dir.join("d.jsonl");
    let options = DecisionLogOptions {
        erase: vec!["/caller/username".into()],
        ..DecisionLogOptions::default()
    };
    let log = DecisionLog::open_with(DecisionLogSink::File(path.clone()), options).expect("open");
    let mut input = sample_input();
    input.phase = crate::policy::Phase::List;
    let reasons = vec!["writes are not offered".to_owned()];
    log.record_list(&ListRecord {
        decision_id: "list-1",
        input: &input,
        offered: vec!["zbx_host_get", "zbx_problem_get"],
        hidden: vec![HiddenTool {
            tool: "zbx_maintenance_create",
            reasons: &reasons,
        }],
        dry_run_would_hide: Vec::new(),
        revision: "abc",
        eval_ns: 900,
        evaluations: 3,
        reused_for_seconds: 10,
    });
    assert!(log.flush());
    let got = lines(&path);
    assert_eq!(got.len(), 1);
    let line = &got[0];
    let keys: Vec<&str> = line
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "decision_id",
            "timestamp",
            "path",
            "input",
            "result",
            "erased",
            "bundles",
            "metrics",
            "labels"
        ]
    );
    assert_eq!(
        line["result"],
        json!({
            "offered": ["zbx_host_get", "zbx_problem_get"],
            "hidden": [{"tool": "zbx_maintenance_create", "reasons": ["writes are not offered"]}],
            "reused_for_seconds": 10
        })
    );
    assert_eq!(line["input"]["phase"], "list");
    assert!(line["input"].get("tool").is_none() && line["input"].get("arguments").is_none());
    assert!(line["input"]["caller"].get("username").is_none());
    assert_eq!(line["erased"], json!(["/input/caller/username"]));
    assert_eq!(
        line["metrics"],
        json!({"timer_eval_ns": 900, "evaluations": 3})
    );
    assert_eq!(line["bundles"]["policies"]["revision"], "abc");
    fs::remove_dir_all(&dir).ok();
}
