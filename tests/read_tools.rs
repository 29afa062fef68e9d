//! Every read tool, through a real MCP client, against the real Zabbix 6.0 and 7.0 labs.

mod common;

use common::{Lab, labs, names, read, results, seed_id, start, tool_error};
use serde_json::{Value, json};

fn is_sorted_by<F: Fn(&Value) -> K, K: PartialOrd>(
    list: &[Value],
    key: F,
    descending: bool,
) -> bool {
    list.windows(2).all(|w| {
        let (a, b) = (key(&w[0]), key(&w[1]));
        if descending { a >= b } else { a <= b }
    })
}

fn num(v: &Value) -> u64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| v.as_u64())
        .unwrap_or(0)
}

#[tokio::test]
async fn tool_list_matches_the_version() {
    for lab in labs() {
        let guard = start(&lab).await;
        let client = common::client(&guard, &lab.token).await;
        let tools = client.list_all_tools().await.unwrap();
        let listed: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        let expected = [
            "hostgroup_get",
            "host_get",
            "template_get",
            "item_get",
            "lld_get",
            "interface_get",
            "macro_get",
            "problem_get",
            "maintenance_get",
            "history_get",
            "trigger_get",
        ];
        for name in expected {
            assert!(
                listed.contains(&name),
                "{}: {name} missing from {listed:?}",
                lab.major
            );
        }
        assert_eq!(
            listed.contains(&"templategroup_get"),
            lab.major >= 7,
            "{listed:?}"
        );
        let reads = tools.iter().filter(|t| t.name.ends_with("_get"));
        for tool in reads {
            let annotations = tool.annotations.as_ref().expect("annotations");
            assert_eq!(annotations.read_only_hint, Some(true), "{}", tool.name);
            assert!(
                tool.output_schema.is_some(),
                "{} has no output schema",
                tool.name
            );
            assert_eq!(tool.input_schema["type"], "object");
            assert_eq!(tool.input_schema["additionalProperties"], false);
            let props = tool.input_schema["properties"].as_object().unwrap();
            for (name, schema) in props {
                assert!(
                    schema["description"].is_string(),
                    "{}.{name} lacks a description",
                    tool.name
                );
            }
        }
        client.cancel().await.unwrap();
        guard.stop().await;
    }
}

#[tokio::test]
async fn hostgroup_and_templategroup_get() {
    for lab in labs() {
        let guard = start(&lab).await;
        let client = common::client(&guard, &lab.token).await;
        let env = read(&client, "hostgroup_get", json!({"search": "MCP/"})).await;
        assert_eq!(
            names(&env, "name"),
            ["MCP/Databases", "MCP/Linux servers", "MCP/Network"]
        );
        let linux = seed_id(&lab, "host_groups", "MCP/Linux servers");
        let env = read(
            &client,
            "hostgroup_get",
            json!({"names": ["MCP/Linux servers"]}),
        )
        .await;
        assert_eq!(env["count"], 1);
        assert_eq!(results(&env)[0]["groupid"], linux.as_str());
        assert_eq!(
            results(&env)[0]["uri"],
            format!("zabbix://hostgroup/{linux}")
        );
        let env = read(
            &client,
            "hostgroup_get",
            json!({"groupids": [linux.parse::<u64>().unwrap()]}),
        )
        .await;
        assert_eq!(names(&env, "name"), ["MCP/Linux servers"]);

        if lab.major >= 7 {
            let env = read(
                &client,
                "templategroup_get",
                json!({"search": "MCP Templates"}),
            )
            .await;
            assert_eq!(names(&env, "name"), ["MCP Templates", "MCP Templates/Apps"]);
            let id = seed_id(&lab, "template_groups", "MCP Templates");
            assert_eq!(
                results(&env)[0]["uri"],
                format!("zabbix://templategroup/{id}")
            );
        } else {
            let err = client
                .call_tool(rmcp::model::CallToolRequestParams::new("templategroup_get"))
                .await
                .expect_err("templategroup_get is not offered on 6.0");
            assert!(err.to_string().contains("unknown tool"), "{err}");
        }
        guard.stop().await;
    }
}

