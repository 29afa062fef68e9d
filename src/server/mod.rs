//! The HTTP server: listeners on `ListenIP:ListenPort`, `AllowedIP` checked at accept,
//! optional TLS, hyper-util connections (HTTP/1.1 and HTTP/2), and graceful shutdown that
//! lets in-flight calls finish.

pub mod guard;
pub mod routes;
pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::config::{SessionMode, TlsAccept};
use crate::mcp::GuardHandler;
use crate::policy::DEFAULT_POLL_INTERVAL;
use crate::server::guard::AllowedHosts;
use crate::server::routes::{McpEndpoint, McpService};

/// Largest MCP request body accepted (tool arguments are small).
const MAX_REQUEST_BODY_BYTES: usize = 1024 * 1024;
/// A client must send its request headers within this time.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for in-flight requests.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("TLSAccept=cert needs TLSCertFile and TLSKeyFile")]
    TlsFilesMissing,
}

/// A running server.
pub struct Server {
    addrs: Vec<SocketAddr>,
    /// The approval page's listeners (empty when it is off).
    approval_addrs: Vec<SocketAddr>,
    /// Stops the accept loops; connections then drain.
    cancel: CancellationToken,
    /// Ends rmcp's sessions, only after the connections drained, so in-flight calls finish.
    mcp_cancel: CancellationToken,
    tasks: JoinSet<()>,
    policy_watcher: tokio::task::JoinHandle<()>,
    app: Arc<App>,
}

impl Server {
    /// Binds every listen address and starts serving.
    pub async fn start(app: Arc<App>) -> Result<Server, ServerError> {
        let tls = match app.config.tls_accept {
            TlsAccept::Unencrypted => None,
            TlsAccept::Cert => match (&app.config.tls_cert_file, &app.config.tls_key_file) {
                (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
                _ => return Err(ServerError::TlsFilesMissing),
            },
        };
        let cancel = CancellationToken::new();
        let mcp_cancel = CancellationToken::new();
        let endpoint = mcp_endpoint(&app, mcp_cancel.clone());
        let mut addrs = Vec::new();
        let mut tasks = JoinSet::new();
        for ip in &app.config.listen_ip {
            let addr = SocketAddr::new(*ip, app.config.listen_port);
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| ServerError::Bind { addr, source })?;
            let local = listener.local_addr().unwrap_or(addr);
            tracing::info!(
                target: crate::telemetry::LIFECYCLE_TARGET,
                address = %local,
                tls = tls.is_some(),
                "listening"
            );
            addrs.push(local);
            tasks.spawn(accept_loop(
                listener,
                app.clone(),
                endpoint.clone(),
                tls.clone(),
                cancel.clone(),
            ));
        }
        let approval_addrs =
            crate::approval_page::start(&app, tls.clone(), cancel.clone(), &mut tasks).await?;
        let policy_watcher = app.policy.spawn_watcher(DEFAULT_POLL_INTERVAL);
        Ok(Server {
            addrs,
            approval_addrs,
            cancel,
            mcp_cancel,
            tasks,
            policy_watcher,
            app,
        })
    }

    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    pub fn approval_addrs(&self) -> &[SocketAddr] {
        &self.approval_addrs
    }

    /// Stops accepting, lets in-flight requests finish (bounded), then returns.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        // Calls in flight finish first; then rmcp's sessions end, which closes the streams
        // stateful clients keep open, and the connections drain.
        let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
        while self.app.in_flight.count() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.mcp_cancel.cancel();
        while self.tasks.join_next().await.is_some() {}
        self.policy_watcher.abort();
        // Every decision of the requests above is queued: write them before returning.
        let log = self.app.decisions.clone();
        let flushed = tokio::task::spawn_blocking(move || log.flush()).await;
        if !matches!(flushed, Ok(true)) {
            tracing::error!("decision log not flushed at shutdown; lines may be lost");
        }
        let lists = &self.app.list_decisions;
        tracing::info!(
            target: crate::telemetry::LIFECYCLE_TARGET,
            dropped = self.app.decisions.dropped(),
            write_errors = self.app.decisions.write_errors(),
            list_sets_decided = lists.evaluated(),
            list_sets_reused = lists.reused(),
            "decision log flushed"
        );
    }

    /// The app this server serves (tests read its counters).
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Serves until `signal` completes, then shuts down gracefully.
    pub async fn run_until(self, signal: impl std::future::Future<Output = ()>) {
        signal.await;
        tracing::info!(target: crate::telemetry::LIFECYCLE_TARGET, "shutting down");
        self.shutdown().await;
    }
}

fn mcp_endpoint(app: &Arc<App>, cancel: CancellationToken) -> McpEndpoint {
    let hosts = AllowedHosts::new(&app.config.listen_ip, &app.config.allowed_hosts);
    let base = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.names().to_vec())
        .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES)
        .with_cancellation_token(cancel);
    let handler_app = app.clone();
    let factory = move || Ok(GuardHandler::new(handler_app.clone()));
    let service = match app.config.session_mode {
        SessionMode::Stateless => McpService::Stateless(StreamableHttpService::new(
            factory,
            Arc::new(NeverSessionManager::default()),
            base.with_legacy_session_mode(false)
                .with_json_response(true),
        )),
        SessionMode::Stateful => McpService::Stateful(StreamableHttpService::new(
            factory,
            Arc::new(LocalSessionManager::default()),
            base,
        )),
    };
    McpEndpoint {
        service,
        hosts: Arc::new(hosts),
    }
}

async fn accept_loop(
    listener: TcpListener,
    app: Arc<App>,
    endpoint: McpEndpoint,
    tls: Option<TlsAcceptor>,
    cancel: CancellationToken,
) {
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        if !guard::peer_allowed(&app.config.allowed_ip, peer.ip()) {
            tracing::info!(client.address = %peer.ip(), "connection refused: not in AllowedIP");
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        spawn_connection(stream, peer.ip(), &app, &endpoint, tls.clone(), &graceful);
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("in-flight requests did not finish in time");
    }
}

fn spawn_connection(
    stream: TcpStream,
    peer: IpAddr,
    app: &Arc<App>,
    endpoint: &McpEndpoint,
    tls: Option<TlsAcceptor>,
    graceful: &GracefulShutdown,
) {
    let app = app.clone();
    let endpoint = endpoint.clone();
    let service = service_fn(move |request| {
        let app = app.clone();
        let endpoint = endpoint.clone();
        async move {
            Ok::<_, std::convert::Infallible>(routes::handle(app, endpoint, request, peer).await)
        }
    });
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let watcher = graceful.watcher();
    tokio::spawn(async move {
        let result = match tls {
            None => {
                let connection = builder.serve_connection(TokioIo::new(stream), service);
                watcher.watch(connection.into_owned()).await
            }
            Some(acceptor) => match acceptor.accept(stream).await {
                Ok(tls_stream) => {
                    let connection = builder.serve_connection(TokioIo::new(tls_stream), service);
                    watcher.watch(connection.into_owned()).await
                }
                Err(error) => {
                    tracing::info!(client.address = %peer, %error, "TLS handshake failed");
                    return;
                }
            },
        };
        if let Err(error) = result {
            tracing::debug!(client.address = %peer, %error, "connection ended with an error");
        }
    });
}
