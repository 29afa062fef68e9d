//! The approval page: the sidecar's own listener (`ApprovalListenIP`/`ApprovalListenPort`,
//! `ApprovalAllowedIP`, TLS like the MCP listener) where a person signs in with their own
//! Zabbix credentials and approves or declines the calls waiting for `page` approval.
//! Server-rendered HTML, no JavaScript; a strict CSP, CSRF tokens on every form,
//! `HttpOnly`/`SameSite=Strict` session cookies (`Secure` under TLS).

mod decide;
mod html;
mod routes;
mod session;
mod summary;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::server::ServerError;
use crate::server::guard;

use session::Sessions;

/// State of the page shared by its connections.
pub(crate) struct Page {
    app: Arc<App>,
    sessions: Sessions,
    tls: bool,
}

/// Binds the approval listeners, if configured, and serves them until `cancel`.
pub async fn start(
    app: &Arc<App>,
    tls: Option<TlsAcceptor>,
    cancel: CancellationToken,
    tasks: &mut JoinSet<()>,
) -> Result<Vec<SocketAddr>, ServerError> {
    let Some(config) = app.config.approval_page.clone() else {
        return Ok(Vec::new());
    };
    let page = Arc::new(Page {
        app: app.clone(),
        sessions: Sessions::new(app),
        tls: tls.is_some(),
    });
    let mut addrs = Vec::new();
    for ip in &config.listen_ip {
        let addr = SocketAddr::new(*ip, config.listen_port);
        let (listener, local) = crate::server::bind(addr, "approval_page", tls.is_some()).await?;
        addrs.push(local);
        tasks.spawn(accept_loop(
            listener,
            page.clone(),
            config.allowed_ip.clone(),
            tls.clone(),
            cancel.clone(),
        ));
    }
    Ok(addrs)
}

async fn accept_loop(
    listener: TcpListener,
    page: Arc<Page>,
    allowed: Vec<ipnet::IpNet>,
    tls: Option<TlsAcceptor>,
    cancel: CancellationToken,
) {
    loop {
        let (stream, peer) = tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    tracing::warn!(%error, "approval page: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        if !guard::peer_allowed(&allowed, peer.ip()) {
            tracing::info!(client.address = %peer.ip(), "approval page: not in ApprovalAllowedIP");
            continue;
        }
        spawn_connection(stream, peer.ip(), page.clone(), tls.clone());
    }
}

fn spawn_connection(
    stream: tokio::net::TcpStream,
    peer: IpAddr,
    page: Arc<Page>,
    tls: Option<TlsAcceptor>,
) {
    let limits = &page.app.config.limits;
    let (handshake, header) = (limits.tls_handshake, limits.header);
    let service = service_fn(move |request| {
        let page = page.clone();
        async move { Ok::<_, std::convert::Infallible>(routes::handle(&page, request, peer).await) }
    });
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header);
    tokio::spawn(async move {
        let result = match tls {
            None => {
                builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await
            }
            Some(acceptor) => match tokio::time::timeout(handshake, acceptor.accept(stream))
                .await
                .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
            {
                Ok(tls_stream) => {
                    builder
                        .serve_connection(TokioIo::new(tls_stream), service)
                        .await
                }
                Err(error) => {
                    tracing::info!(client.address = %peer, %error, "approval page: TLS handshake failed");
                    return;
                }
            },
        };
        if let Err(error) = result {
            tracing::debug!(client.address = %peer, %error, "approval page: connection error");
        }
    });
}