#[tokio::test]
async fn host_get_returns_groups_tags_templates_triggers() {
    for lab in labs() {
        let guard = start(&lab).await;
        let client = common::client(&guard, &lab.token).await;
        let env = read(&client, "host_get", json!({"search": "mcp-*0*"})).await;
        assert_eq!(
            names(&env, "host"),
            [
                "mcp-db-01",
                "mcp-db-02",
                "mcp-sw-01",
                "mcp-web-01",
                "mcp-web-02"
            ],
            "sorted by visible name"
        );
        assert!(is_sorted_by(
            results(&env),
            |r| r["name"].as_str().unwrap().to_owned(),
            false
        ));
        let web = results(&env)
            .iter()
            .find(|h| h["host"] == "mcp-web-01")
            .unwrap();
        let hostid = seed_id(&lab, "hosts", "mcp-web-01");
        assert_eq!(web["hostid"], hostid.as_str());
        assert_eq!(web["uri"], format!("zabbix://host/{hostid}"));
        assert_eq!(web["hostgroups"][0]["name"], "MCP/Linux servers", "{web}");
        assert!(web.get("groups").is_none(), "version-neutral key");
        assert!(
            web["tags"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["tag"] == "role")
        );
        assert!(
            web["parentTemplates"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == "MCP App Template")
        );
        let triggers = web["triggers"].as_array().unwrap();
        assert!(
            triggers
                .iter()
                .any(|t| t["description"] == "MCP float too high")
        );
        assert!(
            triggers[0].get("expression").is_none(),
            "limited trigger fields"
        );

        let group = seed_id(&lab, "host_groups", "MCP/Databases");
        let env = read(&client, "host_get", json!({"groupids": [group]})).await;
        assert_eq!(names(&env, "host"), ["mcp-db-01", "mcp-db-02"]);
        let env = read(&client, "host_get", json!({"hostids": [hostid]})).await;
        assert_eq!(env["count"], 1);
        guard.stop().await;
    }
}

#[tokio::test]
async fn template_get_returns_groups_and_triggers() {
    for lab in labs() {
        let guard = start(&lab).await;
        let client = common::client(&guard, &lab.token).await;
        let env = read(&client, "template_get", json!({"search": "MCP"})).await;
        assert_eq!(
            names(&env, "name"),
            ["MCP App Template", "MCP Base Template"]
        );
        let app = &results(&env)[0];
        let id = seed_id(&lab, "templates", "MCP App Template");
        assert_eq!(app["uri"], format!("zabbix://template/{id}"));
        assert!(
            app["templategroups"]
                .as_array()
                .is_some_and(|g| !g.is_empty()),
            "{app}"
        );
        assert!(
            app["triggers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["description"] == "MCP app is down")
        );
        guard.stop().await;
    }
}

#[tokio::test]
async fn item_lld_interface_macro_get() {
    for lab in labs() {
        let guard = start(&lab).await;
        let client = common::client(&guard, &lab.token).await;
        let web = seed_id(&lab, "hosts", "mcp-web-01");

        let env = read(
            &client,
            "item_get",
            json!({"hostids": [web], "search": "mcp."}),
        )
        .await;
        let keys = names(&env, "key_");
        for key in ["mcp.float", "mcp.char", "mcp.log", "mcp.uint", "mcp.text"] {
            assert!(keys.contains(&key.to_owned()), "{key} missing in {keys:?}");
        }
        assert!(
            is_sorted_by(
                results(&env),
                |r| r["name"].as_str().unwrap().to_lowercase(),
                false
            ) || is_sorted_by(
                results(&env),
                |r| r["name"].as_str().unwrap().to_owned(),
                false
            )
        );
        let float = results(&env)
            .iter()
            .find(|i| i["key_"] == "mcp.float")
            .unwrap();
        assert_eq!(float["value_type"], "0");
        assert!(float["uri"].as_str().unwrap().starts_with("zabbix://item/"));
        assert!(float.get("lastvalue").is_some());

        let env = read(&client, "lld_get", json!({"hostids": [web]})).await;
        assert!(names(&env, "key_").contains(&"mcp.discovery".to_owned()));
        assert!(
            results(&env)[0].get("uri").is_none(),
            "lld_get has no resource"
        );
        let rule = seed_id(&lab, "lld_rules", "mcp.discovery");
        let env = read(&client, "lld_get", json!({"ruleids": [rule]})).await;
        assert_eq!(env["count"], 1);

        let all = seed_id(&lab, "hosts", "mcp-sw-01");
        let env = read(&client, "interface_get", json!({"hostids": [web, all]})).await;
        assert_eq!(env["count"], 2);
        assert!(is_sorted_by(
            results(&env),
            |r| num(&r["interfaceid"]),
            false
        ));
        assert!(results(&env).iter().any(|i| i["port"] == "10050"));

        let env = read(&client, "macro_get", json!({"hostids": [web]})).await;
        assert_eq!(
            names(&env, "macro"),
            ["{$MCP_SECRET_TEXT}", "{$MCP_THRESHOLD}"]
        );
        let env = read(
            &client,
            "macro_get",
            json!({"global": true, "macro_names": ["{$MCP_GLOBAL}"]}),
        )
        .await;
        assert_eq!(names(&env, "macro"), ["{$MCP_GLOBAL}"]);
        assert!(results(&env)[0].get("globalmacroid").is_some());
        let err = tool_error(&client, "macro_get", json!({})).await;
        assert_eq!(err["code"], "invalid_arguments");
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("exactly one of hostids, global")
        );
        guard.stop().await;
    }
}

