//! One client connection from accept to close, bounded at every stage: the connection
//! slot (`MaxConnections`), the TLS handshake (`TLSHandshakeTimeout`), the first request
//! head including the HTTP/1-or-2 detection (`HeaderTimeout`), the keep-alive gap between
//! requests on HTTP/1 and HTTP/2 and a peer that takes no answer (`IdleTimeout`), and dead HTTP/2 peers
//! (`HTTP2KeepAlive` pings). The request body is bounded in `routes` (`BodyTimeout`).
//! Both listeners, MCP and the approval page, serve their connections here.

use std::convert::Infallible;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::App;
use crate::approval_page::Page;
use crate::config::Limits;
use crate::server::peers::PeerWatch;
use crate::server::routes::{self, Body, McpEndpoint};

/// The most an HTTP/1 connection buffers (hyper's default is about 400 kB): request heads
/// are small and bodies stream through in chunks of at most this size, so a thousand
/// connections cannot hold hundreds of MB in buffers.
const MAX_CONN_BUFFER_BYTES: usize = 64 * 1024;

/// What every connection of one listener shares.
#[derive(Clone)]
pub(crate) struct ConnContext {
    pub app: Arc<App>,
    pub routes: Routes,
    pub tls: Option<TlsAcceptor>,
    /// The listener's admitted peers: a connection whose peer a reload leaves out closes.
    pub peers: PeerWatch,
    /// Server shutdown: connections finish their requests and close.
    pub shutdown: CancellationToken,
    pub tracker: TaskTracker,
}

/// Which requests a listener answers.
#[derive(Clone)]
pub(crate) enum Routes {
    /// `/mcp`, `/healthz`, `/readyz`.
    Mcp(Arc<McpEndpoint>),
    /// The approval page (`/approvals/...`).
    ApprovalPage(Arc<Page>),
}

impl Routes {
    /// The listener's name in logs (as `bind` logs it).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Routes::Mcp(_) => "mcp",
            Routes::ApprovalPage(_) => "approval_page",
        }
    }
}

/// What keeps one connection busy, and when it may next be closed for idleness; the
/// watchdog closes it when nothing is busy past the deadline.
#[derive(Clone, Copy, Debug)]
struct Activity {
    /// Requests whose handler runs, and response bodies waiting on their own source (a
    /// stream between events). A body with data ready that the peer does not take (an
    /// HTTP/2 window held at 0, a full socket) is not busy: its connection closes after
    /// `IdleTimeout` without progress, which frees the response it holds.
    active: usize,
    deadline: Instant,
}

/// The connection's [`Activity`], shared by its requests and response bodies.
#[derive(Clone)]
struct Busy {
    activity: Arc<watch::Sender<Activity>>,
    idle: Duration,
}

/// Counts a request as busy while its handler runs (dropped with its future).
struct HandlerGuard(Busy);

/// A response body that counts as busy only while it waits on its source.
pub(crate) struct TrackedBody {
    inner: Body,
    busy: Busy,
    waiting: bool,
}
/// How a connection ended, for the debug log.
#[derive(Debug, Clone, Copy)]
enum Closed {
    Done,
    Idle,
    Shutdown,
    /// A reload took the peer's address out of `AllowedIP` (or `ApprovalAllowedIP`).
    NoLongerAllowed,
}

impl Busy {
    fn begin(&self) {
        // No wake-up: a watchdog sleeping toward an old deadline looks again when it fires.
        self.activity.send_if_modified(|a| {
            a.active += 1;
            false
        });
    }

    fn end(&self) {
        let deadline = Instant::now() + self.idle;
        // Wakes the watchdog only when nothing is busy any more: it arms the deadline.
        self.activity.send_if_modified(|a| {
            a.active = a.active.saturating_sub(1);
            a.deadline = deadline;
            a.active == 0
        });
    }

    /// Data moved: the idle deadline starts again.
    fn progress(&self) {
        let deadline = Instant::now() + self.idle;
        self.activity.send_if_modified(|a| {
            a.deadline = deadline;
            false
        });
    }
}

impl Drop for HandlerGuard {
    fn drop(&mut self) {
        self.0.end();
    }
}

