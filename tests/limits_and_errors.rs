//! Truncation by count and by size, every class of argument error, and proof that
//! `output: extend` never reaches Zabbix.

mod common;

use std::time::Duration;

use common::{config_for, labs, read, results, start, start_with, tool_error};
use rmcp::ServiceError;
use rmcp::model::ReadResourceRequestParams;
use serde_json::{Value, json};

#[tokio::test]
async fn truncation_by_count_keeps_sort_order() {
    for lab in labs() {
        let guard = start(&lab).await;
        let client = common::client(&guard, &lab.token).await;
        let full = read(&client, "host_get", json!({"search": "mcp-*0*"})).await;
        let cut = read(
            &client,
            "host_get",
            json!({"search": "mcp-*0*", "limit": 2}),
        )
        .await;
        assert_eq!(cut["count"], 2);
        assert_eq!(cut["limit"], 2);
        assert_eq!(cut["truncated"], true);
        assert_eq!(cut["truncated_by"], "count");
        assert!(cut["note"].as_str().unwrap().contains("limit"));
        assert!(
            results(&cut)[..] == results(&full)[..2],
            "a truncated response is the beginning"
        );
        assert_eq!(full["truncated"], false);
        assert_eq!(full["truncated_by"], Value::Null);
        assert_eq!(full["limit"], 100);
        guard.stop().await;
    }
}

#[tokio::test]
async fn truncation_by_size_cuts_between_results() {
    for lab in labs() {
        let mut config = config_for(&lab.url);
        config.max_response_size = 16 * 1024;
        let guard = start_with(config).await;
        let client = common::client(&guard, &lab.token).await;
        // All items (templates ship hundreds) are far more than 16K.
        let result = common::call(&client, "item_get", json!({"limit": 1000})).await;
        let text = result.content[0].as_text().unwrap().text.clone();
        assert!(text.len() <= 16 * 1024, "response is {} bytes", text.len());
        let env = result.structured_content.unwrap();
        assert_eq!(env["truncated"], true);
        assert_eq!(env["truncated_by"], "size");
        assert!(env["note"].as_str().unwrap().contains("16384 bytes"));
        let cut = results(&env).clone();
        assert!(!cut.is_empty());
        // Whole records, the beginning of the same sorted list asked with a small limit.
        let head = read(&client, "item_get", json!({"limit": cut.len() as u64})).await;
        let ids = |list: &[Value]| list.iter().map(|r| r["itemid"].clone()).collect::<Vec<_>>();
        assert_eq!(ids(results(&head)), ids(&cut));
        assert!(results(&head)[..] == cut[..], "same records");
        guard.stop().await;
    }
}

#[tokio::test]
async fn argument_errors_name_the_constraint() {
    let lab = common::lab(7);
    let guard = start(&lab).await;
    let client = common::client(&guard, &lab.token).await;
    let cases = [
        (
            "host_get",
            json!({"limit": 0}),
            "limit must be between 1 and 1000, got 0",
        ),
        (
            "host_get",
            json!({"limit": 1001}),
            "limit must be between 1 and 1000, got 1001",
        ),
        (
            "host_get",
            json!({"limit": "many"}),
            "limit must be between 1 and 1000",
        ),
        (
            "host_get",
            json!({"hostid": ["1"]}),
            "unknown argument \"hostid\"; host_get accepts: hostids, groupids, search, limit",
        ),
        (
            "host_get",
            json!({"hostids": "10084"}),
            "hostids must be an array of IDs",
        ),
        (
            "host_get",
            json!({"hostids": []}),
            "hostids must not be empty",
        ),
        (
            "host_get",
            json!({"hostids": ["10084", "x1"]}),
            "hostids[1] must be an ID",
        ),
        (
            "host_get",
            json!({"hostids": [-3]}),
            "hostids[0] must be an ID",
        ),
        (
            "host_get",
            json!({"search": ""}),
            "search must not be empty",
        ),
        ("host_get", json!({"search": 5}), "search must be a string"),
        (
            "problem_get",
            json!({"severities": [6]}),
            "severities[0] must be an integer between 0 and 5",
        ),
        (
            "problem_get",
            json!({"acknowledged": "yes"}),
            "acknowledged must be true or false",
        ),
        ("history_get", json!({"itemids": ["1"]}), "type is required"),
        (
            "history_get",
            json!({"itemids": ["1"], "type": "json"}),
            "type \"json\" needs Zabbix 8.0 or later",
        ),
        (
            "history_get",
            json!({"itemids": ["1"], "type": "float", "time_from": 10, "time_till": 5}),
            "time_from (10) must not be later than time_till (5)",
        ),
        (
            "history_get",
            json!({"itemids": ["1"], "type": "float", "time_from": -1}),
            "time_from must be a Unix time",
        ),
        (
            "macro_get",
            json!({"hostids": ["1"], "global": true}),
            "exactly one of hostids, global must be given",
        ),
    ];
    for (tool, args, expected) in cases {
        let err = tool_error(&client, tool, args.clone()).await;
        assert_eq!(err["code"], "invalid_arguments", "{tool} {args}: {err}");
        let message = err["message"].as_str().unwrap();
        assert!(
            message.contains(expected),
            "{tool} {args}: {message:?} lacks {expected:?}"
        );
    }
    // null means "not given", and integer IDs are accepted.
    let ok = read(
        &client,
        "host_get",
        json!({"hostids": null, "search": "mcp-web-01"}),
    )
    .await;
    assert_eq!(ok["count"], 1);
    guard.stop().await;
}

