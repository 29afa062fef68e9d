//! `subscriptions/listen` (protocol 2026-07-28) against the 7.0 lab: a listen stream hears
//! `notifications/tools/list_changed` in both session modes (rmcp's client, and the wire
//! read as raw SSE); streams are capped like sessions, per token and in all, and their
//! places are given back when they end; shutdown ends each with its final result, and a
//! token Zabbix no longer accepts ends its streams with the error a request gets. In the
//! stateful mode, 2026-07-28 requests (which carry no session) need no session place.

mod common;

use std::time::Duration;

use common::zapi::TestUser;
use common::{config_for, start_with};
use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use serde_json::{Value, json};
use zabbix_mcp_guard::config::{Config, SessionMode};

const WAIT: Duration = Duration::from_secs(30);

/// The lab's configuration with a policy directory of the test's own, to revise.
fn config(name: &str, mode: SessionMode) -> (Config, std::path::PathBuf) {
    let lab = common::lab(7);
    let policies = common::policy_copy(&common::scratch_dir(name));
    let mut config = config_for(&lab.url);
    config.policy_dir = Some(policies.clone());
    config.session_mode = mode;
    (config, policies)
}

/// A policy set of another revision, loaded.
fn revise(guard: &common::Guard, policies: &std::path::Path, mark: &str) {
    let rego = policies.join("default.rego");
    let text = std::fs::read_to_string(&rego).expect("policy");
    std::fs::write(&rego, format!("{text}\n# {mark}\n")).expect("policy revised");
    guard.app().policy.reload().expect("the revised set loads");
}

fn http() -> reqwest::Client {
    common::init();
    reqwest::Client::new()
}

/// `subscriptions/listen` as a 2026-07-28 client posts it, for the tool list's changes.
async fn post_listen(url: &str, token: &str, id: u64) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw-sse", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}
        },
        "notifications": {"toolsListChanged": true}}});
    http()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .bearer_auth(token)
        .body(body.to_string())
        .send()
        .await
        .expect("the request is answered")
}

/// The JSON-RPC messages of an SSE response body, as they come.
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    fn new(response: reqwest::Response) -> Sse {
        assert_eq!(response.status(), 200);
        let kind = response.headers()["content-type"].to_str().unwrap_or("");
        assert!(kind.starts_with("text/event-stream"), "{kind}");
        Sse {
            response,
            buffer: String::new(),
        }
    }

    /// The next message; `None` once the stream ended.
    async fn next(&mut self) -> Option<Value> {
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                let data = data.join("\n");
                if !data.is_empty() {
                    return Some(serde_json::from_str(&data).expect("a JSON-RPC message"));
                }
            }
            let chunk = tokio::time::timeout(WAIT, self.response.chunk())
                .await
                .expect("the stream goes on within 30 s")
                .expect("the stream reads");
            match chunk {
                Some(bytes) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                None => return None,
            }
        }
    }
}

async fn listen_streams_open(guard: &common::Guard) -> f64 {
    common::metrics::scrape(&guard.base)
        .await
        .get("listen_streams_open")
}

#[tokio::test]
async fn a_listen_stream_hears_tool_list_changes_in_both_session_modes() {
    let lab = common::lab(7);
    for mode in [SessionMode::Stateless, SessionMode::Stateful] {
        let (config, policies) = config(&format!("listen-{mode:?}"), mode);
        let guard = start_with(config).await;

        // Clients before 2026-07-28 hear of changes only on a session.
        let legacy = common::client_with(&guard, &lab.token, ProtocolVersion::V_2025_11_25).await;
        let told = legacy
            .peer_info()
            .and_then(|info| info.capabilities.tools.clone())
            .and_then(|tools| tools.list_changed);
        let expected = (mode == SessionMode::Stateful).then_some(true);
        assert_eq!(told, expected, "{mode:?}");
        legacy.cancel().await.unwrap();

        let client = common::client_with(&guard, &lab.token, ProtocolVersion::V_2026_07_28).await;
        let mut subscription = client
            .peer()
            .listen(SubscriptionFilter::builder().tools_list_changed().build())
            .await
            .unwrap_or_else(|e| panic!("{mode:?}: listen refused: {e}"));
        assert_eq!(
            subscription.acknowledged().tools_list_changed,
            Some(true),
            "{mode:?}"
        );
        assert_eq!(listen_streams_open(&guard).await, 1.0, "{mode:?}");
        common::wait_until("the stream to be listed", WAIT, async || {
            guard.app().list_changed.streams() == 1
        })
        .await;
        // Bounded by the listen caps, an open stream holds no place in the MCP gate.
        let inside = common::metrics::scrape(&guard.base)
            .await
            .get("mcp_requests_in_progress");
        assert_eq!(inside, 0.0, "{mode:?}");

        revise(&guard, &policies, "revised");
        let heard = tokio::time::timeout(WAIT, subscription.next())
            .await
            .unwrap_or_else(|_| panic!("{mode:?}: no notification within 30 s"))
            .expect("the stream reads");
        assert!(
            matches!(
                heard,
                Some(ServerNotification::ToolListChangedNotification(_))
            ),
            "{mode:?}: {heard:?}"
        );
        // The same client goes on calling while it listens.
        let tools = client.list_all_tools().await.expect("tools/list");
        assert!(tools.iter().any(|t| t.name == "host_get"), "{mode:?}");

        subscription
            .cancel()
            .await
            .expect("the client ends its stream");
        common::wait_until("the stream's place to be given back", WAIT, async || {
            listen_streams_open(&guard).await == 0.0 && guard.app().list_changed.streams() == 0
        })
        .await;
        client.cancel().await.unwrap();
        guard.stop().await;
    }
}

