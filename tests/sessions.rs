//! Issue 12, sessions (stateful mode): a session belongs to the token that created it
//! (another token holder who learns its id can neither use nor delete it), sessions are
//! capped by `MaxSessions`, idle ones end after `SessionIdleTimeout`, and a token revoked
//! in Zabbix loses its sessions.

mod common;

use std::time::Duration;

use common::zapi::TestUser;
use reqwest::{Client, Response};
use serde_json::json;
use zabbix_mcp_guard::config::SessionMode;

const GENEROUS: Duration = Duration::from_secs(60);

fn initialize() -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "sessions-test", "version": "1"}}})
}

async fn post(
    http: &Client,
    url: &str,
    token: &str,
    session: Option<&str>,
    body: &serde_json::Value,
) -> Response {
    let mut request = http
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(body);
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    request.send().await.unwrap()
}

async fn delete(http: &Client, url: &str, token: &str, session: &str) -> Response {
    http.delete(url)
        .bearer_auth(token)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap()
}

fn session_of(response: &Response) -> String {
    response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a new session id")
        .to_owned()
}

#[tokio::test]
async fn sessions_are_bound_to_their_token_capped_and_idle_expired() {
    let (zabbix, _stub) = common::stub::start(Duration::ZERO).await;
    let mut config = common::config_for(&zabbix);
    config.session_mode = SessionMode::Stateful;
    config.limits.max_sessions = 1;
    config.limits.session_idle = Duration::from_secs(2);
    let guard = common::start_with(config).await;
    let http = Client::new();
    let url = guard.url.as_str();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});

    let created = post(&http, url, "token-a", None, &initialize()).await;
    assert_eq!(created.status(), 200);
    let session = session_of(&created);
    drop(created);

    // Another token holder with the id: not found, for use and for delete.
    let foreign = post(&http, url, "token-b", Some(&session), &initialized).await;
    assert_eq!(foreign.status(), 404);
    assert_eq!(delete(&http, url, "token-b", &session).await.status(), 404);
    // The owner still uses it.
    let own = post(&http, url, "token-a", Some(&session), &initialized).await;
    assert_eq!(own.status(), 202, "{:?}", own.text().await);

    // MaxSessions=1: a second session is refused while the first lives.
    let refused = post(&http, url, "token-b", None, &initialize()).await;
    assert_eq!(refused.status(), 503);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "too_many_sessions");

    // The owner ends it; a new session can then be made.
    // 204: the official Python SDK reads rmcp's own 202 as a failed termination.
    assert_eq!(delete(&http, url, "token-a", &session).await.status(), 204);
    // Ended: unknown to its owner too, answered as any unknown id.
    let ended = post(&http, url, "token-a", Some(&session), &initialized).await;
    assert_eq!(ended.status(), 404);
    let body: serde_json::Value = ended.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32001, "{body}");
    assert_eq!(body["error"]["data"]["code"], "session_not_found", "{body}");
    let second = post(&http, url, "token-b", None, &initialize()).await;
    assert_eq!(second.status(), 200);
    let second = session_of(&second);

    // SessionIdleTimeout: left alone, the session ends (its id is then unknown). A probe is
    // traffic too, so probes are spaced wider than the idle limit.
    let idle_ended = async || {
        let probe = http
            .get(url)
            .bearer_auth("token-b")
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &second)
            .header("mcp-protocol-version", "2025-11-25")
            .timeout(Duration::from_millis(200))
            .send()
            .await;
        matches!(probe, Ok(r) if r.status() == 404)
    };
    common::wait_until_every(
        "the idle session to end",
        GENEROUS,
        Duration::from_secs(3),
        idle_ended,
    )
    .await;
    guard.stop().await;
}

