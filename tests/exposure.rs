//! Tool exposure end to end: the official shipped defaults, ToolPrefix, and that a denied
//! tool is absent, uncallable and has no resources. Also the example configuration file.

mod common;

use common::{config_for, read, seed_id, start_with};
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use serde_json::json;
use zabbix_mcp_guard::config::{Config, Sources};

fn example_config() -> Config {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/zabbix_mcp_guard.conf");
    Config::load(&Sources {
        config_file: Some(path),
        env: Default::default(),
        flags: Vec::new(),
        env_contract: Default::default(),
    })
    .expect("the example configuration is valid")
}

#[tokio::test]
async fn official_defaults_from_the_example_file() {
    let lab = common::lab(7);
    let file = example_config();
    let mut config = config_for(&lab.url);
    config.tool_rules = file.tool_rules.clone();
    let guard = start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for denied in [
        "item_get",
        "lld_get",
        "interface_get",
        "macro_get",
        "history_get",
    ] {
        assert!(
            !names.contains(&denied),
            "{denied} must be hidden: {names:?}"
        );
        let err = client
            .call_tool(
                CallToolRequestParams::new(denied)
                    .with_arguments(json!({"limit": 1}).as_object().unwrap().clone()),
            )
            .await
            .expect_err("a denied tool cannot be called");
        assert!(
            err.to_string().contains(&format!("unknown tool: {denied}")),
            "{err}"
        );
    }
    assert!(names.contains(&"host_get"));
    // The item resource belongs to the denied item_get.
    let item = lab.seed["items"]["mcp-web-01"]["mcp.float"]
        .as_str()
        .unwrap()
        .to_owned();
    let err = client
        .read_resource(ReadResourceRequestParams::new(format!(
            "zabbix://item/{item}"
        )))
        .await
        .expect_err("no resource for a denied tool");
    assert!(err.to_string().contains("resource not found"), "{err}");
    let templates = client.list_all_resource_templates().await.unwrap();
    assert!(templates.iter().all(|t| t.name != "item"));
    // zabbix://about is not affected by the rules.
    client
        .read_resource(ReadResourceRequestParams::new("zabbix://about"))
        .await
        .unwrap();
    guard.stop().await;
}

#[tokio::test]
async fn tool_prefix_and_allow_list() {
    let lab = common::lab(6);
    let mut config = config_for(&lab.url);
    config.tool_prefix = "zbx_".into();
    config.tool_rules = vec![
        zabbix_mcp_guard::exposure::ToolRule::Allow(
            zabbix_mcp_guard::exposure::Pattern::wildcard("host*").unwrap(),
        ),
        zabbix_mcp_guard::exposure::ToolRule::Deny(
            zabbix_mcp_guard::exposure::Pattern::regex(".*").unwrap(),
        ),
    ];
    let guard = start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["zbx_host_get", "zbx_hostgroup_get"]);
    let env = read(&client, "zbx_host_get", json!({"search": "mcp-web-01"})).await;
    assert_eq!(env["count"], 1);
    let err = client
        .call_tool(CallToolRequestParams::new("host_get"))
        .await
        .expect_err("the plain name is not exposed");
    assert!(err.to_string().contains("unknown tool"), "{err}");
    let web = seed_id(&lab, "hosts", "mcp-web-01");
    let host = client
        .read_resource(ReadResourceRequestParams::new(format!(
            "zabbix://host/{web}"
        )))
        .await
        .unwrap();
    assert_eq!(host.contents.len(), 1);
    guard.stop().await;
}

#[test]
fn test_config_flag_validates_the_example_file() {
    let bin = env!("CARGO_BIN_EXE_zabbix-mcp-guard");
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/zabbix_mcp_guard.conf"
    );
    let out = std::process::Command::new(bin)
        .args(["-T", "-c", example])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("DenyTool=history_get"), "{text}");

    let dir = common::scratch_dir("badconf");
    let bad = dir.join("bad.conf");
    std::fs::write(
        &bad,
        "FrontendURL=http://127.0.0.1/\nAllowedIP=127.0.0.1\nTimeout=45\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin)
        .args(["-T", "-c"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.conf:3") && err.contains("Timeout"),
        "{err}"
    );
}
