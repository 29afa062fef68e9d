//! Logging, as the official Zabbix MCP server's `LogType`, `LogFile`, `LogFileSize` and
//! `DebugLevel` describe it: fixed messages with structured fields, written by a
//! tracing-subscriber fmt layer to
//!
//! - `LogType=console`: stderr (colours only on a terminal);
//! - `LogType=file`: `LogFile`, appended to and rotated to `<LogFile>.old` at
//!   `LogFileSize` MB (0: never); if reopening after a rotation fails, stderr;
//! - `LogType=system`: syslog through `/dev/log` (facility `daemon`, tag
//!   `zabbix-mcp-guard[<pid>]`); stderr if `/dev/log` is absent.
//!
//! Every failure of a destination is said once on stderr, and the records it could
//! not take go to stderr, so none is lost. `DebugLevel` picks the filter (see
//! [`filter_for_debug_level`]), and a configuration reload may pick another
//! ([`set_debug_level`]); `RUST_LOG`, when set, replaces it.

pub(crate) mod fallback;
mod fields;
pub(crate) mod file;
mod filter;
mod sink;
mod syslog;

use std::fmt;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use tracing_subscriber::filter::{FilterExt, ParseError};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::reload;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::config::Config;
use fields::PlainFields;
use sink::{SharedSink, Sink};

pub use filter::{LIFECYCLE_TARGET, filter_for_debug_level};

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("LogType=file needs LogFile")]
    MissingLogFile,
    #[error("cannot open log file \"{}\": {source}", path.display())]
    OpenLogFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("RUST_LOG=\"{spec}\" is not a valid filter: {source}")]
    RustLog {
        spec: String,
        #[source]
        source: ParseError,
    },
    #[error("logging is already set up in this process")]
    AlreadyInitialized,
}

/// The filter of the subscriber this module installed, when `DebugLevel` chose it (not
/// `RUST_LOG`): what [`set_debug_level`] replaces.
static DEBUG_LEVEL_FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Keeps the log destination open; hold it until the process exits. Records are
/// written synchronously, so dropping it early loses nothing today, but a buffered
/// destination would flush here. `Display` says where the logs go.
#[must_use = "hold the guard until exit"]
pub struct TelemetryGuard {
    sink: Arc<Sink>,
}

impl fmt::Display for TelemetryGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.sink, f)
    }
}

impl fmt::Debug for TelemetryGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryGuard")
            .field("destination", &self.sink.to_string())
            .finish()
    }
}

/// Installs the process-wide subscriber for `config`; call once, before anything logs.
/// Fails when the log file cannot be opened, `RUST_LOG` is invalid, or a subscriber
/// is already installed.
pub fn init(config: &Config) -> Result<TelemetryGuard, TelemetryError> {
    install(Sink::open(config)?, config.debug_level, true)
}

/// Like [`init`], but an already installed subscriber is not an error (the first one
/// stays): for tests and benches that may set up logging more than once.
pub fn try_init(config: &Config) -> Result<TelemetryGuard, TelemetryError> {
    install(Sink::open(config)?, config.debug_level, false)
}

/// [`try_init`] for stderr at `debug_level`, for tests and benches without a `Config`.
pub fn try_init_console(debug_level: u8) -> Result<TelemetryGuard, TelemetryError> {
    install(Sink::Stderr, debug_level, false)
}

/// Whether [`set_debug_level`] can change what is logged: logging was set up here and
/// `DebugLevel`, not `RUST_LOG`, chose the filter.
pub fn debug_level_reloadable() -> bool {
    DEBUG_LEVEL_FILTER.get().is_some()
}

/// Puts `DebugLevel` `level` in force for every line from now on; false (nothing changed)
/// when it cannot be (see [`debug_level_reloadable`]).
pub fn set_debug_level(level: u8) -> bool {
    DEBUG_LEVEL_FILTER.get().is_some_and(|handle| {
        handle
            .reload(EnvFilter::new(filter_for_debug_level(level)))
            .is_ok()
    })
}

fn install(sink: Sink, debug_level: u8, strict: bool) -> Result<TelemetryGuard, TelemetryError> {
    let rust_log = std::env::var("RUST_LOG").ok();
    let from_rust_log = rust_log
        .as_deref()
        .is_some_and(|spec| !spec.trim().is_empty());
    let filter = filter::build(debug_level, rust_log.as_deref())?;
    // Behind a reload handle: a filter whose callsites' interest is cached, as before, and
    // rebuilt when a reload replaces it; each span and event then takes a read lock.
    let (filter, handle) = reload::Layer::new(filter);
    let sink = Arc::new(sink);
    let installed = subscriber(Arc::clone(&sink), filter).try_init();
    match installed {
        Err(_) if strict => Err(TelemetryError::AlreadyInitialized),
        Err(_) => Ok(TelemetryGuard { sink }),
        Ok(()) => {
            if !from_rust_log {
                let _ = DEBUG_LEVEL_FILTER.set(handle);
            }
            Ok(TelemetryGuard { sink })
        }
    }
}

/// The fmt layer for a sink: timestamps except for syslog (the daemon adds its own),
/// colours only for a terminal, fields as `DefaultFields` writes them ([`PlainFields`]).
fn subscriber(
    sink: Arc<Sink>,
    filter: reload::Layer<EnvFilter, Registry>,
) -> impl tracing::Subscriber + Send + Sync {
    let writer = SharedSink(Arc::clone(&sink));
    let layer: Box<dyn Layer<Registry> + Send + Sync> = match &*sink {
        Sink::Stderr => tracing_subscriber::fmt::layer()
            .fmt_fields(PlainFields)
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(writer)
            .boxed(),
        Sink::File(_) => tracing_subscriber::fmt::layer()
            .fmt_fields(PlainFields)
            .with_ansi(false)
            .with_writer(writer)
            .boxed(),
        Sink::Syslog(_) => tracing_subscriber::fmt::layer()
            .fmt_fields(PlainFields)
            .with_ansi(false)
            .without_time()
            .with_writer(writer)
            .boxed(),
    };
    let filter = filter.and(tracing_subscriber::filter::filter_fn(|meta| {
        !crate::server::hangup::is_drain_send_error(meta)
    }));
    tracing_subscriber::registry().with(layer.with_filter(filter))
}

/// A fresh scratch directory for the module's tests, removed when dropped.
#[cfg(test)]
pub(crate) fn test_dir(name: &str) -> crate::scratch::Scratch {
    crate::scratch::Scratch::new(&format!("telemetry-{name}"))
}

#[cfg(test)]
mod tests;
