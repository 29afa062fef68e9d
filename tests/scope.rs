//! One policy view per caller, in every phase: a tool the list phase hides is unknown to
//! calls too; a resource read is decided on the equivalent tool call's arguments; the
//! defaults a caller did not give (limit, history window) are decided as they will be sent.

mod common;

use std::path::{Path, PathBuf};

use common::trapper::{fresh_problem, wait_problem};
use common::{Lab, config_for, read, seed_id, start_with, temp_path, tool_error};
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use serde_json::{Value, json};
use zabbix_mcp_guard::config::DecisionLogSink;

/// A guard on `lab` with `rego` (and `data`) as its whole policy set; returns the decision log.
async fn guard_with(lab: &Lab, rego: &str, data: Option<Value>) -> (common::Guard, PathBuf) {
    let dir = temp_path("policy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.rego"), rego).unwrap();
    if let Some(data) = data {
        std::fs::write(dir.join("data.json"), data.to_string()).unwrap();
    }
    let mut config = config_for(&lab.url);
    config.policy_dir = Some(dir);
    let log = temp_path("decisions.log");
    config.decision_log = DecisionLogSink::File(log.clone());
    (start_with(config).await, log)
}

fn call_decisions(log: &Path, tool: &str) -> Vec<Value> {
    common::decision_log_text(log)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["input"]["phase"] == "call" && l["input"]["tool"]["name"] == tool)
        .collect()
}

/// The JSON-RPC error of a tools/call that must fail at the protocol level.
async fn protocol_error(client: &common::Client, tool: &str, args: Value) -> String {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Value::Object(map) = args {
        params = params.with_arguments(map);
    }
    match client.call_tool(params).await {
        Ok(result) => panic!("{tool} answered instead of failing: {result:?}"),
        Err(error) => error.to_string(),
    }
}

#[tokio::test]
async fn a_hidden_tool_answers_like_a_tool_that_does_not_exist() {
    let lab = common::lab(7);
    let linux = seed_id(&lab, "host_groups", "MCP/Linux servers");
    let data = json!({"tier1": {"usrgrps": ["MCP Operators"], "groupids": [linux]}});
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/examples/tier1_operations");
    let rego = std::fs::read_to_string(example.join("policy.rego")).unwrap();
    let (guard, _) = guard_with(&lab, &rego, Some(data)).await;
    let operator = common::client(&guard, &lab.token_operator).await;

    let unknown = protocol_error(&operator, "no_such_tool", json!({})).await;
    assert!(unknown.contains("unknown tool: no_such_tool"), "{unknown}");
    // host_get is hidden from tier 1: with good, bad or no arguments, it does not exist.
    for args in [json!({}), json!({"hostid": "1"}), json!({"limit": 0})] {
        let hidden = protocol_error(&operator, "host_get", args).await;
        assert_eq!(
            hidden,
            unknown.replace("no_such_tool", "host_get"),
            "hidden and unknown answer alike"
        );
    }
    // The admin still has it.
    let admin = common::client(&guard, &lab.token).await;
    read(&admin, "host_get", json!({"limit": 1})).await;
    guard.stop().await;
}

const HIDE_HOST_GET: &str = r#"package zabbix.mcp
import rego.v1
# host_get is not offered; nothing else is said about it.
decision := {"allow": false, "reasons": ["not offered"]} if {
    input.phase == "list"
    input.tool.name == "host_get"
} else := {"allow": true, "reasons": []}
"#;

#[tokio::test]
async fn a_hidden_tool_has_no_resources_either() {
    let lab = common::lab(7);
    let web = seed_id(&lab, "hosts", "mcp-web-01");
    let (guard, _) = guard_with(&lab, HIDE_HOST_GET, None).await;
    let client = common::client(&guard, &lab.token).await;
    let hidden = protocol_error(&client, "host_get", json!({"hostids": [web.clone()]})).await;
    assert!(hidden.contains("unknown tool: host_get"), "{hidden}");
    let err = client
        .read_resource(ReadResourceRequestParams::new(format!(
            "zabbix://host/{web}"
        )))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("resource not found"), "{err}");
    // Other kinds are unaffected.
    let linux = seed_id(&lab, "host_groups", "MCP/Linux servers");
    client
        .read_resource(ReadResourceRequestParams::new(format!(
            "zabbix://hostgroup/{linux}"
        )))
        .await
        .unwrap();
    guard.stop().await;
}

