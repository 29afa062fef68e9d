//! Everything that talks to the Zabbix API: the closed method set, versions, the
//! JSON-RPC client, TLS toward Zabbix and what it trusts, and the caller's identity.

mod bounded;
pub mod caller;
pub mod client;
mod connections;
pub mod error;
pub mod method;
pub mod params_text;
pub mod raw;
pub mod scan;
mod tls;
pub(crate) mod trust;
pub mod version;

pub use caller::{ApiToken, Caller, CallerError, CallerResolver, Identity};
pub use client::{ClientSettings, Payload, ZabbixClient};
pub use error::ZabbixError;
pub use method::Method;
pub use trust::TrustStatus;
pub use version::ZabbixVersion;
