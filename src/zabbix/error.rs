//! Errors of the Zabbix client: what went wrong between the sidecar and the Zabbix API.

use std::time::Duration;

use serde_json::Value;

use crate::zabbix::method::Method;
use crate::zabbix::version::ZabbixVersion;

#[derive(Debug, thiserror::Error)]
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
    #[error("cannot reach the Zabbix API: {0}")]
    Unavailable(String),
    #[error("the Zabbix API answered HTTP {0}")]
    HttpStatus(u16),
    #[error("the Zabbix API sent an invalid response: {0}")]
    BadResponse(String),
    #[error("{method} needs Zabbix {needed} or later; this Zabbix is {actual}")]
    Unsupported {
        method: Method,
        needed: ZabbixVersion,
        actual: ZabbixVersion,
    },
    #[error("invalid Zabbix API URL {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("TLS setup for the Zabbix connection failed: {0}")]
    Tls(String),
}
