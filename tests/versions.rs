//! Issue 12, Zabbix versions the lab cannot install: the 7.0 lab behind a front
//! (tests/common/version_front.rs) that answers `apiinfo.version` as 6.4, 7.2, 7.4 and 8.0
//! and behaves as those versions do on the wire where it matters: 7.2+ refuses `auth` and
//! `selectGroups`, 8.0 accepts history type 6 (JSON). Per version: tools/list, reads and a
//! resource read; the whole write suite (tests/common/write_suite.rs: every problem tool,
//! maintenance create/update/delete); `history_get type=json` (sent on 8.0 only, refused
//! `invalid_arguments` before Zabbix otherwise). No request the pretended version would
//! refuse is ever sent.

mod common;

use common::version_front::{self, Front, HISTORY_JSON};
use common::write_suite::{Target, maintenance_tools, problem_tools};
use serde_json::{Value, json};

const VERSIONS: [(&str, (u16, u16)); 4] = [
    ("6.4.0", (6, 4)),
    ("7.2.0", (7, 2)),
    ("7.4.0", (7, 4)),
    ("8.0.0", (8, 0)),
];

fn assert_nothing_refused(front: &Front, version: &str) {
    assert!(
        front.refused.lock().unwrap().is_empty(),
        "{version}: sent what it refuses: {:?}",
        front.refused.lock().unwrap()
    );
}

#[tokio::test]
async fn reads_work_through_every_pretended_version() {
    let lab = common::lab(7);
    for (version, _) in VERSIONS {
        let (url, front) = version_front::start(&lab.url, version).await;
        let guard = common::start_with(common::config_for(&url)).await;
        let client = common::client(&guard, &lab.token).await;
        let tools = client.list_all_tools().await.unwrap();
        assert!(
            tools.iter().any(|t| t.name == "templategroup_get"),
            "{version}"
        );
        let hosts = common::read(&client, "host_get", json!({"search": "mcp-web-01"})).await;
        assert_eq!(hosts["count"], 1, "{version}: {hosts}");
        assert!(
            hosts["results"][0]["hostgroups"].is_array(),
            "{version}: {hosts}"
        );
        let groups = common::read(&client, "hostgroup_get", json!({})).await;
        assert!(!common::results(&groups).is_empty(), "{version}");
        common::read(&client, "template_get", json!({"limit": 2})).await;
        common::read(&client, "problem_get", json!({"limit": 2})).await;
        let about = client
            .read_resource(rmcp::model::ReadResourceRequestParams::new(
                "zabbix://about",
            ))
            .await
            .unwrap();
        let text = format!("{about:?}");
        assert!(text.contains(version), "{version}: {text}");
        assert_nothing_refused(&front, version);
        // The front does refuse what the version refuses (6.4 still takes `auth`), with
        // Zabbix's own error.
        let with_auth = json!({"jsonrpc": "2.0", "id": 1, "method": "host.get",
                               "params": {"limit": 1}, "auth": lab.token});
        let answer: Value = reqwest::Client::new()
            .post(&url)
            .json(&with_auth)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            answer.get("error").is_some(),
            version != "6.4.0",
            "{version}: {answer}"
        );
        if version != "6.4.0" {
            assert_eq!(answer["error"]["code"], -32602, "{answer}");
            assert!(
                answer["error"]["data"]
                    .as_str()
                    .unwrap()
                    .contains("unexpected parameter \"auth\""),
                "{answer}"
            );
        }
        // The sidecar itself never sent `auth` (Bearer from 6.4 on).
        let with_body_token = front
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.get("auth").is_some())
            .count();
        assert_eq!(with_body_token, 1, "{version}: only the probe above");
        client.cancel().await.unwrap();
        guard.stop().await;
    }
}

#[tokio::test]
async fn json_history_only_from_8_0() {
    let lab = common::lab(7);
    let seeded = &lab.seed["history"]["mcp.text"];
    let itemid = seeded["itemid"].as_str().unwrap().to_owned();
    let (from, till) = (
        seeded["from"].as_i64().unwrap(),
        seeded["till"].as_i64().unwrap(),
    );
    let values: Vec<String> = seeded["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_str().unwrap().to_owned())
        .collect();
    let args = json!({"itemids": [itemid], "type": "json", "time_from": from, "time_till": till});
    let mut outcomes = Vec::new();
    for (version, numbers) in VERSIONS {
        let (url, front) = version_front::start(&lab.url, version).await;
        let guard = common::start_with(common::config_for(&url)).await;
        let client = common::client(&guard, &lab.token).await;
        let schema = client
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .find(|t| t.name == "history_get")
            .unwrap()
            .input_schema;
        // tools/list offers `json` only where Zabbix has it.
        let offered = schema["properties"]["type"]["enum"]
            .as_array()
            .is_some_and(|e| e.iter().any(|v| v == "json"));
        assert_eq!(offered, numbers >= (8, 0), "{version}: {schema:?}");
        if numbers >= (8, 0) {
            let env = common::read(&client, "history_get", args.clone()).await;
            let got = common::results(&env);
            assert!(got.len() >= values.len(), "{version}: {env}");
            for value in &values {
                let document = json!({"text": value}).to_string();
                assert!(
                    got.iter().any(|r| r["value"] == document.as_str()),
                    "{version}: {value} missing: {env}"
                );
            }
            assert_eq!(front.history_requests(HISTORY_JSON), 1, "{version}");
            outcomes.push(format!("{version}: {} JSON values", got.len()));
        } else {
            let err = common::tool_error(&client, "history_get", args.clone()).await;
            assert_eq!(err["code"], "invalid_arguments", "{version}: {err}");
            let message = err["message"].as_str().unwrap();
            assert!(
                message.contains("needs Zabbix 8.0") && message.contains(version),
                "{version}: {message}"
            );
            assert_eq!(
                front.history_requests(HISTORY_JSON),
                0,
                "{version}: history 6 never reaches a Zabbix before 8.0"
            );
            outcomes.push(format!("{version}: invalid_arguments, 0 sent"));
        }
        // The other types work the same everywhere.
        let text = common::read(
            &client,
            "history_get",
            json!({"itemids": [itemid], "type": "text", "time_from": from, "time_till": till}),
        )
        .await;
        assert!(common::results(&text).len() >= values.len(), "{version}");
        assert_nothing_refused(&front, version);
        client.cancel().await.unwrap();
        guard.stop().await;
    }
    eprintln!("history_get type=json: {}", outcomes.join("; "));
}

#[tokio::test]
async fn writes_work_through_every_pretended_version() {
    let lab = common::lab(7);
    for (version, numbers) in VERSIONS {
        let (url, front) = version_front::start(&lab.url, version).await;
        let target = Target {
            lab: &lab,
            url: &url,
            version: numbers,
        };
        problem_tools(&target).await;
        maintenance_tools(&target).await;
        assert_nothing_refused(&front, version);
        // The writes went through the front, with the token as Bearer, never in the body.
        for method in [
            "event.acknowledge",
            "maintenance.create",
            "maintenance.update",
            "maintenance.delete",
        ] {
            let sent = front.of_method(method);
            assert!(!sent.is_empty(), "{version}: no {method}");
            assert!(
                sent.iter().all(|r| r.get("auth").is_none()),
                "{version}: {method} carried auth"
            );
        }
        eprintln!(
            "{version}: write suite passed; {} event.acknowledge, {} maintenance.* requests",
            front.of_method("event.acknowledge").len(),
            front.of_method("maintenance.create").len()
                + front.of_method("maintenance.update").len()
                + front.of_method("maintenance.delete").len()
        );
    }
}
