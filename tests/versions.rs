//! Issue 12, Zabbix versions the lab cannot install: the 7.0 lab behind a front that
//! answers `apiinfo.version` as 6.4, 7.2, 7.4 and 8.0 (7.2+ refusing `auth` and
//! `selectGroups` as they do). Reads, tools/list, a resource read and a maintenance created and deleted per version; no
//! request the pretended version would refuse is ever sent.

mod common;

use serde_json::json;

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn reads_and_writes_work_through_every_pretended_version() {
    let lab = common::lab(7);
    for version in ["6.4.0", "7.2.0", "7.4.0", "8.0.0"] {
        let (url, front) = common::version_front::start(&lab.url, version).await;
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
        assert!(
            front.refused.lock().unwrap().is_empty(),
            "{version}: sent what it refuses: {:?}",
            front.refused.lock().unwrap()
        );
        // A write and its undo: a maintenance of our own, created and deleted.
        let since = (now() / 60) * 60;
        let name = format!("MCP version front {version} {}", std::process::id());
        let host = common::seed_id(&lab, "hosts", "mcp-web-01");
        let created = common::call(
            &client,
            "maintenance_create",
            json!({"name": name, "hostids": [host], "active_since": since, "active_till": since + 3600}),
        )
        .await;
        assert_ne!(
            created.is_error,
            Some(true),
            "{version}: {:?}",
            created.content
        );
        let id = created.structured_content.unwrap()["maintenanceids"][0]
            .as_str()
            .unwrap()
            .to_owned();
        let deleted = common::call(
            &client,
            "maintenance_delete",
            json!({"maintenanceids": [id]}),
        )
        .await;
        assert_ne!(
            deleted.is_error,
            Some(true),
            "{version}: {:?}",
            deleted.content
        );
        // The front does refuse what the version refuses (6.4 still takes `auth`).
        let with_auth = json!({"jsonrpc": "2.0", "id": 1, "method": "host.get",
                               "params": {"limit": 1}, "auth": lab.token});
        let answer: serde_json::Value = reqwest::Client::new()
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
        client.cancel().await.unwrap();
        guard.stop().await;
    }
}
