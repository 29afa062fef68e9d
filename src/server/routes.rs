//! HTTP routing: `/healthz`, `/readyz`, `/metrics` (unless the status listener serves it),
//! and `/mcp` (authenticated, then handed to rmcp).

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_TYPE, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Body as HttpBody;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use serde_json::json;
use tower_service::Service;

use crate::app::App;
use crate::mcp::GuardHandler;
use crate::mcp::errors;
use crate::mcp::splice::Splice;
use crate::server::body::{BodyBudget, read_body};
use crate::server::direct::{self, Direct, Served};
use crate::server::gate::{Inside, McpGate};
use crate::server::guard::{self, AllowedHosts, GuardError};
use crate::server::hangup::{CallWatch, HangupGuard};
use crate::server::listeners::{self, Listeners};
use crate::server::ready::Readiness;
use crate::server::refusal::{self, RefusalContext, Refused};
use crate::server::sessions::{Admission, SessionOwners};
use crate::zabbix::Caller;

pub type Body = BoxBody<Bytes, Infallible>;

/// rmcp's service in the session mode the configuration asks for, and the host names it
/// answers to.
#[derive(Clone)]
pub struct McpEndpoint {
    pub service: McpService,
    pub hosts: Arc<AllowedHosts>,
    pub(crate) readiness: Readiness,
    /// Session owners and the session cap (stateful mode only).
    pub(crate) sessions: Option<Arc<SessionOwners>>,
    /// The MCP listener's `MaxConnections` slots, read by `/metrics` (none without a socket).
    pub(crate) connection_slots: Option<Arc<tokio::sync::Semaphore>>,
    /// The certificate the listeners serve (`TLSAccept=cert`), read by `/metrics`.
    pub(crate) certificate: Option<Arc<crate::server::tls::ServerCertificate>>,
    /// Bounds the requests being answered outside sessions.
    pub(crate) gate: Arc<McpGate>,
    /// Answers stateless tool lists and calls without rmcp's per-request service.
    pub(crate) direct: Option<Arc<Direct>>,
    /// The bytes all request bodies may hold at once.
    pub(crate) bodies: Arc<BodyBudget>,
    /// Bounds the `subscriptions/listen` streams open at once.
    pub(crate) listeners: Arc<Listeners>,
}

#[derive(Clone)]
pub enum McpService {
    Stateless(StreamableHttpService<GuardHandler, NeverSessionManager>),
    Stateful(StreamableHttpService<GuardHandler, LocalSessionManager>),
}

