//! Policies that run builtins on the agent's own text: what would allocate without bound,
//! compute for minutes, panic inside regorus or fail is a denial with a decision line, and
//! the sidecar goes on serving.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{self, Guard, read, start_with, tool_error};
use crate::{config, log_lines, policy_dir};

/// A sidecar on the 7.0 lab whose only policy denies what `deny_rules` (Rego rules of a
/// `deny` set) hold, with Admin's client, and its decision log.
async fn denying(deny_rules: &str) -> (Guard, common::Client, PathBuf) {
    let lab = common::lab(7);
    let rego = format!(
        "package zabbix.mcp\nimport rego.v1\ndefault allow := false\n{deny_rules}\n\
         allow if count(deny) == 0\ndecision := {{\"allow\": allow, \"reasons\": deny}}\n"
    );
    let dir = policy_dir(None, &[("p.rego", rego)]);
    let (config, log) = config(&lab, &dir);
    let guard = start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    (guard, client, log)
}

/// `err`'s first reason, after checking it is a denial.
fn denied_for(err: &Value) -> String {
    assert_eq!(err["code"], "denied", "{err}");
    err["data"]["reasons"][0].as_str().unwrap().to_owned()
}

async fn logged_denial(log: &std::path::Path, err: &Value) {
    let id = err["decision_id"].as_str().unwrap().to_owned();
    common::wait_until(
        "the denial is logged",
        Duration::from_secs(10),
        async || {
            log_lines(log)
                .iter()
                .any(|l| l["decision_id"] == id.as_str() && l["decision"]["allow"] == false)
        },
    )
    .await;
}

#[tokio::test]
async fn a_range_over_agent_arguments_is_refused_not_allocated() {
    let (guard, client, log) = denying(
        "deny contains \"window too wide\" if {\n\
            input.tool.name == \"history_get\"\n\
            count(numbers.range(input.arguments.time_from, input.arguments.time_till)) > 86401\n\
        }",
    )
    .await;
    let args =
        json!({"itemids": ["1"], "type": "float", "time_from": 0, "time_till": 2_147_483_647});
    let err = tool_error(&client, "history_get", args).await;
    let reason = denied_for(&err);
    assert!(reason.contains("memory limit"), "{reason}");
    read(&client, "host_get", json!({"limit": 1})).await;
    logged_denial(&log, &err).await;
    guard.stop().await;
}

#[tokio::test]
async fn a_panic_inside_regorus_denies_the_call_and_is_logged() {
    // regorus panics on a time.format layout with a letter outside ASCII: here the agent's.
    let (guard, client, log) = denying(
        "deny contains \"no date in search\" if {\n\
            input.tool.name == \"host_get\"\n\
            count(time.format([0, \"UTC\", input.arguments.search])) == 0\n\
        }",
    )
    .await;
    // Before: "the request's task ended without an answer", and no decision line.
    let err = tool_error(&client, "host_get", json!({"search": "é", "limit": 1})).await;
    let reason = denied_for(&err);
    assert!(
        reason.starts_with("policy evaluation failed: the policy engine panicked"),
        "{reason}"
    );
    // The session and the runtime thread's next evaluation go on.
    read(&client, "host_get", json!({"search": "web", "limit": 1})).await;
    logged_denial(&log, &err).await;
    guard.stop().await;
}

#[tokio::test]
async fn units_and_prefixes_in_agent_text_are_refused_not_computed() {
    let (guard, client, _log) = denying(
        "deny contains \"search names too much\" if {\n\
            input.tool.name == \"host_get\"\n\
            units.parse(input.arguments.search) > 1000000\n\
        }\n\
        deny contains \"search spans too many addresses\" if {\n\
            input.tool.name == \"hostgroup_get\"\n\
            count(net.cidr_expand(input.arguments.search)) > 256\n\
        }",
    )
    .await;
    let reason = async |tool: &str, search: &str| {
        denied_for(&tool_error(&client, tool, json!({"search": search, "limit": 1})).await)
    };
    assert_eq!(reason("host_get", "5M").await, "search names too much");
    assert_eq!(
        reason("hostgroup_get", "10.0.0.0/23").await,
        "search spans too many addresses"
    );
    // Before: regorus computed 10^999999999 on the runtime's one thread (minutes; /readyz
    // did not answer meanwhile), and listed 16777216 addresses (39 s, debug build).
    for (tool, search) in [
        ("host_get", "1e999999999"),
        ("hostgroup_get", "10.0.0.0/8"),
        ("hostgroup_get", "::/0"),
    ] {
        let reason = reason(tool, search).await;
        assert!(reason.contains("memory limit"), "{search}: {reason}");
    }
    let ready = reqwest::get(format!("{}/readyz", guard.base))
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    guard.stop().await;
}

