//! Resources through a real MCP client: zabbix://about, the entity kinds, and "not found"
//! for missing and invisible entities alike.

mod common;

use std::time::Duration;

use common::{config_for, labs, seed_id, start, start_with};
use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::Value;
use zabbix_mcp_guard::config::DecisionLogSink;

async fn read_uri(client: &common::Client, uri: &str) -> Result<Value, rmcp::ServiceError> {
    let result = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await?;
    let contents = result.contents.first().expect("one content");
    match contents {
        ResourceContents::TextResourceContents {
            text, mime_type, ..
        } => {
            assert_eq!(mime_type.as_deref(), Some("application/json"));
            Ok(serde_json::from_str(text).expect("JSON resource"))
        }
        other => panic!("unexpected content {other:?}"),
    }
}

fn is_not_found(error: &rmcp::ServiceError) -> bool {
    error.to_string().contains("resource not found")
}

#[tokio::test]
async fn about_lists_and_templates() {
    for lab in labs() {
        let guard = start(&lab).await;
        let client = common::client(&guard, &lab.token).await;
        let listed = client.list_all_resources().await.unwrap();
        let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["zabbix://about"]);
        let templates = client.list_all_resource_templates().await.unwrap();
        let kinds: Vec<&str> = templates.iter().map(|t| t.name.as_str()).collect();
        let mut expected = vec!["host", "hostgroup", "template", "item", "trigger"];
        if lab.major >= 7 {
            expected.insert(3, "templategroup");
        }
        assert_eq!(kinds, expected);
        assert!(
            templates
                .iter()
                .all(|t| t.uri_template.starts_with("zabbix://"))
        );

        let about = read_uri(&client, "zabbix://about").await.unwrap();
        assert_eq!(about["zabbix_version"], lab.api_version.as_str());
        assert_eq!(about["api_url"], lab.url.as_str());
        assert_eq!(about["identity"]["username"], "Admin");
        assert_eq!(about["identity"]["type"], 3);
        assert!(
            about["identity"]["usrgrps"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g == "Zabbix administrators")
        );
        assert_eq!(about["identity"]["token_id"].as_str().unwrap().len(), 16);
        assert!(
            !about.to_string().contains(&lab.token),
            "the token never appears"
        );
        assert!(
            about["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t == "host_get")
        );

        let viewer = common::client(&guard, &lab.token_viewer).await;
        let about = read_uri(&viewer, "zabbix://about").await.unwrap();
        assert_eq!(about["identity"]["username"], "mcp-viewer");
        assert_eq!(about["identity"]["type"], 1);
        guard.stop().await;
    }
}