#[tokio::test]
async fn the_wire_carries_the_acknowledgment_and_the_notification_with_their_subscription() {
    let lab = common::lab(7);
    let (config, policies) = config("listen-wire", SessionMode::Stateless);
    let guard = start_with(config).await;
    let mut stream = Sse::new(post_listen(&guard.url, &lab.token, 7).await);
    let ack = stream.next().await.expect("an acknowledgment");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["toolsListChanged"], true,
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7,
        "{ack}"
    );

    revise(&guard, &policies, "wire");
    let told = stream.next().await.expect("a notification");
    assert_eq!(told["method"], "notifications/tools/list_changed", "{told}");
    assert_eq!(
        told["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7,
        "{told}"
    );

    // Shutdown ends the stream with its final result, not at the end of the grace period.
    let stopping = tokio::spawn(guard.stop());
    let last = stream.next().await.expect("a final result");
    assert_eq!(last["id"], 7, "{last}");
    assert!(last.get("result").is_some(), "{last}");
    assert!(stream.next().await.is_none(), "the stream ends after it");
    stopping.await.expect("shutdown completes");
}

/// A listen stream quiet for longer than `IdleTimeout` is a request in flight, not an
/// idle connection: a keep-alive connection made after it is closed for idleness while the
/// stream still hears the next change. (Waiting on its own source, its body counts as
/// busy; one whose data the peer does not take does not, `tests/connection_limits.rs`.)
#[tokio::test]
async fn a_quiet_listen_stream_outlives_the_idle_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let lab = common::lab(7);
    let (mut config, policies) = config("listen-quiet", SessionMode::Stateless);
    config.limits.idle = Duration::from_secs(1);
    let guard = start_with(config).await;
    let mut stream = Sse::new(post_listen(&guard.url, &lab.token, 9).await);
    stream.next().await.expect("an acknowledgment");

    let address = guard.base.trim_start_matches("http://").to_owned();
    let mut idle = tokio::net::TcpStream::connect(&address).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    tokio::time::timeout(WAIT, idle.read_to_end(&mut seen))
        .await
        .expect("the idle keep-alive connection is closed")
        .ok();
    assert!(seen.starts_with(b"HTTP/1.1 200"), "{seen:?}");

    revise(&guard, &policies, "quiet");
    let told = stream.next().await.expect("the stream is still open");
    assert_eq!(told["method"], "notifications/tools/list_changed", "{told}");
    guard.stop().await;
}

#[tokio::test]
async fn listen_streams_are_capped_per_token_and_in_all() {
    let lab = common::lab(7);
    let (mut config, _) = config("listen-caps", SessionMode::Stateless);
    config.limits.max_sessions = 2;
    config.limits.max_sessions_per_token = 1;
    let guard = start_with(config).await;

    let mut first = Sse::new(post_listen(&guard.url, &lab.token, 1).await);
    assert!(first.next().await.is_some(), "acknowledged");
    let (status, body) =
        common::status_and_body(post_listen(&guard.url, &lab.token, 2).await).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"], "too_many_listen_streams", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("MaxSessionsPerToken"),
        "{body}"
    );

    let mut second = Sse::new(post_listen(&guard.url, &lab.token_operator, 3).await);
    assert!(second.next().await.is_some(), "acknowledged");
    let (status, body) =
        common::status_and_body(post_listen(&guard.url, &lab.token_viewer, 4).await).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("MaxSessions"),
        "{body}"
    );
    assert_eq!(listen_streams_open(&guard).await, 2.0);

    // A stream that ends gives its place back, and other requests never counted.
    drop(first);
    common::wait_until(
        "the first stream's place to be given back",
        WAIT,
        async || listen_streams_open(&guard).await == 1.0,
    )
    .await;
    let client = common::client_with(&guard, &lab.token, ProtocolVersion::V_2026_07_28).await;
    let env = common::read(&client, "host_get", json!({"search": "mcp-web-01"})).await;
    assert_eq!(env["count"], 1);
    let mut again = Sse::new(post_listen(&guard.url, &lab.token, 5).await);
    assert!(again.next().await.is_some(), "acknowledged");
    client.cancel().await.unwrap();
    drop((second, again));
    guard.stop().await;
}

