//! Write approval: a human sees the exact JSON-RPC payload (pretty-printed and escaped by
//! `crate::display`) and its SHA-256 and answers one required boolean `approve`; after a
//! yes exactly that payload is sent. A 2026-07-28 retry rebuilds the payload from its
//! arguments and sends it only if it has the sealed digest.
//!
//! Which path: the policy's `approval` (`none`, `if_supported`, `required`) and what the
//! client can do. Clients on 2025-06-18/2025-11-25 that declare form elicitation get an
//! `elicitation/create` during the call (needs `SessionMode=stateful`); clients on
//! 2026-07-28 get an input-required result whose request state is sealed with
//! `ApprovalSealKey` (any replica with the key can finish it) and answer by retrying.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, ProtocolVersion, RequestStateCodec,
    SealOptions,
};
use rmcp::service::{RequestContext, RoleServer};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::display;
use crate::policy::Approval;
use crate::store::{Store, StoreError};
use crate::zabbix::{Method, Payload};

/// How long a sealed approval request stays valid.
const APPROVAL_TTL: Duration = Duration::from_secs(600);
/// The key of the approval question in an input-required round trip.
const INPUT_KEY: &str = "approval";

/// Seals and opens approval state for the 2026-07-28 round trip, and remembers which
/// approved states were used.
pub struct Approver {
    codec: RequestStateCodec,
    /// Nonces of redeemed states, kept as long as a state can live, in the shared store:
    /// with `SharedStore=redis://…` replicas agree, so a state is redeemed once overall.
    store: Arc<Store>,
    /// With the store in memory, states are bound to this process (a random id): only it
    /// remembers which were redeemed, so another replica with the same key, or this one
    /// restarted, would take a used state as new. `None` with Redis.
    process: Option<String>,
}

/// Which way this call gets (or skips) its human yes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// No approval needed, or none possible and the policy allows that.
    Apply,
    /// Ask now, within the call (`elicitation/create`).
    Elicit,
    /// Answer with an input-required result; the client retries with the answer.
    InputRequired,
    /// The policy requires approval and the client cannot give one.
    Unavailable,
    /// A person decides on the approval page (`crate::mcp::page_approval`).
    Page,
}

/// What the human answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Approved,
    Declined,
    Cancelled,
}