#[tokio::test]
async fn a_builtin_error_on_agent_text_denies_instead_of_skipping_a_rule() {
    let (guard, client, _log) = denying(
        "deny contains \"search names more than a day\" if {\n\
            input.tool.name == \"host_get\"\n\
            time.parse_duration_ns(input.arguments.search) > 86400000000000\n\
        }",
    )
    .await;
    read(&client, "host_get", json!({"search": "1h", "limit": 1})).await;
    let err = tool_error(&client, "host_get", json!({"search": "48h", "limit": 1})).await;
    assert_eq!(denied_for(&err), "search names more than a day");
    // Before: the builtin's error read as undefined, the deny rule did not hold, and the
    // call went through to Zabbix.
    for search in ["forever", "1é"] {
        let err = tool_error(&client, "host_get", json!({"search": search, "limit": 1})).await;
        let reason = denied_for(&err);
        assert!(
            reason.starts_with("policy evaluation failed"),
            "{search}: {reason}"
        );
    }
    guard.stop().await;
}

/// `count` names of 255 characters, every character different (U+20000 on, four bytes
/// each): 900 of them are 229,500 characters, 918 kB, most of a 1 MiB request.
fn distinct_names(count: u32) -> Vec<String> {
    (0..count)
        .map(|n| {
            (0..255)
                .filter_map(|i| char::from_u32(0x2_0000 + n * 255 + i))
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn agent_sized_text_in_builtins_that_multiply_it_answers_at_once() {
    // `all` is the agent's names as one text. concat puts it between each two of its
    // characters (229,500 × 918 kB); trim_left looked each character up in it from the
    // start (229,500²/2 lookups); any_prefix_match compares each character with each pair
    // of them (229,500 × 114,750); the YAML scanner's work grew with the depth of 63,000
    // open braces at every token.
    let (guard, client, log) = denying(
        "all := concat(\"\", input.arguments.names)\n\
        deny contains \"names repeat\" if {\n\
            input.tool.name == \"hostgroup_get\"\n\
            input.arguments.limit == 1\n\
            contains(concat(all, split(all, \"\")), \"web\")\n\
        }\n\
        deny contains \"names share a prefix\" if {\n\
            input.tool.name == \"hostgroup_get\"\n\
            input.arguments.limit == 2\n\
            strings.any_prefix_match(split(all, \"\"), regex.find_n(\"..\", all, -1))\n\
        }\n\
        deny contains \"names trim to nothing\" if {\n\
            input.tool.name == \"templategroup_get\"\n\
            input.arguments.limit == 1\n\
            trim_left(all, all) == \"\"\n\
        }\n\
        deny contains \"names are no YAML\" if {\n\
            input.tool.name == \"templategroup_get\"\n\
            input.arguments.limit == 2\n\
            not yaml.is_valid(all)\n\
        }",
    )
    .await;
    let lab = common::lab(7);
    let other = common::client(&guard, &lab.token).await;
    let names = json!({"names": distinct_names(900), "limit": 1});
    let pairs = json!({"names": distinct_names(900), "limit": 2});
    let braces = json!({"names": vec!["{a: ".repeat(63); 1000], "limit": 2});
    // Before: the concat asked for 210 GB at once (the process aborted), and the others
    // held the runtime's one thread for minutes, this other session's host_get waiting.
    let (built, compared, trimmed, nested, read_meanwhile) = tokio::join!(
        tool_error(&client, "hostgroup_get", names.clone()),
        tool_error(&client, "hostgroup_get", pairs),
        tool_error(&client, "templategroup_get", names),
        tool_error(&client, "templategroup_get", braces),
        read(&other, "host_get", json!({"limit": 1})),
    );
    for err in [&built, &compared, &nested] {
        let reason = denied_for(err);
        assert!(reason.contains("memory limit"), "{reason}");
    }
    assert_eq!(denied_for(&trimmed), "names trim to nothing");
    assert_eq!(read_meanwhile["count"], 1, "{read_meanwhile}");
    logged_denial(&log, &built).await;
    // A name longer than Zabbix's (255 characters) names nothing: refused before the
    // policy sees it.
    let long = tool_error(
        &client,
        "hostgroup_get",
        json!({"names": ["x".repeat(256)]}),
    )
    .await;
    assert_eq!(long["code"], "invalid_arguments", "{long}");
    assert_eq!(
        long["message"],
        "names[0] must be at most 255 characters long"
    );
    guard.stop().await;
}

/// Names `n0/a0, n0/b0, a0/n1, b0/n1, ...`: edges `from/to` making `layers` diamonds in a
/// row, 2^layers paths from `n0`.
fn diamonds(layers: usize) -> Vec<String> {
    (0..layers)
        .flat_map(|l| {
            [
                format!("n{l}/a{l}"),
                format!("n{l}/b{l}"),
                format!("a{l}/n{}", l + 1),
                format!("b{l}/n{}", l + 1),
            ]
        })
        .collect()
}

/// Splits all of the agent's names into characters and finds each character, once for
/// each of its first 60 names (fewer instructions than the 1024 between regorus' own looks
/// at its clock), and follows
/// every path of the graph its names `from/to` make.
const SLOW_BUILTINS: &str = "all := concat(\"\", input.arguments.names)\n\
    edges := [split(n, \"/\") | some n in input.arguments.names]\n\
    g := {e[0]: [f[1] | some f in edges; f[0] == e[0]] | some e in edges}\n\
    deny contains \"names split\" if {\n\
        input.tool.name == \"hostgroup_get\"\n\
        input.arguments.limit == 1\n\
        count([1 | some n in array.slice(input.arguments.names, 0, 60); count(split(all, \"\")) > 0; count(regex.find_n(\".\", all, -1)) > 0]) > 0\n\
    }\n\
    deny contains \"a path too long\" if {\n\
        input.tool.name == \"hostgroup_get\"\n\
        input.arguments.limit == 2\n\
        some path in graph.reachable_paths(g, [\"n0\"])\n\
        count(path) > 100\n\
    }";

#[tokio::test]
async fn builtins_repeated_or_walking_agent_graphs_end_at_their_limits() {
    let (guard, client, log) = denying(SLOW_BUILTINS).await;
    let lab = common::lab(7);
    let other = common::client(&guard, &lab.token).await;
    // Before: the 60 splits and finds over 229,500 characters all ran (regorus reads its clock every
    // 1024 instructions; 900 of them held the thread 6.5 s, release build), and the 16
    // diamonds' 65,536 paths were all built (40 ran for days), this other session's
    // host_get waiting.
    let (split, walked, read_meanwhile) = tokio::join!(
        tool_error(
            &client,
            "hostgroup_get",
            json!({"names": distinct_names(900), "limit": 1})
        ),
        tool_error(
            &client,
            "hostgroup_get",
            json!({"names": diamonds(16), "limit": 2})
        ),
        read(&other, "host_get", json!({"limit": 1})),
    );
    let reason = denied_for(&split);
    assert!(reason.contains("time limit"), "{reason}");
    let reason = denied_for(&walked);
    assert!(reason.contains("memory limit"), "{reason}");
    assert_eq!(read_meanwhile["count"], 1, "{read_meanwhile}");
    logged_denial(&log, &split).await;
    // The official Python SDK, the same calls and another session's read.
    let summary = common::python_sdk(
        "agent_text_python.py",
        vec![guard.url.clone(), lab.token.clone()],
    )
    .await;
    let reasons: Vec<String> = summary["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(denied_for)
        .collect();
    assert!(reasons[0].contains("time limit"), "{summary}");
    assert!(reasons[1].contains("memory limit"), "{summary}");
    assert_eq!(summary["other_count"], 1, "{summary}");
    guard.stop().await;
}