#[tokio::test]
async fn problem_maintenance_trigger_get() {
    for lab in labs() {
        let guard = start(&lab).await;
        let client = common::client(&guard, &lab.token).await;
        let web = seed_id(&lab, "hosts", "mcp-web-01");
        let env = read(&client, "problem_get", json!({"hostids": [web]})).await;
        let problems = results(&env);
        assert!(!problems.is_empty(), "{env}");
        assert!(
            is_sorted_by(problems, |p| num(&p["eventid"]), true),
            "event ID descending"
        );
        assert!(
            problems
                .iter()
                .any(|p| p["name"].as_str().unwrap().starts_with("MCP "))
        );
        let env = read(
            &client,
            "problem_get",
            json!({"hostids": [web], "severities": [4]}),
        )
        .await;
        assert!(results(&env).iter().all(|p| p["severity"] == "4"));
        assert!(
            results(&env)
                .iter()
                .any(|p| p["name"] == "MCP uint too high")
        );

        let db2 = seed_id(&lab, "hosts", "mcp-db-02");
        let env = read(&client, "maintenance_get", json!({"hostids": [db2]})).await;
        let m = results(&env)
            .iter()
            .find(|m| m["name"] == "MCP planned maintenance")
            .expect("seeded maintenance");
        assert!(
            m["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h["hostid"] == db2.as_str())
        );
        assert!(!m["timeperiods"].as_array().unwrap().is_empty());

        let env = read(
            &client,
            "trigger_get",
            json!({"hostids": [web], "search": "too high"}),
        )
        .await;
        assert_eq!(
            names(&env, "description"),
            ["MCP float too high", "MCP uint too high"]
        );
        let t = &results(&env)[0];
        assert_eq!(t["manual_close"], "1");
        assert!(
            t["expression"].as_str().unwrap().contains("mcp-web-01"),
            "expanded: {t}"
        );
        assert!(t["uri"].as_str().unwrap().starts_with("zabbix://trigger/"));
        guard.stop().await;
    }
}

fn seeded_history(lab: &Lab, key: &str) -> (String, i64, i64, Vec<Value>) {
    let h = &lab.seed["history"][key];
    (
        h["itemid"].as_str().unwrap().to_owned(),
        h["from"].as_i64().unwrap(),
        h["till"].as_i64().unwrap(),
        h["values"].as_array().unwrap().clone(),
    )
}

#[tokio::test]
async fn history_get_every_type_newest_first() {
    for lab in labs() {
        let guard = start(&lab).await;
        let client = common::client(&guard, &lab.token).await;
        for (key, ty) in [
            ("mcp.float", "float"),
            ("mcp.uint", "unsigned"),
            ("mcp.char", "character"),
            ("mcp.text", "text"),
            ("mcp.log", "log"),
        ] {
            let (itemid, from, till, values) = seeded_history(&lab, key);
            let env = read(
                &client,
                "history_get",
                json!({"itemids": [itemid], "type": ty, "time_from": from, "time_till": till}),
            )
            .await;
            let got = results(&env);
            assert!(got.len() >= values.len(), "{key}: {env}");
            assert!(
                is_sorted_by(got, |r| num(&r["clock"]), true),
                "{key}: clock descending"
            );
            for pair in &values {
                let (clock, value) = (pair[0].as_i64().unwrap(), &pair[1]);
                let want = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                assert!(
                    got.iter().any(|r| num(&r["clock"]) == clock as u64
                        && (r["value"] == want.as_str()
                            || r["value"].as_str().and_then(|s| s.parse::<f64>().ok())
                                == want.parse::<f64>().ok())),
                    "{key}: seeded value {want} at {clock} missing"
                );
            }
            if ty == "log" {
                assert!(
                    got[0].get("logeventid").is_some(),
                    "log history has log fields"
                );
            } else {
                assert!(got[0].get("logeventid").is_none());
            }
        }
        // Without a window: the widest allowed one ending now, which includes the seed.
        let (itemid, _, _, values) = seeded_history(&lab, "mcp.float");
        let env = read(
            &client,
            "history_get",
            json!({"itemids": [itemid.clone()], "type": "float", "limit": 3}),
        )
        .await;
        assert_eq!(env["count"], 3);
        assert_eq!(env["truncated_by"], "count");
        assert!(values.len() >= 3);

        let err = tool_error(
            &client,
            "history_get",
            json!({"itemids": [itemid.clone()], "type": "binary"}),
        )
        .await;
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("type must be one of float, character, log, unsigned, text"),
            "{err}"
        );
        let now = common_now();
        let err = tool_error(&client, "history_get",
            json!({"itemids": [itemid.clone()], "type": "float", "time_from": now - 8 * 86400, "time_till": now})).await;
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("at most 604800 seconds (7 days)"),
            "{err}"
        );
        let err = tool_error(&client, "history_get",
            json!({"itemids": [itemid.clone()], "type": "float", "time_from": now - 9 * 86400, "time_till": now - 8 * 86400})).await;
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("no earlier than 604800 seconds (7 days) ago"),
            "{err}"
        );
        let err = tool_error(&client, "history_get", json!({"type": "float"})).await;
        assert_eq!(err["message"], "itemids is required");
        guard.stop().await;
    }
}

