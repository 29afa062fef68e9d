//! The approval page: the sidecar's own listener (`ApprovalListenIP`/`ApprovalListenPort`,
//! `ApprovalAllowedIP`, TLS like the MCP listener) where a person signs in with their own
//! Zabbix credentials and approves or declines the calls waiting for `page` approval.
//! Server-rendered HTML, no JavaScript; a strict CSP, CSRF tokens on every form,
//! `HttpOnly`/`SameSite=Strict` session cookies (`Secure` under TLS).

mod attempts;
mod decide;
mod html;
mod reply;
mod routes;
mod session;
mod summary;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::server::body::{BodyBudget, PAGE_BODY_BUDGET_BYTES};
use crate::server::routes::Body;
use crate::server::{self, Listener, Routes, ServerError};

pub(crate) use attempts::LoginAttempts;
use session::Sessions;

/// State of the page shared by its connections.
pub(crate) struct Page {
    app: Arc<App>,
    sessions: Sessions,
    /// Whether people reach the page over TLS: served with it, or `ApprovalURL` is https
    /// (a proxy terminating TLS in front): its cookies are then `Secure`, so no browser
    /// ever sends them over plain HTTP.
    secure_cookies: bool,
    /// The bytes the forms being received may hold at once.
    bodies: BodyBudget,
}

/// Binds the approval listeners, if configured, and serves them until `cancel` with the
/// MCP listener's connection limits (`crate::server::serve_listener`); the page has its own
/// pool of `MaxConnections` slots, so neither listener can starve the other.
pub async fn start(
    app: &Arc<App>,
    tls: Option<TlsAcceptor>,
    cancel: CancellationToken,
    tasks: &mut JoinSet<()>,
) -> Result<Vec<SocketAddr>, ServerError> {
    let (Some(config), Some(peers)) = (app.config.approval_page.clone(), &app.approval_peers)
    else {
        return Ok(Vec::new());
    };
    let page = Arc::new(Page {
        app: app.clone(),
        sessions: Sessions::new(app),
        secure_cookies: tls.is_some() || config.url.to_ascii_lowercase().starts_with("https://"),
        bodies: BodyBudget::new(PAGE_BODY_BUDGET_BYTES),
    });
    let slots = Arc::new(Semaphore::new(app.config.limits.max_connections));
    let mut addrs = Vec::new();
    for ip in &config.listen_ip {
        let addr = SocketAddr::new(*ip, config.listen_port);
        let (listener, local) = crate::server::bind(addr, "approval_page", tls.is_some()).await?;
        addrs.push(local);
        tasks.spawn(server::serve_listener(
            listener,
            Listener {
                app: app.clone(),
                routes: Routes::ApprovalPage(page.clone()),
                tls: tls.clone(),
                allowed: peers.watch(),
                shutdown: cancel.clone(),
                slots: slots.clone(),
            },
        ));
    }
    Ok(addrs)
}

/// Answers one request of the page (called by the shared connection code).
pub(crate) async fn handle(
    page: &Page,
    request: Request<Incoming>,
    peer: IpAddr,
) -> Response<Body> {
    routes::handle(page, request, peer)
        .await
        .map(BodyExt::boxed)
}