impl McpEndpoint {
    async fn call(&self, request: Request<Full<Bytes>>) -> Response<Body> {
        let request = match &self.direct {
            // Boxed: the connection's own future stays small while no call is in it.
            Some(direct) => match Box::pin(direct.serve(request)).await {
                Served::Answered(response) => return response,
                Served::NotOurs(request) => request,
            },
            None => request,
        };
        // The request stays at hand (a shared buffer, not a copy) to explain rmcp's refusal.
        let (mut parts, bytes) = direct::into_bytes(request).await;
        let listening = if parts.method == Method::POST && listeners::may_listen(&bytes) {
            // A stream is bounded by the listen caps; it would hold a place for its life.
            parts.extensions.remove::<Inside>();
            let token_id = parts
                .extensions
                .get::<Caller>()
                .map_or("", |caller| caller.token_id.as_str());
            match self.listeners.admit(token_id) {
                Ok(permit) => Some(permit),
                Err(refused) => return refused.response(),
            }
        } else {
            None
        };
        let head = RefusalContext::of(&parts);
        let request = Request::from_parts(parts, Full::new(bytes.clone()));
        let result = match &self.service {
            McpService::Stateless(service) => service.clone().call(request).await,
            McpService::Stateful(service) => service.clone().call(request).await,
        };
        let response = match result {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let response = refusal::from_rmcp(response, &head, &bytes).await;
        match listening {
            Some(permit) => listeners::hold(response, permit),
            None => response,
        }
    }
}

/// Answers one request. Generic over the body so the router can be driven without a
/// socket (fuzzing); hyper hands it `Incoming`. `local`: the address the connection came
/// in on, if known.
pub async fn handle<B>(
    app: Arc<App>,
    mcp: &McpEndpoint,
    request: Request<B>,
    peer: IpAddr,
    local: Option<IpAddr>,
) -> Response<Body>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/healthz") => json_response(StatusCode::OK, &json!({"status": "ok"})),
        (_, "/mcp") => {
            let mut request = detach_head(request);
            // Host/Origin first: a rebinding page must not even learn whether a token works.
            if let Err(error) = mcp.hosts.check(request.uri(), request.headers()) {
                return refused(&error);
            }
            // Boxed: requests waiting at the MCP gate need none of the identity lookup's
            // state (a cache read, and on a miss a call to Zabbix, boxed again there).
            match Box::pin(guard::authenticate(&app, request.headers(), peer)).await {
                Ok(caller) => {
                    let token_id = caller.token_id.clone();
                    request.extensions_mut().insert(caller);
                    let watch = CallWatch::default();
                    request.extensions_mut().insert(watch.clone());
                    let hangup = HangupGuard::new(watch);
                    // Held until the answer: the body is in memory until then.
                    let (request, _share) =
                        match read_body(request, app.config.limits.body, &mcp.bodies).await {
                            Ok(read) => read,
                            Err(response) => return response,
                        };
                    let response = match &mcp.sessions {
                        None => {
                            let (inside, mut request) = match enter(mcp, request).await {
                                Ok(entered) => entered,
                                Err(response) => return response,
                            };
                            // Stateless answers are whole JSON bodies (listen streams aside):
                            // reads splice their text in.
                            let splice = Splice::default();
                            request.extensions_mut().insert(inside);
                            request.extensions_mut().insert(splice.clone());
                            splice.apply(mcp.call(request).await).await
                        }
                        Some(owners) => match in_session(owners, mcp, request, &token_id).await {
                            Ok(response) => response,
                            Err(refused) => return refused,
                        },
                    };
                    response.map(|body| hangup.into_body(body).boxed())
                }
                Err(error) => refused_request(&app, mcp, request, &error).await,
            }
        }
        _ => {
            if let Err(error) = status_host(mcp, &request, local) {
                return refused(&error);
            }
            match (request.method(), request.uri().path()) {
                (&Method::GET, "/readyz") => readiness(&app, &mcp.readiness).await,
                // Behind AllowedIP, checked at accept like every request on this listener.
                (&Method::GET, "/metrics") if app.config.status_listener.is_none() => {
                    crate::server::status::metrics(&app, mcp).await
                }
                _ => json_response(StatusCode::NOT_FOUND, &json!({"error": "not found"})),
            }
        }
    }
}

/// Host/Origin of a request to a route other than `/mcp` and `/healthz`: `/readyz` and
/// `/metrics` tell how the sidecar runs, and a DNS-rebinding page would read them from a
/// browser on an allowed address. Also the address the connection came in on, which is
/// what probes and scrapers name; `/healthz` stays open to any probe and says nothing.
pub(crate) fn status_host<B>(
    mcp: &McpEndpoint,
    request: &Request<B>,
    local: Option<IpAddr>,
) -> Result<(), GuardError> {
    mcp.hosts
        .check_arrived(request.uri(), request.headers(), local)
}

