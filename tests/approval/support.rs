//! Helpers of the approval tests: policies per approval mode, sidecars behind a recording
//! proxy, a scripted human (an MCP client handler that answers elicitations), and readers
//! of the decision log.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::common;
use crate::common::recorder::Recorder;
use crate::common::trapper::{fresh_problem, wait_problem};
use crate::common::{Guard, Lab, config_for, read, results, start_with, temp_path};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, Implementation, InputRequest, InputRequiredResult, InputResponses,
    ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use zabbix_mcp_guard::config::{DecisionLogSink, Secret, SessionMode};
use zabbix_mcp_guard::display::pretty_payload;

/// The tests share one lab trigger; they take turns.
pub static LAB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub const HOST: &str = "mcp-web-01";
pub const TOOL: &str = "problem_acknowledge";

/// A new open problem of "MCP float too high" on mcp-web-01 (the previous one is resolved).
pub async fn new_problem(reader: &common::Client, lab: &Lab) -> String {
    fresh_problem(
        reader,
        lab,
        HOST,
        "mcp.float",
        "MCP float too high",
        "1",
        "500",
    )
    .await
}

// ---------------------------------------------------------------------------------------
// The sidecar: a policy whose writes need `approval`, in front of the recording proxy.

/// A policy directory whose decision asks `approval` for writes and nothing for reads.
pub fn policy(approval: &str) -> PathBuf {
    let dir = temp_path("policy");
    std::fs::create_dir_all(&dir).unwrap();
    let rego = format!(
        "package zabbix.mcp\nimport rego.v1\n\
         decision := {{\"allow\": true, \"reasons\": [], \"approval\": \"{approval}\"}} \
         if input.tool.kind == \"write\"\n\
         else := {{\"allow\": true, \"reasons\": [], \"approval\": \"none\"}}\n"
    );
    std::fs::write(dir.join("policy.rego"), rego).unwrap();
    dir
}

pub struct Sidecar {
    pub guard: Guard,
    pub log: PathBuf,
}

/// A sidecar; given an `ApprovalSealKey`, it shares the lab's Redis, as replicas do.
pub async fn sidecar(
    zabbix_url: &str,
    approval: &str,
    mode: SessionMode,
    seal_key: Option<&[u8]>,
) -> Sidecar {
    sidecar_on(zabbix_url, approval, mode, seal_key, true).await
}

/// A sidecar with the store in memory whatever the key, as a replica without Redis.
pub async fn sidecar_in_memory(
    zabbix_url: &str,
    approval: &str,
    mode: SessionMode,
    seal_key: Option<&[u8]>,
) -> Sidecar {
    sidecar_on(zabbix_url, approval, mode, seal_key, false).await
}

async fn sidecar_on(
    zabbix_url: &str,
    approval: &str,
    mode: SessionMode,
    seal_key: Option<&[u8]>,
    redis: bool,
) -> Sidecar {
    let mut config = config_for(zabbix_url);
    config.policy_dir = Some(policy(approval));
    config.session_mode = mode;
    config.approval_seal_key = seal_key.map(|k| Secret::new(k.to_vec()));
    if redis && seal_key.is_some() {
        let url = common::redis_url();
        config.shared_store = Some(Secret::new(url.into_bytes()));
    }
    let log = temp_path("decisions.log");
    config.decision_log = DecisionLogSink::File(log.clone());
    Sidecar {
        guard: start_with(config).await,
        log,
    }
}

/// The event.acknowledge bodies that reached Zabbix so far.
pub fn acks(recorder: &Recorder) -> Vec<String> {
    recorder
        .bodies
        .lock()
        .unwrap()
        .iter()
        .filter(|b| {
            serde_json::from_str::<Value>(b).is_ok_and(|v| v["method"] == "event.acknowledge")
        })
        .cloned()
        .collect()
}

// ---------------------------------------------------------------------------------------
// The human: an MCP client handler that answers elicitations and remembers what it saw.

