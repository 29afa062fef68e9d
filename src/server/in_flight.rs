//! The JSON-RPC ids of a session's requests in flight. rmcp routes a session's answers to
//! their HTTP streams by request id: a second request with the id of one still in flight
//! took over its route, so the first one's answer was lost (its stream stayed open, with
//! keep-alives only, until the client gave up) or went to the other stream. A request
//! reusing an id in flight is refused instead, naming the id.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::RequestId;

use crate::server::refusal;

/// The (session, request id) pairs in flight, all sessions together.
#[derive(Debug, Default)]
pub(crate) struct InFlightIds {
    claimed: Mutex<HashSet<(String, RequestId)>>,
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

/// A request whose id is that of one of its session's requests still in flight.
#[derive(Debug, thiserror::Error)]
#[error(
    "request id {0} is in use by a request of this session still in flight; give each request its own id"
)]
pub(crate) struct IdInFlight(RequestId);

impl InFlightIds {
    /// Claims the id of the request in `body` in `session`; `Ok(None)` for a body that is
    /// no request (a notification, the client's answer to the server's own request, or
    /// one rmcp refuses as malformed).
    pub(crate) fn claim(
        self: &Arc<Self>,
        session: &str,
        body: &[u8],
    ) -> Result<Option<Claim>, IdInFlight> {
        let Some(id) = refusal::request_id(body) else {
            return Ok(None);
        };
        let key = (session.to_owned(), id);
        let mut claimed = self.claimed.lock().unwrap_or_else(PoisonError::into_inner);
        if claimed.contains(&key) {
            return Err(IdInFlight(key.1));
        }
        claimed.insert(key.clone());
        Ok(Some(Claim {
            _held: Arc::new(Held {
                ids: self.clone(),
                key,
            }),
        }))
    }
}

impl IdInFlight {
    /// The refused request's id.
    pub(crate) fn id(&self) -> RequestId {
        self.0.clone()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.ids
            .claimed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::RequestId;

    use super::InFlightIds;

    #[test]
    fn an_id_in_flight_is_refused_in_its_session_only_and_freed_when_done() {
        let ids = Arc::new(InFlightIds::default());
        let call = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#;
        let first = ids.claim("s1", call).ok().flatten().expect("claimed");
        let again = ids.claim("s1", br#"{"jsonrpc":"2.0","id":7.0,"method":"tools/list"}"#);
        assert_eq!(again.err().expect("refused").id(), RequestId::Number(7));
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
}