#[tokio::test]
async fn zabbix_errors_come_back_unchanged() {
    let lab = common::lab(7);
    let guard = start(&lab).await;
    let client = common::client(&guard, &lab.token).await;
    // An ID beyond Zabbix's range is Zabbix's own error, passed through.
    let err = tool_error(
        &client,
        "host_get",
        json!({"hostids": ["99999999999999999999"]}),
    )
    .await;
    assert_eq!(err["code"], "zabbix_error", "{err}");
    assert!(err["data"]["code"].is_i64());
    assert!(err["data"]["message"].is_string());
    guard.stop().await;
}

#[tokio::test]
async fn output_extend_is_never_sent() {
    for lab in labs() {
        let (proxy_url, recorder) = common::recorder::start(&lab.url).await;
        let guard = start_with(config_for(&proxy_url)).await;
        let client = common::client(&guard, &lab.token).await;
        let web = common::seed_id(&lab, "hosts", "mcp-web-01");
        let item = lab.seed["items"]["mcp-web-01"]["mcp.log"]
            .as_str()
            .unwrap()
            .to_owned();
        let tools = client.list_all_tools().await.unwrap();
        let mut called = 0;
        for tool in tools
            .iter()
            .filter(|t| t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true))
        {
            let args = match tool.name.as_ref() {
                "history_get" => json!({"itemids": [item], "type": "log"}),
                "macro_get" => json!({"hostids": [web]}),
                _ => json!({"limit": 5}),
            };
            read(&client, &tool.name, args).await;
            called += 1;
        }
        read(&client, "macro_get", json!({"global": true})).await;
        for uri in [
            format!("zabbix://host/{web}"),
            format!("zabbix://item/{item}"),
        ] {
            client
                .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
                .await
                .unwrap();
        }
        assert_eq!(called, if lab.major >= 7 { 12 } else { 11 });
        let bodies = recorder.taken();
        assert!(bodies.len() > called, "every call reached the recorder");
        for body in &bodies {
            assert!(!body.contains("extend"), "sent: {body}");
            let v: Value = serde_json::from_str(body).unwrap();
            if v["method"] != "apiinfo.version" && v["method"] != "user.checkAuthentication" {
                // 6.0 reads the token from the body, 6.4+ from the header only.
                assert_eq!(v.get("auth").is_some(), lab.major < 7, "{body}");
            } else {
                assert!(v.get("auth").is_none(), "{body}");
            }
        }
        guard.stop().await;
    }
}

