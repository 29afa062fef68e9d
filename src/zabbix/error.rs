//! Errors of the Zabbix client: what went wrong between the sidecar and the Zabbix API.
//! Our own failures on the way (a request we could not build) are kept apart from what
//! Zabbix did, so that a bug of ours is never reported as Zabbix being down.

use std::time::Duration;

use serde_json::Value;

#[derive(Debug, Clone, thiserror::Error)]
pub enum ZabbixError {
    /// Zabbix answered with a JSON-RPC error; passed to the agent unchanged.
    #[error("Zabbix API error {code}: {message} {data}")]
    Api {
        code: i64,
        message: String,
        data: Value,
    },
    #[error("the Zabbix API did not answer within {}s", .0.as_secs())]
    Timeout(Duration),
    /// Every `MaxZabbixConcurrency` slot stayed taken for `waited`: the sidecar's own
    /// overload, not Zabbix's slowness; the call was not sent.
    #[error(
        "the sidecar is overloaded: all {limit} Zabbix call slots (MaxZabbixConcurrency) stayed busy for {}s; the call was not sent to Zabbix, retry later",
        .waited.as_secs()
    )]
    Overloaded { limit: usize, waited: Duration },
    /// Not sent: the connection could not be made, or took nothing of the request.
    #[error("cannot reach the Zabbix API: {0}")]
    Unavailable(String),
    /// Sent (or partly), and the connection broke before the whole answer came back.
    #[error("the request reached the Zabbix API, but its answer was lost: {0}")]
    AnswerLost(String),
    /// The answer grew past `MaxZabbixResponseSize`; the read was stopped there.
    #[error(
        "the Zabbix API answer is larger than {0} bytes (MaxZabbixResponseSize); narrow the request"
    )]
    ResponseTooLarge(usize),
    #[error("the Zabbix API answered HTTP {0}")]
    HttpStatus(u16),
    /// Zabbix answered, but not with a JSON-RPC response we can read.
    #[error("the Zabbix API sent an invalid response: {0}")]
    BadResponse(String),
    /// The sidecar could not build the request (ours, not Zabbix's: `internal_error`).
    #[error("cannot build the request to the Zabbix API: {0}")]
    Request(String),
    #[error("invalid Zabbix API URL {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("TLS setup for the Zabbix connection failed: {0}")]
    Tls(String),
}

impl ZabbixError {
    /// What a caller not yet authenticated is told: the kind of failure, without the words
    /// that describe the sidecar's surroundings (a connection error names Zabbix's address,
    /// a URL error the URL, a TLS or HTTP library its own findings). The whole text goes to
    /// the process log. Zabbix's own answers (`Api`), and failures that name only a limit,
    /// are told as they are.
    pub fn public_text(&self) -> String {
        match self {
            ZabbixError::Unavailable(_) => "cannot reach the Zabbix API".to_owned(),
            ZabbixError::AnswerLost(_) => {
                "the request reached the Zabbix API, but its answer was lost".to_owned()
            }
            ZabbixError::BadResponse(_) => "the Zabbix API sent an invalid response".to_owned(),
            ZabbixError::Request(_) => "cannot build the request to the Zabbix API".to_owned(),
            ZabbixError::BadUrl { .. } => "invalid Zabbix API URL".to_owned(),
            ZabbixError::Tls(_) => "TLS setup for the Zabbix connection failed".to_owned(),
            ZabbixError::Api { .. }
            | ZabbixError::Timeout(_)
            | ZabbixError::Overloaded { .. }
            | ZabbixError::ResponseTooLarge(_)
            | ZabbixError::HttpStatus(_) => self.to_string(),
        }
    }

    /// Whether the request may have been carried out although no result came back: it was
    /// sent, and what came back (or nothing) says neither yes nor no. For a write that
    /// means it may have been applied.
    pub fn outcome_unknown(&self) -> bool {
        match self {
            ZabbixError::Timeout(_)
            | ZabbixError::AnswerLost(_)
            | ZabbixError::ResponseTooLarge(_)
            | ZabbixError::HttpStatus(_)
            | ZabbixError::BadResponse(_) => true,
            ZabbixError::Api { .. }
            | ZabbixError::Overloaded { .. }
            | ZabbixError::Unavailable(_)
            | ZabbixError::Request(_)
            | ZabbixError::BadUrl { .. }
            | ZabbixError::Tls(_) => false,
        }
    }
}