#[tokio::test]
async fn unresolvable_targets_deny_when_zabbix_does_not_answer() {
    // A stub whose data methods (event.get among them) answer after the timeout.
    let (url, _stub) = common::stub::start(std::time::Duration::from_secs(30)).await;
    let mut config = config_for(&url);
    config.timeout = std::time::Duration::from_secs(1);
    let log = temp_path("decisions.log");
    config.decision_log = DecisionLogSink::File(log.clone());
    let guard = start_with(config).await;
    let client = common::client(&guard, "stub-token").await;
    let err = tool_error(&client, "problem_acknowledge", json!({"eventids": ["1"]})).await;
    assert_eq!(err["code"], "denied", "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("targets of the call could not be resolved")
            && message.contains("did not answer"),
        "{message}"
    );
    let decided = call_decisions(&log, "problem_acknowledge");
    assert_eq!(decided.len(), 1, "the denial is logged");
    assert_eq!(decided[0]["decision_id"], err["decision_id"]);
    assert_eq!(
        decided[0]["result"],
        Value::Null,
        "no policy ran: {}",
        decided[0]
    );
    guard.stop().await;
}

const HOST_SCOPE: &str = r#"package zabbix.mcp
import rego.v1
# host_get (and so zabbix://host/<id>) only for the hosts in data.scope.hostids.
hostids := object.get(input.arguments, "hostids", [])
deny contains "host_get must name hostids" if {
    input.phase != "list"
    input.tool.name == "host_get"
    count(hostids) == 0
}
deny contains sprintf("host %v is out of scope", [h]) if {
    input.tool.name == "host_get"
    some h in hostids
    not h in data.scope.hostids
}
decision := {"allow": count(deny) == 0, "reasons": deny}
"#;

#[tokio::test]
async fn a_resource_read_is_decided_on_the_equivalent_call() {
    for lab in common::labs() {
        let web1 = seed_id(&lab, "hosts", "mcp-web-01");
        let web2 = seed_id(&lab, "hosts", "mcp-web-02");
        let data = json!({"scope": {"hostids": [web1]}});
        let (guard, log) = guard_with(&lab, HOST_SCOPE, Some(data)).await;
        let admin = common::client(&guard, &lab.token).await;

        let allowed = admin
            .read_resource(ReadResourceRequestParams::new(format!(
                "zabbix://host/{web1}"
            )))
            .await
            .unwrap_or_else(|e| panic!("Zabbix {}: {e}", lab.major));
        assert!(format!("{allowed:?}").contains("mcp-web-01"));
        let denied = admin
            .read_resource(ReadResourceRequestParams::new(format!(
                "zabbix://host/{web2}"
            )))
            .await
            .unwrap_err();
        assert!(
            denied.to_string().contains("resource not found"),
            "{denied}"
        );
        // The tool gets the same answers.
        read(&admin, "host_get", json!({"hostids": [web1]})).await;
        let err = tool_error(&admin, "host_get", json!({"hostids": [web2]})).await;
        assert_eq!(err["code"], "denied");

        let text = common::decision_log_text(&log);
        let resource: Value = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|l| l["input"]["phase"] == "resource")
            .expect("resource decision logged");
        assert_eq!(resource["input"]["tool"]["name"], "host_get");
        assert_eq!(resource["input"]["arguments"]["hostids"], json!([web1]));
        guard.stop().await;
    }
}

const SMALL_LIMIT: &str = r#"package zabbix.mcp
import rego.v1
decision := {"allow": true, "reasons": [], "max_limit": 2}
"#;

const ONE_DAY_OF_HISTORY: &str = r#"package zabbix.mcp
import rego.v1
decision := {"allow": true, "reasons": [],
             "history": {"max_window_seconds": 86400, "max_age_seconds": 86400}}