/// What the human (or the client) answers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reply {
    /// accept, `{"approve": true}`
    Approve,
    /// accept, `{"approve": false}`
    ApproveFalse,
    Decline,
    Cancel,
    /// The client answers `elicitation/create` with a JSON-RPC error.
    Fail,
}

/// One question the human saw: the message and the requested schema.
#[derive(Clone, Debug)]
pub struct Asked {
    pub message: String,
    pub schema: Value,
}

#[derive(Clone)]
pub struct Human {
    pub reply: Reply,
    /// Declares form elicitation.
    pub form: bool,
    pub version: ProtocolVersion,
    pub asked: Arc<Mutex<Vec<Asked>>>,
}

impl Human {
    pub fn new(reply: Reply, form: bool, version: ProtocolVersion) -> Self {
        Human {
            reply,
            form,
            version,
            asked: Arc::default(),
        }
    }

    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }
}

pub fn elicit_result(reply: Reply) -> ElicitResult {
    match reply {
        Reply::Approve => {
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true}))
        }
        Reply::ApproveFalse => {
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": false}))
        }
        Reply::Decline => ElicitResult::new(ElicitationAction::Decline),
        Reply::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        Reply::Fail => unreachable!("a failing client sends no result"),
    }
}

pub fn asked_of(request: &ElicitRequestParams) -> Asked {
    match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => Asked {
            message: message.clone(),
            schema: serde_json::to_value(requested_schema).unwrap(),
        },
        _ => Asked {
            message: "<not a form elicitation>".into(),
            schema: Value::Null,
        },
    }
}

impl ClientHandler for Human {
    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.form {
            ClientCapabilities::builder()
                .enable_elicitation_with(
                    ElicitationCapability::new().with_form(FormElicitationCapability::new()),
                )
                .build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(capabilities, Implementation::new("approval-tests", "1.0"))
            .with_protocol_version(self.version.clone())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.lock().unwrap().push(asked_of(&request));
        if self.reply == Reply::Fail {
            return Err(ErrorData::internal_error("the approval UI crashed", None));
        }
        Ok(elicit_result(self.reply))
    }
}

pub type HumanClient = RunningService<RoleClient, Human>;

/// Connects `human` to the sidecar: legacy initialize, or discover for 2026-07-28.
pub async fn connect(guard: &Guard, token: &str, human: &Human) -> HumanClient {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(guard.url.as_str()).auth_header(token),
    );
    let version = human.version.clone();
    if version.has_initialize() {
        human
            .clone()
            .serve(transport)
            .await
            .expect("client connects")
    } else {
        human
            .clone()
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![version],
                },
            )
            .await
            .expect("client connects (discover)")
    }
}

pub fn params(args: Value) -> CallToolRequestParams {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(TOOL).with_arguments(map)
}

pub fn ack_args(event: &str) -> Value {
    json!({"eventids": [event], "message": "approved through zabbix-mcp-guard tests"})
}

/// problem_acknowledge with the MRTR rounds driven by the client.
pub async fn acknowledge(client: &HumanClient, event: &str) -> CallToolResult {
    client
        .call_tool(params(ack_args(event)))
        .await
        .unwrap_or_else(|e| panic!("tools/call {TOOL} failed at the protocol level: {e}"))
}

/// One round only: the input-required result the sidecar answers with.
pub async fn acknowledge_once(client: &HumanClient, event: &str) -> InputRequiredResult {
    match client.call_tool_once(params(ack_args(event))).await {
        Ok(CallToolResponse::InputRequired(result)) => result,
        Ok(CallToolResponse::Complete(result)) => panic!(
            "expected input_required, got a final result (isError {:?}: {})",
            result.is_error,
            brief(result.structured_content.as_ref().unwrap_or(&Value::Null))
        ),
        Ok(_) => panic!("expected input_required, got a task"),
        Err(e) => panic!("tools/call failed at the protocol level: {e}"),
    }
}

