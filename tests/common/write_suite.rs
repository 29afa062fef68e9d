//! The write tools end to end (problems and maintenances): real problems made by trapper
//! values, effects read back through problem_get / maintenance_get, Zabbix errors
//! (permission included) unchanged. Run by tests/writes.rs against each lab, and by
//! tests/versions.rs through the version front for each pretended version.

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use super::trapper::{fresh_problem, wait_problem};
use super::{Lab, config_for, read, results, seed_id, start_with, tool_error};
use crate::common;

/// Where the suite runs: a lab, the URL the sidecar is given (the lab's own, or a front
/// before it), and the Zabbix version the sidecar will see there.
pub struct Target<'a> {
    pub lab: &'a Lab,
    pub url: &'a str,
    pub version: (u16, u16),
}

impl<'a> Target<'a> {
    /// The lab itself.
    pub fn direct(lab: &'a Lab) -> Self {
        let mut parts = lab.api_version.split('.').map(|p| p.parse().unwrap_or(0));
        let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        Target {
            lab,
            url: &lab.url,
            version,
        }
    }

    pub fn label(&self) -> String {
        format!("{}.{}", self.version.0, self.version.1)
    }
}

async fn write(client: &common::Client, tool: &str, args: Value) -> Value {
    let result: CallToolResult = common::call(client, tool, args.clone()).await;
    assert_ne!(
        result.is_error,
        Some(true),
        "{tool} {args}: {:?}",
        result.structured_content
    );
    result.structured_content.expect("structured Zabbix result")
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Every problem tool on a real problem, Zabbix's refusals, and the permission cases.
pub async fn problem_tools(target: &Target<'_>) {
    let lab = target.lab;
    let guard = start_with(config_for(target.url)).await;
    let client = common::client(&guard, &lab.token).await;
    let tools = common::tool_names(&client).await;
    for name in [
        "problem_acknowledge",
        "problem_unacknowledge",
        "problem_close",
        "problem_annotate",
        "problem_change_severity",
    ] {
        assert!(
            tools.contains(&name.to_owned()),
            "{name} offered on {}",
            target.label()
        );
    }
    assert_eq!(
        tools.contains(&"problem_suppress".to_owned()),
        target.version >= (6, 2),
        "suppress needs 6.2"
    );

    let event = fresh_problem(
        &client,
        lab,
        "mcp-web-01",
        "mcp.float",
        "MCP float too high",
        "1",
        "500",
    )
    .await;
    let result = write(
        &client,
        "problem_acknowledge",
        json!({"eventids": [event.clone()], "message": "seen by the MCP test"}),
    )
    .await;
    assert_eq!(
        result["eventids"][0].to_string().trim_matches('"'),
        event,
        "Zabbix's own result: {result}"
    );
    wait_problem(&client, &event, |p| {
        p.is_some_and(|p| p["acknowledged"] == "1")
    })
    .await;

    let err = tool_error(
        &client,
        "problem_annotate",
        json!({"eventids": [event.clone()]}),
    )
    .await;
    assert_eq!(err["code"], "invalid_arguments");
    assert!(
        err["message"].as_str().unwrap().contains("message"),
        "{err}"
    );
    write(
        &client,
        "problem_annotate",
        json!({"eventids": [event.clone()], "message": "a note"}),
    )
    .await;

    write(
        &client,
        "problem_change_severity",
        json!({"eventids": [event.clone()], "severity": 5}),
    )
    .await;
    wait_problem(&client, &event, |p| p.is_some_and(|p| p["severity"] == "5")).await;
    let err = tool_error(
        &client,
        "problem_change_severity",
        json!({"eventids": [event.clone()], "severity": 6}),
    )
    .await;
    assert_eq!(err["code"], "invalid_arguments");

    write(
        &client,
        "problem_unacknowledge",
        json!({"eventids": [event.clone()]}),
    )
    .await;
    wait_problem(&client, &event, |p| {
        p.is_some_and(|p| p["acknowledged"] == "0")
    })
    .await;

    if target.version >= (6, 2) {
        let until = now() + 3600;
        write(
            &client,
            "problem_suppress",
            json!({"eventids": [event.clone()], "suppress_until": until}),
        )
        .await;
        wait_problem(&client, &event, |p| {
            p.is_some_and(|p| p["suppressed"] == "1")
        })
        .await;
        write(
            &client,
            "problem_unsuppress",
            json!({"eventids": [event.clone()]}),
        )
        .await;
        wait_problem(&client, &event, |p| {
            p.is_some_and(|p| p["suppressed"] == "0")
        })
        .await;
    }

    write(
        &client,
        "problem_close",
        json!({"eventids": [event.clone()], "message": "closed by the MCP test"}),
    )
    .await;
    wait_problem(&client, &event, |p| p.is_none_or(|p| p["r_eventid"] != "0")).await;

    // A trigger without manual close: Zabbix refuses, and its error comes back unchanged.
    let uint = fresh_problem(
        &client,
        lab,
        "mcp-web-01",
        "mcp.uint",
        "MCP uint too high",
        "1",
        "5000",
    )
    .await;
    let err = tool_error(&client, "problem_close", json!({"eventids": [uint]})).await;
    assert_eq!(err["code"], "zabbix_error", "{err}");
    assert!(err["data"]["code"].is_i64());
    let zabbix_text = format!("{} {}", err["data"]["message"], err["data"]["data"]);
    assert!(
        zabbix_text.to_lowercase().contains("close"),
        "{zabbix_text}"
    );

    // The operator cannot see the database hosts: the event's targets do not resolve, so
    // the call is denied before Zabbix (tests/scope.rs). The viewer sees them read-only,
    // and closing needs read-write: Zabbix's permission error comes back unchanged.
    let db = fresh_problem(
        &client,
        lab,
        "mcp-db-01",
        "mcp.db.connections",
        "MCP db connections high",
        "1",
        "900",
    )
    .await;
    let operator = common::client(&guard, &lab.token_operator).await;
    let err = tool_error(
        &operator,
        "problem_acknowledge",
        json!({"eventids": [db.clone()]}),
    )
    .await;
    assert_eq!(err["code"], "denied", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains(&format!("event {db} cannot be resolved")),
        "{err}"
    );
    let viewer = common::client(&guard, &lab.token_viewer).await;
    let err = tool_error(&viewer, "problem_close", json!({"eventids": [db.clone()]})).await;
    assert_eq!(err["code"], "zabbix_error", "{err}");
    assert!(
        err["data"]["message"].is_string() && err["data"]["data"].is_string(),
        "{err}"
    );
    assert!(
        err["data"]["data"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("permission"),
        "{err}"
    );
    write(&client, "problem_close", json!({"eventids": [db]})).await;
    // Leave the lab as the seed made it: both mcp-web-01 problems open.
    fresh_problem(
        &client,
        lab,
        "mcp-web-01",
        "mcp.float",
        "MCP float too high",
        "1",
        "500",
    )
    .await;
    guard.stop().await;
}

/// maintenance_create / update / delete, read back; the write tools' annotations.
pub async fn maintenance_tools(target: &Target<'_>) {
    let lab = target.lab;
    let guard = start_with(config_for(target.url)).await;
    let client = common::client(&guard, &lab.token).await;
    let (a, b, c) = (
        seed_id(lab, "hosts", "mcp-web-01"),
        seed_id(lab, "hosts", "mcp-web-02"),
        seed_id(lab, "hosts", "mcp-db-01"),
    );
    let group = seed_id(lab, "host_groups", "MCP/Network");
    let since = (now() / 60) * 60;
    let name = format!(
        "MCP test maintenance {} {}",
        target.label(),
        std::process::id()
    );
    let err = tool_error(
        &client,
        "maintenance_create",
        json!({"name": name, "hostids": [a], "active_since": since + 3600, "active_till": since}),
    )
    .await;
    assert_eq!(err["code"], "invalid_arguments");
    assert!(
        err["message"].as_str().unwrap().contains("active_since"),
        "{err}"
    );

    let created = write(
        &client,
        "maintenance_create",
        json!({
        "name": name, "hostids": [a, b], "active_since": since, "active_till": since + 7200,
        "description": "made by the MCP tests"}),
    )
    .await;
    let id = created["maintenanceids"][0]
        .as_str()
        .expect("maintenanceids")
        .to_owned();
    let hosts = |env: &Value| -> Vec<String> {
        let mut ids: Vec<String> = results(env)[0]["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["hostid"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let env = read(
        &client,
        "maintenance_get",
        json!({"maintenanceids": [id.clone()]}),
    )
    .await;
    let mut ab = vec![a.clone(), b.clone()];
    ab.sort();
    assert_eq!(hosts(&env), ab);

    // A list argument replaces the whole set.
    write(
        &client,
        "maintenance_update",
        json!({"maintenanceid": id.clone(), "hostids": [c]}),
    )
    .await;
    let env = read(
        &client,
        "maintenance_get",
        json!({"maintenanceids": [id.clone()]}),
    )
    .await;
    assert_eq!(hosts(&env), std::slice::from_ref(&c));
    // An empty list clears it (a group keeps the maintenance valid).
    write(
        &client,
        "maintenance_update",
        json!({"maintenanceid": id.clone(), "groupids": [group.clone()], "hostids": []}),
    )
    .await;
    let env = read(
        &client,
        "maintenance_get",
        json!({"maintenanceids": [id.clone()]}),
    )
    .await;
    assert!(hosts(&env).is_empty(), "{env}");
    assert_eq!(results(&env)[0]["hostgroups"][0]["groupid"], group.as_str());

    write(
        &client,
        "maintenance_delete",
        json!({"maintenanceids": [id.clone()]}),
    )
    .await;
    let env = read(&client, "maintenance_get", json!({"maintenanceids": [id]})).await;
    assert_eq!(env["count"], 0);

    let tools = client.list_all_tools().await.unwrap();
    let annotations = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .annotations
            .clone()
            .unwrap()
    };
    assert_eq!(
        annotations("maintenance_delete").destructive_hint,
        Some(true)
    );
    assert_eq!(
        annotations("maintenance_create").idempotent_hint,
        Some(false)
    );
    assert_eq!(
        annotations("maintenance_update").read_only_hint,
        Some(false)
    );
    // Zabbix cannot reopen a closed problem, and every comment is one more record.
    assert_eq!(annotations("problem_close").destructive_hint, Some(true));
    assert_eq!(annotations("problem_annotate").idempotent_hint, Some(false));
    assert_eq!(
        annotations("problem_acknowledge").destructive_hint,
        Some(false)
    );
    guard.stop().await;
}
