//! `ElicitationTimeout` (issue 12): a stateful client that declares form elicitation and
//! never answers the approval question. After the timeout the call ends `approval_unavailable`,
//! nothing reaches Zabbix, and the decision log has the `approval` event (`unavailable`).
//! An answer sent after the timeout (an `approve: true` for the expired question) changes
//! nothing: still nothing sent, no second approval event, and the session keeps working.
//!
//! The client is raw streamable HTTP (reqwest), because rmcp's client drops a handler's
//! answer once the server cancelled the request: only a raw client can send the late answer.
//! The timeout is the parameter's minimum, 10 s (range 10–3600); production is not changed.

use std::time::Duration;

use serde_json::{Value, json};
use zabbix_mcp_guard::config::SessionMode;

use crate::common::{self, recorder};
use crate::support::{TOOL, acks, event_of, log_lines, open_problem_other_than, policy};

/// `ElicitationTimeout`'s minimum: what the test waits for, at least.
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(10);
/// Far above the timeout: reaching it means the call was never ended.
const GENEROUS: Duration = Duration::from_secs(120);
const PROTOCOL: &str = "2025-11-25";

/// A streamable HTTP MCP session driven by hand.
struct RawSession {
    http: reqwest::Client,
    url: String,
    token: String,
    session: Option<String>,
}

/// Reads JSON-RPC messages from one SSE (or plain JSON) response, one at a time.
struct Messages {
    response: reqwest::Response,
    buffer: String,
    sse: bool,
    done: bool,
}

impl Messages {
    async fn next(&mut self) -> Option<Value> {
        loop {
            if !self.sse {
                if self.done {
                    return None;
                }
                self.done = true;
                let text = std::mem::take(&mut self.buffer) + &read_rest(&mut self.response).await;
                return serde_json::from_str(&text).ok();
            }
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() || data.iter().all(|d| d.is_empty()) {
                    continue; // priming event or keep-alive
                }
                return Some(serde_json::from_str(&data.join("\n")).expect("SSE data is JSON"));
            }
            match self.response.chunk().await.ok().flatten() {
                Some(chunk) => self
                    .buffer
                    .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n")),
                None => return None,
            }
        }
    }
}

async fn read_rest(response: &mut reqwest::Response) -> String {
    let mut text = String::new();
    while let Some(chunk) = response.chunk().await.ok().flatten() {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

impl RawSession {
    async fn post(&self, body: &Value) -> reqwest::Response {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .json(body);
        if let Some(id) = &self.session {
            request = request.header("mcp-session-id", id);
        }
        request.send().await.expect("POST /mcp")
    }

    async fn messages(&self, body: &Value) -> Messages {
        let response = self.post(body).await;
        assert!(response.status().is_success(), "{}", response.status());
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        Messages {
            response,
            buffer: String::new(),
            sse,
            done: false,
        }
    }

    /// initialize (declaring form elicitation) and notifications/initialized.
    async fn open(guard: &common::Guard, token: &str) -> RawSession {
        let mut session = RawSession {
            http: reqwest::Client::new(),
            url: guard.url.clone(),
            token: token.to_owned(),
            session: None,
        };
        let response = session
            .post(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "silent-approver", "version": "1.0"}}}),
            )
            .await;
        assert!(response.status().is_success(), "{}", response.status());
        session.session = Some(
            response
                .headers()
                .get("mcp-session-id")
                .expect("a stateful session id")
                .to_str()
                .unwrap()
                .to_owned(),
        );
        let initialized = session
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(initialized.status(), 202);
        session
    }
}

/// The JSON error body `{code, message, decision_id}` of a failed tools/call result.
fn tool_error_of(result: &Value) -> Value {
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().expect("a text block");
    serde_json::from_str(text).expect("the error text is JSON")
}

#[tokio::test]
async fn an_unanswered_question_times_out_and_a_late_answer_does_nothing() {
    let lab = common::lab(7);
    // `if_supported` asks a client that can be asked, exactly as `required` does.
    for approval in ["required", "if_supported"] {
        unanswered(&lab, approval).await;
    }
}

