//! Reading a request's body: whole, within `BodyTimeout`, at most a size per request (1 MiB
//! for MCP, 16 kB for the approval page's forms), and within a budget each listener's
//! bodies share while they are received or wait for their answer.
//!
//! The budget is what bounds memory: the size is per request, and one HTTP/2 connection
//! carries up to 200 requests at once, each with a body that may trickle in until
//! `BodyTimeout`. Without a total, a caller with any valid token could hold MaxConnections
//! × 200 × 1 MiB. With it, a body that would take the total past the budget
//! ([`BODY_BUDGET_BYTES`] for MCP) is refused with 503 as its bytes arrive, and a body
//! announced larger than the size (`Content-Length`) is refused before any of it is read.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_ENCODING;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Body as HttpBody;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::server::drain::{self, DRAIN_MAX_BYTES};
use crate::server::refusal::Refused;
use crate::server::routes::{Body, closing};

/// Largest MCP request body accepted (tool arguments are small).
pub(crate) const MAX_REQUEST_BODY_BYTES: usize = 1024 * 1024;

/// The most request-body bytes held at once, all connections together: 64 bodies of the
/// largest size, or tens of thousands of the few-kB bodies MCP clients send.
pub(crate) const BODY_BUDGET_BYTES: usize = 64 * 1024 * 1024;

/// The most the approval page's forms hold at once: 256 forms of the largest size.
pub(crate) const PAGE_BODY_BUDGET_BYTES: usize = 4 * 1024 * 1024;

/// The bytes all request bodies of a listener may hold at once.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    free: Arc<Semaphore>,
    total: usize,
}

/// A body's share of the budget, given back when dropped (once its request is answered).
#[derive(Debug)]
pub(crate) struct BodyShare(OwnedSemaphorePermit);

impl BodyBudget {
    pub(crate) fn new(bytes: usize) -> BodyBudget {
        BodyBudget {
            free: Arc::new(Semaphore::new(bytes)),
            total: bytes,
        }
    }

    /// Bytes bodies hold now, for `/metrics`.
    pub(crate) fn held(&self) -> usize {
        self.total.saturating_sub(self.free.available_permits())
    }

    /// A share of `bytes`, if that many are free now (never waits).
    fn take(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let bytes = u32::try_from(bytes).ok()?;
        self.free.clone().try_acquire_many_owned(bytes).ok()
    }
}

impl BodyShare {
    /// Bytes this share holds.
    fn bytes(&self) -> usize {
        self.0.num_permits()
    }
}

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// Larger than the listener takes, announced (`Content-Length`) or as it arrived.
    #[error("the request body is larger than {0} bytes")]
    TooLarge(usize),
    #[error("the request body could not be read")]
    Unreadable,
    /// The bodies being received hold the whole budget: retry later.
    #[error("the request bodies being received hold {} MiB, the limit", .0 / (1024 * 1024))]
    OverBudget(usize),
    #[error("the request body did not arrive within {}s (BodyTimeout)", .0.as_secs())]
    Timeout(Duration),
    /// A content coding other than `identity`: decoding none, reading the bytes as JSON
    /// would take them for something other than what the client (and any proxy) meant.
    #[error(
        "the request body is sent with Content-Encoding {0:?}; send it unencoded (this server decodes no content coding)"
    )]
    Encoded(String),
}

/// Reads `body` whole within `timeout`, `max` bytes and `budget`, so a client that trickles
/// its body costs a socket for seconds, not forever, and many such bodies together cannot
/// exhaust memory. The share is to be held until the request is answered: the body is in
/// memory until then.
pub(crate) async fn read<B>(
    body: B,
    max: usize,
    timeout: Duration,
    budget: &BodyBudget,
) -> Result<(Bytes, BodyShare), BodyError>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let body = std::pin::pin!(body);
    let deadline = Instant::now() + timeout;
    read_until(body, max, deadline, timeout, budget)
        .await
        .map_err(|stopped| stopped.error)
}

/// Why a body was not read, and what was read of it.
struct Stopped {
    error: BodyError,
    read: Vec<u8>,
}

