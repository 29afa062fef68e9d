//! How `/mcp` refuses a request as an MCP message, in both session modes, against the 7.0
//! lab: every refusal is a JSON-RPC error body with the HTTP status the MCP transport asks
//! for, the request's id when its body is a request, and a message naming the fault.
//! Before, rmcp answered most of them in plain text (`Bad Request: Unsupported
//! MCP-Protocol-Version: 1999-01-01`, `Method Not Allowed`), which a TypeScript-SDK client
//! cannot read as the request's error, and an unknown session was `{error, message}`.

mod common;

use common::{config_for, start_with};
use reqwest::Method;
use serde_json::{Value, json};
use zabbix_mcp_guard::config::SessionMode;

const BOTH: &str = "application/json, text/event-stream";

struct Answer {
    status: u16,
    allow: Option<String>,
    body: Value,
}

/// One request: `headers` beside the token; the body's JSON-RPC answer (the last
/// `data:` line of an event stream).
async fn send(
    url: &str,
    token: &str,
    method: Method,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut request = reqwest::Client::new()
        .request(method, url)
        .bearer_auth(token)
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the sidecar answers");
    let status = response.status().as_u16();
    let allow = response
        .headers()
        .get("allow")
        .map(|value| value.to_str().unwrap().to_owned());
    let json = response
        .headers()
        .get("content-type")
        .is_some_and(|value| value.to_str().unwrap().starts_with("application/json"));
    let text = response.text().await.unwrap();
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .rfind(|data| !data.is_empty());
    let body = match (json, data) {
        (true, _) => serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}")),
        (false, Some(data)) => serde_json::from_str(data).unwrap_or_else(|_| panic!("{text}")),
        (false, None) => panic!("{status}: not a JSON-RPC answer: {text:?}"),
    };
    Answer {
        status,
        allow,
        body,
    }
}

fn list(id: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}).to_string()
}

/// A stateful session of `token`, initialized.
async fn session(url: &str, token: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "refusals", "version": "1"}}});
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", BOTH)
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", BOTH)
        .header("mcp-session-id", &id)
        .body(initialized.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    id
}

fn assert_refused(what: &str, answer: &Answer, status: u16, code: i64, id: &Value, message: &str) {
    let body = &answer.body;
    assert_eq!(answer.status, status, "{what}: {body}");
    assert_eq!(body["jsonrpc"], "2.0", "{what}: {body}");
    assert_eq!(&body["id"], id, "{what}: {body}");
    assert_eq!(body["error"]["code"], code, "{what}: {body}");
    let text = body["error"]["message"].as_str().unwrap_or_default();
    assert!(text.contains(message), "{what}: {text}");
}