/// One token cannot take every session: past `MaxSessionsPerToken` its next `initialize`
/// gets 429 `too_many_sessions`, while another token still gets a session; once the first
/// token ends one of its own, it may open one again. Against the 7.0 lab.
#[tokio::test]
async fn one_token_cannot_take_every_session() {
    let lab = common::lab(7);
    let mut config = common::config_for(&lab.url);
    config.session_mode = SessionMode::Stateful;
    config.limits.max_sessions = 10;
    config.limits.max_sessions_per_token = 2;
    let guard = common::start_with(config).await;
    let http = Client::new();
    let url = guard.url.as_str();
    let mut mine = Vec::new();
    for _ in 0..2 {
        let created = post(&http, url, &lab.token_viewer, None, &initialize()).await;
        assert_eq!(created.status(), 200);
        mine.push(session_of(&created));
    }
    let refused = post(&http, url, &lab.token_viewer, None, &initialize()).await;
    assert_eq!(refused.status(), 429);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "too_many_sessions", "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("this token holds 2 sessions already (MaxSessionsPerToken)"),
        "{body}"
    );
    // Another token is not held back by this one.
    let other = post(&http, url, &lab.token, None, &initialize()).await;
    assert_eq!(other.status(), 200);
    // Ending one of its own makes room for the first token again.
    let ended = delete(&http, url, &lab.token_viewer, &mine[0]).await;
    assert_eq!(ended.status(), 204);
    let again = post(&http, url, &lab.token_viewer, None, &initialize()).await;
    assert_eq!(again.status(), 200);
    guard.stop().await;
}

