//! What the human is asked, through a real 2026-07-28 client against the lab: the payload
//! pretty-printed with method, IDs and times first, every non-ASCII or invisible character
//! escaped, long whitespace pointed out; and text arguments carrying bidirectional or
//! invisible format characters refused before anything is asked or sent.

use rmcp::model::{CallToolRequestParams, CallToolResponse, ProtocolVersion};
use serde_json::{Value, json};
use zabbix_mcp_guard::config::SessionMode;

use crate::common::{self, Lab, recorder, seed_id};
use crate::support::{
    Human, LAB, Reply, connect, failed, question_in, retry, shown_block, sidecar,
};

const CREATE: &str = "maintenance_create";

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn writes(recorder: &recorder::Recorder) -> Vec<String> {
    recorder
        .bodies
        .lock()
        .unwrap()
        .iter()
        .filter(|b| {
            serde_json::from_str::<Value>(b).is_ok_and(|v| {
                matches!(
                    v["method"].as_str(),
                    Some("maintenance.create" | "event.acknowledge")
                )
            })
        })
        .cloned()
        .collect()
}

async fn question_on(lab: &Lab) {
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateless, None).await;
    let human = Human::new(Reply::Decline, true, ProtocolVersion::V_2026_07_28);
    let client = connect(&side.guard, &lab.token, &human).await;
    let host = seed_id(lab, "hosts", "mcp-web-01");
    let since = (now() / 60) * 60 + 86_400;
    let name = format!("MCP question café 🚀 {} {}", lab.major, std::process::id());
    let description = format!("routine{}and also the database hosts", " ".repeat(60_000));
    let args = json!({"name": name, "description": description, "hostids": [host],
                      "active_since": since, "active_till": since + 3600});
    let Value::Object(map) = args.clone() else {
        unreachable!()
    };
    let request = CallToolRequestParams::new(CREATE).with_arguments(map);
    let pending = match client.call_tool_once(request).await.unwrap() {
        CallToolResponse::InputRequired(pending) => pending,
        _ => panic!("expected an approval question"),
    };
    let message = question_in(&pending).message;
    assert!(message.is_ascii(), "the question holds raw non-ASCII text");
    assert!(
        message.starts_with("Approve maintenance_create (maintenance.create)?"),
        "{}",
        &message[..100]
    );
    let shown = shown_block(&message);
    // Escaped, and still meaning exactly the name given.
    assert!(
        shown.contains("MCP question caf\\u00e9 \\ud83d\\ude80"),
        "{shown:.400}"
    );
    let body: Value = serde_json::from_str(shown).unwrap();
    assert_eq!(body["params"]["name"], name.as_str());
    assert_eq!(body["params"]["description"], description.as_str());
    // Method, then IDs and times, before any free text. Keys of the request and of params
    // (nested ones are indented deeper), in order:
    let keys: Vec<&str> = shown
        .lines()
        .filter(|l| !l.starts_with("      "))
        .filter_map(|l| l.trim().strip_prefix('"'))
        .filter_map(|l| l.split_once("\":").map(|(key, _)| key))
        .take(6)
        .collect();
    assert_eq!(
        keys,
        [
            "method",
            "params",
            "hosts",
            "active_since",
            "active_till",
            "name"
        ]
    );
    // The whitespace run that could hide the rest of the description is pointed out
    // before the payload.
    let note = "Note: params.description is 60034 characters long and holds a run of 60000 \
                whitespace characters at character 7: read it to its end.";
    let at = message.find(note).expect("a note on the whitespace run");
    assert!(at < message.find(shown).unwrap());

    let state = pending.request_state.clone().expect("sealed state");
    let result = retry(&client, CREATE, args, &state, Reply::Decline).await;
    failed(&result, "approval_declined");
    assert!(writes(&recorder).is_empty(), "nothing sent");
    side.guard.stop().await;
}

#[tokio::test]
async fn the_question_is_pretty_escaped_and_decisive_fields_come_first() {
    let _turn = LAB.lock().await;
    question_on(&common::lab(7)).await;
    question_on(&common::lab(6)).await;
}

#[tokio::test]
async fn hidden_format_characters_in_text_arguments_are_refused() {
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateless, None).await;
    let human = Human::new(Reply::Approve, true, ProtocolVersion::V_2026_07_28);
    let client = connect(&side.guard, &lab.token, &human).await;
    let host = seed_id(&lab, "hosts", "mcp-web-01");
    let since = (now() / 60) * 60 + 86_400;
    let cases = [
        (
            CREATE,
            json!({"name": "MCP night \u{202E}eteled", "hostids": [host],
                   "active_since": since, "active_till": since + 3600}),
            "name contains U+202E at character 10 (counting from 0)",
        ),
        (
            CREATE,
            json!({"name": "MCP tags", "hostids": [host], "active_since": since,
                   "active_till": since + 3600, "tags": [{"tag": "env", "value": "prod\u{200B}"}]}),
            "tags[0].value contains U+200B at character 4",
        ),
        (
            "problem_acknowledge",
            json!({"eventids": ["1"], "message": "\u{2067}ok"}),
            "message contains U+2067 at character 0",
        ),
    ];
    for (tool, args, expected) in cases {
        let Value::Object(map) = args else {
            unreachable!()
        };
        let request = CallToolRequestParams::new(tool).with_arguments(map);
        let result = client.call_tool(request).await.unwrap();
        // Refused before the decision: no decision_id.
        let body = common::error_body(&result);
        assert_eq!(result.is_error, Some(true), "{tool}: {body}");
        assert_eq!(body["code"], "invalid_arguments", "{tool}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(expected), "{tool}: {message}");
        assert!(
            message.contains("bidirectional and invisible format characters are not accepted"),
            "{message}"
        );
    }
    assert!(human.asked().is_empty(), "never asked");
    assert!(writes(&recorder).is_empty(), "nothing sent");
    side.guard.stop().await;
}
