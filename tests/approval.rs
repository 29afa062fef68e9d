//! Write approval end to end, through real MCP clients against the real lab: a human (a
//! client handler) sees the exact JSON-RPC payload and its SHA-256 and answers `approve`;
//! a recording proxy in front of Zabbix shows what actually reached it. Elicitation during
//! the call (2025-11-25, stateful sessions), the 2026-07-28 input-required round trip
//! (stateless, across replicas sharing ApprovalSealKey), refusals, tampered state, the
//! decision log, and writes that are never retried.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::recorder::{self, Recorder};
use common::trapper::{fresh_problem, wait_problem};
use common::{Guard, Lab, config_for, read, results, start_with, temp_path};
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

/// The tests share one lab trigger; they take turns.
static LAB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const HOST: &str = "mcp-web-01";
const TOOL: &str = "problem_acknowledge";

/// A new open problem of "MCP float too high" on mcp-web-01 (the previous one is resolved).
async fn new_problem(reader: &common::Client, lab: &Lab) -> String {
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
fn policy(approval: &str) -> PathBuf {
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

struct Sidecar {
    guard: Guard,
    log: PathBuf,
}

async fn sidecar(
    zabbix_url: &str,
    approval: &str,
    mode: SessionMode,
    seal_key: Option<&[u8]>,
) -> Sidecar {
    let mut config = config_for(zabbix_url);
    config.policy_dir = policy(approval);
    config.session_mode = mode;
    config.approval_seal_key = seal_key.map(|k| Secret::new(k.to_vec()));
    let log = temp_path("decisions.log");
    config.decision_log = DecisionLogSink::File(log.clone());
    Sidecar {
        guard: start_with(config).await,
        log,
    }
}

/// The event.acknowledge bodies that reached Zabbix so far.
fn acks(recorder: &Recorder) -> Vec<String> {
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
enum Reply {
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
struct Asked {
    message: String,
    schema: Value,
}

#[derive(Clone)]
struct Human {
    reply: Reply,
    /// Declares form elicitation.
    form: bool,
    version: ProtocolVersion,
    asked: Arc<Mutex<Vec<Asked>>>,
}

impl Human {
    fn new(reply: Reply, form: bool, version: ProtocolVersion) -> Self {
        Human {
            reply,
            form,
            version,
            asked: Arc::default(),
        }
    }

    fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }
}

fn elicit_result(reply: Reply) -> ElicitResult {
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

fn asked_of(request: &ElicitRequestParams) -> Asked {
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

type HumanClient = RunningService<RoleClient, Human>;

/// Connects `human` to the sidecar: legacy initialize, or discover for 2026-07-28.
async fn connect(guard: &Guard, token: &str, human: &Human) -> HumanClient {
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

fn params(args: Value) -> CallToolRequestParams {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(TOOL).with_arguments(map)
}

fn ack_args(event: &str) -> Value {
    json!({"eventids": [event], "message": "approved through zabbix-mcp-guard tests"})
}

/// problem_acknowledge with the MRTR rounds driven by the client.
async fn acknowledge(client: &HumanClient, event: &str) -> CallToolResult {
    client
        .call_tool(params(ack_args(event)))
        .await
        .unwrap_or_else(|e| panic!("tools/call {TOOL} failed at the protocol level: {e}"))
}

/// One round only: the input-required result the sidecar answers with.
async fn acknowledge_once(client: &HumanClient, event: &str) -> InputRequiredResult {
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
async fn retry(
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
fn question_in(result: &InputRequiredResult) -> Asked {
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
fn brief(body: &Value) -> String {
    format!("{}: {}", body["code"], body["message"])
}

fn applied(result: &CallToolResult, event: &str) {
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
fn failed(result: &CallToolResult, code: &str) -> Value {
    let body = result.structured_content.clone().unwrap_or(Value::Null);
    assert_eq!(result.is_error, Some(true), "should fail with {code}");
    assert_eq!(body["code"], code, "{}", brief(&body));
    assert!(
        body["decision_id"].is_string(),
        "no decision_id: {}",
        brief(&body)
    );
    body
}

fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The body as the sidecar built it: on 6.0 the token is spliced in as a last `auth`
/// field in transport; without it the bytes are the approved ones.
fn without_auth(lab: &Lab, sent: &str) -> String {
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

/// The human saw exactly `body` (what reached Zabbix, token aside) and its SHA-256, and
/// was asked one required boolean `approve`.
fn saw_exactly(asked: &Asked, body: &str, lab: &Lab) {
    let text = &asked.message;
    assert!(
        text.contains(&format!("\n\n{body}\n\n")),
        "the message does not show the exact body sent ({} bytes)",
        body.len()
    );
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

fn acknowledged(reader_env: &Value) -> Option<String> {
    results(reader_env)
        .first()
        .and_then(|p| p["acknowledged"].as_str())
        .map(str::to_owned)
}

/// The problem is still open and not acknowledged (nothing was sent).
async fn untouched(reader: &common::Client, event: &str) {
    let env = read(
        reader,
        "problem_get",
        json!({"eventids": [event], "recent": true}),
    )
    .await;
    assert_eq!(acknowledged(&env).as_deref(), Some("0"), "problem {event}");
}

async fn acknowledged_now(reader: &common::Client, event: &str) {
    wait_problem(reader, event, |p| {
        p.is_some_and(|p| p["acknowledged"] == "1")
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// 6. The decision log: every test below finds each outcome (approved, declined, cancelled,
//    unavailable, requested, not_required) under the decision_id of its call, the one a
//    tool error carries.

fn log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("decision log lines are JSON"))
        .collect()
}

/// The one `event` line of this kind under `id`.
fn event_of<'a>(lines: &'a [Value], id: &str, event: &str) -> &'a Value {
    let found: Vec<&Value> = lines
        .iter()
        .filter(|l| l["decision_id"] == id && l["event"] == event)
        .collect();
    assert_eq!(found.len(), 1, "{event} events under {id}");
    found[0]
}

/// The call decisions of problem_acknowledge for this event, in log order.
fn call_ids(lines: &[Value], event: &str) -> Vec<String> {
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
fn approval_logged<'a>(lines: &'a [Value], id: &str, outcome: &str) -> &'a Value {
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

// ---------------------------------------------------------------------------------------
// 1. Elicitation during the call (2025-11-25, stateful session): approve.

async fn elicitation_approve_on(lab: &Lab) {
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateful, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let event = new_problem(&reader, lab).await;
    let human = Human::new(Reply::Approve, true, ProtocolVersion::V_2025_11_25);
    let client = connect(&side.guard, &lab.token, &human).await;

    let result = acknowledge(&client, &event).await;
    applied(&result, &event);
    let asked = human.asked();
    assert_eq!(asked.len(), 1, "asked once");
    let sent = acks(&recorder);
    assert_eq!(sent.len(), 1, "one event.acknowledge reached Zabbix");
    let body = without_auth(lab, &sent[0]);
    let json: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["params"]["eventids"], json!([event]));
    saw_exactly(&asked[0], &body, lab);
    acknowledged_now(&reader, &event).await;

    // The decision log: the call's decision, approved through elicitation, applied.
    let lines = log_lines(&side.log);
    let ids = call_ids(&lines, &event);
    assert_eq!(ids.len(), 1, "one call decision");
    let approval = approval_logged(&lines, &ids[0], "approved");
    assert_eq!(approval["data"]["via"], "elicitation");
    assert_eq!(approval["data"]["sha256"], sha256(&body));
    // Stateful sessions hold an SSE stream open; closing them first keeps stop() short.
    client.cancel().await.unwrap();
    reader.cancel().await.unwrap();
    side.guard.stop().await;
}

#[tokio::test]
async fn elicitation_approve_sends_exactly_what_was_shown() {
    let _turn = LAB.lock().await;
    elicitation_approve_on(&common::lab(7)).await;
    elicitation_approve_on(&common::lab(6)).await;
}

// ---------------------------------------------------------------------------------------
// 2. Elicitation: decline, cancel, accept with approve=false; a client whose elicitation
//    fails.

#[tokio::test]
async fn elicitation_refusals_send_nothing() {
    let _turn = LAB.lock().await;
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateful, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let event = new_problem(&reader, &lab).await;
    for (reply, outcome) in [
        (Reply::Decline, "declined"),
        (Reply::Cancel, "cancelled"),
        (Reply::ApproveFalse, "declined"),
    ] {
        let human = Human::new(reply, true, ProtocolVersion::V_2025_11_25);
        let client = connect(&side.guard, &lab.token, &human).await;
        let result = acknowledge(&client, &event).await;
        let body = failed(&result, "approval_declined");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("({outcome})")) && message.contains("nothing was sent"),
            "{reply:?}: {message}"
        );
        assert_eq!(human.asked().len(), 1, "{reply:?}: asked once");
        assert!(acks(&recorder).is_empty(), "{reply:?}: nothing sent");
        // The denial's decision_id leads to the approval outcome in the log.
        let lines = log_lines(&side.log);
        let id = body["decision_id"].as_str().unwrap();
        let approval = approval_logged(&lines, id, outcome);
        assert_eq!(approval["data"]["via"], "elicitation", "{reply:?}");
        client.cancel().await.unwrap();
    }

    // The client answers the elicitation with a JSON-RPC error: no approval, nothing sent.
    let broken = Human::new(Reply::Fail, true, ProtocolVersion::V_2025_11_25);
    let client = connect(&side.guard, &lab.token, &broken).await;
    let body = failed(&acknowledge(&client, &event).await, "approval_unavailable");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("elicitation failed"),
        "{}",
        brief(&body)
    );
    assert_eq!(broken.asked().len(), 1, "asked once");
    assert!(acks(&recorder).is_empty(), "nothing sent");
    let lines = log_lines(&side.log);
    let id = body["decision_id"].as_str().unwrap();
    let outcome = &event_of(&lines, id, "zabbix_result")["data"];
    assert_eq!(outcome["code"], "approval_unavailable");
    let approval = &event_of(&lines, id, "approval")["data"];
    assert_eq!(approval["outcome"], "unavailable");
    client.cancel().await.unwrap();

    untouched(&reader, &event).await;
    reader.cancel().await.unwrap();
    side.guard.stop().await;
}

// ---------------------------------------------------------------------------------------
// 3. Clients that cannot ask, and policies that do not.

#[tokio::test]
async fn approval_unavailable_and_not_required() {
    let _turn = LAB.lock().await;
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let mute = Human::new(Reply::Approve, false, ProtocolVersion::V_2025_11_25);
    let human = Human::new(Reply::Approve, true, ProtocolVersion::V_2025_11_25);

    // `required`, a client without elicitation: refused, nothing sent.
    let side = sidecar(&proxy, "required", SessionMode::Stateful, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let event = new_problem(&reader, &lab).await;
    let client = connect(&side.guard, &lab.token, &mute).await;
    let body = failed(&acknowledge(&client, &event).await, "approval_unavailable");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("nothing was sent"),
        "{}",
        brief(&body)
    );
    assert!(mute.asked().is_empty(), "not asked");
    assert!(acks(&recorder).is_empty(), "nothing sent");
    let lines = log_lines(&side.log);
    let id = body["decision_id"].as_str().unwrap();
    let approval = approval_logged(&lines, id, "unavailable");
    assert_eq!(approval["data"]["approval"], "required");
    untouched(&reader, &event).await;
    client.cancel().await.unwrap();
    reader.cancel().await.unwrap();
    side.guard.stop().await;

    // `required`, a client WITH form elicitation, but a stateless sidecar: a legacy
    // (initialize) client's capabilities do not reach a stateless request, so the policy
    // input shows no elicitation and the call is refused the same way; never asked.
    let side = sidecar(&proxy, "required", SessionMode::Stateless, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let client = connect(&side.guard, &lab.token, &human).await;
    let body = failed(&acknowledge(&client, &event).await, "approval_unavailable");
    assert!(human.asked().is_empty(), "not asked");
    assert!(acks(&recorder).is_empty(), "nothing sent");
    let lines = log_lines(&side.log);
    let id = body["decision_id"].as_str().unwrap();
    approval_logged(&lines, id, "unavailable");
    let decision = lines
        .iter()
        .find(|l| l["decision_id"] == id && l["input"].is_object())
        .expect("the call decision");
    let seen = &decision["input"]["client"];
    assert_eq!(seen["elicitation"], json!([]), "stateless: {seen}");
    assert_eq!(seen["protocol_version"], "2025-11-25");
    untouched(&reader, &event).await;
    side.guard.stop().await;

    // `if_supported`, a client without elicitation: applied without asking.
    let side = sidecar(&proxy, "if_supported", SessionMode::Stateful, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let client = connect(&side.guard, &lab.token, &mute).await;
    applied(&acknowledge(&client, &event).await, &event);
    assert!(mute.asked().is_empty(), "not asked");
    assert_eq!(acks(&recorder).len(), 1, "sent once");
    acknowledged_now(&reader, &event).await;
    let lines = log_lines(&side.log);
    let ids = call_ids(&lines, &event);
    assert_eq!(ids.len(), 1);
    let approval = approval_logged(&lines, &ids[0], "not_required");
    assert_eq!(approval["data"]["approval"], "if_supported");
    assert_eq!(
        event_of(&lines, &ids[0], "zabbix_result")["data"]["ok"],
        true
    );
    client.cancel().await.unwrap();

    // `none`, a client that could elicit: applied without asking.
    let side2 = sidecar(&proxy, "none", SessionMode::Stateful, None).await;
    let event = new_problem(&reader, &lab).await;
    let client = connect(&side2.guard, &lab.token, &human).await;
    applied(&acknowledge(&client, &event).await, &event);
    assert!(human.asked().is_empty(), "not asked");
    assert_eq!(acks(&recorder).len(), 2, "sent once more");
    acknowledged_now(&reader, &event).await;
    let lines = log_lines(&side2.log);
    let ids = call_ids(&lines, &event);
    assert_eq!(ids.len(), 1);
    let approval = approval_logged(&lines, &ids[0], "not_required");
    assert_eq!(approval["data"]["approval"], "none");
    assert_eq!(
        event_of(&lines, &ids[0], "zabbix_result")["data"]["ok"],
        true
    );
    client.cancel().await.unwrap();
    reader.cancel().await.unwrap();
    side2.guard.stop().await;
    side.guard.stop().await;
}

// ---------------------------------------------------------------------------------------
// 4. The 2026-07-28 round trip: stateless, across replicas sharing ApprovalSealKey.

#[tokio::test]
async fn input_required_round_trip_across_replicas() {
    let _turn = LAB.lock().await;
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let key = b"a shared approval seal key of 32+ bytes, for tests".as_slice();
    let a = sidecar(&proxy, "required", SessionMode::Stateless, Some(key)).await;
    let reader = common::client(&a.guard, &lab.token).await;
    let modern = ProtocolVersion::V_2026_07_28;

    // Driven by the client: asked once, applied, exactly the sealed payload sent.
    let event = new_problem(&reader, &lab).await;
    let human = Human::new(Reply::Approve, true, modern.clone());
    let client = connect(&a.guard, &lab.token, &human).await;
    applied(&acknowledge(&client, &event).await, &event);
    let asked = human.asked();
    assert_eq!(asked.len(), 1, "asked once");
    let sent = acks(&recorder);
    assert_eq!(sent.len(), 1, "one event.acknowledge reached Zabbix");
    saw_exactly(&asked[0], &sent[0], &lab);
    acknowledged_now(&reader, &event).await;
    let lines = log_lines(&a.log);
    let ids = call_ids(&lines, &event);
    assert_eq!(ids.len(), 2, "the call and its retry are two decisions");
    let requested = approval_logged(&lines, &ids[0], "requested");
    assert_eq!(requested["data"]["via"], "input_required");
    assert_eq!(requested["data"]["sha256"], sha256(&sent[0]));
    let approved = approval_logged(&lines, &ids[1], "approved");
    assert_eq!(approved["data"]["approval_of"], ids[0].as_str());
    assert_eq!(approved["data"]["sha256"], sha256(&sent[0]));

    // Declined in the round trip: nothing sent.
    let event = new_problem(&reader, &lab).await;
    let no = Human::new(Reply::Decline, true, modern.clone());
    let client = connect(&a.guard, &lab.token, &no).await;
    let body = failed(&acknowledge(&client, &event).await, "approval_declined");
    assert_eq!(no.asked().len(), 1, "asked once");
    assert_eq!(acks(&recorder).len(), 1, "nothing more sent");
    let lines = log_lines(&a.log);
    let declined = approval_logged(&lines, body["decision_id"].as_str().unwrap(), "declined");
    let first = declined["data"]["approval_of"]
        .as_str()
        .expect("approval_of");
    approval_logged(&lines, first, "requested");
    untouched(&reader, &event).await;

    // Asked by replica A, finished by replica B (same key); a replica with another key
    // cannot open the state.
    let b = sidecar(&proxy, "required", SessionMode::Stateless, Some(key)).await;
    let other_key = b"another approval seal key, also 32 bytes or more".as_slice();
    let c = sidecar(&proxy, "required", SessionMode::Stateless, Some(other_key)).await;
    let silent = Human::new(Reply::Approve, true, modern.clone());
    let on_a = connect(&a.guard, &lab.token, &silent).await;
    let on_b = connect(&b.guard, &lab.token, &silent).await;
    let on_c = connect(&c.guard, &lab.token, &silent).await;
    let pending = acknowledge_once(&on_a, &event).await;
    let question = question_in(&pending);
    let state = pending.request_state.clone().expect("sealed request state");
    let result = retry(&on_c, TOOL, ack_args(&event), &state, Reply::Approve).await;
    let body = failed(&result, "invalid_arguments");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("approval request state"),
        "{}",
        brief(&body)
    );
    assert_eq!(acks(&recorder).len(), 1, "replica C sent nothing");
    let result = retry(&on_b, TOOL, ack_args(&event), &state, Reply::Approve).await;
    applied(&result, &event);
    assert!(silent.asked().is_empty(), "call_tool_once drives no rounds");
    let sent = acks(&recorder);
    assert_eq!(sent.len(), 2, "replica B sent it once");
    saw_exactly(&question, &sent[1], &lab);
    acknowledged_now(&reader, &event).await;
    // B logged the approval of A's decision.
    let lines_b = log_lines(&b.log);
    let ids_b = call_ids(&lines_b, &event);
    assert_eq!(ids_b.len(), 1);
    let approved = approval_logged(&lines_b, &ids_b[0], "approved");
    let asked_by_a = approved["data"]["approval_of"].as_str().unwrap();
    approval_logged(&log_lines(&a.log), asked_by_a, "requested");
    for side in [a, b, c] {
        side.guard.stop().await;
    }
}

// ---------------------------------------------------------------------------------------
// 5. Sealed state that was tampered with, replayed by another caller, or reused for other
//    arguments or another tool.

#[tokio::test]
async fn tampered_or_misused_state_is_refused() {
    let _turn = LAB.lock().await;
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateless, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let event = new_problem(&reader, &lab).await;
    let modern = ProtocolVersion::V_2026_07_28;
    let human = Human::new(Reply::Approve, true, modern.clone());
    let client = connect(&side.guard, &lab.token, &human).await;
    let pending = acknowledge_once(&client, &event).await;
    let state = pending.request_state.clone().expect("sealed request state");

    let refused = |result: CallToolResult, case: &str, text: &str| {
        let body = failed(&result, "invalid_arguments");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(text), "{case}: {message}");
        assert!(acks(&recorder).is_empty(), "{case}: nothing sent");
    };

    // One character flipped.
    let mut tampered: Vec<char> = state.chars().collect();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();
    let result = retry(&client, TOOL, ack_args(&event), &tampered, Reply::Approve).await;
    refused(result, "tampered", "approval request state");

    // Replayed by another caller (the operator's token).
    let operator_human = Human::new(Reply::Approve, true, modern.clone());
    let operator = connect(&side.guard, &lab.token_operator, &operator_human).await;
    let result = retry(&operator, TOOL, ack_args(&event), &state, Reply::Approve).await;
    refused(result, "another caller", "approval request state");

    // Other arguments on the retry.
    let other =
        json!({"eventids": [event, "1"], "message": "approved through zabbix-mcp-guard tests"});
    let result = retry(&client, TOOL, other, &state, Reply::Approve).await;
    refused(result, "other eventids", "arguments changed");
    let result = retry(
        &client,
        TOOL,
        json!({"eventids": [event], "message": "another message"}),
        &state,
        Reply::Approve,
    )
    .await;
    refused(result, "other message", "arguments changed");

    // Another tool.
    let result = retry(
        &client,
        "problem_close",
        json!({"eventids": [event]}),
        &state,
        Reply::Approve,
    )
    .await;
    refused(result, "another tool", "approval request state is for");

    untouched(&reader, &event).await;
    // The intact state, from its own caller, still works: the refusals were the checks.
    let result = retry(&client, TOOL, ack_args(&event), &state, Reply::Approve).await;
    applied(&result, &event);
    assert_eq!(acks(&recorder).len(), 1, "sent once");
    acknowledged_now(&reader, &event).await;
    assert!(human.asked().is_empty() && operator_human.asked().is_empty());
    side.guard.stop().await;
}

// ---------------------------------------------------------------------------------------
// 7. A write whose connection drops after the request was read is not sent again.

#[tokio::test]
async fn writes_are_never_retried() {
    let (url, stub) = common::hangup::start().await;
    let side = sidecar(&url, "none", SessionMode::Stateless, None).await;
    let client = common::client(&side.guard, "stub-token").await;
    let result = common::call(&client, TOOL, json!({"eventids": ["42"]})).await;
    let body = failed(&result, "upstream_unavailable");
    assert_eq!(stub.acknowledges(), 1, "sent once");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(stub.acknowledges(), 1, "and never again");
    let lines = log_lines(&side.log);
    let id = body["decision_id"].as_str().unwrap();
    approval_logged(&lines, id, "not_required");
    let outcome = &event_of(&lines, id, "zabbix_result")["data"];
    assert_eq!(outcome["code"], "upstream_unavailable");
    side.guard.stop().await;
}

// ---------------------------------------------------------------------------------------
// Two gaps found while writing these tests, now closed.

#[tokio::test]
async fn elicitation_failure_logs_an_approval_event() {
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateful, None).await;
    let broken = Human::new(Reply::Fail, true, ProtocolVersion::V_2025_11_25);
    let client = connect(&side.guard, &lab.token, &broken).await;
    // Nothing is sent, so any event ID will do.
    let body = failed(&acknowledge(&client, "1").await, "approval_unavailable");
    assert!(acks(&recorder).is_empty(), "nothing sent");
    let lines = log_lines(&side.log);
    let id = body["decision_id"].as_str().unwrap();
    let approval = event_of(&lines, id, "approval");
    assert_eq!(approval["data"]["via"], "elicitation");
    assert_eq!(approval["data"]["outcome"], "unavailable");
    client.cancel().await.unwrap();
    side.guard.stop().await;
}

#[tokio::test]
async fn approved_state_is_redeemed_once() {
    let _turn = LAB.lock().await;
    let lab = common::lab(7);
    let (proxy, recorder) = recorder::start(&lab.url).await;
    let side = sidecar(&proxy, "required", SessionMode::Stateless, None).await;
    let reader = common::client(&side.guard, &lab.token).await;
    let event = new_problem(&reader, &lab).await;
    let human = Human::new(Reply::Approve, true, ProtocolVersion::V_2026_07_28);
    let client = connect(&side.guard, &lab.token, &human).await;
    let state = acknowledge_once(&client, &event)
        .await
        .request_state
        .expect("sealed request state");
    let first = retry(&client, TOOL, ack_args(&event), &state, Reply::Approve).await;
    applied(&first, &event);
    // The same retry again (a client resending after a dropped connection, or a replay):
    // one human yes, so at most one write.
    let again = retry(&client, TOOL, ack_args(&event), &state, Reply::Approve).await;
    assert_eq!(
        acks(&recorder).len(),
        1,
        "the approved payload was sent twice"
    );
    failed(&again, "invalid_arguments");
    side.guard.stop().await;
}