/// A session lives no longer than Zabbix accepts its token: once the token is deleted in
/// Zabbix, its sessions are closed when the identity cache next lets identities lapse,
/// and only its own. Against the 7.0 lab, with a user of the test's own.
#[tokio::test]
async fn a_revoked_tokens_sessions_are_closed() {
    let lab = common::lab(7);
    let viewers = common::seed_id(&lab, "user_groups", "MCP Viewers");
    let user = TestUser::create(&lab, &viewers, &[]).await;
    let (guard, other) = user
        .run(&lab, revoked_with_sessions(lab.clone(), user.clone()))
        .await;
    // The cache's minute, and a margin.
    common::wait_until(
        "the revoked token's session to close",
        Duration::from_secs(120),
        async || sessions_open(&guard).await == 1.0,
    )
    .await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let kept = post(
        &Client::new(),
        &guard.url,
        &lab.token,
        Some(&other),
        &initialized,
    )
    .await;
    assert_eq!(kept.status(), 202, "the other token's session is kept");
    let closed = common::metrics::scrape(&guard.base)
        .await
        .get(r#"revocation_closures_total{kind="session"}"#);
    assert_eq!(closed, 1.0);
    guard.stop().await;
}

async fn sessions_open(guard: &common::Guard) -> f64 {
    common::metrics::scrape(&guard.base)
        .await
        .get("sessions_open")
}

/// A stateful sidecar with a session of `user`'s, whose token is then revoked, and one of
/// the lab's Admin, whose id it returns.
async fn revoked_with_sessions(lab: common::Lab, user: TestUser) -> (common::Guard, String) {
    let mut config = common::config_for(&lab.url);
    config.session_mode = SessionMode::Stateful;
    let guard = common::start_with(config).await;
    let http = Client::new();
    let mine = post(&http, &guard.url, &user.token, None, &initialize()).await;
    assert_eq!(mine.status(), 200);
    let other = post(&http, &guard.url, &lab.token, None, &initialize()).await;
    assert_eq!(other.status(), 200);
    let other = session_of(&other);
    assert_eq!(sessions_open(&guard).await, 2.0);
    user.revoke_token(&lab).await;
    (guard, other)
}

/// A client that hangs up while its `initialize` is answered. rmcp creates the session
/// before it answers; on this test's one thread the request is polled by hand until the
/// session exists and then dropped, as hyper drops it when its client goes. Before, the
/// owner was recorded only once the answer came back: the session was nobody's (outside
/// `MaxSessionsPerToken` and the revocation sweep) until it idled out, so a token capped
/// at 1 got a second one, and by hanging up again and again could take every session.
#[tokio::test(flavor = "current_thread")]
async fn a_session_whose_client_hung_up_during_initialize_counts_against_its_token() {
    let lab = common::lab(7);
    let mut config = common::config_for(&lab.url);
    config.session_mode = SessionMode::Stateful;
    config.limits.max_sessions = 10;
    config.limits.max_sessions_per_token = 1;
    let app = zabbix_mcp_guard::app::App::new(config).expect("app");
    let router = zabbix_mcp_guard::server::Router::new(app);
    let peer: std::net::IpAddr = [127, 0, 0, 1].into();
    let request = |body: String| {
        http::Request::post("http://127.0.0.1/mcp")
            .header("host", "127.0.0.1")
            .header("authorization", format!("Bearer {}", lab.token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .expect("request")
    };
    let open = async || {
        let scrape = http::Request::get("http://127.0.0.1/metrics")
            .header("host", "127.0.0.1")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .expect("request");
        let response = router.handle(scrape, peer).await;
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .expect("metrics")
            .to_bytes();
        let text = String::from_utf8_lossy(&body).into_owned();
        text.lines()
            .find_map(|line| line.strip_prefix("zabbix_mcp_guard_sessions_open "))
            .and_then(|n| n.parse::<u32>().ok())
            .expect("sessions_open")
    };
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    router.handle(request(ping), peer).await;

    // Polled until the session exists, then dropped unanswered (had it been answered
    // first, the session would be this token's all the same).
    let mut answering = Box::pin(router.handle(request(initialize().to_string()), peer));
    common::wait_until("the session to be created", GENEROUS, async || {
        let polled = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(answering.as_mut().poll(cx).map(|_| ()))
        })
        .await;
        polled.is_ready() || open().await == 1
    })
    .await;
    drop(answering);

    let again = router.handle(request(initialize().to_string()), peer).await;
    let sessions = open().await;
    assert_eq!(
        again.status(),
        429,
        "the abandoned session is this token's ({sessions} open)"
    );
    assert_eq!(sessions, 1);
}

/// Reads an SSE response until a `data:` line holds `needle`; that JSON-RPC message.
async fn sse_until(response: &mut Response, needle: &str) -> serde_json::Value {
    let mut text = String::new();
    loop {
        let chunk = tokio::time::timeout(GENEROUS, response.chunk())
            .await
            .unwrap_or_else(|_| panic!("no {needle} within {GENEROUS:?}: {text}"))
            .expect("the stream reads")
            .unwrap_or_else(|| panic!("the stream ended without {needle}: {text}"));
        text.push_str(&String::from_utf8_lossy(&chunk));
        let found = text
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .find(|data| data.contains(needle));
        if let Some(data) = found {
            return serde_json::from_str(data).expect("a JSON-RPC message");
        }
    }
}

/// Declines `question`, the approval asked by the write with request id `id`, and reads
/// that write's answer from its `stream`.
async fn decline(
    http: &Client,
    (guard, lab, session): (&common::Guard, &common::Lab, &str),
    question: &serde_json::Value,
    stream: &mut Response,
    id: u64,
) -> serde_json::Value {
    let decline = json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}});
    let answered = post(http, &guard.url, &lab.token, Some(session), &decline).await;
    assert_eq!(answered.status(), 202);
    sse_until(stream, &format!(r#""id":{id}"#)).await
}

/// A stateful sidecar on the 7.0 lab, a session whose client answers elicitations, and in
/// it a write (`problem_annotate` with JSON-RPC id `id`) waiting for its approval.
struct WaitingWrite {
    lab: common::Lab,
    guard: common::Guard,
    http: Client,
    session: String,
    /// The write's SSE stream, read up to the approval question.
    stream: Response,
    /// The approval question (`elicitation/create`).
    question: serde_json::Value,
}

async fn a_write_waiting_for_approval(id: u64, message: &str) -> WaitingWrite {
    let lab = common::lab(7);
    let config = common::config_for(&lab.url);
    a_write_waiting_for_approval_in(config, lab, id, message).await
}

/// The same on a sidecar of this configuration (made stateful).
async fn a_write_waiting_for_approval_in(
    mut config: zabbix_mcp_guard::config::Config,
    lab: common::Lab,
    id: u64,
    message: &str,
) -> WaitingWrite {
    config.session_mode = SessionMode::Stateful;
    let guard = common::start_with(config).await;
    let http = Client::new();
    let mut init = initialize();
    init["params"]["capabilities"] = json!({"elicitation": {"form": {}}});
    let created = post(&http, &guard.url, &lab.token, None, &init).await;
    assert_eq!(created.status(), 200);
    let session = session_of(&created);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let told = post(&http, &guard.url, &lab.token, Some(&session), &initialized).await;
    assert_eq!(told.status(), 202);

    let (stream, question) = a_write_in(&http, &guard, &lab, &session, id, message).await;
    WaitingWrite {
        lab,
        guard,
        http,
        session,
        stream,
        question,
    }
}

/// A write (`problem_annotate`, JSON-RPC id `id`) in `session`, read up to its approval
/// question.
async fn a_write_in(
    http: &Client,
    guard: &common::Guard,
    lab: &common::Lab,
    session: &str,
    id: u64,
    message: &str,
) -> (Response, serde_json::Value) {
    let eventid = common::seed_id(lab, "problems", "MCP float too high");
    let write = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "problem_annotate",
        "arguments": {"eventids": [eventid], "message": message}}});
    let mut stream = post(http, &guard.url, &lab.token, Some(session), &write).await;
    assert_eq!(stream.status(), 200);
    let question = sse_until(&mut stream, "elicitation/create").await;
    (stream, question)
}

