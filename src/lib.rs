//! zabbix-mcp-guard: a policy-enforcing MCP sidecar in front of the Zabbix API.
//!
//! The request path, one module per step: `server` (HTTP, AllowedIP, TLS) → `mcp` (rmcp
//! handler) → caller resolution (`zabbix::caller`) → `catalog` (tool definitions and
//! argument validation) → `exposure` (ToolPrefix, allow/deny rules) → `zabbix` (JSON-RPC
//! client) → `response` (envelope and truncation). `policy` decides every list, call and
//! resource read and writes the decision log.

pub mod app;
pub mod approval_page;
pub mod calendar;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod core_dumps;
pub(crate) mod decimal;
pub mod display;
pub mod exposure;
pub mod fd_limit;
pub(crate) mod hashing;
pub mod list_changed;
pub mod mcp;
pub mod metrics;
#[cfg(test)]
pub(crate) mod mutate;
pub mod pidfile;
pub mod policy;
pub mod preflight;
pub mod ratelimit;
pub mod reconfigure;
pub(crate) mod reload;
pub mod response;
#[cfg(test)]
pub(crate) mod scratch;
pub mod server;
pub mod service_manager;
pub(crate) mod simd;
pub mod startup;
pub mod stdio;
pub mod store;
pub(crate) mod swar;
pub mod targets;
pub mod telemetry;
pub mod zabbix;
