//! Where formatted records go, chosen by `LogType`, and the per-event writer the fmt
//! layer fills: it collects the whole record and hands it over in one piece on drop,
//! which is what lets every destination keep records whole.

use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

use super::TelemetryError;
use super::fallback::Fallback;
use super::file::RotatingFile;
use super::syslog::{DEV_LOG, Syslog};
use crate::config::{Config, LogType};

pub(crate) enum Sink {
    Stderr,
    File(RotatingFile),
    Syslog(Syslog),
}

impl Sink {
    pub(crate) fn open(config: &Config) -> Result<Sink, TelemetryError> {
        match config.log_type {
            LogType::Console => Ok(Sink::Stderr),
            LogType::File => {
                let path = config
                    .log_file
                    .as_deref()
                    .ok_or(TelemetryError::MissingLogFile)?;
                RotatingFile::open(path, config.log_file_size_mb)
                    .map(Sink::File)
                    .map_err(|source| TelemetryError::OpenLogFile {
                        path: path.to_path_buf(),
                        source,
                    })
            }
            LogType::System => Ok(Sink::Syslog(Syslog::connect(
                Path::new(DEV_LOG),
                Fallback::stderr(),
            ))),
        }
    }

    fn write_record(&self, level: Level, record: &[u8]) {
        match self {
            // Stderr is the last resort: a failure there has nowhere to be reported.
            Sink::Stderr => drop(io::stderr().lock().write_all(record)),
            // Its failures are said on stderr, where the record goes instead.
            Sink::File(file) => {
                file.write_record(record);
            }
            Sink::Syslog(syslog) => syslog.write_record(level, record),
        }
    }
}

impl fmt::Display for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sink::Stderr => f.write_str("console (stderr)"),
            Sink::File(file) if file.limit_mb() == 0 => {
                write!(f, "file \"{}\", not rotated", file.path().display())
            }
            Sink::File(file) => write!(
                f,
                "file \"{}\", rotated at {} MB",
                file.path().display(),
                file.limit_mb()
            ),
            Sink::Syslog(syslog) if syslog.is_connected() => {
                write!(f, "syslog \"{}\"", syslog.socket_path().display())
            }
            Sink::Syslog(syslog) => write!(
                f,
                "stderr (syslog \"{}\" unavailable)",
                syslog.socket_path().display()
            ),
        }
    }
}

/// The fmt layer's `MakeWriter`: shared with the guard, which keeps the sink alive.
#[derive(Clone)]
pub(crate) struct SharedSink(pub(crate) Arc<Sink>);

impl<'a> MakeWriter<'a> for SharedSink {
    type Writer = Record<'a>;

    fn make_writer(&'a self) -> Record<'a> {
        Record::new(&self.0, Level::INFO)
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Record<'a> {
        Record::new(&self.0, *meta.level())
    }
}

/// One event's bytes, delivered to the sink when dropped.
pub(crate) struct Record<'a> {
    sink: &'a Sink,
    level: Level,
    buf: Vec<u8>,
}

impl<'a> Record<'a> {
    fn new(sink: &'a Sink, level: Level) -> Record<'a> {
        Record {
            sink,
            level,
            buf: Vec::with_capacity(256),
        }
    }
}

impl Write for Record<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Record<'_> {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            self.sink.write_record(self.level, &self.buf);
        }
    }
}
