//! Stateless `tools/list` and `tools/call` from clients before protocol 2026-07-28 are
//! answered by the sidecar itself, not by rmcp's per-request service: the answers must be
//! the very bytes rmcp writes. An `Accept` header with a weight is left to rmcp (its parser
//! reads weights), which gives both answers to the same request side by side.

mod common;

use common::metrics::scrape;
use common::{labs, start};
use serde_json::{Value, json};

/// Plain media types: the sidecar's own path.
const DIRECT: &str = "application/json, text/event-stream";
/// The same types with a weight: rmcp's path.
const RMCP: &str = "application/json, text/event-stream;q=1";

const DIRECT_SERIES: &str = "mcp_requests_total{path=\"direct\"}";
const RMCP_SERIES: &str = "mcp_requests_total{path=\"rmcp\"}";

struct Answer {
    status: u16,
    content_type: Option<String>,
    body: String,
}

async fn post(url: &str, token: &str, accept: &str, version: Option<&str>, body: &Value) -> Answer {
    common::init();
    let mut request = reqwest::Client::new()
        .post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", accept)
        .body(body.to_string());
    if let Some(version) = version {
        request = request.header("mcp-protocol-version", version);
    }
    let response = request.send().await.expect("the sidecar answers");
    Answer {
        status: response.status().as_u16(),
        content_type: response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned()),
        body: response.text().await.unwrap(),
    }
}

/// A tool error's text without its `decision_id` (each call gets its own).
fn without_decision_id(body: &str) -> Value {
    let mut value: Value = serde_json::from_str(body).expect("a JSON-RPC answer");
    if let Some(text) = value["result"]["content"][0]["text"].as_str() {
        let mut inner: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        if let Some(object) = inner.as_object_mut() {
            object.remove("decision_id");
        }
        value["result"]["content"][0]["text"] = inner;
    }
    value
}

fn request(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test]
async fn the_sidecar_answers_as_rmcp_would() {
    for lab in labs() {
        let guard = start(&lab).await;
        let requests = [
            (&lab.token, request(json!(1), "tools/list", json!({}))),
            (
                &lab.token,
                json!({"jsonrpc": "2.0", "id": "list-2", "method": "tools/list"}),
            ),
            (
                &lab.token,
                request(
                    json!(7),
                    "tools/call",
                    json!({"name": "host_get", "arguments": {"limit": 3}}),
                ),
            ),
            (
                &lab.token,
                request(
                    json!("bad"),
                    "tools/call",
                    json!({"name": "host_get", "arguments": {"limit": "many"}}),
                ),
            ),
            (
                &lab.token,
                request(json!(9), "tools/call", json!({"name": "no_such_tool"})),
            ),
            // Request metadata and members rmcp ignores, read alike both ways.
            (
                &lab.token,
                json!({"jsonrpc": "2.0", "id": "meta-12", "method": "tools/call", "extra": [1],
                    "params": {"_meta": {"progressToken": "p-1"}, "name": "host_get",
                        "arguments": {"limit": 1}, "other": true}}),
            ),
            (
                &lab.token_viewer,
                request(
                    json!(10),
                    "tools/call",
                    json!({"name": "maintenance_delete", "arguments": {"maintenanceids": ["999999"]}}),
                ),
            ),
        ];
        let versions = [
            None,
            Some("2024-11-05"),
            Some("2025-03-26"),
            Some("2025-06-18"),
            Some("2025-11-25"),
        ];
        let before = scrape(&guard.base).await;
        let mut compared = 0.0;
        for version in versions {
            for (token, body) in &requests {
                let direct = post(&guard.url, token, DIRECT, version, body).await;
                let rmcp = post(&guard.url, token, RMCP, version, body).await;
                let what = format!("Zabbix {} {version:?} {body}", lab.major);
                assert_eq!(direct.status, 200, "{what}: {}", direct.body);
                assert_eq!(direct.status, rmcp.status, "{what}");
                assert_eq!(direct.content_type, rmcp.content_type, "{what}");
                if direct.body.contains("decision_id") {
                    assert_eq!(
                        without_decision_id(&direct.body),
                        without_decision_id(&rmcp.body),
                        "{what}"
                    );
                } else {
                    assert_eq!(direct.body, rmcp.body, "{what}");
                }
                compared += 1.0;
            }
        }
        let after = scrape(&guard.base).await;
        assert_eq!(after.delta(&before, DIRECT_SERIES), compared);
        assert_eq!(after.delta(&before, RMCP_SERIES), compared);

        // 2026-07-28 requests (per-request metadata) and other methods stay rmcp's.
        let ping = request(json!(11), "ping", json!({}));
        let answer = post(&guard.url, &lab.token, DIRECT, Some("2025-11-25"), &ping).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let last = scrape(&guard.base).await;
        assert_eq!(last.delta(&after, DIRECT_SERIES), 0.0);
        assert_eq!(last.delta(&after, RMCP_SERIES), 1.0);
        guard.stop().await;
    }
}
