//! `DebugLevel` (0–5) → a tracing filter; `RUST_LOG`, when set, replaces it.

use tracing_subscriber::EnvFilter;

use super::TelemetryError;

/// Events with this target (`tracing::info!(target: LIFECYCLE_TARGET, ...)`) are shown
/// at every `DebugLevel`, as Zabbix shows start and stop messages even at level 0.
pub const LIFECYCLE_TARGET: &str = "zabbix_mcp_guard::lifecycle";

/// The filter directives for a `DebugLevel`; levels above 5 count as 5.
///
/// | DebugLevel | Zabbix meaning | zabbix-mcp-guard | dependencies (hyper, rmcp, rustls, …) |
/// |---|---|---|---|
/// | 0 | basic information | error (+ [`LIFECYCLE_TARGET`] info) | error |
/// | 1 | critical information | error (+ [`LIFECYCLE_TARGET`] info) | error |
/// | 2 | error information | error (+ [`LIFECYCLE_TARGET`] info) | error |
/// | 3 (default) | warnings | info | warn |
/// | 4 | debugging | debug | info |
/// | 5 | extended debugging | trace | trace |
///
/// Why: tracing has no separate "critical" level, so 1 and 2 coincide; Zabbix's 0
/// hides even critical errors, but a silent failure costs more than a line, so 0 shows
/// errors too. Our start-up and request-refusal lines are `info`, so the default 3
/// shows them for our crate while dependencies stay at `warn`. 4 shows our debug lines
/// without the flood of hyper/h2 debug output; 5 shows everything.
pub fn filter_for_debug_level(level: u8) -> &'static str {
    match level {
        0..=2 => "error,zabbix_mcp_guard::lifecycle=info",
        3 => "warn,zabbix_mcp_guard=info",
        4 => "info,zabbix_mcp_guard=debug",
        _ => "trace",
    }
}

/// The filter to install: `RUST_LOG` when set and not blank, else the `DebugLevel` one.
/// An invalid `RUST_LOG` is an error rather than silently ignored.
pub(crate) fn build(debug_level: u8, rust_log: Option<&str>) -> Result<EnvFilter, TelemetryError> {
    match rust_log.map(str::trim).filter(|spec| !spec.is_empty()) {
        Some(spec) => EnvFilter::try_new(spec).map_err(|source| TelemetryError::RustLog {
            spec: spec.to_owned(),
            source,
        }),
        None => Ok(EnvFilter::new(filter_for_debug_level(debug_level))),
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::EnvFilter;

    use super::{LIFECYCLE_TARGET, build, filter_for_debug_level};
    use crate::telemetry::TelemetryError;
    use crate::telemetry::fallback::capture::Capture;

    /// Which of a fixed set of events a filter lets through, as `target:level` words.
    fn shown(filter: EnvFilter) -> String {
        let lines = Capture::default();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(lines.clone())
            .with_ansi(false)
            .without_time()
            .with_level(false)
            .with_target(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "zabbix_mcp_guard::server", "ours:error");
            tracing::warn!(target: "zabbix_mcp_guard::server", "ours:warn");
            tracing::info!(target: "zabbix_mcp_guard::server", "ours:info");
            tracing::debug!(target: "zabbix_mcp_guard::server", "ours:debug");
            tracing::trace!(target: "zabbix_mcp_guard::server", "ours:trace");
            tracing::info!(target: LIFECYCLE_TARGET, "lifecycle:info");
            tracing::error!(target: "hyper::proto", "dep:error");
            tracing::warn!(target: "hyper::proto", "dep:warn");
            tracing::info!(target: "rmcp::service", "dep:info");
            tracing::debug!(target: "rmcp::service", "dep:debug");
            tracing::trace!(target: "rmcp::service", "dep:trace");
        });
        lines
            .text()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn every_level_is_a_valid_filter() {
        for level in 0..=u8::MAX {
            EnvFilter::try_new(filter_for_debug_level(level)).expect("valid directives");
        }
    }

    #[test]
    fn levels_map_as_documented() {
        let at = |level| shown(build(level, None).expect("filter"));
        let quiet = "ours:error lifecycle:info dep:error";
        assert_eq!(at(0), quiet);
        assert_eq!(at(1), quiet);
        assert_eq!(at(2), quiet);
        assert_eq!(
            at(3),
            "ours:error ours:warn ours:info lifecycle:info dep:error dep:warn"
        );
        assert_eq!(
            at(4),
            "ours:error ours:warn ours:info ours:debug lifecycle:info dep:error dep:warn dep:info"
        );
        assert_eq!(at(5).split(' ').count(), 11, "everything");
        assert_eq!(at(9), at(5));
    }

    #[test]
    fn rust_log_overrides_debug_level() {
        let filter = build(0, Some(" rmcp=trace ")).expect("valid RUST_LOG");
        assert_eq!(shown(filter), "dep:info dep:debug dep:trace");
        assert_eq!(
            shown(build(3, Some("  ")).expect("blank")),
            shown(build(3, None).expect("3"))
        );
    }

    #[test]
    fn invalid_rust_log_is_an_error() {
        let error = build(3, Some("zabbix_mcp_guard=loud")).expect_err("invalid");
        assert!(matches!(error, TelemetryError::RustLog { .. }));
        assert!(
            error
                .to_string()
                .contains("RUST_LOG=\"zabbix_mcp_guard=loud\""),
            "{error}"
        );
    }
}