/// A Zabbix answer of the wrong shape is our failure to understand it, not Zabbix being
/// down: `internal_error`, with the decision_id. A list holding other than records is one
/// (before, it was sent, and the tool's output schema, which promises objects, failed the
/// call in clients that check it: "data/results/1 must be object" in the Inspector).
#[tokio::test]
async fn a_result_we_cannot_read_is_an_internal_error() {
    for result in [json!({"hostid": "1"}), json!([{"hostid": "1"}, 7])] {
        let (stub_url, _stub) = common::stub::start_answering(Duration::ZERO, result).await;
        let guard = start_with(config_for(&stub_url)).await;
        let client = common::client(&guard, "stub-token").await;
        let err = tool_error(&client, "host_get", json!({})).await;
        assert_eq!(err["code"], "internal_error", "{err}");
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("host.get did not return a list of records"),
            "{err}"
        );
        assert!(err["decision_id"].is_string(), "{err}");
        guard.stop().await;
    }
}

/// An answer with more records than the read asked for (`limit` + 1) is not the answer
/// asked for: refused as an invalid response while it is read, before its records cost
/// memory (a 15 MB answer of tiny records took some 300 MB before).
#[tokio::test]
async fn more_records_than_asked_for_are_an_invalid_response() {
    let records: Vec<Value> = (0..7).map(|n| json!({"hostid": n.to_string()})).collect();
    let (stub_url, _stub) = common::stub::start_answering(Duration::ZERO, json!(records)).await;
    let guard = start_with(config_for(&stub_url)).await;
    let client = common::client(&guard, "stub-token").await;
    let err = tool_error(&client, "host_get", json!({"limit": 5})).await;
    assert_eq!(err["code"], "upstream_unavailable", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("not the answer asked for (at most 6 records): more elements"),
        "{err}"
    );
    // Six, the one more that says more exist, are what a read asks for.
    let env = read(&client, "host_get", json!({"limit": 6})).await;
    assert_eq!(env["count"], 6, "{env}");
    assert_eq!(env["truncated_by"], "count", "{env}");
    guard.stop().await;
}

/// A failed resource read is a JSON-RPC error whose data names the same code a tool
/// call would get.
#[tokio::test]
async fn resource_errors_carry_the_error_code() {
    let (stub_url, _stub) = common::stub::start(Duration::from_secs(3)).await;
    let mut config = config_for(&stub_url);
    config.timeout = Duration::from_millis(500);
    let guard = start_with(config).await;
    let client = common::client(&guard, "stub-token").await;
    let err = client
        .read_resource(ReadResourceRequestParams::new("zabbix://host/1"))
        .await
        .unwrap_err();
    let ServiceError::McpError(error) = err else {
        panic!("expected a JSON-RPC error, got {err}");
    };
    assert_eq!(
        error.data,
        Some(json!({"code": "upstream_timeout"})),
        "{error:?}"
    );
    assert!(error.message.contains("did not answer"), "{error:?}");
    guard.stop().await;
}

/// A record nested as deep as the scan takes is still one a client can read: the response
/// puts it two levels deeper (`result`, `structuredContent`), and rmcp's client, reading
/// with serde_json, stops at 128. Nested deeper, it is an invalid response, a tool error;
/// before, 125 levels in a record passed and the client failed the call ("recursion limit
/// exceeded").
#[tokio::test]
async fn records_nested_too_deep_for_a_client_are_an_invalid_response() {
    let nested = |levels: usize| (0..levels).fold(json!([]), |inner, _| json!([inner]));
    for (levels, readable) in [(60, true), (124, false)] {
        let (stub_url, _stub) = common::stub::start_answering(
            Duration::ZERO,
            json!([{"hostid": "1", "x": nested(levels)}]),
        )
        .await;
        let guard = start_with(config_for(&stub_url)).await;
        let client = common::client(&guard, "stub-token").await;
        if readable {
            let env = read(&client, "host_get", json!({})).await;
            assert_eq!(env["count"], 1, "{env}");
        } else {
            let err = tool_error(&client, "host_get", json!({})).await;
            assert_eq!(err["code"], "upstream_unavailable", "{err}");
            assert!(
                err["message"].as_str().unwrap().contains("nested too deep"),
                "{err}"
            );
        }
        guard.stop().await;
    }
}