/// The retry of a round trip with this state and answer, without driving more rounds.
pub async fn retry(
    client: &HumanClient,
    tool: &str,
    args: Value,
    state: &str,
    reply: Reply,
) -> CallToolResult {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    let mut responses = InputResponses::new();
    responses.insert(
        "approval".into(),
        serde_json::to_value(elicit_result(reply)).unwrap(),
    );
    let mut request = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(map)
        .with_input_responses(responses);
    request.request_state = Some(state.to_owned());
    match client.call_tool_once(request).await {
        Ok(CallToolResponse::Complete(result)) => result,
        Ok(CallToolResponse::InputRequired(_)) => panic!("the retry asked again"),
        Ok(_) => panic!("the retry made a task"),
        Err(e) => panic!("the retry failed at the protocol level: {e}"),
    }
}

/// The question inside an input-required result (key `approval`).
pub fn question_in(result: &InputRequiredResult) -> Asked {
    let requests = result.input_requests.as_ref().expect("input requests");
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        ["approval"],
        "one question, keyed approval"
    );
    match &requests["approval"] {
        InputRequest::Elicitation(request) => asked_of(&request.params),
        _ => panic!("the approval question is not an elicitation"),
    }
}

// ---------------------------------------------------------------------------------------
// Assertions.

/// `code: message` of a tool error body, for failure messages that stay short.
pub fn brief(body: &Value) -> String {
    format!("{}: {}", body["code"], body["message"])
}