/// `MaxRequestsPerSession`: a session's requests pass no MCP gate, and a write waiting for
/// its approval holds its place for `ElicitationTimeout`, also once its client hung up.
/// Before, one session held any number of them (1,000 writes waiting: 1,001 calls in
/// flight and 50 MB more in a debug build, after their client had gone). Now the request
/// past the cap gets its JSON-RPC error `-32005` naming it, and a place freed is used again.
#[tokio::test]
async fn a_session_holds_at_most_max_requests_per_session_in_flight() {
    let lab = common::lab(7);
    let mut config = common::config_for(&lab.url);
    config.limits.max_requests_per_session = 2;
    let WaitingWrite {
        lab,
        guard,
        http,
        session,
        stream: mut first,
        question,
    } = a_write_waiting_for_approval_in(config, lab, 1, "session cap test (declined)").await;
    let (mut second, second_question) = a_write_in(
        &http,
        &guard,
        &lab,
        &session,
        2,
        "session cap test (declined)",
    )
    .await;

    let before = common::metrics::scrape(&guard.base).await;
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let refused = post(&http, &guard.url, &lab.token, Some(&session), &list).await;
    assert_eq!(refused.status(), 200, "the request's own error");
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["id"], 3, "{body}");
    assert_eq!(body["error"]["code"], -32005, "{body}");
    assert_eq!(body["error"]["data"]["retry_after_seconds"], 1, "{body}");
    assert_eq!(body["error"]["data"]["code"], "rate_limited", "{body}");
    assert_eq!(
        body["error"]["data"]["scope"], "max_requests_per_session",
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "too many requests in flight in this session: it has 2 (MaxRequestsPerSession)"
        ),
        "{message}"
    );
    let after = common::metrics::scrape(&guard.base).await;
    assert_eq!(after.delta(&before, "session_requests_refused_total"), 1.0);

    // Answered, a write gives its place back.
    for (question, stream, id) in [
        (&question, &mut first, 1),
        (&second_question, &mut second, 2),
    ] {
        decline(&http, (&guard, &lab, &session), question, stream, id).await;
    }
    let again = post(&http, &guard.url, &lab.token, Some(&session), &list).await;
    assert_eq!(again.status(), 200);
    guard.stop().await;
}