#[tokio::test]
async fn stateful_sidecars_serve_2026_requests_without_a_session_place() {
    let lab = common::lab(7);
    let (mut config, _) = config("listen-stateful-cap", SessionMode::Stateful);
    config.limits.max_sessions = 1;
    let guard = start_with(config).await;
    // The only session place is taken.
    let session = common::client_with(&guard, &lab.token, ProtocolVersion::V_2025_11_25).await;
    let (status, body) = common::raw_initialize(&http(), &guard.url, &lab.token_operator).await;
    assert_eq!(status, 503, "the cap still holds for sessions: {body}");

    // A 2026-07-28 client creates none, so it is served.
    let client =
        common::client_with(&guard, &lab.token_operator, ProtocolVersion::V_2026_07_28).await;
    let env = common::read(&client, "host_get", json!({"search": "mcp-web-01"})).await;
    assert_eq!(env["count"], 1);
    client.cancel().await.unwrap();
    session.cancel().await.unwrap();
    guard.stop().await;
}

#[tokio::test]
async fn a_revoked_token_ends_its_listen_stream() {
    let lab = common::lab(7);
    let viewers = common::seed_id(&lab, "user_groups", "MCP Viewers");
    let user = TestUser::create(&lab, &viewers, &[]).await;
    let guard = user
        .run(&lab, ended_when_revoked(lab.clone(), user.clone()))
        .await;
    common::wait_until("the stream's place to be given back", WAIT, async || {
        listen_streams_open(&guard).await == 0.0
    })
    .await;
    guard.stop().await;
}

/// The sidecar whose stream of `token` ended when the token was revoked.
async fn ended_when_revoked(lab: common::Lab, user: TestUser) -> common::Guard {
    let token = user.token.clone();
    let (config, _) = config("listen-revoked", SessionMode::Stateless);
    let guard = start_with(config).await;
    let mut stream = Sse::new(post_listen(&guard.url, &token, 9).await);
    assert!(stream.next().await.is_some(), "acknowledged");

    // The stream looks again within 15 s.
    common::revoke_now(&guard, &lab, &user).await;
    let last = tokio::time::timeout(Duration::from_secs(120), stream.next())
        .await
        .expect("the stream ends within two minutes of the revocation")
        .expect("an answer ending the stream");
    assert_eq!(last["id"], 9, "{last}");
    assert_eq!(last["error"]["data"]["code"], "unauthorized", "{last}");
    assert!(stream.next().await.is_none(), "the stream ends with it");
    let closed = common::metrics::scrape(&guard.base)
        .await
        .get(r#"revocation_closures_total{kind="listen_stream"}"#);
    assert_eq!(closed, 1.0);
    guard
}

/// 2026-07-28 requests to a stateful sidecar are answered outside sessions, so they pass the
/// MCP gate as stateless requests do (before, they were bounded by nothing once they no
/// longer waited for a session to be created). Against a stub that answers slowly.
#[tokio::test]
async fn stateful_sidecars_gate_2026_requests() {
    const CALLS: usize = 3;
    let stub = common::fault::start(common::fault::Fault::Answer(json!([]))).await;
    let mut config = config_for(&stub.url);
    config.session_mode = SessionMode::Stateful;
    let guard = start_with(config).await;
    let mut clients = Vec::new();
    for _ in 0..CALLS {
        clients
            .push(common::client_with(&guard, "gate-token", ProtocolVersion::V_2026_07_28).await);
    }
    stub.set(common::fault::Fault::Slow(Duration::from_secs(3)));
    let mut calls = tokio::task::JoinSet::new();
    for client in clients {
        calls.spawn(async move {
            common::read(&client, "host_get", json!({"limit": 1})).await;
            let _ = client.cancel().await;
        });
    }
    common::wait_until("the calls to be inside the gate", WAIT, async || {
        common::metrics::scrape(&guard.base)
            .await
            .get("mcp_requests_in_progress")
            == CALLS as f64
    })
    .await;
    while let Some(done) = calls.join_next().await {
        done.expect("the call succeeds once Zabbix answers");
    }
    guard.stop().await;
}