#[tokio::test]
async fn refusals_of_the_transport_are_json_rpc_errors_in_both_session_modes() {
    let lab = common::lab(7);
    let token = lab.token.as_str();
    let json_type = ("content-type", "application/json");
    let accept = ("accept", BOTH);
    for mode in [SessionMode::Stateless, SessionMode::Stateful] {
        let mut config = config_for(&lab.url);
        config.session_mode = mode;
        let guard = start_with(config).await;
        let url = guard.url.as_str();
        let sid = match mode {
            SessionMode::Stateful => Some(session(url, token).await),
            SessionMode::Stateless => None,
        };
        let with_session = |headers: &[(&'static str, &'static str)]| {
            let mut all: Vec<(&str, &str)> = headers.to_vec();
            if let Some(sid) = &sid {
                all.push(("mcp-session-id", sid.as_str()));
            }
            all.into_iter()
                .map(|(n, v)| (n.to_owned(), v.to_owned()))
                .collect::<Vec<_>>()
        };
        let post = async |headers: Vec<(String, String)>, body: &str| {
            let headers: Vec<(&str, &str)> = headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            send(url, token, Method::POST, &headers, body).await
        };

        // An unsupported version: -32022 naming it and the versions served, as 2026-07-28
        // clients read it to pick one.
        let version = post(
            with_session(&[json_type, accept, ("mcp-protocol-version", "1999-01-01")]),
            &list(json!("v-1")),
        )
        .await;
        assert_refused(
            "version",
            &version,
            400,
            -32022,
            &json!("v-1"),
            "MCP-Protocol-Version \"1999-01-01\" is not supported; supported: 2024-11-05,",
        );
        let data = &version.body["error"]["data"];
        assert_eq!(data["requested"], "1999-01-01");
        assert!(
            data["supported"]
                .as_array()
                .unwrap()
                .contains(&json!("2026-07-28"))
        );

        let accept_json = post(
            with_session(&[json_type, ("accept", "application/json")]),
            &list(json!(2)),
        )
        .await;
        assert_refused(
            "accept",
            &accept_json,
            406,
            -32600,
            &json!(2),
            "the Accept header must list both application/json and text/event-stream",
        );
        let text = post(
            with_session(&[("content-type", "text/plain"), accept]),
            &list(json!(3)),
        )
        .await;
        assert_refused(
            "content-type",
            &text,
            415,
            -32600,
            &json!(3),
            "Content-Type must be application/json, not \"text/plain\"",
        );
        let headers = [json_type, accept];
        let put = send(url, token, Method::PUT, &headers, &list(json!(4))).await;
        let allow = match mode {
            SessionMode::Stateless => "POST",
            SessionMode::Stateful => "GET, POST, DELETE",
        };
        assert_refused(
            "PUT",
            &put,
            405,
            -32600,
            &json!(4),
            &format!("HTTP method PUT is not served on /mcp; use {allow}"),
        );
        assert_eq!(put.allow.as_deref(), Some(allow));

        let unknown = [
            ("accept", "text/event-stream"),
            ("mcp-session-id", "no-such"),
        ];
        let get = send(url, token, Method::GET, &unknown, "").await;
        let delete = send(url, token, Method::DELETE, &unknown, "").await;
        match mode {
            SessionMode::Stateless => {
                assert_refused("GET", &get, 405, -32600, &Value::Null, "HTTP method GET");
                assert_refused(
                    "DELETE",
                    &delete,
                    405,
                    -32600,
                    &Value::Null,
                    "HTTP method DELETE",
                );
            }
            SessionMode::Stateful => {
                for (what, answer) in [("GET", &get), ("DELETE", &delete)] {
                    assert_refused(what, answer, 404, -32001, &Value::Null, "no such session");
                    assert_eq!(answer.body["error"]["data"]["code"], "session_not_found");
                }
                let sessionless = [("accept", "text/event-stream")];
                let get = send(url, token, Method::GET, &sessionless, "").await;
                let needs = "this request needs the Mcp-Session-Id header";
                assert_refused("GET without", &get, 400, -32600, &Value::Null, needs);
                let list_without = send(url, token, Method::POST, &headers, &list(json!(5))).await;
                assert_refused("POST without", &list_without, 400, -32600, &json!(5), needs);
                let named = [json_type, accept, ("mcp-session-id", "no-such")];
                let gone = send(url, token, Method::POST, &named, &list(json!(6))).await;
                assert_refused(
                    "POST unknown",
                    &gone,
                    404,
                    -32001,
                    &json!(6),
                    "no such session",
                );
                let json_get = [("accept", "application/json")];
                let sid = sid.as_deref().unwrap();
                let json_get = [json_get[0], ("mcp-session-id", sid)];
                let get = send(url, token, Method::GET, &json_get, "").await;
                let needs = "the Accept header must list text/event-stream";
                assert_refused("GET json", &get, 406, -32600, &Value::Null, needs);
            }
        }

        // An unknown method says what is wrong, on either path.
        for (method, id) in [
            ("no/such", 7),
            ("prompts/list", 8),
            ("completion/complete", 9),
        ] {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}});
            let answer = post(with_session(&[json_type, accept]), &body.to_string()).await;
            let message = format!("method not found: {method}");
            assert_refused(method, &answer, 200, -32601, &json!(id), &message);
            assert_eq!(answer.body["error"]["message"], message);
        }
        guard.stop().await;
    }
}

/// A body over 1 MiB is that request's error (`-32600`) in a 200 once the sidecar has read
/// it to its end (none of it kept): the official Python SDK (1.30) raised on the 413 in its
/// transport's task group, or met the connection closed under the body it still sent
/// (`ReadError`), and either way ended the whole client with every call in flight. The next
/// call in the same session is answered. Both session modes.
#[tokio::test]
async fn the_python_sdk_reads_a_body_too_large_as_the_calls_error() {
    let lab = common::lab(7);
    for mode in [SessionMode::Stateless, SessionMode::Stateful] {
        let mut config = config_for(&lab.url);
        config.session_mode = mode;
        let guard = start_with(config).await;
        let summary = common::python_sdk(
            "refused_call_python.py",
            vec![guard.url.clone(), lab.token.clone(), "large".into()],
        )
        .await;
        assert_eq!(summary["refused"], true, "{mode:?}: {summary}");
        assert_eq!(summary["code"], -32600, "{mode:?}: {summary}");
        assert_eq!(
            summary["message"], "the request body is larger than 1048576 bytes",
            "{mode:?}: {summary}"
        );
        assert_eq!(summary["data"]["code"], "invalid_request", "{summary}");
        assert_eq!(summary["after_ok"], true, "{mode:?}: {summary}");
        guard.stop().await;
    }
}
