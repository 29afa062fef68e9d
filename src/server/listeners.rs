//! `subscriptions/listen` streams (protocol 2026-07-28): requests that stay open, each
//! holding a connection, rmcp's per-request service (a task and its channels) and a place
//! in the tool list's announcements (`list_changed`) until its client ends it. They are
//! bounded as sessions are, in all (`MaxSessions`) and per token (`MaxSessionsPerToken`),
//! counted apart from sessions, and refused before rmcp reads the request.
//!
//! Which requests count is decided from the body, failing closed (`method::may_be`). The
//! place is held by the response body, so it is given back when the stream ends, however
//! it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use http::{Response, StatusCode};
use http_body_util::BodyExt;
use memchr::{memchr, memmem};
use serde_json::json;

use crate::server::method;
use crate::server::routes::{Body, json_response};

const LISTEN_METHOD: &str = "subscriptions/listen";

/// The listen streams open now, in all and by token.
pub(crate) struct Listeners {
    open: Mutex<Open>,
    max: usize,
    max_per_token: usize,
}

#[derive(Default)]
struct Open {
    total: usize,
    /// `token_id` → its open streams; a token leaves when its last stream ends.
    by_token: HashMap<String, usize>,
}

/// Why a listen stream was refused a place.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListenRefused {
    #[error("{open} subscriptions/listen streams are open (MaxSessions); retry later")]
    Full { open: usize },
    #[error(
        "this token holds {held} subscriptions/listen streams already (MaxSessionsPerToken); end one first"
    )]
    TokenFull { held: usize },
}

/// One open stream's place; given back when dropped.
pub(crate) struct ListenPermit {
    listeners: Arc<Listeners>,
    token_id: String,
}

impl Listeners {
    pub(crate) fn new(max: usize, max_per_token: usize) -> Arc<Listeners> {
        Arc::new(Listeners {
            open: Mutex::new(Open::default()),
            max,
            max_per_token,
        })
    }

    /// A place for one more stream of this token, or why there is none.
    pub(crate) fn admit(self: &Arc<Self>, token_id: &str) -> Result<ListenPermit, ListenRefused> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.total >= self.max {
            return Err(ListenRefused::Full { open: open.total });
        }
        let held = open.by_token.get(token_id).copied().unwrap_or(0);
        if held >= self.max_per_token {
            return Err(ListenRefused::TokenFull { held });
        }
        open.total += 1;
        *open.by_token.entry(token_id.to_owned()).or_insert(0) += 1;
        Ok(ListenPermit {
            listeners: self.clone(),
            token_id: token_id.to_owned(),
        })
    }

    /// Listen streams open now (read by `/metrics`).
    pub(crate) fn open(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .total
    }
}

impl ListenRefused {
    /// 503 when the sidecar is full, 429 when this token is; nothing was done either way.
    pub(crate) fn response(&self) -> Response<Body> {
        let status = match self {
            ListenRefused::Full { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ListenRefused::TokenFull { .. } => StatusCode::TOO_MANY_REQUESTS,
        };
        tracing::warn!(http.response.status_code = status.as_u16(), reason = %self, "listen stream refused");
        json_response(
            status,
            &json!({"error": "too_many_listen_streams", "message": self.to_string()}),
        )
    }
}

impl Drop for ListenPermit {
    fn drop(&mut self) {
        let mut open = self
            .listeners
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(held) = open.by_token.get_mut(&self.token_id) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                open.by_token.remove(&self.token_id);
            }
        }
    }
}

/// Whether rmcp could read this POST body as a `subscriptions/listen` request. Any
/// spelling of the method has `listen` in it or an escape, so a body with neither is
/// known not to be one without reading it (most calls).
pub(crate) fn may_listen(body: &[u8]) -> bool {
    (memmem::find(body, b"listen").is_some() || memchr(b'\\', body).is_some())
        && method::may_be(body, LISTEN_METHOD)
}

/// The response with `held` (a stream's place, a request id's claim) kept until its body
/// ends or is dropped.
pub(crate) fn hold<T: Send + Sync + 'static>(response: Response<Body>, held: T) -> Response<Body> {
    response.map(|body| {
        body.map_frame(move |frame| {
            let _held = &held;
            frame
        })
        .boxed()
    })
}

#[cfg(test)]
mod tests {
    use super::{Listeners, may_listen};

    #[test]
    fn only_bodies_that_may_be_listen_requests_count() {
        let listen = br#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}"#;
        assert!(may_listen(listen));
        // Escaped spellings are the same method to rmcp.
        assert!(may_listen(
            br#"{"jsonrpc":"2.0","id":1,"method":"subscriptions\/listen"}"#
        ));
        assert!(may_listen(
            br#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/\u006cisten"}"#
        ));
        // Unreadable or ambiguous bodies count (fail closed).
        assert!(may_listen(
            br#"{"method":"tools/list","method":"subscriptions/listen"}"#
        ));
        assert!(may_listen(br#"[{"method":"subscriptions/listen"}]"#));
        // Another method, even with "listen" in its arguments, does not.
        assert!(!may_listen(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"host_get","arguments":{"search":"listen"}}}"#
        ));
        assert!(!may_listen(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        ));
        assert!(!may_listen(
            br#"{"jsonrpc":"2.0","id":1,"result":{"x":"\n"}}"#
        ));
    }

    #[test]
    fn places_are_capped_in_all_and_per_token_and_given_back() {
        let listeners = Listeners::new(3, 2);
        let a1 = listeners.admit("a").ok().unwrap();
        let _a2 = listeners.admit("a").ok().unwrap();
        let refused = listeners.admit("a").err().unwrap().response();
        assert_eq!(refused.status(), http::StatusCode::TOO_MANY_REQUESTS);
        let _b1 = listeners.admit("b").ok().unwrap();
        let refused = listeners.admit("c").err().unwrap().response();
        assert_eq!(refused.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(listeners.open(), 3);
        drop(a1);
        assert_eq!(listeners.open(), 2);
        assert!(listeners.admit("c").is_ok());
    }
}
