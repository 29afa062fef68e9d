//! Write approval: a human sees the exact JSON-RPC payload and its SHA-256 and answers one
//! required boolean `approve`; after a yes exactly that payload is sent.
//!
//! Which path: the policy's `approval` (`none`, `if_supported`, `required`) and what the
//! client can do. Clients on 2025-06-18/2025-11-25 that declare form elicitation get an
//! `elicitation/create` during the call (needs `SessionMode=stateful`); clients on
//! 2026-07-28 get an input-required result whose request state is sealed with
//! `ApprovalSealKey` (any replica with the key can finish it) and answer by retrying.

use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, ProtocolVersion, RequestStateCodec,
    SealOptions,
};
use rmcp::service::{RequestContext, RoleServer};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::policy::Approval;
use crate::zabbix::{Method, Payload};

/// How long a sealed approval request stays valid.
const APPROVAL_TTL: Duration = Duration::from_secs(600);
/// The key of the approval question in an input-required round trip.
const INPUT_KEY: &str = "approval";

/// Seals and opens approval state for the 2026-07-28 round trip, and remembers which
/// approved states were used.
pub struct Approver {
    codec: RequestStateCodec,
    /// Nonces of redeemed states, kept as long as a state can live. Per replica: a
    /// deployment that lets two replicas redeem the same state needs sticky routing of the
    /// retry (or one replica); documented in the README.
    redeemed: moka::future::Cache<String, ()>,
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
    /// The JSON-RPC body, without the token, as it will be sent.
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
    #[error("the arguments changed since approval was asked; call again to get a new approval")]
    Changed,
    #[error("this approval was already used; call again to get a new approval")]
    AlreadyUsed,
    #[error("elicitation failed: {0}")]
    Elicitation(String),
    #[error("cannot build the approval question: {0}")]
    Schema(String),
}

impl Approver {
    /// With `ApprovalSealKey`, or a random key (one replica only: another cannot open it).
    pub fn new(key: Option<&[u8]>) -> Result<Self, ApprovalError> {
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
        let redeemed = moka::future::Cache::builder()
            .max_capacity(100_000)
            .time_to_live(APPROVAL_TTL)
            .build();
        Ok(Approver { codec, redeemed })
    }

    /// Seals the payload, bound to the caller's token so no one else can redeem it.
    pub fn seal(&self, sealed: &Sealed, token_id: &str) -> Result<String, ApprovalError> {
        let options = SealOptions::new()
            .associated_data(token_id.as_bytes())
            .ttl(APPROVAL_TTL);
        self.codec
            .seal_json_with(sealed, &options)
            .map_err(|_| ApprovalError::BadState)
    }

    /// Marks an approved state as used; a second use is refused, even a concurrent one.
    pub async fn redeem(&self, sealed: &Sealed) -> Result<(), ApprovalError> {
        let entry = self
            .redeemed
            .entry(sealed.nonce.clone())
            .or_insert(())
            .await;
        if entry.is_fresh() {
            Ok(())
        } else {
            Err(ApprovalError::AlreadyUsed)
        }
    }

    pub fn open(&self, state: &str, token_id: &str) -> Result<Sealed, ApprovalError> {
        self.codec
            .open_json_with(state, token_id.as_bytes())
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
        (Approval::IfSupported, Some(route)) | (Approval::Required, Some(route)) => route,
        (Approval::IfSupported, None) => Route::Apply,
        (Approval::Required, None) => Route::Unavailable,
    }
}

pub fn sha256_hex(body: &[u8]) -> String {
    hex::encode(Sha256::digest(body))
}

/// The question a human sees: the tool, the exact payload and its digest.
fn question(
    tool: &str,
    method: Method,
    body: &str,
    sha256: &str,
) -> Result<ElicitRequestParams, ApprovalError> {
    let schema = ElicitationSchema::builder()
        .required_bool_with("approve", |b| {
            b.description("true sends exactly the payload shown; false cancels the change")
        })
        .description("Approve this Zabbix change?")
        .build()
        .map_err(|e| ApprovalError::Schema(e.to_string()))?;
    let message = format!(
        "Approve {tool} ({method})?\n\nThis exact JSON-RPC payload will be sent to Zabbix \
         with your API token (the token is added in transport and is not shown):\n\n{body}\n\n\
         SHA-256: {sha256}"
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
    let body = String::from_utf8_lossy(&payload.body);
    let params = question(tool, payload.method, &body, &sha256_hex(&payload.body))?;
    // `ElicitationTimeout`: a question nobody answers must not hold the call forever.
    let result = context
        .peer
        .create_elicitation_with_timeout(params, Some(timeout))
        .await
        .map_err(|e| ApprovalError::Elicitation(e.to_string()))?;
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
            &sealed.body,
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