/// rmcp routes a session's answers by request id: a request reusing the id of one still in
/// flight took over its route. Before, the second request (`tools/list`, id 7) was
/// answered while the first (a write waiting for its approval, id 7) never got its answer:
/// its stream stayed open with keep-alives only. Now the second is refused naming the id,
/// and the first gets its answer.
#[tokio::test]
async fn a_request_reusing_an_id_in_flight_in_its_session_is_refused() {
    let WaitingWrite {
        lab,
        guard,
        http,
        session,
        stream: mut first,
        question,
    } = a_write_waiting_for_approval(7, "id reuse test (declined)").await;

    let list = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
    let second = post(&http, &guard.url, &lab.token, Some(&session), &list).await;
    assert_eq!(second.status(), 400, "the id is in flight");
    let refusal: serde_json::Value = second.json().await.unwrap();
    assert_eq!(refusal["id"], 7, "{refusal}");
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    let message = refusal["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("request id 7 is in use"), "{message}");

    let result = decline(&http, (&guard, &lab, &session), &question, &mut first, 7).await;
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(text.contains("approval_declined"), "{result}");

    // Answered, the id is free again.
    let again = post(&http, &guard.url, &lab.token, Some(&session), &list).await;
    assert_eq!(again.status(), 200);
    guard.stop().await;
}

/// The id stays in use while its request's handler goes on after its client hung up (a
/// write waiting for its approval): rmcp would route that request's answer to a new
/// request's stream. Before, the id was given back with the HTTP response.
#[tokio::test]
async fn an_id_stays_in_use_while_its_abandoned_request_goes_on() {
    let WaitingWrite {
        lab,
        guard,
        http,
        session,
        stream,
        ..
    } = a_write_waiting_for_approval(9, "abandoned id test (never approved)").await;
    drop(stream);
    drop(http);

    let http = Client::new();
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
    // The sidecar learns of the hangup when an SSE keep-alive fails to go out.
    let noticed = Duration::from_secs(120);
    common::wait_until("the abandoned stream to be closed", noticed, async || {
        common::metrics::scrape(&guard.base)
            .await
            .get("connections_open")
            <= 1.0
    })
    .await;
    let second = post(&http, &guard.url, &lab.token, Some(&session), &list).await;
    assert_eq!(
        second.status(),
        400,
        "the abandoned request is still in flight"
    );
    guard.stop().await;
}

/// The official MCP Python SDK reads a request refused at `MaxRequestsPerSession` as that
/// call's error (`-32005`, naming the limit) and goes on in its session. Before, the refusal
/// was a 429, which the SDK (1.30) raises in its transport's task group: the whole client
/// ended with an ExceptionGroup, every call in flight lost (and the code was `-32603`,
/// internal error).
#[tokio::test]
async fn the_python_sdk_reads_a_session_at_its_limit_as_the_calls_error() {
    let lab = common::lab(7);
    let mut config = common::config_for(&lab.url);
    config.session_mode = SessionMode::Stateful;
    config.limits.max_requests_per_session = 1;
    let guard = common::start_with(config).await;
    let summary = common::python_sdk(
        "session_limit_python.py",
        vec![guard.url.clone(), lab.token.clone()],
    )
    .await;
    assert_eq!(summary["refused"], true, "{summary}");
    assert_eq!(summary["code"], -32005, "{summary}");
    let message = summary["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "too many requests in flight in this session: it has 1 (MaxRequestsPerSession)"
        ),
        "{summary}"
    );
    assert_eq!(
        summary["data"]["scope"], "max_requests_per_session",
        "{summary}"
    );
    assert_eq!(summary["after_ok"], true, "{summary}");
    guard.stop().await;
}
