//! The JSON-RPC ids of a session's requests in flight. rmcp routes a session's answers to
//! their HTTP streams by request id: a second request with the id of one still in flight
//! took over its route, so the first one's answer was lost (its stream stayed open, with
//! keep-alives only, until the client gave up) or went to the other stream. A request
//! reusing an id in flight is refused instead, naming the id.
//!
//! The same count caps the requests one session has in flight (`MaxRequestsPerSession`):
//! a session's requests pass no MCP gate, and a write waiting for its approval goes on
//! for `ElicitationTimeout` after its client hangs up, so one session could otherwise hold
//! any number of calls (1,000 held 50 MB in a debug build, each for 300 s).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::RequestId;

use crate::server::refusal;

/// The request ids in flight, by session.
#[derive(Debug)]
pub(crate) struct InFlightIds {
    claimed: Mutex<HashMap<String, HashSet<RequestId>>>,
    /// `MaxRequestsPerSession`.
    max: usize,
}

/// One request's hold on its id in its session, given up once its answer has ended and
/// its handler is done (a handler goes on when its client hangs up): both hold a copy.
#[derive(Clone)]
pub(crate) struct Claim {
    _held: Arc<Held>,
}

struct Held {
    ids: Arc<InFlightIds>,
    key: (String, RequestId),
}

/// Why a request of a session was not let in.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotClaimed {
    /// Its id is that of one of its session's requests still in flight.
    #[error(
        "request id {0} is in use by a request of this session still in flight; give each request its own id"
    )]
    IdInFlight(RequestId),
    /// Its session has `MaxRequestsPerSession` requests in flight.
    #[error(
        "too many requests in flight in this session: it has {0} (MaxRequestsPerSession); retry once one is answered"
    )]
    SessionFull(usize),
}

impl InFlightIds {
    pub(crate) fn new(max: usize) -> InFlightIds {
        InFlightIds {
            claimed: Mutex::new(HashMap::new()),
            max,
        }
    }

    /// Claims the id of the request in `body` in `session`; `Ok(None)` for a body that is
    /// no request (a notification, the client's answer to the server's own request, or
    /// one rmcp refuses as malformed).
    pub(crate) fn claim(
        self: &Arc<Self>,
        session: &str,
        body: &[u8],
    ) -> Result<Option<Claim>, NotClaimed> {
        let Some(id) = refusal::request_id(body) else {
            return Ok(None);
        };
        let mut claimed = self.claimed.lock().unwrap_or_else(PoisonError::into_inner);
        let ids = claimed.entry(session.to_owned()).or_default();
        if ids.contains(&id) {
            return Err(NotClaimed::IdInFlight(id));
        }
        if ids.len() >= self.max {
            return Err(NotClaimed::SessionFull(self.max));
        }
        ids.insert(id.clone());
        let key = (session.to_owned(), id);
        Ok(Some(Claim {
            _held: Arc::new(Held {
                ids: self.clone(),
                key,
            }),
        }))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut claimed = self
            .ids
            .claimed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (session, id) = &self.key;
        if let Some(ids) = claimed.get_mut(session) {
            ids.remove(id);
            if ids.is_empty() {
                claimed.remove(session);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::RequestId;

    use super::{InFlightIds, NotClaimed};

    #[test]
    fn an_id_in_flight_is_refused_in_its_session_only_and_freed_when_done() {
        let ids = Arc::new(InFlightIds::new(64));
        let call = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#;
        let first = ids.claim("s1", call).ok().flatten().expect("claimed");
        let again = ids.claim("s1", br#"{"jsonrpc":"2.0","id":7.0,"method":"tools/list"}"#);
        assert!(matches!(
            again,
            Err(NotClaimed::IdInFlight(RequestId::Number(7)))
        ));
        assert!(
            ids.claim("s2", call).ok().flatten().is_some(),
            "another session"
        );
        // Notifications and the client's answers carry no id of its requests.
        for body in [
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.as_slice(),
            br#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
            br#"[{"jsonrpc":"2.0","id":7,"method":"ping"}]"#,
        ] {
            assert!(matches!(ids.claim("s1", body), Ok(None)), "{body:?}");
        }
        drop(first);
        assert!(ids.claim("s1", call).ok().flatten().is_some());
        let by_name = br#"{"jsonrpc":"2.0","id":"7","method":"ping"}"#;
        assert!(
            ids.claim("s1", by_name).ok().flatten().is_some(),
            "\"7\" is not 7"
        );
    }

    /// `MaxRequestsPerSession`: a session's requests in flight are capped, other sessions
    /// keep theirs, and a request done gives its place back.
    #[test]
    fn a_session_holds_at_most_its_cap_of_requests() {
        let ids = Arc::new(InFlightIds::new(2));
        let call = |id: u32| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"}}"#);
        let first = ids.claim("s1", call(1).as_bytes()).ok().flatten();
        let _second = ids.claim("s1", call(2).as_bytes()).ok().flatten();
        let third = ids.claim("s1", call(3).as_bytes());
        assert!(matches!(third, Err(NotClaimed::SessionFull(2))));
        assert_eq!(
            third.err().map(|e| e.to_string()).unwrap_or_default(),
            "too many requests in flight in this session: it has 2 (MaxRequestsPerSession); retry once one is answered"
        );
        // Notifications and answers are not requests in flight.
        let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert!(matches!(ids.claim("s1", note), Ok(None)));
        assert!(ids.claim("s2", call(3).as_bytes()).ok().flatten().is_some());
        drop(first);
        assert!(ids.claim("s1", call(3).as_bytes()).ok().flatten().is_some());
    }
}
