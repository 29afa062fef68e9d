//! The HTTP server: listeners on `ListenIP:ListenPort`, `AllowedIP` checked at accept,
//! optional TLS, hyper-util connections (HTTP/1.1 and HTTP/2), and graceful shutdown that
//! lets in-flight calls finish.

pub(crate) mod body;
mod conn;
mod direct;
mod direct_parse;
mod drain;
mod gate;
pub mod guard;
pub mod hangup;
pub(crate) mod in_flight;
pub(crate) mod listeners;
pub(crate) mod malformed;
mod method;
pub mod peers;
mod ready;
pub(crate) mod refusal;
pub(crate) mod rejected;
pub mod routes;
mod sessions;
mod status;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::App;
use crate::config::{SessionMode, TlsAccept};
use crate::list_changed::ListChanged;
use crate::mcp::GuardHandler;
use crate::policy::DEFAULT_POLL_INTERVAL;
use crate::server::body::{BODY_BUDGET_BYTES, BodyBudget, MAX_REQUEST_BODY_BYTES};
use crate::server::conn::ConnContext;
pub(crate) use crate::server::conn::Routes;
use crate::server::direct::Direct;
use crate::server::gate::McpGate;
use crate::server::guard::AllowedHosts;
use crate::server::listeners::Listeners;
use crate::server::ready::Readiness;
use crate::server::routes::{McpEndpoint, McpService};
use crate::server::sessions::SessionOwners;
use crate::server::tls::ServerCertificate;

/// How long shutdown waits for in-flight requests at least.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// How long shutdown waits for in-flight requests: a write may wait up to `Timeout` for a
/// Zabbix slot, then look its targets up and send itself, each within `Timeout`; cut short,
/// it would be logged as stopped with its outcome unknown.
pub(crate) fn shutdown_grace(timeout: Duration) -> Duration {
    SHUTDOWN_GRACE.max(timeout.saturating_mul(3))
}

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
    /// The status listeners (empty when `/metrics` is on the MCP listener).
    status_addrs: Vec<SocketAddr>,
    /// Stops the accept loops; connections then drain.
    cancel: CancellationToken,
    /// Ends rmcp's sessions, only after the connections drained, so in-flight calls finish.
    mcp_cancel: CancellationToken,
    tasks: JoinSet<()>,
    policy_watcher: tokio::task::JoinHandle<()>,
    /// Reloads the TLS certificate when its files change or on SIGHUP (`TLSAccept=cert`).
    certificate_watcher: Option<tokio::task::JoinHandle<()>>,
    /// Reloads the CAs trusted toward Zabbix when `TLSCAFile` changes or on SIGHUP.
    trust_watcher: Option<tokio::task::JoinHandle<()>>,
    /// Tells sessions and listen streams that the tool list changed.
    announcer: tokio::task::JoinHandle<()>,
    /// The listen streams open, which shutdown ends before rmcp's sessions.
    listeners: Arc<Listeners>,
    /// Closes the sessions of tokens Zabbix no longer accepts (`SessionMode=stateful`).
    session_sweep: Option<tokio::task::JoinHandle<()>>,
    readiness_task: tokio::task::JoinHandle<()>,
    app: Arc<App>,
}