"#;

#[tokio::test]
async fn a_default_limit_is_the_callers_max_limit() {
    let lab = common::lab(7);
    let (guard, log) = guard_with(&lab, SMALL_LIMIT, None).await;
    let client = common::client(&guard, &lab.token).await;

    // No limit given: the caller's max_limit, not a refusal of the default 100.
    let env = read(&client, "host_get", json!({})).await;
    assert_eq!(env["limit"], 2, "{env}");
    assert_eq!(env["count"], 2, "{env}");
    let err = tool_error(&client, "host_get", json!({"limit": 3})).await;
    assert_eq!(err["code"], "invalid_arguments");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("limit must be between 1 and 2 for this caller, got 3"),
        "{err}"
    );
    let decided = call_decisions(&log, "host_get");
    assert_eq!(decided.len(), 2, "one logged decision per call");
    assert_eq!(decided[0]["input"]["arguments"]["limit"], 2);
    guard.stop().await;
}

#[tokio::test]
async fn history_get_is_decided_on_the_window_it_sends() {
    let lab = common::lab(7);
    let (guard, log) = guard_with(&lab, ONE_DAY_OF_HISTORY, None).await;
    let client = common::client(&guard, &lab.token).await;
    // history_get without a window: the policy sees the one-day window that is sent.
    let item = lab.seed["items"]["mcp-web-01"]["mcp.float"]
        .as_str()
        .unwrap()
        .to_owned();
    read(
        &client,
        "history_get",
        json!({"itemids": [item], "type": "float"}),
    )
    .await;
    let decided = call_decisions(&log, "history_get");
    let arguments = &decided[0]["input"]["arguments"];
    let from = arguments["time_from"].as_i64().expect("time_from decided");
    let till = arguments["time_till"].as_i64().expect("time_till decided");
    assert_eq!(till - from, 86400, "{arguments}");
    guard.stop().await;
}

fn example(name: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/examples");
    std::fs::read_to_string(dir.join(name).join("policy.rego")).unwrap()
}

#[tokio::test]
async fn tier1_acknowledges_problems_only_on_hosts_of_its_groups() {
    for lab in common::labs() {
        let linux = seed_id(&lab, "host_groups", "MCP/Linux servers");
        let db = seed_id(&lab, "host_groups", "MCP/Databases");
        let web = seed_id(&lab, "hosts", "mcp-web-01");
        let tier1 =
            |groupid: &str| json!({"tier1": {"usrgrps": ["MCP Operators"], "groupids": [groupid]}});

        // In scope: tier 1 works on MCP/Linux servers, where mcp-web-01 is.
        let (guard, log) =
            guard_with(&lab, &example("tier1_operations"), Some(tier1(&linux))).await;
        let admin = common::client(&guard, &lab.token).await;
        let operator = common::client(&guard, &lab.token_operator).await;
        let event = fresh_problem(
            &admin,
            &lab,
            "mcp-web-01",
            "mcp.float",
            "MCP float too high",
            "1",
            "500",
        )
        .await;
        let result = common::call(
            &operator,
            "problem_acknowledge",
            json!({"eventids": [event.clone()], "message": "tier 1 scope test"}),
        )
        .await;
        assert_ne!(
            result.is_error,
            Some(true),
            "Zabbix {}: {:?}",
            lab.major,
            result.structured_content
        );
        wait_problem(&admin, &event, |p| {
            p.is_some_and(|p| p["acknowledged"] == "1")
        })
        .await;
        let decided = call_decisions(&log, "problem_acknowledge");
        assert_eq!(
            decided[0]["input"]["targets"],
            json!({"hosts": [{"hostid": web, "host": "mcp-web-01",
                              "groups": [{"groupid": linux, "name": "MCP/Linux servers"}]}],
                   "groups": []})
        );
        // An event the operator cannot see (or that does not exist) has no targets: denied.
        let err = tool_error(
            &operator,
            "problem_acknowledge",
            json!({"eventids": ["999999999"]}),
        )
        .await;
        assert_eq!(err["code"], "denied", "{err}");
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("event 999999999 cannot be resolved"),
            "{err}"
        );
        guard.stop().await;

        // Out of scope: tier 1 limited to MCP/Databases; the same problem is refused.
        let (guard, _) = guard_with(&lab, &example("tier1_operations"), Some(tier1(&db))).await;
        let operator = common::client(&guard, &lab.token_operator).await;
        let err = tool_error(
            &operator,
            "problem_acknowledge",
            json!({"eventids": [event.clone()]}),
        )
        .await;
        assert_eq!(err["code"], "denied", "{err}");
        assert_eq!(
            err["data"]["reasons"],
            json!(["tier 1: host mcp-web-01 is outside the tier 1 scope"]),
            "{err}"
        );
        guard.stop().await;
    }
}

