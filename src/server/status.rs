//! `/metrics`, and the status listener (`StatusListenIP`/`StatusListenPort`): plain HTTP
//! serving `/metrics`, `/healthz` and `/readyz` to scrapers and probes, apart from the MCP
//! listener. It has no TLS and no `AllowedIP`: bind it where only they reach it. Each
//! connection serves one request within a deadline, and few are open at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::metrics::process::Process;
use crate::metrics::{CONTENT_TYPE as METRICS_CONTENT_TYPE, Scrape};
use crate::server::ServerError;
use crate::server::routes::{self, Body, McpEndpoint, json_response};

/// Status connections open at once; more are closed at accept (scrapers and probes are few).
const MAX_STATUS_CONNECTIONS: usize = 32;
/// A status connection's whole life: one request and its answer.
const STATUS_CONNECTION_DEADLINE: Duration = Duration::from_secs(30);

/// Binds the status listeners, if configured, and serves them until `cancel`.
pub(crate) async fn start(
    app: &Arc<App>,
    endpoint: &McpEndpoint,
    cancel: CancellationToken,
    tasks: &mut JoinSet<()>,
) -> Result<Vec<SocketAddr>, ServerError> {
    let Some(config) = app.config.status_listener.clone() else {
        return Ok(Vec::new());
    };
    let slots = Arc::new(Semaphore::new(MAX_STATUS_CONNECTIONS));
    let mut addrs = Vec::new();
    for ip in &config.listen_ip {
        let addr = SocketAddr::new(*ip, config.listen_port);
        let (listener, local) = super::bind(addr, "status", false).await?;
        addrs.push(local);
        tasks.spawn(accept_loop(
            listener,
            app.clone(),
            endpoint.clone(),
            slots.clone(),
            cancel.clone(),
        ));
    }
    Ok(addrs)
}

async fn accept_loop(
    listener: TcpListener,
    app: Arc<App>,
    endpoint: McpEndpoint,
    slots: Arc<Semaphore>,
    cancel: CancellationToken,
) {
    loop {
        let (stream, peer) = tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    tracing::warn!(%error, "status listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::debug!(client.address = %peer.ip(), "status connection refused: too many open");
            continue;
        };
        let (app, endpoint) = (app.clone(), endpoint.clone());
        let header_timeout = app.config.limits.header;
        let local = stream.local_addr().ok().map(|addr| addr.ip());
        let service = service_fn(move |request| {
            let (app, endpoint) = (app.clone(), endpoint.clone());
            async move {
                Ok::<_, std::convert::Infallible>(handle(&app, &endpoint, &request, local).await)
            }
        });
        tokio::spawn(async move {
            let mut builder = Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(false);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            if tokio::time::timeout(STATUS_CONNECTION_DEADLINE, connection)
                .await
                .is_err()
            {
                tracing::debug!(client.address = %peer.ip(), "status connection cut at its deadline");
            }
            drop(permit);
        });
    }
}

/// One request on the status listener (`local`: the address it came in on). Host/Origin
/// are checked as on the MCP listener: no `AllowedIP` guards this one, and a browser that
/// reaches it could be a DNS-rebinding page's.
async fn handle<B>(
    app: &App,
    endpoint: &McpEndpoint,
    request: &Request<B>,
    local: Option<std::net::IpAddr>,
) -> Response<Body> {
    let path = request.uri().path();
    if request.method() == Method::GET && path == "/healthz" {
        return json_response(StatusCode::OK, &json!({"status": "ok"}));
    }
    if let Err(error) = routes::status_host(endpoint, request, local) {
        return routes::refused(&error);
    }
    match (request.method(), path) {
        (&Method::GET, "/metrics") => metrics(app, endpoint).await,
        (&Method::GET, "/readyz") => routes::readiness(app, &endpoint.readiness).await,
        _ => json_response(StatusCode::NOT_FOUND, &json!({"error": "not found"})),
    }
}

/// The text exposition: the registry, plus this moment's gauges and the counters the app
/// and the server keep anyway.
pub(crate) async fn metrics(app: &App, endpoint: &McpEndpoint) -> Response<Body> {
    let policy = app.policy.status();
    let sessions_open = match &endpoint.sessions {
        Some(owners) => owners.open().await,
        None => 0,
    };
    let connections_open = endpoint.connection_slots.as_ref().map_or(0, |slots| {
        app.config
            .limits
            .max_connections
            .saturating_sub(slots.available_permits())
    });
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let checked = endpoint.readiness.last();
    let scrape = Scrape {
        in_flight: count(app.in_flight.count()),
        connections_open: count(connections_open),
        connections_refused: app
            .refused_connections
            .load(std::sync::atomic::Ordering::Relaxed),
        sessions_open: count(sessions_open),
        listen_streams_open: count(endpoint.listeners.open()),
        mcp_requests_in_progress: count(endpoint.gate.in_use()),
        request_body_bytes: count(endpoint.bodies.held()),
        decision_log_written: app.decisions.written(),
        decision_log_dropped: app.decisions.dropped(),
        decision_log_failed: app.decisions.write_errors(),
        identity_cache_hits: app.callers.hits(),
        identity_cache_misses: app.callers.misses(),
        identity_lookups_refused: app.rejected_tokens.refused(),
        policy_reloads_ok: policy.reloads_ok,
        policy_reloads_failed: policy.reloads_failed,
        policy_revision: policy.revision,
        list_sets_evaluated: app.list_decisions.evaluated(),
        list_sets_reused: app.list_decisions.reused(),
        tls: endpoint.certificate.as_ref().map(|c| c.status()),
        zabbix_trust: app.zabbix.trust_status(),
        // Reads of /proc: small, but file reads, so off the runtime's thread.
        process: tokio::task::spawn_blocking(Process::read)
            .await
            .ok()
            .flatten(),
        zabbix_up: checked.as_ref().map(|c| c.zabbix.is_ok()),
        shared_store_up: checked
            .as_ref()
            .and_then(|c| c.store.as_ref())
            .map(Result::is_ok),
    };
    let text = app.metrics.render(scrape);
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(METRICS_CONTENT_TYPE));
    response
}