/// The sealed request state: everything needed to send exactly the approved payload.
#[derive(Debug, Serialize, Deserialize)]
pub struct Sealed {
    /// Random, so that each approval question can be answered (and redeemed) once.
    pub nonce: String,
    pub tool: String,
    pub decision_id: String,
    pub sha256: String,
    /// The JSON-RPC body, without the token, as shown; the retry rebuilds it from its
    /// arguments with this body's `id` and checks the digest (never sends this text).
    pub body: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("ApprovalSealKey is not usable: {0}")]
    Key(String),
    #[error("the approval request state is invalid, expired, or not for this caller")]
    BadState,
    #[error("the approval request state is for {sealed}, not {called}")]
    WrongTool { sealed: String, called: String },
    #[error("the approval request state holds a {sealed} request, not {expected}")]
    WrongMethod {
        sealed: String,
        expected: &'static str,
    },
    #[error("the arguments changed since approval was asked; call again to get a new approval")]
    Changed,
    #[error("this approval was already used; call again to get a new approval")]
    AlreadyUsed,
    #[error(
        "what the call touches changed while it waited for approval ({0}); nothing was sent to Zabbix: call again to have it decided anew"
    )]
    TargetsChanged(String),
    #[error(
        "the caller's user, role or user groups changed while the call waited for approval; nothing was sent to Zabbix: call again to have it decided anew"
    )]
    CallerChanged,
    #[error("elicitation failed: {0}; nothing was sent to Zabbix")]
    Elicitation(String),
    #[error("cannot build the approval question: {0}")]
    Schema(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Approver {
    /// With `ApprovalSealKey`, or a random key (one replica only: another cannot open it).
    /// With the store in memory a state opens only in the process that sealed it, whatever
    /// the key: replicas finish each other's states only when they share Redis.
    pub fn new(key: Option<&[u8]>, store: Arc<Store>) -> Result<Self, ApprovalError> {
        let key = match key {
            Some(key) => key.to_vec(),
            None => {
                let mut key = uuid::Uuid::new_v4().as_bytes().to_vec();
                key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
                key
            }
        };
        let codec =
            RequestStateCodec::try_new(key).map_err(|e| ApprovalError::Key(e.to_string()))?;
        let process = match &*store {
            Store::Memory(_) => Some(uuid::Uuid::new_v4().simple().to_string()),
            Store::Redis(_) => None,
        };
        Ok(Approver {
            codec,
            store,
            process,
        })
    }

    /// Seals the payload, bound to the caller's token so no one else can redeem it (and,
    /// with the store in memory, to this process).
    pub fn seal(&self, sealed: &Sealed, token_id: &str) -> Result<String, ApprovalError> {
        let bound_to = self.bound_to(token_id);
        let options = SealOptions::new()
            .associated_data(&bound_to)
            .ttl(APPROVAL_TTL);
        self.codec
            .seal_json_with(sealed, &options)
            .map_err(|_| ApprovalError::BadState)
    }

    fn bound_to(&self, token_id: &str) -> Vec<u8> {
        match &self.process {
            None => token_id.as_bytes().to_vec(),
            Some(process) => format!("{token_id}\0{process}").into_bytes(),
        }
    }

    /// Marks an approved state as used; a second use is refused, even a concurrent one.
    pub async fn redeem(&self, sealed: &Sealed) -> Result<(), ApprovalError> {
        if self.store.use_once(&sealed.nonce, APPROVAL_TTL).await? {
            Ok(())
        } else {
            Err(ApprovalError::AlreadyUsed)
        }
    }

    pub fn open(&self, state: &str, token_id: &str) -> Result<Sealed, ApprovalError> {
        self.codec
            .open_json_with(state, &self.bound_to(token_id))
            .map_err(|_| ApprovalError::BadState)
    }
}

/// Chooses the approval path from the policy's answer and the client's abilities.
pub fn route(approval: Approval, context: &RequestContext<RoleServer>, can_form: bool) -> Route {
    let modern = context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
    let ask = match (modern, can_form) {
        (true, true) => Some(Route::InputRequired),
        (false, true) => Some(Route::Elicit),
        _ => None,
    };
    match (approval, ask) {
        (Approval::None, _) => Route::Apply,
        (Approval::Page, _) => Route::Page,
        (Approval::IfSupported, Some(route)) | (Approval::Required, Some(route)) => route,
        (Approval::IfSupported, None) => Route::Apply,
        (Approval::Required, None) => Route::Unavailable,
    }
}

pub fn sha256_hex(body: &[u8]) -> String {
    hex::encode(Sha256::digest(body))
}

/// The JSON-RPC `id` of a sealed body, after checking that the body is the one its digest
/// names and calls `method`: the retry rebuilds the request with this id and sends it only
/// if the rebuilt bytes have the sealed digest.
pub fn sealed_request_id(sealed: &Sealed, method: Method) -> Result<u64, ApprovalError> {
    #[derive(Deserialize)]
    struct Head {
        method: String,
        id: u64,
    }
    if sha256_hex(sealed.body.as_bytes()) != sealed.sha256 {
        return Err(ApprovalError::BadState);
    }
    let head: Head = serde_json::from_str(&sealed.body).map_err(|_| ApprovalError::BadState)?;
    if head.method != method.as_str() {
        return Err(ApprovalError::WrongMethod {
            sealed: head.method,
            expected: method.as_str(),
        });
    }
    Ok(head.id)
}

/// The question a human sees: the tool, the exact payload pretty-printed with its decisive
/// fields first and every non-ASCII or invisible character escaped (agent text cannot
/// reorder or hide what is shown), notes on text a person may not see whole, and the
/// SHA-256 of the bytes sent (without the token).
fn question(
    tool: &str,
    method: Method,
    body: &[u8],
    sha256: &str,
) -> Result<ElicitRequestParams, ApprovalError> {
    let schema = ElicitationSchema::builder()
        .required_bool_with("approve", |b| {
            b.description("true sends exactly the payload shown; false cancels the change")
        })
        .description("Approve this Zabbix change?")
        .build()
        .map_err(|e| ApprovalError::Schema(e.to_string()))?;
    let shown = display::pretty_payload(body).map_err(|e| ApprovalError::Schema(e.to_string()))?;
    let notes: String = display::long_text_notes(body)
        .iter()
        .map(|note| format!("Note: {note}.\n\n"))
        .collect();
    let message = format!(
        "Approve {tool} ({method})?\n\nThis exact JSON-RPC request will be sent to Zabbix \
         with your API token (the token is added in transport and is not shown). It is shown \
         pretty-printed, method and IDs and times first, with every non-ASCII or invisible \
         character written as \\uXXXX; the SHA-256 is of the compact bytes sent.\n\n\
         {notes}{shown}\n\nSHA-256: {sha256}"
    );
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    })
}

