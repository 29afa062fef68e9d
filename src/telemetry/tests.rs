//! Start-up behaviour: choosing and opening the destination, and the global install.

use std::sync::Arc;

use super::sink::Sink;
use super::{TelemetryError, init, subscriber, test_dir, try_init, try_init_console};
use crate::config::{Config, LogType};

fn config(log_type: LogType) -> Config {
    let mut config = Config::new("http://127.0.0.1/zabbix", "127.0.0.1").expect("config");
    config.log_type = log_type;
    config
}

#[test]
fn file_logging_needs_a_log_file() {
    let error = Sink::open(&config(LogType::File))
        .err()
        .expect("no LogFile");
    assert!(matches!(error, TelemetryError::MissingLogFile));
}

#[test]
fn an_unopenable_log_file_stops_the_start_naming_the_path() {
    let dir = test_dir("unopenable");
    let path = dir.join("missing-dir").join("guard.log");
    let mut config = config(LogType::File);
    config.log_file = Some(path.clone());
    let error = try_init(&config).expect_err("cannot open");
    assert!(matches!(error, TelemetryError::OpenLogFile { .. }));
    assert!(
        error.to_string().contains(&path.display().to_string()),
        "{error}"
    );
}

#[test]
fn file_records_are_plain_text_lines() {
    let dir = test_dir("records");
    let path = dir.join("guard.log");
    let mut config = config(LogType::File);
    config.log_file = Some(path.clone());
    config.log_file_size_mb = 2;
    let sink = Arc::new(Sink::open(&config).expect("file sink"));
    assert_eq!(
        sink.to_string(),
        format!("file \"{}\", rotated at 2 MB", path.display())
    );
    let filter = super::filter::build(3, None).expect("filter");
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    tracing::subscriber::with_default(subscriber(sink, filter), || {
        tracing::info!(target: "zabbix_mcp_guard::server", address = "127.0.0.1:8080", "listening");
        tracing::debug!(target: "zabbix_mcp_guard::server", "not at DebugLevel=3");
        // What a reload to DebugLevel=4 does (set_debug_level, on the global subscriber).
        handle
            .reload(tracing_subscriber::EnvFilter::new(
                super::filter_for_debug_level(4),
            ))
            .expect("reloaded");
        tracing::debug!(target: "zabbix_mcp_guard::server", "at DebugLevel=4");
    });
    let text = std::fs::read_to_string(&path).expect("log written");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[1].contains(" DEBUG zabbix_mcp_guard::server: at DebugLevel=4"),
        "{text}"
    );
    assert!(
        lines[0].contains(" INFO zabbix_mcp_guard::server: listening address=\"127.0.0.1:8080\""),
        "{text}"
    );
    assert!(!text.contains('\u{1b}'), "no colour codes in files: {text}");
}

#[test]
fn system_logging_without_dev_log_names_the_fallback() {
    // Only meaningful where /dev/log is absent, as in most containers.
    if std::path::Path::new(super::syslog::DEV_LOG).exists() {
        return;
    }
    let sink = Sink::open(&config(LogType::System)).expect("syslog sink");
    assert_eq!(sink.to_string(), "stderr (syslog \"/dev/log\" unavailable)");
}

#[test]
fn only_the_first_install_wins() {
    let first = try_init_console(3).expect("first or ignored");
    assert_eq!(first.to_string(), "console (stderr)");
    let _again = try_init_console(3).expect("already set is ignored");
    let error = init(&config(LogType::Console)).expect_err("second init");
    assert!(matches!(error, TelemetryError::AlreadyInitialized));
}