impl Drop for TrackedBody {
    fn drop(&mut self) {
        // A body dropped after a frame was taken has stamped its progress then.
        if self.waiting {
            self.busy.end();
        }
    }
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match (&polled, self.waiting) {
            (Poll::Pending, false) => {
                self.waiting = true;
                self.busy.begin();
            }
            (Poll::Pending, true) => {}
            (Poll::Ready(_), true) => {
                self.waiting = false;
                self.busy.end();
            }
            (Poll::Ready(_), false) => self.busy.progress(),
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Serves one accepted connection in its own task; `permit` is its `MaxConnections` slot.
pub(crate) fn spawn(
    stream: TcpStream,
    peer: IpAddr,
    ctx: &ConnContext,
    permit: OwnedSemaphorePermit,
) {
    let ctx = ctx.clone();
    let tracker = ctx.tracker.clone();
    // The address the peer connected to: status routes take it as a Host of ours.
    let local = stream.local_addr().ok().map(|addr| addr.ip());
    tracker.spawn(async move {
        let limits = ctx.app.config.limits.clone();
        let closed = match ctx.tls.clone() {
            None => serve(TokioIo::new(stream), peer, local, &ctx, &limits).await,
            Some(acceptor) => {
                match tokio::time::timeout(limits.tls_handshake, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => serve(TokioIo::new(tls), peer, local, &ctx, &limits).await,
                    Ok(Err(error)) => {
                        tracing::info!(client.address = %peer, %error, "TLS handshake failed");
                        Closed::Done
                    }
                    Err(_) => {
                        tracing::info!(client.address = %peer, "TLS handshake timed out");
                        Closed::Done
                    }
                }
            }
        };
        tracing::debug!(client.address = %peer, reason = ?closed, "connection closed");
        drop(permit);
    });
}

async fn serve<I>(
    io: TokioIo<I>,
    peer: IpAddr,
    local: Option<IpAddr>,
    ctx: &ConnContext,
    limits: &Limits,
) -> Closed
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (activity, mut watchdog) = watch::channel(Activity {
        active: 0,
        deadline: Instant::now() + limits.header,
    });
    let busy = Busy {
        activity: Arc::new(activity),
        idle: limits.idle,
    };
    let app = ctx.app.clone();
    let served = ctx.routes.clone();
    let service = service_fn(move |request| {
        busy.begin();
        let handler = HandlerGuard(busy.clone());
        let app = app.clone();
        let served = served.clone();
        // Boxed: hyper keeps one slot the size of this future for the whole life of a
        // connection; boxed, an idle keep-alive connection holds a pointer, not the state
        // of a whole request (several kB), and a request's state lives only while it runs.
        Box::pin(async move {
            let response = match served {
                Routes::Mcp(endpoint) => routes::handle(app, &endpoint, request, peer, local).await,
                Routes::ApprovalPage(page) => {
                    crate::approval_page::handle(&page, request, peer).await
                }
            };
            let busy = handler.0.clone();
            drop(handler);
            Ok::<_, Infallible>(response.map(|inner| TrackedBody {
                inner,
                busy,
                waiting: false,
            }))
        })
    });
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header)
        .max_buf_size(MAX_CONN_BUFFER_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.http2_keep_alive);
    if let Some(interval) = limits.http2_keep_alive {
        builder.http2().keep_alive_timeout(interval);
    }
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let mut closing: Option<(Closed, Instant)> = None;
    let grace = super::shutdown_grace(ctx.app.config.timeout);
    // Armed once per connection and again after each change: a future made anew on every
    // turn of this loop would register with the watch for every request.
    let mut peer_change = ctx.peers.clone().next_change();
    loop {
        let idle_deadline = {
            let a = *watchdog.borrow_and_update();
            (a.active == 0).then_some(a.deadline)
        };
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(client.address = %peer, %error, "connection ended with an error");
                }
                return closing.map_or(Closed::Done, |(why, _)| why);
            }
            changed = watchdog.changed(), if closing.is_none() => {
                // Every sender gone means hyper dropped the service: the connection ends.
                if changed.is_err() {
                    closing = Some((Closed::Done, Instant::now() + limits.header));
                }
            }
            () = sleep_until_some(idle_deadline), if closing.is_none() => {
                // Requests begin and data moves without waking this loop: look again.
                let now = *watchdog.borrow();
                if now.active == 0 && Instant::now() >= now.deadline {
                    connection.as_mut().graceful_shutdown();
                    closing = Some((Closed::Idle, Instant::now() + limits.header));
                }
            }
            changed = &mut peer_change, if closing.is_none() => {
                match changed {
                    Some(watch) if !watch.admits(peer) => {
                        tracing::info!(client.address = %peer, "connection closed: its address is no longer allowed");
                        connection.as_mut().graceful_shutdown();
                        closing = Some((Closed::NoLongerAllowed, Instant::now() + grace));
                    }
                    Some(watch) => peer_change = watch.next_change(),
                    // The list can no longer change.
                    None => peer_change = Box::pin(std::future::pending()),
                }
            }
            () = ctx.shutdown.cancelled(), if closing.is_none() => {
                connection.as_mut().graceful_shutdown();
                closing = Some((Closed::Shutdown, Instant::now() + grace));
            }
            () = sleep_until_some(closing.map(|(_, at)| at)) => {
                // A peer that does not let a graceful close finish is cut off.
                return closing.map_or(Closed::Done, |(why, _)| why);
            }
        }
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