impl Server {
    /// Binds every listen address and starts serving.
    pub async fn start(app: Arc<App>) -> Result<Server, ServerError> {
        let certificate = match app.config.tls_accept {
            TlsAccept::Unencrypted => None,
            TlsAccept::Cert => match (&app.config.tls_cert_file, &app.config.tls_key_file) {
                (Some(cert), Some(key)) => Some(Arc::new(ServerCertificate::load(cert, key)?)),
                _ => return Err(ServerError::TlsFilesMissing),
            },
        };
        let tls = certificate.clone().map(tls::acceptor).transpose()?;
        let cancel = CancellationToken::new();
        let mcp_cancel = CancellationToken::new();
        let (readiness, readiness_task) = Readiness::spawn(app.clone(), mcp_cancel.clone());
        // One pool of connection slots for every listen address.
        let slots = Arc::new(Semaphore::new(app.config.limits.max_connections));
        let mut endpoint = mcp_endpoint(&app, mcp_cancel.clone(), readiness);
        endpoint.connection_slots = Some(slots.clone());
        endpoint.certificate = certificate.clone();
        let mut addrs = Vec::new();
        let mut tasks = JoinSet::new();
        for ip in &app.config.listen_ip {
            let addr = SocketAddr::new(*ip, app.config.listen_port);
            let (listener, local) = bind(addr, "mcp", tls.is_some()).await?;
            addrs.push(local);
            tasks.spawn(serve_listener(
                listener,
                Listener {
                    app: app.clone(),
                    routes: Routes::Mcp(Arc::new(endpoint.clone())),
                    tls: tls.clone(),
                    allowed: app.allowed_peers.watch(),
                    shutdown: cancel.clone(),
                    slots: slots.clone(),
                },
            ));
        }
        let approval_addrs =
            crate::approval_page::start(&app, tls.clone(), cancel.clone(), &mut tasks).await?;
        let status_addrs = status::start(&app, &endpoint, cancel.clone(), &mut tasks).await?;
        let policy_watcher = app.policy.spawn_watcher(DEFAULT_POLL_INTERVAL);
        let certificate_watcher = certificate.map(|c| c.spawn_watcher(DEFAULT_POLL_INTERVAL));
        let trust_watcher = app.zabbix.spawn_trust_watcher(DEFAULT_POLL_INTERVAL);
        let announcer = ListChanged::spawn(&app);
        let listeners = endpoint.listeners.clone();
        let session_sweep = endpoint
            .sessions
            .as_ref()
            .map(|owners| owners.spawn_revocation_sweep(app.clone()));
        Ok(Server {
            addrs,
            approval_addrs,
            status_addrs,
            cancel,
            mcp_cancel,
            tasks,
            policy_watcher,
            certificate_watcher,
            trust_watcher,
            announcer,
            listeners,
            session_sweep,
            readiness_task,
            app,
        })
    }

    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    pub fn approval_addrs(&self) -> &[SocketAddr] {
        &self.approval_addrs
    }

    /// Where `/metrics`, `/healthz` and `/readyz` are served apart from MCP, if configured.
    pub fn status_addrs(&self) -> &[SocketAddr] {
        &self.status_addrs
    }

    /// Stops accepting, lets in-flight requests finish (bounded), then returns.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        // Listen streams would hold their connections to the end of the grace period: they
        // end now, each with its final result.
        self.app.list_changed.close();
        // Calls in flight finish and listen streams send their last message first; then
        // rmcp's sessions end, which closes the streams stateful clients keep open, and
        // the connections drain.
        let deadline = tokio::time::Instant::now() + shutdown_grace(self.app.config.timeout);
        while (self.app.in_flight.count() > 0 || self.listeners.open() > 0)
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.mcp_cancel.cancel();
        while self.tasks.join_next().await.is_some() {}
        self.policy_watcher.abort();
        self.announcer.abort();
        for watcher in [
            &self.certificate_watcher,
            &self.trust_watcher,
            &self.session_sweep,
        ]
        .into_iter()
        .flatten()
        {
            watcher.abort();
        }
        self.readiness_task.abort();
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

/// The HTTP router without a socket: one request in, one response out (fuzzing, tests).
/// Readiness is refreshed in the background as in a server.
pub struct Router {
    app: Arc<App>,
    endpoint: McpEndpoint,
    readiness_task: tokio::task::JoinHandle<()>,
}

impl Router {
    /// Must be called inside a Tokio runtime.
    pub fn new(app: Arc<App>) -> Router {
        let cancel = CancellationToken::new();
        let (readiness, readiness_task) = Readiness::spawn(app.clone(), cancel.clone());
        let endpoint = mcp_endpoint(&app, cancel, readiness);
        Router {
            app,
            endpoint,
            readiness_task,
        }
    }