#[tokio::test]
async fn change_window_scopes_a_maintenance_by_its_hosts() {
    for lab in common::labs() {
        let linux = seed_id(&lab, "host_groups", "MCP/Linux servers");
        let db = seed_id(&lab, "host_groups", "MCP/Databases");
        let maintenance = seed_id(&lab, "maintenances", "MCP planned maintenance");
        // Every hour of every day: the test is about the scope, not the clock.
        let window = |groupid: &str| {
            json!({"change_window": {"groupids": [groupid], "start_hour": 0, "end_hour": 24,
                "days": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]}})
        };
        // The seeded maintenance covers mcp-db-02 (MCP/Databases): outside a Linux scope.
        let (guard, log) = guard_with(&lab, &example("change_window"), Some(window(&linux))).await;
        let admin = common::client(&guard, &lab.token).await;
        let delete = json!({"maintenanceids": [maintenance.clone()]});
        let err = tool_error(&admin, "maintenance_delete", delete.clone()).await;
        assert_eq!(err["code"], "denied", "{err}");
        assert_eq!(
            err["data"]["reasons"],
            json!(["host mcp-db-02 is in no host group of the change window scope"]),
            "{err}"
        );
        let decided = call_decisions(&log, "maintenance_delete");
        assert_eq!(
            decided[0]["input"]["targets"]["hosts"][0]["host"],
            "mcp-db-02"
        );
        guard.stop().await;

        // Inside a Databases scope the policy allows it, with a required approval that this
        // client cannot give: nothing is sent either way.
        let (guard, _) = guard_with(&lab, &example("change_window"), Some(window(&db))).await;
        let admin = common::client(&guard, &lab.token).await;
        let err = tool_error(&admin, "maintenance_delete", delete).await;
        assert_eq!(err["code"], "approval_unavailable", "{err}");
        let seeded = read(
            &admin,
            "maintenance_get",
            json!({"maintenanceids": [maintenance.clone()]}),
        )
        .await;
        assert_eq!(seeded["count"], 1, "the seeded maintenance is still there");
        guard.stop().await;
    }
}

/// Host groups of the admin's own, deleted at the end: `names`, created in this order.
async fn groups(lab: &Lab, names: &[String]) -> Vec<String> {
    let mut ids = Vec::new();
    for name in names {
        let created = common::zapi::admin(lab, "hostgroup.create", json!({"name": name})).await;
        ids.push(created["groupids"][0].as_str().unwrap().to_owned());
    }
    ids
}

fn every_hour(groupids: &[&String]) -> Value {
    json!({"change_window": {"groupids": groupids, "start_hour": 0, "end_hour": 24,
        "days": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]}})
}