/// A request in the stateful mode, as its session (or its lack of one) admits it; `Err`
/// for a refusal.
async fn in_session(
    owners: &Arc<SessionOwners>,
    mcp: &McpEndpoint,
    request: Request<Full<Bytes>>,
    token_id: &str,
) -> Result<Response<Body>, Response<Body>> {
    let (parts, bytes) = direct::into_bytes(request).await;
    let admission = owners.admit(&parts.headers, &bytes, token_id).await?;
    let request = Request::from_parts(parts, Full::new(bytes));
    Ok(match admission {
        Admission::Existing(claim) => {
            let deleting = request.method() == Method::DELETE;
            let mut request = request;
            if let Some(claim) = &claim {
                request.extensions_mut().insert(claim.clone());
            }
            let mut response = mcp.call(request).await;
            if deleting {
                owners.forget_ended().await;
                ended_is_no_content(&mut response);
            }
            match claim {
                Some(claim) => listeners::hold(response, claim),
                None => response,
            }
        }
        // In a task of its own: rmcp creates the session before it answers, and a client
        // hanging up in between would otherwise leave a session no token owns (outside
        // `MaxSessionsPerToken` and the revocation sweep) until it idled out.
        Admission::New(creating) => {
            let (owners, mcp) = (owners.clone(), mcp.clone());
            let task = tokio::spawn(async move {
                let _creating = creating;
                let caller = request.extensions().get::<Caller>().cloned();
                let response = mcp.call(request).await;
                if let Some(caller) = caller {
                    owners.record(response.headers(), &caller).await;
                }
                response
            });
            task.await.unwrap_or_else(|error| {
                tracing::error!(%error, "session creation ended without an answer");
                json_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &json!({"error": "internal_error",
                            "message": "the session could not be created: its task ended without an answer"}),
                )
            })
        }
        // Outside sessions as in the stateless mode: through the gate.
        Admission::Sessionless => {
            let (inside, mut request) = enter(mcp, request).await?;
            request.extensions_mut().insert(inside);
            mcp.call(request).await
        }
    })
}

/// A place in the MCP gate for `request`, or the refusal of that request (its JSON-RPC
/// error, with its id).
async fn enter(
    mcp: &McpEndpoint,
    request: Request<Full<Bytes>>,
) -> Result<(Inside, Request<Full<Bytes>>), Response<Body>> {
    match mcp.gate.enter().await {
        Ok(inside) => Ok((inside, request)),
        Err(full) => {
            let (_, bytes) = direct::into_bytes(request).await;
            Err(Refused::from(full).response(refusal::request_id(&bytes)))
        }
    }
}

/// rmcp answers the `DELETE` that ends a session with 202 and no body; the official
/// MCP Python SDK reads only 200 and 204 as ended and logs `Session termination failed:
/// 202` at every close. 204 says the same (done, nothing to tell) to every client.
fn ended_is_no_content<B>(response: &mut Response<B>) {
    if response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
}

/// hyper hands the request head over as slices of the connection's read buffer: while a
/// request waits (identity, the MCP gate, Zabbix) they pin that buffer (8 kB or more) and
/// hyper allocates another for the connection. Copying the few hundred bytes of the URI and
/// header values lets the buffer be reused: about 8 kB less per busy connection.
fn detach_head<B>(request: Request<B>) -> Request<B> {
    let (mut parts, body) = request.into_parts();
    for value in parts.headers.values_mut() {
        if let Ok(mut owned) = HeaderValue::from_bytes(value.as_bytes()) {
            owned.set_sensitive(value.is_sensitive());
            *value = owned;
        }
    }
    if let Ok(uri) = http::Uri::try_from(parts.uri.to_string()) {
        parts.uri = uri;
    }
    Request::from_parts(parts, body)
}

