//! Stateful sessions bound to the token that created them and capped in number, in all
//! (`MaxSessions`) and per token (`MaxSessionsPerToken`, so one caller cannot take every
//! session); rmcp's session manager ends idle ones (`SessionIdleTimeout`). A session id
//! another token holder learned is "not found" to them: they can neither use nor delete it.
//!
//! A session lives no longer than Zabbix accepts its token: the tokens of open sessions are
//! looked up again through the identity cache (`CallerResolver::recheck_every`), and the
//! sessions of one Zabbix refuses are closed (`spawn_revocation_sweep`).
//!
//! Only an `initialize` creates a session. Requests of protocol 2026-07-28 carry none and
//! rmcp serves them statelessly in either mode: they pass without the creation lock and
//! without counting against the cap (`Admission::Sessionless`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use http::{HeaderMap, StatusCode};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::json;
use tokio::task::JoinHandle;

use crate::app::App;
use crate::config::Limits;
use crate::metrics::{Metrics, Revoked};
use crate::server::in_flight::{Claim, InFlightIds, NotClaimed};
use crate::server::method;
use crate::server::refusal::{self, Refused};
use crate::server::routes::{Body, json_response};
use crate::zabbix::{ApiToken, Caller};

const SESSION_HEADER: &str = "mcp-session-id";
const INITIALIZE: &str = "initialize";

/// Who owns which session, beside rmcp's own session table.
pub(crate) struct SessionOwners {
    manager: Arc<LocalSessionManager>,
    /// Session id → the token that created it.
    owners: Mutex<HashMap<String, Owner>>,
    max: usize,
    max_per_token: usize,
    /// Held while a new session is created, so that the cap is not overshot by a burst.
    /// Owned by the creating task, which outlives a client that hangs up.
    creating: Arc<tokio::sync::Mutex<()>>,
    /// The request ids in flight in each session, at most `MaxRequestsPerSession` each.
    in_flight: Arc<InFlightIds>,
    metrics: Arc<Metrics>,
}

/// The token that created a session: its `token_id` (hash prefix) to compare, the token
/// itself to look up again.
struct Owner {
    token_id: String,
    token: ApiToken,
}

/// What a request with or without a session id may do.
pub(crate) enum Admission {
    /// It names a session this token owns; a request holds its id there until answered.
    Existing(Option<Claim>),
    /// It may create a session; the guard keeps creation serialized until recorded.
    New(tokio::sync::OwnedMutexGuard<()>),
    /// It names no session and cannot create one (rmcp serves or refuses it as such).
    Sessionless,
}

impl SessionOwners {
    pub fn new(manager: Arc<LocalSessionManager>, limits: &Limits, metrics: Arc<Metrics>) -> Self {
        SessionOwners {
            manager,
            owners: Mutex::new(HashMap::new()),
            max: limits.max_sessions,
            max_per_token: limits.max_sessions_per_token,
            creating: Arc::new(tokio::sync::Mutex::new(())),
            in_flight: Arc::new(InFlightIds::new(limits.max_requests_per_session)),
            metrics,
        }
    }