#[tokio::test]
async fn a_maintenance_of_a_group_targets_its_nested_subgroups() {
    for lab in common::labs() {
        // Zabbix's server puts the hosts of A/sub and A/sub/deep in a maintenance of A (seen
        // on both labs: a host only in A/sub went into maintenance). Names that merely look
        // alike (another case, no slash after A) are not nested.
        let parent = common::zapi::unique("mcp-nest");
        let names = [
            parent.clone(),
            format!("{parent}/sub"),
            format!("{parent}/sub/deep"),
            format!("{parent}x/other"),
            format!("{}/up", parent.to_uppercase()),
        ];
        let ids = groups(&lab, &names).await;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let create = json!({"name": parent, "groupids": [ids[0]],
                            "active_since": now, "active_till": now + 3600});

        let (guard, log) = guard_with(
            &lab,
            &example("change_window"),
            Some(every_hour(&[&ids[0]])),
        )
        .await;
        let admin = common::client(&guard, &lab.token).await;
        let err = tool_error(&admin, "maintenance_create", create.clone()).await;
        assert_eq!(err["code"], "denied", "Zabbix {}: {err}", lab.major);
        assert_eq!(
            err["data"]["reasons"],
            json!([
                format!(
                    "host group {} ({}) is outside the change window scope",
                    names[1], ids[1]
                ),
                format!(
                    "host group {} ({}) is outside the change window scope",
                    names[2], ids[2]
                ),
            ]),
            "{err}"
        );
        let decided = call_decisions(&log, "maintenance_create");
        let targeted: Vec<Value> = (0..3)
            .map(|i| json!({"groupid": ids[i], "name": names[i]}))
            .collect();
        assert_eq!(decided[0]["input"]["targets"]["groups"], json!(targeted));
        guard.stop().await;

        // With the subgroups in scope the policy allows it (and asks an approval this client
        // cannot give: nothing is created).
        let scope = every_hour(&[&ids[0], &ids[1], &ids[2]]);
        let (guard, _) = guard_with(&lab, &example("change_window"), Some(scope)).await;
        let admin = common::client(&guard, &lab.token).await;
        let err = tool_error(&admin, "maintenance_create", create).await;
        assert_eq!(err["code"], "approval_unavailable", "{err}");
        guard.stop().await;
        common::zapi::admin(&lab, "hostgroup.delete", json!(ids)).await;
    }
}

const NO_DELETE_OUTSIDE: &str = r#"package zabbix.mcp
import rego.v1
# Any update; a delete only of maintenances wholly in data.scope.groupids.
deny contains sprintf("maintenance of %v may not be deleted", [g.name]) if {
    input.tool.name == "maintenance_delete"
    some g in input.targets.groups
    not g.groupid in data.scope.groupids
}
decision := {"allow": count(deny) == 0, "reasons": deny, "approval": "none"}
"#;

#[tokio::test]
async fn a_write_is_decided_on_what_the_previous_write_left() {
    for lab in common::labs() {
        let names = [
            common::zapi::unique("mcp-keep"),
            common::zapi::unique("mcp-free"),
        ];
        let ids = groups(&lab, &names).await;
        let (free, keep) = (&ids[1], &ids[0]);
        let maintenance = common::zapi::maintenance_on_group(&lab, &names[1], free).await;
        let data = json!({"scope": {"groupids": [free]}});
        let (guard, _) = guard_with(&lab, NO_DELETE_OUTSIDE, Some(data)).await;
        let admin = common::client(&guard, &lab.token).await;

        // The maintenance is looked up (in scope), then moved out of scope, then deleted at
        // once: the delete must see where the move left it, not the first lookup.
        for update in [
            json!({"maintenanceid": maintenance, "description": "looked up"}),
            json!({"maintenanceid": maintenance, "groupids": [keep]}),
        ] {
            let result = common::call(&admin, "maintenance_update", update).await;
            assert_ne!(
                result.is_error,
                Some(true),
                "{:?}",
                result.structured_content
            );
        }
        let err = tool_error(
            &admin,
            "maintenance_delete",
            json!({"maintenanceids": [maintenance]}),
        )
        .await;
        assert_eq!(err["code"], "denied", "Zabbix {}: {err}", lab.major);
        assert_eq!(
            err["data"]["reasons"],
            json!([format!("maintenance of {} may not be deleted", names[0])]),
            "{err}"
        );
        common::zapi::assert_maintenance_kept(&lab, &maintenance).await;
        guard.stop().await;
        common::zapi::admin(&lab, "maintenance.delete", json!([maintenance])).await;
        common::zapi::admin(&lab, "hostgroup.delete", json!(ids)).await;
    }
}