pub fn applied(result: &CallToolResult, event: &str) {
    let body = result.structured_content.clone().unwrap_or(Value::Null);
    assert_ne!(result.is_error, Some(true), "not applied: {}", brief(&body));
    let ids: Vec<String> = body["eventids"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.to_string().trim_matches('"').to_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(ids, [event], "Zabbix's result names the event");
}

/// The structured error body of a failed call, checked for its code.
pub fn failed(result: &CallToolResult, code: &str) -> Value {
    assert_eq!(result.is_error, Some(true), "should fail with {code}");
    let body = crate::common::error_body(result);
    assert_eq!(body["code"], code, "{}", brief(&body));
    assert!(
        body["decision_id"].is_string(),
        "no decision_id: {}",
        brief(&body)
    );
    body
}

pub fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The body as the sidecar built it: on 6.0 the token is spliced in as a last `auth`
/// field in transport; without it the bytes are the approved ones.
pub fn without_auth(lab: &Lab, sent: &str) -> String {
    if lab.major >= 7 {
        assert!(!sent.contains("\"auth\""), "7.0 gets the token as Bearer");
        return sent.to_owned();
    }
    let suffix = format!(",\"auth\":{}}}", serde_json::to_string(&lab.token).unwrap());
    let body = sent
        .strip_suffix(&suffix)
        .expect("6.0: the token is the last field, `auth`");
    format!("{body}}}")
}

/// The JSON block of an approval question: from the first line that is `{` to the
/// blank line before the SHA-256.
pub fn shown_block(message: &str) -> &str {
    let start = message
        .find("\n\n{\n")
        .expect("a JSON block in the question")
        + 2;
    let end = message.rfind("\n\nSHA-256: ").expect("the SHA-256 line");
    &message[start..end]
}

/// The human saw exactly `body` (what reached Zabbix, token aside), pretty-printed and
/// escaped, and its SHA-256, and was asked one required boolean `approve`.
pub fn saw_exactly(asked: &Asked, body: &str, lab: &Lab) {
    let text = &asked.message;
    assert!(text.is_ascii(), "the question holds non-ASCII text");
    let shown = shown_block(text);
    assert_eq!(
        shown,
        pretty_payload(body.as_bytes()).unwrap(),
        "the question does not show the body sent, pretty-printed"
    );
    // What is shown means exactly what was sent, method first.
    assert_eq!(
        serde_json::from_str::<Value>(shown).unwrap(),
        serde_json::from_str::<Value>(body).unwrap()
    );
    assert!(shown.starts_with("{\n  \"method\": "), "{shown}");
    assert!(
        text.contains(&format!("SHA-256: {}", sha256(body))),
        "the message does not show the body's SHA-256"
    );
    assert!(!text.contains(&lab.token), "the token is in the message");
    let schema = &asked.schema;
    assert_eq!(schema["type"], "object");
    let properties = schema["properties"].as_object().expect("properties");
    assert_eq!(
        properties.keys().collect::<Vec<_>>(),
        ["approve"],
        "one field"
    );
    assert_eq!(properties["approve"]["type"], "boolean");
    assert_eq!(schema["required"], json!(["approve"]));
}

pub fn acknowledged(reader_env: &Value) -> Option<String> {
    results(reader_env)
        .first()
        .and_then(|p| p["acknowledged"].as_str())
        .map(str::to_owned)
}

/// An open problem the reader can see, other than `event` (the lab always has some).
pub async fn open_problem_other_than(reader: &common::Client, event: &str) -> String {
    let env = read(reader, "problem_get", json!({"limit": 10})).await;
    env["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["eventid"].as_str())
        .find(|id| *id != event)
        .expect("another open problem in the lab")
        .to_owned()
}

/// The problem is still open and not acknowledged (nothing was sent).
pub async fn untouched(reader: &common::Client, event: &str) {
    let env = read(
        reader,
        "problem_get",
        json!({"eventids": [event], "recent": true}),
    )
    .await;
    assert_eq!(acknowledged(&env).as_deref(), Some("0"), "problem {event}");
}

pub async fn acknowledged_now(reader: &common::Client, event: &str) {
    wait_problem(reader, event, |p| {
        p.is_some_and(|p| p["acknowledged"] == "1")
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// 6. The decision log: every test below finds each outcome (approved, declined, cancelled,
//    unavailable, requested, not_required) under the decision_id of its call, the one a
//    tool error carries.

pub fn log_lines(path: &Path) -> Vec<Value> {
    // Lines are written by the log's writer thread: wait until what is queued is written.
    zabbix_mcp_guard::policy::flush_decision_logs();
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("decision log lines are JSON"))
        .collect()
}

/// The one `event` line of this kind under `id`.
pub fn event_of<'a>(lines: &'a [Value], id: &str, event: &str) -> &'a Value {
    let found: Vec<&Value> = lines
        .iter()
        .filter(|l| l["decision_id"] == id && l["event"] == event)
        .collect();
    assert_eq!(found.len(), 1, "{event} events under {id}");
    found[0]
}

/// The call decisions of problem_acknowledge for this event, in log order.
pub fn call_ids(lines: &[Value], event: &str) -> Vec<String> {
    lines
        .iter()
        .filter(|l| {
            l["input"]["phase"] == "call"
                && l["input"]["tool"]["name"] == TOOL
                && l["input"]["arguments"]["eventids"] == json!([event])
        })
        .map(|l| l["decision_id"].as_str().unwrap().to_owned())
        .collect()
}

/// The approval outcome logged under `id`; checks the call's final outcome too.
pub fn approval_logged<'a>(lines: &'a [Value], id: &str, outcome: &str) -> &'a Value {
    let approval = event_of(lines, id, "approval");
    assert_eq!(approval["data"]["outcome"], outcome, "approval under {id}");
    let result = &event_of(lines, id, "zabbix_result")["data"];
    match outcome {
        "approved" => assert_eq!(result["ok"], true, "{id}: {result}"),
        // Sent without asking; the outcome is whatever Zabbix said.
        "not_required" => {}
        "requested" => assert_eq!(result["pending"], "approval", "{id}: {result}"),
        "declined" | "cancelled" => assert_eq!(result["code"], "approval_declined", "{id}"),
        "unavailable" => assert_eq!(result["code"], "approval_unavailable", "{id}"),
        other => panic!("unexpected outcome {other}"),
    }
    approval
}