fn answer_of(result: &ElicitResult) -> Answer {
    match result.action {
        ElicitationAction::Accept => {
            let approved = result
                .content
                .as_ref()
                .and_then(|c| c.get("approve"))
                .and_then(serde_json::Value::as_bool)
                == Some(true);
            if approved {
                Answer::Approved
            } else {
                Answer::Declined
            }
        }
        ElicitationAction::Decline => Answer::Declined,
        _ => Answer::Cancelled,
    }
}

/// Asks the human during the call (2025-06-18 / 2025-11-25 clients with form elicitation).
pub async fn elicit(
    context: &RequestContext<RoleServer>,
    tool: &str,
    payload: &Payload,
    timeout: std::time::Duration,
) -> Result<Answer, ApprovalError> {
    let params = question(
        tool,
        payload.method,
        &payload.body,
        &sha256_hex(&payload.body),
    )?;
    // `ElicitationTimeout`: a question nobody answers must not hold the call forever.
    let result = context
        .peer
        .create_elicitation_with_timeout(params, Some(timeout))
        .await
        .map_err(|e| match e {
            rmcp::service::ServiceError::Timeout { .. } => ApprovalError::Elicitation(format!(
                "no answer within ElicitationTimeout ({} s)",
                timeout.as_secs()
            )),
            other => ApprovalError::Elicitation(other.to_string()),
        })?;
    Ok(answer_of(&result))
}

/// The input-required result for a 2026-07-28 client.
pub fn input_required(
    approver: &Approver,
    tool: &str,
    decision_id: &str,
    token_id: &str,
    payload: &Payload,
) -> Result<(InputRequiredResult, String), ApprovalError> {
    let body = String::from_utf8_lossy(&payload.body).into_owned();
    let sha256 = sha256_hex(&payload.body);
    let sealed = Sealed {
        nonce: uuid::Uuid::new_v4().to_string(),
        tool: tool.to_owned(),
        decision_id: decision_id.to_owned(),
        sha256: sha256.clone(),
        body,
    };
    let state = approver.seal(&sealed, token_id)?;
    let mut requests = InputRequests::new();
    requests.insert(
        INPUT_KEY.into(),
        InputRequest::Elicitation(ElicitRequest::new(question(
            tool,
            payload.method,
            &payload.body,
            &sha256,
        )?)),
    );
    Ok((
        InputRequiredResult::new(Some(requests), Some(state)),
        sha256,
    ))
}

/// The human's answer in a retried call; a missing or malformed one counts as cancelled.
pub fn answer_from_responses(responses: Option<&rmcp::model::InputResponses>) -> Answer {
    responses
        .and_then(|r| r.get(INPUT_KEY))
        .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok())
        .map_or(Answer::Cancelled, |r| answer_of(&r))
}

