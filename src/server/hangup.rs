//! A client that hangs up mid-call is normal traffic. The call still finishes (rmcp runs
//! it in its own task, and its outcome reaches the decision log); the sidecar says so once,
//! at debug level, with the decision id, instead of rmcp's error line per hangup.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use rmcp::RoleServer;
use rmcp::service::RequestContext;

use crate::server::routes::Body;

/// The decision a request's tool call reached, shared between the HTTP request (which
/// notices the hangup) and the handler (which knows the decision id).
#[derive(Clone, Debug, Default)]
pub struct CallWatch(Arc<Mutex<Option<String>>>);

/// Logs the hangup when dropped before the response body ended.
pub(crate) struct HangupGuard {
    watch: CallWatch,
    done: bool,
}

/// A response body that disarms its [`HangupGuard`] once fully produced.
pub(crate) struct WatchedBody {
    inner: Body,
    guard: HangupGuard,
}

impl CallWatch {
    fn decision(&self) -> Option<String> {
        self.0.lock().ok().and_then(|slot| slot.clone())
    }
}

/// Records the decision id of the call a request carries (no-op outside HTTP).
pub fn decided(context: &RequestContext<RoleServer>, decision_id: &str) {
    let watch = context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<CallWatch>());
    if let Some(watch) = watch
        && let Ok(mut slot) = watch.0.lock()
    {
        *slot = Some(decision_id.to_owned());
    }
}

impl HangupGuard {
    pub fn new(watch: CallWatch) -> Self {
        HangupGuard { watch, done: false }
    }

    pub fn into_body(self, inner: Body) -> WatchedBody {
        WatchedBody { inner, guard: self }
    }
}

impl Drop for HangupGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(decision_id) = self.watch.decision() {
            tracing::debug!(
                decision_id = %decision_id,
                "client went away before the answer; the call finishes and its outcome is logged"
            );
        }
    }
}

impl HttpBody for WatchedBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.guard.done = true;
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

/// rmcp 3.11 (pinned) logs `failed to send pending response during drain` at ERROR for
/// every response whose client left; [`HangupGuard`] says it once at debug instead.
pub fn is_drain_send_error(meta: &tracing::Metadata<'_>) -> bool {
    meta.target() == "rmcp::service"
        && *meta.level() == tracing::Level::ERROR
        && meta.line() == Some(1866)
        && meta.file().is_some_and(|f| f.ends_with("service.rs"))
}