/// [`read`] of a body the caller keeps, to read on after a refusal.
async fn read_until<B>(
    mut body: Pin<&mut B>,
    max: usize,
    deadline: Instant,
    timeout: Duration,
    budget: &BodyBudget,
) -> Result<(Bytes, BodyShare), Stopped>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stopped = |error| Stopped {
        error,
        read: Vec::new(),
    };
    // A body that says it is larger than the limit is refused before any of it is read.
    let announced = usize::try_from(body.size_hint().lower()).unwrap_or(usize::MAX);
    if announced > max {
        return Err(stopped(BodyError::TooLarge(max)));
    }
    let over_budget = || BodyError::OverBudget(budget.total);
    let mut share = BodyShare(
        budget
            .take(announced)
            .ok_or_else(|| stopped(over_budget()))?,
    );
    let mut bytes = Vec::with_capacity(announced);
    let read = async {
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|error| {
                tracing::debug!(error = %error.into(), "request body not read");
                BodyError::Unreadable
            })?;
            // Trailers carry nothing a request here needs.
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let total = bytes.len() + data.len();
            if total > max {
                return Err(BodyError::TooLarge(max));
            }
            if total > share.bytes() {
                let more = budget.take(total - share.bytes()).ok_or_else(over_budget)?;
                share.0.merge(more);
            }
            bytes.extend_from_slice(&data);
        }
        Ok(())
    };
    match tokio::time::timeout_at(deadline, read).await {
        Ok(Ok(())) => Ok((Bytes::from(bytes), share)),
        Ok(Err(error)) => Err(Stopped { error, read: bytes }),
        Err(_) => {
            tracing::info!(
                timeout_s = timeout.as_secs(),
                "request body not received in time (BodyTimeout)"
            );
            Err(stopped(BodyError::Timeout(timeout)))
        }
    }
}

/// An MCP request with its body read ([`read`], at most [`MAX_REQUEST_BODY_BYTES`]), or the
/// JSON answer to why not. A body refused as too large or over the budget whose
/// `Content-Length` is at most [`DRAIN_MAX_BYTES`] is read on to its end, none of it kept,
/// and the refusal is its request's JSON-RPC error in a 200 (`server::drain` says why).
pub(crate) async fn read_body<B>(
    request: Request<B>,
    timeout: Duration,
    budget: &BodyBudget,
) -> Result<(Request<Full<Bytes>>, BodyShare), Response<Body>>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = request.into_parts();
    if let Some(coding) = encoded(&parts.headers) {
        return Err(refusal(BodyError::Encoded(coding)));
    }
    let drainable = body
        .size_hint()
        .exact()
        .is_some_and(|announced| announced <= DRAIN_MAX_BYTES);
    let mut body = std::pin::pin!(body);
    let deadline = Instant::now() + timeout;
    match read_until(
        body.as_mut(),
        MAX_REQUEST_BODY_BYTES,
        deadline,
        timeout,
        budget,
    )
    .await
    {
        Ok((bytes, share)) => Ok((Request::from_parts(parts, Full::new(bytes)), share)),
        Err(Stopped {
            error: error @ (BodyError::TooLarge(_) | BodyError::OverBudget(_)),
            read,
        }) if drainable => match drain::request_id(body, read, deadline).await {
            Some(id) => {
                log_over_budget(&error);
                Err(Refused::Body(error).response(Some(id)))
            }
            None => Err(refusal(error)),
        },
        Err(stopped) => Err(refusal(stopped.error)),
    }
}

/// The content codings of a request other than `identity`, as the client wrote them; `None`
/// for a body sent as is.
fn encoded(headers: &http::HeaderMap) -> Option<String> {
    let mut codings = headers.get_all(CONTENT_ENCODING).iter().peekable();
    codings.peek()?;
    let named: Vec<&str> = codings
        .flat_map(|value| value.to_str().unwrap_or("\u{fffd}").split(','))
        .map(str::trim)
        .filter(|coding| !coding.is_empty() && !coding.eq_ignore_ascii_case("identity"))
        .collect();
    (!named.is_empty()).then(|| named.join(", "))
}

/// The MCP listener's answer to a body not read, as `server::refusal` words it; the
/// connection is closed after it (the rest of the body is unread).
fn refusal(error: BodyError) -> Response<Body> {
    log_over_budget(&error);
    closing(Refused::Body(error).response(None))
}

fn log_over_budget(error: &BodyError) {
    if let BodyError::OverBudget(_) = error {
        tracing::info!("request refused: request bodies at the memory budget (overloaded)");
    }
}

#[cfg(test)]
#[path = "body_tests.rs"]
mod tests;
