//! The connections toward Zabbix's frontend, made, kept and reused by the client itself on
//! hyper's connection API: plain HTTP/1.1, or TLS with HTTP/2 when the frontend's ALPN
//! picks it. The client has one URL, so one set of idle connections.
//!
//! - Reuse: an HTTP/1.1 connection goes back to the idle list once its answer is read
//!   whole, unless the answer closes it (`Connection: close`, or HTTP/1.0 without
//!   keep-alive). The most recently used is taken first, after hyper says it is still
//!   ready; at most [`MAX_IDLE`] are kept, none used again after [`IDLE_TIMEOUT`]. An
//!   HTTP/2 connection is shared by every call while it is open, and pinged every
//!   `Timeout` (closed when a ping goes unanswered that long). None is reused once
//!   `TLSCAFile` was loaded anew since it was made, nor after a call timed out
//!   ([`Connections::close_idle`]), nor once older than `MaxZabbixConnectionAge`: the
//!   next connection looks the frontend's name up again, so a name moved to another
//!   address (blue/green, a failover) is followed. A call in flight keeps its connection.
//! - Resending: hyper hands a request back when the connection closed before any of it
//!   was written. Such a read is sent again on a new connection if the closed one was a
//!   reused one (a frontend closing an idle connection as it is taken); a write never is,
//!   so a write reaches Zabbix at most once. A write goes on a new HTTP/1.1 connection,
//!   never an idle one, so a frontend's keep-alive close cannot race it (HTTP/2's shared
//!   connection carries writes too). An HTTP/2 stream the frontend refused unprocessed
//!   (above the last-stream-id of its GOAWAY, or reset with REFUSED_STREAM: RFC 9113
//!   §6.8, §8.7) is sent again once on a new connection, a write too: the frontend said
//!   none of it was processed. A stream at or below that id may have been, and is not.
//! - Why not hyper-util's pooled client: against a frontend that closes every connection
//!   (the lab's `php -S`), its pool, checkout and connect race were about 600 of the
//!   5,700 cache lines of code a call ran (docs/performance-log.md), and its connector asked
//!   the kernel for both socket addresses of every connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONNECTION, CONTENT_TYPE, HOST, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri, Version};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::client::conn::{TrySendError, http1, http2};
use hyper::rt::{Read, Write};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::zabbix::trust::ZabbixTrust;

/// Idle HTTP/1.1 connections kept for reuse.
pub(crate) const MAX_IDLE: usize = 64;
/// An idle connection older than this is closed, not reused (frontends close theirs
/// after a minute or so: nginx's `keepalive_timeout` is 75 s).
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether a request a closed connection handed back unsent may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resend {
    /// A read: sent again on a new connection.
    IfUnsent,
    /// A write: never sent twice; the caller gets the error.
    Never,
}

