//! Reading an MCP request's body: whole, within `BodyTimeout`, at most 1 MiB, and within a
//! budget shared by every body being received or waiting to be answered.
//!
//! The budget is what bounds memory: 1 MiB a body is per request, and one HTTP/2 connection
//! carries up to 200 requests at once, each with a body that may trickle in until
//! `BodyTimeout`. Without a total, a caller with any valid token could hold MaxConnections
//! × 200 × 1 MiB. With it, a body that would take the total past [`BODY_BUDGET_BYTES`] is
//! refused with 503 `overloaded` as its bytes arrive, and a body announced larger than
//! 1 MiB (`Content-Length`) is refused before any of it is read.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, RETRY_AFTER};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Body as HttpBody;
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::server::routes::{Body, closing, json_response};

/// Largest MCP request body accepted (tool arguments are small).
pub(crate) const MAX_REQUEST_BODY_BYTES: usize = 1024 * 1024;

/// The most request-body bytes held at once, all connections together: 64 bodies of the
/// largest size, or tens of thousands of the few-kB bodies MCP clients send.
pub(crate) const BODY_BUDGET_BYTES: usize = 64 * 1024 * 1024;

/// The bytes all request bodies may hold at once.
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

/// Reads the whole request body within `timeout`, [`MAX_REQUEST_BODY_BYTES`] and `budget`,
/// so a client that trickles its body costs a socket for seconds, not forever, and many
/// such bodies together cannot exhaust memory. The share is held until the request is
/// answered: the body is in memory until then.
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
    // A body that says it is larger than the limit is refused before any of it is read.
    let announced = usize::try_from(body.size_hint().lower()).unwrap_or(usize::MAX);
    if announced > MAX_REQUEST_BODY_BYTES {
        return Err(too_large());
    }
    let mut share = BodyShare(budget.take(announced).ok_or_else(over_budget)?);
    let mut bytes = Vec::with_capacity(announced);
    let read = async {
        let mut body = std::pin::pin!(body);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|error| {
                tracing::debug!(error = %error.into(), "request body not read");
                unreadable()
            })?;
            // Trailers carry nothing an MCP request needs.
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let total = bytes.len() + data.len();
            if total > MAX_REQUEST_BODY_BYTES {
                return Err(too_large());
            }
            if total > share.bytes() {
                let more = budget.take(total - share.bytes()).ok_or_else(over_budget)?;
                share.0.merge(more);
            }
            bytes.extend_from_slice(&data);
        }
        Ok(())
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(())) => Ok((
            Request::from_parts(parts, Full::new(Bytes::from(bytes))),
            share,
        )),
        Ok(Err(response)) => Err(response),
        Err(_) => {
            tracing::info!(
                timeout_s = timeout.as_secs(),
                "request body not received in time (BodyTimeout)"
            );
            Err(closing(json_response(
                StatusCode::REQUEST_TIMEOUT,
                &json!({"error": "invalid_request",
                        "message": format!("the request body did not arrive within {}s (BodyTimeout)", timeout.as_secs())}),
            )))
        }
    }
}

fn too_large() -> Response<Body> {
    closing(json_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        &json!({"error": "invalid_request",
                "message": format!("the request body is larger than {MAX_REQUEST_BODY_BYTES} bytes")}),
    ))
}

fn unreadable() -> Response<Body> {
    closing(json_response(
        StatusCode::BAD_REQUEST,
        &json!({"error": "invalid_request", "message": "the request body could not be read"}),
    ))
}

/// 503, retryable: the bodies being received hold the whole budget.
fn over_budget() -> Response<Body> {
    tracing::info!("request refused: request bodies at the memory budget (overloaded)");
    let mut response = closing(json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        &json!({"error": "overloaded", "message": format!(
            "the sidecar is overloaded: the request bodies being received hold {} MiB, its limit; nothing was done, retry later",
            BODY_BUDGET_BYTES / (1024 * 1024)
        )}),
    ));
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

#[cfg(test)]
#[path = "body_tests.rs"]
mod tests;