async fn unanswered(lab: &common::Lab, approval_mode: &str) {
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let mut config = common::config_for(&proxy);
    config.policy_dir = Some(policy(approval_mode));
    config.session_mode = SessionMode::Stateful;
    config.limits.elicitation = ELICITATION_TIMEOUT;
    let log = common::temp_path("decisions.log");
    config.decision_log = zabbix_mcp_guard::config::DecisionLogSink::File(log.clone());
    let guard = common::start_with(config).await;
    // Nothing is sent, so any open problem will do (its targets must resolve).
    let reader = common::client(&guard, &lab.token).await;
    let event = open_problem_other_than(&reader, "").await;

    let silent = RawSession::open(&guard, &lab.token).await;
    let started = std::time::Instant::now();
    let mut stream = silent
        .messages(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": TOOL, "arguments": {"eventids": [event], "message": "never answered"}}}),
        )
        .await;
    let mut question_id = None;
    let mut cancelled = None;
    let result = tokio::time::timeout(GENEROUS, async {
        loop {
            let message = stream.next().await.expect("the call's stream ended early");
            match message["method"].as_str() {
                Some("elicitation/create") => question_id = Some(message["id"].clone()),
                Some("notifications/cancelled") => cancelled = Some(message["params"].clone()),
                _ if message["id"] == 2 => return message["result"].clone(),
                _ => {}
            }
        }
    })
    .await
    .expect("the call ended after ElicitationTimeout");
    let waited = started.elapsed();
    let question_id = question_id.expect("the client was asked (elicitation/create)");
    let body = tool_error_of(&result);
    assert_eq!(body["code"], "approval_unavailable", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("no answer within ElicitationTimeout (10 s)"),
        "{message}"
    );
    assert!(message.contains("nothing was sent"), "{message}");
    assert!(
        waited >= ELICITATION_TIMEOUT,
        "ended before the timeout: {waited:?}"
    );
    assert!(acks(&recorder).is_empty(), "nothing reached Zabbix");
    let id = body["decision_id"]
        .as_str()
        .expect("decision_id")
        .to_owned();
    let lines = log_lines(&log);
    let approval = &event_of(&lines, &id, "approval")["data"];
    assert_eq!(approval["outcome"], "unavailable", "{approval}");
    assert_eq!(approval["via"], "elicitation", "{approval}");
    assert!(
        approval["error"]
            .as_str()
            .unwrap()
            .contains("ElicitationTimeout"),
        "{approval}"
    );
    assert_eq!(
        event_of(&lines, &id, "zabbix_result")["data"]["code"],
        "approval_unavailable"
    );

    // The human finally says yes, to the expired question.
    let late = silent
        .post(&json!({"jsonrpc": "2.0", "id": question_id,
                       "result": {"action": "accept", "content": {"approve": true}}}))
        .await;
    let late_status = late.status();
    assert!(
        late_status.is_success(),
        "the late answer is taken and ignored: {late_status}"
    );
    // The session still answers (a read on the same session), and by then the late answer
    // has been handled: still nothing sent, still one approval event under that decision.
    let mut next = silent
        .messages(
            &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "problem_get", "arguments": {"eventids": [event], "recent": true}}}),
        )
        .await;
    let read = loop {
        let message = next.next().await.expect("the read's answer");
        if message["id"] == 3 {
            break message["result"].clone();
        }
    };
    assert_ne!(read["isError"], true, "{read}");
    assert!(acks(&recorder).is_empty(), "the late answer sent nothing");
    let lines = log_lines(&log);
    let approvals = lines
        .iter()
        .filter(|l| l["event"] == "approval")
        .collect::<Vec<_>>();
    assert_eq!(
        approvals.len(),
        1,
        "one approval event in all: {approvals:?}"
    );
    eprintln!(
        "approval {approval_mode}, ElicitationTimeout=10s: call ended approval_unavailable after {:.1}s ({message}); \
         cancelled notification: {}; late answer HTTP {late_status}; 0 event.acknowledge sent",
        waited.as_secs_f64(),
        cancelled.map_or("none".into(), |c| c.to_string()),
    );
    reader.cancel().await.unwrap();
    guard.stop().await;
}