fn common_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Zabbix on PostgreSQL cuts text at a NUL (libpq's escaping stops there): a filter the
/// policy saw as "MCP/Databases\0…" would be looked up as "MCP/Databases", and a search of
/// "\0" alone as a pattern matching everything. Refused with `invalid_arguments` before the
/// policy or Zabbix sees it.
#[tokio::test]
async fn a_nul_in_text_never_reaches_zabbix() {
    for lab in labs() {
        let guard = start(&lab).await;
        let client = common::client(&guard, &lab.token).await;
        for (tool, args, expected) in [
            (
                "hostgroup_get",
                json!({"names": ["MCP/Databases\u{0}, only this name"]}),
                "names[0] contains U+0000 at character 13",
            ),
            (
                "hostgroup_get",
                json!({"search": "\u{0}"}),
                "search contains U+0000 at character 0",
            ),
        ] {
            let result = common::call(&client, tool, args.clone()).await;
            assert_eq!(
                result.is_error,
                Some(true),
                "{} {tool} {args}: Zabbix answered for the text cut at its NUL: {:?}",
                lab.major,
                result.structured_content
            );
            let body = common::error_body(&result);
            assert_eq!(body["code"], "invalid_arguments", "{body}");
            let message = body["message"].as_str().unwrap_or_default();
            assert!(message.contains(expected), "{message}");
        }
        guard.stop().await;
    }
}

/// history.get takes 32-bit times: a time in milliseconds used to pass the window checks
/// (the default time_from followed it) and come back as Zabbix's own refusal. It is
/// `invalid_arguments` now, naming the slip.
#[tokio::test]
async fn history_times_in_milliseconds_are_refused_as_such() {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for lab in labs() {
        let guard = start(&lab).await;
        let client = common::client(&guard, &lab.token).await;
        let (itemid, ..) = seeded_history(&lab, "mcp.float");
        let args = json!({"itemids": [itemid], "type": "float", "time_till": now_ms});
        let body = tool_error(&client, "history_get", args).await;
        assert_eq!(body["code"], "invalid_arguments", "{} {body}", lab.major);
        let message = body["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!(
                "time_till must be a Unix time in seconds between 0 and 2147483647, got {now_ms} (milliseconds?"
            )),
            "{message}"
        );
        guard.stop().await;
    }
}