    pub async fn handle(
        &self,
        request: http::Request<http_body_util::Full<bytes::Bytes>>,
        peer: std::net::IpAddr,
    ) -> http::Response<routes::Body> {
        routes::handle(self.app.clone(), &self.endpoint, request, peer, None).await
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.readiness_task.abort();
    }
}

/// Binds one listen address and logs it; `listener` names which (`mcp`, `approval_page`).
pub(crate) async fn bind(
    addr: SocketAddr,
    listener: &'static str,
    tls: bool,
) -> Result<(TcpListener, SocketAddr), ServerError> {
    let bound = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let local = bound.local_addr().unwrap_or(addr);
    tracing::info!(
        target: crate::telemetry::LIFECYCLE_TARGET,
        address = %local,
        listener,
        tls,
        "listening"
    );
    Ok((bound, local))
}

fn mcp_endpoint(app: &Arc<App>, cancel: CancellationToken, readiness: Readiness) -> McpEndpoint {
    let hosts = AllowedHosts::new(&app.config.listen_ip, &app.config.allowed_hosts);
    let base = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.names().to_vec())
        .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES)
        .with_cancellation_token(cancel.clone());
    let handler_app = app.clone();
    let factory = move || Ok(GuardHandler::new(handler_app.clone()));
    let direct = (app.config.session_mode == SessionMode::Stateless)
        .then(|| Arc::new(Direct::new(app.clone(), &cancel)));
    let (service, sessions) = match app.config.session_mode {
        SessionMode::Stateless => (
            McpService::Stateless(StreamableHttpService::new(
                factory,
                Arc::new(NeverSessionManager::default()),
                base.with_legacy_session_mode(false)
                    .with_json_response(true),
            )),
            None,
        ),
        SessionMode::Stateful => {
            let mut manager = LocalSessionManager::default();
            manager.session_config.keep_alive = Some(app.config.limits.session_idle);
            let manager = Arc::new(manager);
            let owners =
                SessionOwners::new(manager.clone(), &app.config.limits, app.metrics.clone());
            (
                McpService::Stateful(StreamableHttpService::new(factory, manager, base)),
                Some(Arc::new(owners)),
            )
        }
    };
    // Requests outside sessions. The stateful mode keeps its sessions' requests in rmcp's
    // sessions (an elicitation waits there for minutes), bounded by `MaxSessions` instead.
    let gate = Arc::new(McpGate::new(
        app.config.limits.max_zabbix_concurrency,
        app.config.timeout,
    ));
    McpEndpoint {
        service,
        hosts: Arc::new(hosts),
        readiness,
        sessions,
        connection_slots: None,
        certificate: None,
        gate,
        direct,
        bodies: Arc::new(BodyBudget::new(BODY_BUDGET_BYTES)),
        listeners: Listeners::new(
            app.config.limits.max_sessions,
            app.config.limits.max_sessions_per_token,
        ),
    }
}

/// One listener's accept loop and what its connections share: the MCP listener and the
/// approval page's get the same limits (`Limits`), each kind its own `MaxConnections` pool.
pub(crate) struct Listener {
    pub app: Arc<App>,
    pub routes: Routes,
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Peers allowed to connect (`AllowedIP`, `ApprovalAllowedIP`), as reloads change them.
    pub allowed: peers::PeerWatch,
    /// Stops accepting; connections then drain.
    pub shutdown: CancellationToken,
    /// The `MaxConnections` slots this listener draws from.
    pub slots: Arc<Semaphore>,
}

/// Accepts until shutdown, then waits (bounded) for the connections to finish.
pub(crate) async fn serve_listener(listener: TcpListener, spec: Listener) {
    let Listener {
        app,
        routes,
        tls,
        allowed,
        shutdown,
        slots,
    } = spec;
    let name = routes.name();
    let ctx = ConnContext {
        app: app.clone(),
        routes,
        tls,
        peers: allowed.clone(),
        shutdown,
        tracker: TaskTracker::new(),
    };
    loop {
        let (stream, peer) = tokio::select! {
            () = ctx.shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(listener = name, %error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // A listener on `::` takes IPv4 connections as `::ffff:a.b.c.d`: the address is the
        // IPv4 one from here on (AllowedIP, the lockout, logs, the policy's
        // `client.address`), so a rule written for `10.1.2.3` also sees it as such.
        let peer = peer.ip().to_canonical();
        if !allowed.admits(peer) {
            tracing::info!(listener = name, client.address = %peer, "connection refused: not an allowed IP");
            drop(stream);
            continue;
        }
        // Over MaxConnections the connection is closed at once: a refused client retries,
        // while a queued one would hold a socket and a kernel backlog slot for nothing.
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            app.refused_connections.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(listener = name, client.address = %peer, "connection refused: MaxConnections reached");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        conn::spawn(stream, peer, &ctx, permit);
    }
    drop(listener);
    ctx.tracker.close();
    if tokio::time::timeout(shutdown_grace(app.config.timeout), ctx.tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("in-flight requests did not finish in time");
    }
}