#[tokio::test]
async fn entity_resources_and_not_found() {
    for lab in labs() {
        let guard = start(&lab).await;
        let client = common::client(&guard, &lab.token).await;
        let web = seed_id(&lab, "hosts", "mcp-web-01");
        let host = read_uri(&client, &format!("zabbix://host/{web}"))
            .await
            .unwrap();
        assert_eq!(host["host"], "mcp-web-01");
        assert_eq!(host["uri"], format!("zabbix://host/{web}"));
        assert_eq!(host["hostgroups"][0]["name"], "MCP/Linux servers");
        for absent in ["triggers", "items", "interfaces", "macros"] {
            assert!(host.get(absent).is_none(), "host resource has no {absent}");
        }
        let group = seed_id(&lab, "host_groups", "MCP/Network");
        let g = read_uri(&client, &format!("zabbix://hostgroup/{group}"))
            .await
            .unwrap();
        assert_eq!(g["name"], "MCP/Network");
        assert!(g.get("hosts").is_none());
        let template = seed_id(&lab, "templates", "MCP App Template");
        let t = read_uri(&client, &format!("zabbix://template/{template}"))
            .await
            .unwrap();
        assert_eq!(t["name"], "MCP App Template");
        assert!(t.get("triggers").is_none());
        let item = lab.seed["items"]["mcp-web-01"]["mcp.float"]
            .as_str()
            .unwrap()
            .to_owned();
        let i = read_uri(&client, &format!("zabbix://item/{item}"))
            .await
            .unwrap();
        assert_eq!(i["key_"], "mcp.float");
        assert!(
            i.get("lastvalue").is_none(),
            "item resource has no current value"
        );
        let trigger = seed_id(&lab, "triggers", "MCP float too high");
        let tr = read_uri(&client, &format!("zabbix://trigger/{trigger}"))
            .await
            .unwrap();
        assert_eq!(tr["description"], "MCP float too high");
        for absent in ["hosts", "tags", "dependencies", "functions"] {
            assert!(tr.get(absent).is_none(), "trigger resource has no {absent}");
        }
        if lab.major >= 7 {
            let tg = seed_id(&lab, "template_groups", "MCP Templates");
            let v = read_uri(&client, &format!("zabbix://templategroup/{tg}"))
                .await
                .unwrap();
            assert_eq!(v["name"], "MCP Templates");
        } else {
            let err = read_uri(&client, "zabbix://templategroup/1")
                .await
                .unwrap_err();
            assert!(is_not_found(&err), "{err}");
        }

        // Missing and invisible entities read the same.
        let missing = read_uri(&client, "zabbix://host/999999999")
            .await
            .unwrap_err();
        assert!(is_not_found(&missing), "{missing}");
        let switch = seed_id(&lab, "hosts", "mcp-sw-01");
        let viewer = common::client(&guard, &lab.token_viewer).await;
        let hidden = read_uri(&viewer, &format!("zabbix://host/{switch}"))
            .await
            .unwrap_err();
        assert!(is_not_found(&hidden), "{hidden}");
        assert_eq!(
            missing.to_string().replace("999999999", "X"),
            hidden.to_string().replace(&switch, "X")
        );
        let visible = read_uri(&viewer, &format!("zabbix://host/{web}"))
            .await
            .unwrap();
        assert_eq!(visible["host"], "mcp-web-01");
        for bad in ["zabbix://host/abc", "zabbix://nothing/1", "zabbix://host"] {
            let err = read_uri(&client, bad).await.unwrap_err();
            assert!(is_not_found(&err), "{bad}: {err}");
        }
        guard.stop().await;
    }
}

/// The data of the `zabbix_result` line under the decision that read `uri`, once written.
async fn resource_outcome(log: &std::path::Path, uri: &str) -> Value {
    let what = format!("the outcome of reading {uri}");
    common::eventually(&what, Duration::from_secs(10), || async {
        let lines = common::decision_log_lines(log);
        let decided = lines
            .iter()
            .find(|l| l["input"]["phase"] == "resource" && l["input"]["resource"]["uri"] == uri)?;
        lines
            .iter()
            .find(|l| l["decision_id"] == decided["decision_id"] && l["event"] == "zabbix_result")
            .map(|l| l["data"].clone())
    })
    .await
}

/// A resource read's outcome is logged under its decision as a tool call's is: the record
/// read, a record Zabbix does not have, a Zabbix that does not answer. Before, the log had
/// only the read's "allow" (`cargo test --test resources a_resource_reads_outcome`).
#[tokio::test]
async fn a_resource_reads_outcome_is_logged_under_its_decision() {
    for (answer, delay, read_id, want) in [
        (
            None,
            Duration::ZERO,
            "1",
            serde_json::json!({"ok": true, "count": 1}),
        ),
        (
            Some(serde_json::json!([])),
            Duration::ZERO,
            "2",
            serde_json::json!({"ok": true, "count": 0}),
        ),
        (
            None,
            Duration::from_secs(3),
            "3",
            serde_json::json!({"ok": false, "code": "upstream_timeout"}),
        ),
    ] {
        let (stub_url, _stub) = match answer {
            Some(result) => common::stub::start_answering(delay, result).await,
            None => common::stub::start(delay).await,
        };
        let mut config = config_for(&stub_url);
        config.timeout = Duration::from_millis(500);
        let DecisionLogSink::File(log) = config.decision_log.clone() else {
            panic!("the test configuration logs to a file");
        };
        let guard = start_with(config).await;
        let client = common::client(&guard, "stub-token").await;
        let uri = format!("zabbix://host/{read_id}");
        let _ = read_uri(&client, &uri).await;
        let data = resource_outcome(&log, &uri).await;
        for (key, value) in want.as_object().expect("an object") {
            assert_eq!(&data[key], value, "{uri}: {data}");
        }
        guard.stop().await;
    }
}
