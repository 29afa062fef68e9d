//! Resources through a real MCP client: zabbix://about, the entity kinds, and "not found"
//! for missing and invisible entities alike.

mod common;

use common::{labs, seed_id, start};
use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::Value;

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