/// HTTP/1 closes the connection after this response (the rest of the body is unread).
pub(crate) fn closing(mut response: Response<Body>) -> Response<Body> {
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Ready when Zabbix answered the last background check and a policy set is loaded
/// (without one every call is denied). Reads cached state only.
pub(crate) async fn readiness(app: &App, ready: &Readiness) -> Response<Body> {
    let policy = app.policy.status();
    let policy_json = json!({
        "source": policy.source.kind(),
        "dir": policy.source.dir().map(|d| d.display().to_string()),
        "loaded": policy.loaded,
        "revision": policy.revision,
        "mode": policy.mode.as_str(),
        "last_error": policy.last_error,
        "reloads_failed": policy.reloads_failed,
    });
    // A failing destination refuses every write: not ready. The writer tries it again by
    // itself, so a sidecar taken out of service still learns that it takes lines again.
    let log_failing = app.decisions.failing();
    let decision_log = json!({
        "failing": app.decisions.failing(),
        "lines_failed": app.decisions.write_errors(),
    });
    // Only before the first check ends does a probe wait, and no longer than a call would.
    let Some(state) = ready
        .checked(app.config.timeout + Duration::from_secs(1))
        .await
    else {
        return json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "not ready", "reason": "Zabbix not checked yet", "policy": policy_json}),
        );
    };
    let store = match &state.store {
        None => json!({"backend": "memory"}),
        Some(Ok(())) => json!({"backend": "redis", "reachable": true}),
        Some(Err(error)) => json!({"backend": "redis", "reachable": false, "error": error}),
    };
    let version = match state.zabbix {
        Ok(version) => version,
        Err(reason) => {
            return json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({"status": "not ready", "reason": reason, "checked_at": state.checked_at,
                        "shared_store": store}),
            );
        }
    };
    // Without the store, no call with a limit and no new caller is let in.
    let not_ready = if !policy.loaded {
        Some("no policy loaded".to_owned())
    } else if let Some(Err(error)) = &state.store {
        Some(format!("shared store unreachable: {error}"))
    } else if log_failing {
        Some("the decision log's destination does not take lines; writes are refused".to_owned())
    } else {
        None
    };
    match not_ready {
        None => json_response(
            StatusCode::OK,
            &json!({"status": "ready", "zabbix_version": version, "checked_at": state.checked_at,
                    "policy": policy_json, "shared_store": store, "decision_log": decision_log}),
        ),
        Some(reason) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "not ready", "reason": reason, "zabbix_version": version,
                    "checked_at": state.checked_at, "policy": policy_json, "shared_store": store,
                    "decision_log": decision_log}),
        ),
    }
}

/// A request to `/mcp` refused before MCP. One refused for a reason of the moment (Zabbix
/// could not tell who its token is now: `mcp::errors::refusal_rpc`) whose body is a
/// JSON-RPC request other than `initialize` is that request's error in a 200; anything
/// else is [`refused`].
async fn refused_request<B>(
    app: &App,
    mcp: &McpEndpoint,
    request: Request<B>,
    error: &GuardError,
) -> Response<Body>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Some(rpc) = errors::refusal_rpc(error).filter(|_| request.method() == Method::POST) else {
        return refused(error);
    };
    // The body's share of the budget is held until the answer is built.
    let (request, _share) = match read_body(request, app.config.limits.body, &mcp.bodies).await {
        Ok(read) => read,
        Err(_) => return closing(refused(error)),
    };
    let (_, bytes) = direct::into_bytes(request).await;
    let Some(id) = refusal::request_id_after_initialize(&bytes) else {
        return refused(error);
    };
    log_refused(error, StatusCode::OK);
    json_response(StatusCode::OK, &rpc.body(id))
}

fn log_refused(error: &GuardError, status: StatusCode) {
    let refusal = errors::refusal(error);
    let reason = crate::display::escape_text(&error.to_string());
    if refusal.status == StatusCode::FORBIDDEN {
        tracing::warn!(%reason, "request refused: possible DNS rebinding");
    } else if refusal.code == "identity_incomplete" {
        tracing::warn!(%reason, "request refused: incomplete caller identity");
    } else {
        tracing::info!(http.response.status_code = status.as_u16(), %reason, "request refused");
    }
}

/// A request refused before MCP, answered as `mcp::errors::refusal` says.
pub(crate) fn refused(error: &GuardError) -> Response<Body> {
    let refusal = errors::refusal(error);
    log_refused(error, refusal.status);
    let mut response = json_response(
        refusal.status,
        &json!({"error": refusal.code, "message": errors::refusal_message(error)}),
    );
    if let Some(challenge) = refusal.challenge {
        response
            .headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    }
    if let Some(seconds) = refusal.retry_after_s {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

pub fn json_response(status: StatusCode, body: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
