//! Tracing setup: fixed messages with structured fields, to stderr.

use tracing_subscriber::EnvFilter;

/// Maps Zabbix's `DebugLevel` (0–5) to a tracing filter; `RUST_LOG` overrides it.
pub fn filter_for_debug_level(level: u8) -> &'static str {
    match level {
        0 | 1 => "error",
        2 => "warn",
        3 => "info",
        4 => "debug",
        _ => "trace",
    }
}

pub fn init(debug_level: u8) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "{},hyper=warn,rmcp=warn",
            filter_for_debug_level(debug_level)
        ))
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
