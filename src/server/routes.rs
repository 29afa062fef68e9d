//! HTTP routing: `/healthz`, `/readyz`, and `/mcp` (authenticated, then handed to rmcp).

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use serde_json::json;
use tower_service::Service;

use crate::app::App;
use crate::mcp::GuardHandler;
use crate::mcp::errors;
use crate::server::guard::{self, AllowedHosts, GuardError};

pub type Body = BoxBody<Bytes, Infallible>;

/// rmcp's service in the session mode the configuration asks for, and the host names it
/// answers to.
#[derive(Clone)]
pub struct McpEndpoint {
    pub service: McpService,
    pub hosts: Arc<AllowedHosts>,
}

#[derive(Clone)]
pub enum McpService {
    Stateless(StreamableHttpService<GuardHandler, NeverSessionManager>),
    Stateful(StreamableHttpService<GuardHandler, LocalSessionManager>),
}

impl McpEndpoint {
    async fn call(&self, request: Request<Incoming>) -> Response<Body> {
        let result = match &self.service {
            McpService::Stateless(service) => service.clone().call(request).await,
            McpService::Stateful(service) => service.clone().call(request).await,
        };
        match result {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

pub async fn handle(
    app: Arc<App>,
    mcp: McpEndpoint,
    mut request: Request<Incoming>,
    peer: IpAddr,
) -> Response<Body> {
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/healthz") => json_response(StatusCode::OK, &json!({"status": "ok"})),
        (&Method::GET, "/readyz") => readiness(&app).await,
        (_, "/mcp") => {
            // Host/Origin first: a rebinding page must not even learn whether a token works.
            if let Err(error) = mcp.hosts.check(request.uri(), request.headers()) {
                return refused(&error);
            }
            match guard::authenticate(&app, request.headers(), peer).await {
                Ok(caller) => {
                    request.extensions_mut().insert(caller);
                    mcp.call(request).await
                }
                Err(error) => refused(&error),
            }
        }
        _ => json_response(StatusCode::NOT_FOUND, &json!({"error": "not found"})),
    }
}

/// Ready when Zabbix answers and a policy set is loaded (without one every call is denied).
async fn readiness(app: &App) -> Response<Body> {
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
    match app.zabbix.refresh_version().await {
        Ok(version) if policy.loaded => json_response(
            StatusCode::OK,
            &json!({"status": "ready", "zabbix_version": version.to_string(), "policy": policy_json}),
        ),
        Ok(version) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "not ready", "reason": "no policy loaded",
                    "zabbix_version": version.to_string(), "policy": policy_json}),
        ),
        Err(error) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "not ready", "reason": error.to_string()}),
        ),
    }
}

/// A request refused before MCP, answered as `mcp::errors::refusal` says.
fn refused(error: &GuardError) -> Response<Body> {
    let refusal = errors::refusal(error);
    let reason = crate::display::escape_text(&error.to_string());
    if refusal.status == StatusCode::FORBIDDEN {
        tracing::warn!(%reason, "request refused: possible DNS rebinding");
    } else if refusal.code == "identity_incomplete" {
        tracing::warn!(%reason, "request refused: incomplete caller identity");
    } else {
        tracing::info!(http.response.status_code = refusal.status.as_u16(), %reason, "request refused");
    }
    let mut response = json_response(
        refusal.status,
        &json!({"error": refusal.code, "message": error.to_string()}),
    );
    if let Some(challenge) = refusal.challenge {
        response
            .headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
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