impl Answer {
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Approved => "approved",
            Answer::Declined => "declined",
            Answer::Cancelled => "cancelled",
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ElicitRequestParams;

    use super::{ApprovalError, Approver, Sealed, question, sealed_request_id, sha256_hex};
    use crate::zabbix::Method;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn sealed(body: &str) -> Sealed {
        Sealed {
            nonce: "n".into(),
            tool: "problem_acknowledge".into(),
            decision_id: "d".into(),
            sha256: sha256_hex(body.as_bytes()),
            body: body.into(),
        }
    }

    /// Round trip through the codec with the key, as a forged state would have to be.
    fn reopened(state: &Sealed) -> Sealed {
        let store = std::sync::Arc::new(
            crate::store::Store::open(None, std::time::Duration::from_secs(1), None).unwrap(),
        );
        let approver = Approver::new(Some(KEY), store).unwrap();
        let text = approver.seal(state, "token-id").unwrap();
        approver.open(&text, "token-id").unwrap()
    }

    #[test]
    fn a_sealed_body_of_another_method_is_refused() {
        let body = r#"{"jsonrpc":"2.0","method":"maintenance.delete","params":["7"],"id":3}"#;
        let opened = reopened(&sealed(body));
        match sealed_request_id(&opened, Method::EventAcknowledge) {
            Err(ApprovalError::WrongMethod { sealed, expected }) => {
                assert_eq!(
                    (sealed.as_str(), expected),
                    ("maintenance.delete", "event.acknowledge")
                );
            }
            other => panic!("expected WrongMethod, got {other:?}"),
        }
    }

    #[test]
    fn the_request_id_comes_from_a_body_that_matches_its_digest() {
        let body = r#"{"jsonrpc":"2.0","method":"event.acknowledge","params":{},"id":42}"#;
        let opened = reopened(&sealed(body));
        assert_eq!(
            sealed_request_id(&opened, Method::EventAcknowledge).unwrap(),
            42
        );
        let mut other = sealed(body);
        other.sha256 = sha256_hex(b"something else");
        assert!(matches!(
            sealed_request_id(&reopened(&other), Method::EventAcknowledge),
            Err(ApprovalError::BadState)
        ));
        let broken = sealed(r#"{"method":"event.acknowledge","id":"x"}"#);
        assert!(matches!(
            sealed_request_id(&reopened(&broken), Method::EventAcknowledge),
            Err(ApprovalError::BadState)
        ));
    }

    #[test]
    fn the_question_is_pretty_escaped_and_points_out_hidden_text() {
        let name = "night \u{202E}eteled\u{202C} caf\u{e9}\u{200B}";
        let description = format!("routine{}then more", " ".repeat(60_000));
        let body = serde_json::to_vec(&serde_json::json!({
            "jsonrpc": "2.0", "method": "maintenance.create",
            "params": {"name": name, "description": description, "hostids": ["10084"],
                       "active_since": 100, "active_till": 200},
            "id": 7}))
        .unwrap();
        let ElicitRequestParams::FormElicitationParams { message, .. } = question(
            "maintenance_create",
            Method::MaintenanceCreate,
            &body,
            "abc",
        )
        .unwrap() else {
            panic!("a form question");
        };
        assert!(message.is_ascii(), "{}", &message[..200]);
        assert!(message.contains("night \\u202eeteled\\u202c caf\\u00e9\\u200b"));
        let note = "Note: params.description is 60016 characters long and holds a run of \
                    60000 whitespace characters at character 7: read it to its end.\n\n{\n  \
                    \"method\": \"maintenance.create\",\n  \"params\": {\n    \"hostids\": [";
        assert!(message.contains(note), "{}", &message[..600]);
        assert!(message.ends_with("}\n\nSHA-256: abc"));
    }
}