    /// Lets a request through, or answers it: 404 for a session this token does not own
    /// (as for an unknown one), 503 when `MaxSessions` sessions are open, 429 when this
    /// token holds `MaxSessionsPerToken` of them.
    pub async fn admit(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        token_id: &str,
    ) -> Result<Admission, http::Response<Body>> {
        if let Some(id) = headers.get(SESSION_HEADER) {
            let owned = id.to_str().ok().filter(|id| {
                self.owners
                    .lock()
                    .ok()
                    .is_some_and(|owners| owners.get(*id).is_some_and(|o| o.token_id == token_id))
            });
            return match owned {
                Some(id) => self
                    .in_flight
                    .claim(id, body)
                    .map(Admission::Existing)
                    .map_err(|refused| self.refuse(refused, body)),
                None => Err(Refused::SessionNotFound.response(refusal::request_id(body))),
            };
        }
        if !method::may_be(body, INITIALIZE) {
            return Ok(Admission::Sessionless);
        }
        let guard = self.creating.clone().lock_owned().await;
        let open = self.manager.sessions.read().await.len();
        if open >= self.max {
            tracing::warn!(sessions = open, "session refused: MaxSessions reached");
            return Err(json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({"error": "too_many_sessions",
                        "message": format!("{open} sessions are open (MaxSessions); retry later or end one")}),
            ));
        }
        let live = self.live().await;
        let held = self.owners.lock().map_or(0, |owners| {
            owners
                .iter()
                .filter(|(id, owner)| owner.token_id == token_id && live.contains(*id))
                .count()
        });
        if held >= self.max_per_token {
            tracing::warn!(
                sessions = held,
                token_id,
                "session refused: MaxSessionsPerToken reached"
            );
            return Err(json_response(
                StatusCode::TOO_MANY_REQUESTS,
                &json!({"error": "too_many_sessions",
                        "message": format!("this token holds {held} sessions already (MaxSessionsPerToken); end one (DELETE) or let one idle out (SessionIdleTimeout)")}),
            ));
        }
        Ok(Admission::New(guard))
    }

    /// A request its session did not let in: counted, and logged, when the session is at
    /// `MaxRequestsPerSession`.
    fn refuse(&self, refused: NotClaimed, body: &[u8]) -> http::Response<Body> {
        let id = match &refused {
            NotClaimed::IdInFlight(id) => Some(id.clone()),
            NotClaimed::SessionFull(max) => {
                self.metrics.session_request_refused();
                tracing::warn!(max, "request refused: MaxRequestsPerSession reached");
                refusal::request_id(body)
            }
        };
        Refused::InSession(refused).response(id)
    }

    /// Forgets the owners of sessions rmcp has ended (an owner's `DELETE`, idle expiry):
    /// later requests naming them get the same `session_not_found` as any unknown id.
    pub(crate) async fn forget_ended(&self) {
        let live = self.live().await;
        if let Ok(mut owners) = self.owners.lock() {
            owners.retain(|k, _| live.contains(k));
        }
    }

    async fn live(&self) -> HashSet<String> {
        let sessions = self.manager.sessions.read().await;
        sessions.keys().map(|k| k.to_string()).collect()
    }

    /// Sessions open now (read by `/metrics`).
    pub async fn open(&self) -> usize {
        self.manager.sessions.read().await.len()
    }

    /// Records the owner of a session the response just created, and forgets sessions
    /// rmcp has ended.
    pub async fn record(&self, response_headers: &HeaderMap, caller: &Caller) {
        let Some(id) = response_headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
        else {
            return;
        };
        let live = self.live().await;
        if let Ok(mut owners) = self.owners.lock() {
            owners.retain(|k, _| live.contains(k));
            let owner = Owner {
                token_id: caller.token_id.clone(),
                token: caller.token.clone(),
            };
            owners.insert(id.to_owned(), owner);
        }
    }

    /// Closes the sessions whose token Zabbix refuses, looked at every
    /// `CallerResolver::recheck_every`; runs until aborted.
    pub(crate) fn spawn_revocation_sweep(self: &Arc<Self>, app: Arc<App>) -> JoinHandle<()> {
        let owners = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(app.callers.recheck_every()).await;
                owners.sweep(&app).await;
            }
        })
    }

    /// One look at every token holding a session: one lookup per token, however many
    /// sessions it holds.
    async fn sweep(&self, app: &App) {
        self.forget_ended().await;
        let tokens: HashMap<String, ApiToken> = match self.owners.lock() {
            Ok(owners) => owners
                .values()
                .map(|o| (o.token_id.clone(), o.token.clone()))
                .collect(),
            Err(_) => return,
        };
        for (token_id, token) in tokens {
            let Some(refused) = app.callers.refusal(&app.zabbix, &token).await else {
                continue;
            };
            let ids: Vec<String> = match self.owners.lock() {
                Ok(mut owners) => {
                    let ids = owners
                        .iter()
                        .filter(|(_, o)| o.token_id == token_id)
                        .map(|(id, _)| id.clone())
                        .collect();
                    owners.retain(|_, o| o.token_id != token_id);
                    ids
                }
                Err(_) => return,
            };
            for id in &ids {
                // Already gone is as good as closed.
                let _ = self.manager.close_session(&Arc::from(id.as_str())).await;
            }
            app.metrics
                .revocation_closed(Revoked::Session, ids.len() as u64);
            tracing::info!(
                token_id = %token_id,
                sessions = ids.len(),
                reason = %refused,
                "sessions closed: the token no longer resolves"
            );
        }
    }
}