/// What went wrong on the way to an answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectionError {
    #[error("connecting to {address}")]
    Connect {
        address: String,
        source: std::io::Error,
    },
    #[error("TLS handshake with {address}")]
    Tls {
        address: String,
        source: std::io::Error,
    },
    #[error("HTTP handshake with {address}")]
    Handshake {
        address: String,
        source: hyper::Error,
    },
    /// The request went out (or partly) before the connection failed.
    #[error("sending the request")]
    Send(#[source] hyper::Error),
    /// The connection failed before any of the request was written.
    #[error("sending the request (nothing of it was written)")]
    NotSent(#[source] hyper::Error),
    #[error("reading the response")]
    Read(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The answer grew past the limit; the read stopped there.
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
}

/// The frontend's connections: how to make one, and the idle ones.
pub(crate) struct Connections {
    target: Target,
    /// TLS for `https` URLs, with the name the certificate must carry.
    tls: Option<(Arc<ZabbixTrust>, ServerName<'static>)>,
    /// How often an HTTP/2 connection is pinged, idle or not, and how long a ping may go
    /// unanswered before the connection is closed (`Timeout`).
    ping: Duration,
    /// `MaxZabbixConnectionAge`: no connection older than this is handed a call.
    max_age: Duration,
    idle: Mutex<Idle>,
}

/// Where requests go, in the forms each protocol needs.
struct Target {
    host: String,
    port: u16,
    /// `host:port`, for messages.
    address: String,
    /// HTTP/1.1's `Host` header: the URL's authority.
    authority: HeaderValue,
    /// HTTP/1.1's request target: the path and query.
    origin: Uri,
    /// HTTP/2's: the whole URL (scheme and authority become pseudo-headers).
    absolute: Uri,
}

/// The connections kept for reuse, each with its [`Made`] (HTTP/1.1's also with when it
/// went idle).
#[derive(Default)]
struct Idle {
    http1: Vec<(http1::SendRequest<Full<Bytes>>, Instant, Made)>,
    http2: Option<(http2::SendRequest<Full<Bytes>>, Made)>,
}

/// When a connection was made, and under which load of the trust.
#[derive(Debug, Clone, Copy)]
struct Made {
    trusted: Trusted,
    at: Instant,
}

/// The load of `TLSCAFile` a connection's certificate was verified under
/// ([`ZabbixTrust::generation`]; 0 for `http`). A connection of an older load is not reused:
/// a CA taken out of the file is trusted no longer on connections it let in.
type Trusted = u64;

/// One connection's request side.
enum Sender {
    Http1(http1::SendRequest<Full<Bytes>>),
    Http2(http2::SendRequest<Full<Bytes>>),
}

/// Why a URL cannot be reached (checked once, when the client is built).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TargetError {
    #[error("the URL has no host")]
    NoHost,
    #[error("{0:?} is not a name a TLS certificate can carry")]
    ServerName(String),
    #[error("the URL's host and port are not a valid Host header")]
    Authority,
    #[error("the URL's path is not a valid request target")]
    Path,
}

impl Connections {
    /// Connections to `url` (`http` or `https`, checked by the caller); `trust` is used
    /// for `https` only; an HTTP/2 connection is pinged every `ping`.
    pub(crate) fn new(
        url: &Uri,
        trust: Arc<ZabbixTrust>,
        ping: Duration,
        max_age: Duration,
    ) -> Result<Self, TargetError> {
        let https = url.scheme_str() == Some("https");
        let host = url
            .host()
            .ok_or(TargetError::NoHost)?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = url.port_u16().unwrap_or(if https { 443 } else { 80 });
        // The authority without any user info: `Host` never carries credentials.
        let authority = match (url.host(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => return Err(TargetError::NoHost),
        };
        let origin: Uri = url
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .map_err(|_| TargetError::Path)?;
        let absolute = Uri::builder()
            .scheme(if https { "https" } else { "http" })
            .authority(authority.as_str())
            .path_and_query(origin.to_string())
            .build()
            .map_err(|_| TargetError::Authority)?;
        let tls = if https {
            let name = ServerName::try_from(host.clone())
                .map_err(|_| TargetError::ServerName(host.clone()))?;
            Some((trust, name))
        } else {
            None
        };
        Ok(Self {
            target: Target {
                address: format!("{host}:{port}"),
                authority: HeaderValue::from_str(&authority).map_err(|_| TargetError::Authority)?,
                host,
                port,
                origin,
                absolute,
            },
            tls,
            ping,
            max_age,
            idle: Mutex::new(Idle::default()),
        })
    }

    /// POSTs `body` as JSON-RPC (with `authorization`, if any) and reads the whole answer,
    /// at most `max_bytes` of it: the status and the body. `sending` is set once the request
    /// is handed to a connection: until then nothing of it can have been written, also if
    /// this is dropped (a timeout) while connecting.
    pub(crate) async fn post(
        &self,
        body: Bytes,
        authorization: Option<HeaderValue>,
        resend: Resend,
        max_bytes: usize,
        sending: &AtomicBool,
    ) -> Result<(StatusCode, Bytes), ConnectionError> {
        let mut reused = self.checkout(resend).await;
        let mut refused_once = false;
        loop {
            let (mut sender, was_reused, made) = match reused.take() {
                Some((sender, made)) => (sender, true, made),
                None => {
                    let (sender, made) = self.connect().await?;
                    (sender, false, made)
                }
            };
            let request = self.request(&sender, body.clone(), authorization.clone());
            sending.store(true, Ordering::Release);
            let response = match sender.try_send(request).await {
                Ok(response) => response,
                // Nothing of it was written: a new connection may carry it.
                Err(error)
                    if was_reused && resend == Resend::IfUnsent && error.message().is_some() =>
                {
                    tracing::debug!(error = %error.into_error(), "reused Zabbix connection closed; sending again");
                    continue;
                }
                // hyper hands the request back when it wrote none of it.
                Err(error) if error.message().is_some() => {
                    return Err(ConnectionError::NotSent(error.into_error()));
                }
                Err(error) => {
                    let error = error.into_error();
                    if !refused_once && refused_unprocessed(&error) {
                        refused_once = true;
                        tracing::debug!(%error, "Zabbix refused the HTTP/2 stream unprocessed; sending again on a new connection");
                        continue;
                    }
                    return Err(ConnectionError::Send(error));
                }
            };
            let keep = keeps_open(&response);
            let status = response.status();
            let body = Limited::new(response.into_body(), max_bytes)
                .collect()
                .await
                .map_err(|error| {
                    if error.is::<LengthLimitError>() {
                        ConnectionError::TooLarge(max_bytes)
                    } else {
                        ConnectionError::Read(error)
                    }
                })?
                .to_bytes();
            if keep {
                self.checkin(sender, made);
            }
            return Ok((status, body));
        }
    }

    /// The request in the form `sender`'s protocol wants.
    fn request(
        &self,
        sender: &Sender,
        body: Bytes,
        authorization: Option<HeaderValue>,
    ) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        let headers = request.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json-rpc"),
        );
        if let Some(value) = authorization {
            headers.insert(AUTHORIZATION, value);
        }
        match sender {
            Sender::Http1(_) => {
                headers.insert(HOST, self.target.authority.clone());
                *request.uri_mut() = self.target.origin.clone();
            }
            Sender::Http2(_) => {
                *request.uri_mut() = self.target.absolute.clone();
                *request.version_mut() = Version::HTTP_2;
            }
        }
        request
    }

    /// An idle connection that is still open and verified under the trust loaded now, most
    /// recently used first. A write takes no idle HTTP/1.1 one: a frontend closing it as
    /// the write arrives (Apache at `KeepAliveTimeout`) takes the write's bytes unread, and
    /// nothing tells that from a write applied before its answer was lost, so it would be
    /// reported as possibly applied. A new connection is not closed for idling.
    async fn checkout(&self, resend: Resend) -> Option<(Sender, Made)> {
        loop {
            let trusted = self.trusted();
            let candidate = {
                let mut idle = self.lock();
                match &idle.http2 {
                    Some((shared, made)) if !shared.is_closed() && self.reusable(made, trusted) => {
                        Some((Sender::Http2(shared.clone()), *made))
                    }
                    _ => {
                        idle.http2 = None;
                        let fresh_since = Instant::now().checked_sub(IDLE_TIMEOUT);
                        // Expired ones are dropped, which closes them.
                        idle.http1.retain(|(sender, since, made)| {
                            !sender.is_closed()
                                && Some(*since) > fresh_since
                                && self.reusable(made, trusted)
                        });
                        match resend {
                            Resend::Never => None,
                            Resend::IfUnsent => idle
                                .http1
                                .pop()
                                .map(|(sender, _, made)| (Sender::Http1(sender), made)),
                        }
                    }
                }
            };
            let (mut sender, made) = candidate?;
            if sender.ready().await {
                return Some((sender, made));
            }
            if let Sender::Http2(_) = sender {
                // Closed under us: the next call makes a new one.
                self.lock().http2 = None;
            }
        }
    }

    /// Closes every idle connection (dropped, which closes them); those in use are not
    /// given back while this holds.
    pub(crate) fn close_idle(&self) {
        let mut idle = self.lock();
        idle.http1.clear();
        idle.http2 = None;
    }

    /// Whether a connection `made` may carry another call: verified under the trust loaded
    /// now, and younger than `MaxZabbixConnectionAge`.
    fn reusable(&self, made: &Made, trusted: Trusted) -> bool {
        made.trusted == trusted && made.at.elapsed() < self.max_age
    }

    fn checkin(&self, sender: Sender, made: Made) {
        match sender {
            Sender::Http1(sender) => {
                let mut idle = self.lock();
                if idle.http1.len() < MAX_IDLE && made.at.elapsed() < self.max_age {
                    idle.http1.push((sender, Instant::now(), made));
                }
            }
            // Shared while open: kept from its handshake on.
            Sender::Http2(_) => {}
        }
    }

    /// `host:port`, as messages name it.
    pub(crate) fn address(&self) -> &str {
        &self.target.address
    }

    /// The trust a connection made now is verified under.
    fn trusted(&self) -> Trusted {
        self.tls.as_ref().map_or(0, |(trust, _)| trust.generation())
    }

    /// A new connection, HTTP/2 if TLS's ALPN chose it, and the trust it was verified under.
    async fn connect(&self) -> Result<(Sender, Made), ConnectionError> {
        // Read before the connector is: a reload in between leaves it older, never newer.
        let made = Made {
            trusted: self.trusted(),
            at: Instant::now(),
        };
        let address = &self.target.address;
        let tcp = TcpStream::connect((self.target.host.as_str(), self.target.port))
            .await
            .map_err(|source| ConnectionError::Connect {
                address: address.clone(),
                source,
            })?;
        // Requests are written whole: nothing to gain from Nagle's delay.
        let _ = tcp.set_nodelay(true);
        let sender = match &self.tls {
            None => self.http1(TokioIo::new(tcp)).await?,
            // Boxed: a TLS handshake's state is kBs, which every call's future would
            // otherwise carry (and copy) even when the frontend speaks plain HTTP.
            Some((trust, name)) => {
                Box::pin(self.connect_tls(tcp, trust.connector(), name, made)).await?
            }
        };
        Ok((sender, made))
    }

    async fn connect_tls(
        &self,
        tcp: TcpStream,
        connector: TlsConnector,
        name: &ServerName<'static>,
        made: Made,
    ) -> Result<Sender, ConnectionError> {
        let address = &self.target.address;
        let tls = connector
            .connect(name.clone(), tcp)
            .await
            .map_err(|source| ConnectionError::Tls {
                address: address.clone(),
                source,
            })?;
        if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
            // Pinged while idle too: one that went silent (a path lost without a reset) is
            // closed before a call is sent on it, rather than found out by that call's
            // timeout (a write's then reported as possibly applied).
            let (sender, connection) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .keep_alive_interval(self.ping)
                .keep_alive_timeout(self.ping)
                .keep_alive_while_idle(true)
                .handshake(TokioIo::new(tls))
                .await
                .map_err(|source| self.handshake_error(source))?;
            tokio::spawn(drive(connection));
            self.lock().http2 = Some((sender.clone(), made));
            return Ok(Sender::Http2(sender));
        }
        self.http1(TokioIo::new(tls)).await
    }

    async fn http1<T>(&self, io: T) -> Result<Sender, ConnectionError>
    where
        T: Read + Write + Unpin + Send + 'static,
    {
        let (sender, connection) = http1::handshake(io)
            .await
            .map_err(|source| self.handshake_error(source))?;
        tokio::spawn(drive(connection));
        Ok(Sender::Http1(sender))
    }

    fn handshake_error(&self, source: hyper::Error) -> ConnectionError {
        ConnectionError::Handshake {
            address: self.target.address.clone(),
            source,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Idle> {
        // The list holds no invariant a panic could break half way.
        self.idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Sender {
    /// Sends on this connection; hyper hands the request back if none of it was written.
    async fn try_send(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, TrySendError<Request<Full<Bytes>>>> {
        match self {
            Sender::Http1(sender) => sender.try_send_request(request).await,
            Sender::Http2(sender) => sender.try_send_request(request).await,
        }
    }

    /// Whether the connection can take a request now (false: it closed).
    async fn ready(&mut self) -> bool {
        match self {
            Sender::Http1(sender) => sender.ready().await.is_ok(),
            Sender::Http2(sender) => sender.ready().await.is_ok(),
        }
    }
}

/// Runs a connection until it closes; its error, if any, reached the request too.
async fn drive<F: Future<Output = hyper::Result<()>>>(connection: F) {
    if let Err(error) = connection.await {
        tracing::debug!(%error, "Zabbix connection closed with an error");
    }
}

/// The frontend said it processed none of the request: an HTTP/2 stream above the
/// last-stream-id of the GOAWAY it sent (h2 fails only those streams with the GOAWAY's
/// error; the others end with the connection, as a broken pipe), or one it reset with
/// REFUSED_STREAM.
fn refused_unprocessed(error: &hyper::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(h2) = cause.downcast_ref::<h2::Error>() {
            return h2.is_remote()
                && (h2.is_go_away()
                    || (h2.is_reset() && h2.reason() == Some(h2::Reason::REFUSED_STREAM)));
        }
        source = cause.source();
    }
    false
}

/// Whether the connection stays open after this answer: HTTP/1.1 unless it says `close`,
/// HTTP/1.0 only if it says `keep-alive`.
fn keeps_open(response: &Response<Incoming>) -> bool {
    let says = |token: &str| {
        response
            .headers()
            .get_all(CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .any(|part| part.trim().eq_ignore_ascii_case(token))
    };
    match response.version() {
        Version::HTTP_11 => !says("close"),
        Version::HTTP_10 => says("keep-alive"),
        _ => false,
    }
}
