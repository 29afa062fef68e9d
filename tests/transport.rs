//! The HTTP side: tokens (401), health and readiness, protocol versions, AllowedIP.

mod common;

use common::{config_for, labs, read, start, start_with};
use rmcp::model::ProtocolVersion;
use serde_json::json;
use zabbix_mcp_guard::config::SessionMode;

fn http() -> reqwest::Client {
    common::init();
    reqwest::Client::new()
}

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "curl-like", "version": "1"}}})
    .to_string()
}

#[tokio::test]
async fn missing_and_invalid_tokens_get_401() {
    let lab = common::lab(7);
    let guard = start(&lab).await;
    let http = http();
    let post = |token: Option<&str>| {
        let mut request = http
            .post(&guard.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialize_body());
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        request.send()
    };
    let none = post(None).await.unwrap();
    assert_eq!(none.status(), 401);
    let challenge = none.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    assert!(
        none.text()
            .await
            .unwrap()
            .contains("missing Authorization: Bearer")
    );

    let bad = post(Some(
        "0000000000000000000000000000000000000000000000000000000000000000",
    ))
    .await
    .unwrap();
    assert_eq!(bad.status(), 401);
    assert!(
        bad.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
    let text = bad.text().await.unwrap();
    assert!(text.contains("not accepted by Zabbix"), "{text}");

    let good = post(Some(&lab.token)).await.unwrap();
    assert_eq!(good.status(), 200);
    guard.stop().await;
}

#[tokio::test]
async fn health_and_readiness() {
    let lab = common::lab(6);
    let guard = start(&lab).await;
    let http = http();
    let health = http
        .get(format!("{}/healthz", guard.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let ready = http
        .get(format!("{}/readyz", guard.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(body["zabbix_version"], lab.api_version.as_str());
    guard.stop().await;

    // A Zabbix that does not answer: alive, not ready.
    let guard = start_with(config_for("http://127.0.0.1:9/api_jsonrpc.php")).await;
    assert_eq!(
        http.get(format!("{}/healthz", guard.base))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let ready = http
        .get(format!("{}/readyz", guard.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    guard.stop().await;
}

#[tokio::test]
async fn every_protocol_version_lists_and_calls() {
    for lab in labs() {
        let guard = start(&lab).await;
        for version in [
            ProtocolVersion::V_2025_06_18,
            ProtocolVersion::V_2025_11_25,
            ProtocolVersion::V_2026_07_28,
        ] {
            let client = common::client_with(&guard, &lab.token, version.clone()).await;
            let tools = client.list_all_tools().await.unwrap();
            assert!(tools.iter().any(|t| t.name == "host_get"), "{version}");
            let env = read(&client, "host_get", json!({"search": "mcp-web-01"})).await;
            assert_eq!(env["count"], 1, "{version}");
            client.cancel().await.unwrap();
        }
        guard.stop().await;
    }
}

#[tokio::test]
async fn peers_outside_allowed_ip_are_refused() {
    let lab = common::lab(7);
    let mut config = config_for(&lab.url);
    config.allowed_ip = vec!["127.0.0.2/32".parse().unwrap()];
    let guard = start_with(config).await;
    let result = http().get(format!("{}/healthz", guard.base)).send().await;
    assert!(result.is_err(), "127.0.0.1 is not in AllowedIP: {result:?}");
    guard.stop().await;
}

/// A body over 1 MiB is refused. One announced at most 8 MiB is read to its end (none of
/// it kept) and refused as its request's error in a 200, which every SDK reads as that
/// call's; a larger one gets 413 at once, the connection closed.
#[tokio::test]
async fn oversized_bodies_are_refused() {
    let lab = common::lab(7);
    let guard = start(&lab).await;
    let post = async |pad: usize| {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"pad\":\"{}\"}}}}",
            "x".repeat(pad)
        );
        http()
            .post(&guard.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {}", lab.token))
            .body(big)
            .send()
            .await
    };
    let response = post(2 * 1024 * 1024).await.unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["id"], 1, "{body}");
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert_eq!(
        body["error"]["message"], "the request body is larger than 1048576 bytes",
        "{body}"
    );
    // Past 8 MiB the client may meet the connection closed while it still sends.
    if let Ok(response) = post(9 * 1024 * 1024).await {
        assert_eq!(response.status(), 413);
    }
    guard.stop().await;
}

/// A body posted with the headers a client sends, answered with status and JSON body.
async fn post(guard: &common::Guard, token: &str, body: &str) -> (u16, serde_json::Value) {
    let response = http()
        .post(&guard.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .header("mcp-protocol-version", "2025-06-18")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let json = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, json)
}

#[tokio::test]
async fn malformed_bodies_get_json_rpc_errors_in_both_session_modes() {
    let lab = common::lab(7);
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let cases: [(&str, i64, &str); 13] = [
        ("", -32700, "the body is not JSON: EOF"),
        ("{", -32700, "the body is not JSON: EOF"),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"\ud800"}}"#,
            -32700,
            "the body is not JSON",
        ),
        (&deep, -32700, "the body is not JSON: recursion limit"),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#,
            -32600,
            "the body is a JSON-RPC batch",
        ),
        (
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#,
            -32600,
            r#""jsonrpc" must be "2.0""#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#,
            -32600,
            r#""id" must be"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":["tools/list"]}"#,
            -32600,
            r#""method" must be"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1}"#,
            -32600,
            r#"the object has no "method""#,
        ),
        // Before, these four were "unrecognized JSON-RPC message".
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"host_get"}"#,
            -32600,
            r#""params" must be an object"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/list"}"#,
            -32600,
            r#""id" must be a string or an integer from -2^63 to 2^63-1"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","result":{}}"#,
            -32600,
            r#"the object has both "method" and "result""#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}"#,
            -32600,
            "a member of the message object is given more than once",
        ),
    ];
    for mode in [SessionMode::Stateless, SessionMode::Stateful] {
        let mut config = config_for(&lab.url);
        config.session_mode = mode;
        let guard = start_with(config).await;
        for (body, code, message) in &cases {
            let (status, answer) = post(&guard, &lab.token, body).await;
            let shown = &body[..body.len().min(60)];
            assert_eq!(status, 400, "{mode:?} {shown}: {answer}");
            assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
            assert!(answer["id"].is_null(), "{answer}");
            assert_eq!(answer["error"]["code"], *code, "{mode:?} {shown}: {answer}");
            let text = answer["error"]["message"].as_str().unwrap();
            assert!(text.starts_with(message), "{mode:?} {shown}: {text}");
        }
        guard.stop().await;
    }
}

#[tokio::test]
async fn tool_calls_with_unreadable_params_are_invalid_params_naming_the_fault() {
    let lab = common::lab(7);
    let guard = start(&lab).await;
    let cases = [
        (json!(null), "missing field `params`"),
        (json!({"arguments": {"limit": 1}}), "missing field `name`"),
        (
            json!({"name": "host_get", "arguments": [1]}),
            "invalid type: sequence",
        ),
        (
            json!({"name": 7}),
            "invalid type: integer `7`, expected a string",
        ),
    ];
    for (params, why) in cases {
        let mut request = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call"});
        if !params.is_null() {
            request["params"] = params;
        }
        let (status, answer) = post(&guard, &lab.token, &request.to_string()).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["id"], 5, "{answer}");
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let text = answer["error"]["message"].as_str().unwrap();
        assert!(
            text.starts_with("invalid params for tools/call: "),
            "{text}"
        );
        assert!(text.contains(why), "{text}");
    }
    // A duplicated key is refused by rmcp's reading too, and said so.
    let body = r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"host_get","name":"host_get"}}"#;
    let (_, answer) = post(&guard, &lab.token, body).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "invalid params for tools/call: a key is given more than once"
    );
    // Methods this server does not answer stay "method not found".
    let body = r#"{"jsonrpc":"2.0","id":7,"method":"no/such","params":{}}"#;
    let (_, answer) = post(&guard, &lab.token, body).await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    guard.stop().await;
}

/// A body sent with a content coding is refused with 415 naming it: nothing decodes it, so
/// its bytes were read as JSON whatever the client (or a proxy on the way) meant by them.
/// Before, a gzip body was "the body is not JSON", and a plain body labelled `br` was
/// served as if unlabelled.
#[tokio::test]
async fn encoded_bodies_are_refused_naming_the_coding() {
    let lab = common::lab(7);
    let guard = start(&lab).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let send = |coding: &'static str| {
        http()
            .post(&guard.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {}", lab.token))
            .header("content-encoding", coding)
            .body(ping.clone())
            .send()
    };
    for coding in ["gzip", "br", "identity, gzip"] {
        let response = send(coding).await.unwrap();
        assert_eq!(response.status(), 415, "{coding}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], -32600, "{body}");
        assert_eq!(body["error"]["data"]["code"], "invalid_request", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        let named = coding.trim_start_matches("identity, ");
        assert!(
            message.contains(&format!("Content-Encoding \"{named}\"")),
            "{message}"
        );
    }
    let plain = send("identity").await.unwrap();
    assert_eq!(plain.status(), 200);
    guard.stop().await;
}
