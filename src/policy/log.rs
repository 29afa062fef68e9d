//! The decision log: one JSON object per line in OPA's decision-log shape, so pipelines
//! that read OPA take it unchanged. Later events of a call (approval, Zabbix outcome) are
//! extra lines with the same `decision_id` and an `event` field.
//!
//! Writes are synchronous: each line is serialized first, then written with one
//! `write_all` under a mutex (one `write()` of a complete line on an `O_APPEND` file), so
//! lines never interleave and a line is on its way to the kernel before `record`
//! returns; nothing depends on the request future surviving a client disconnect.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

use super::decision::{Approval, Decision};
use super::input::PolicyInput;
use super::timestamp::rfc3339_nanos;
use super::{DECISION_PATH, PolicyError};

/// Where decision log lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionLogSink {
    Stdout,
    /// Appended to; created if missing.
    File(PathBuf),
    StdoutAndFile(PathBuf),
    /// Nothing is written (tests, benches).
    Discard,
}

/// Options beyond the sink.
#[derive(Debug, Clone, Default)]
pub struct DecisionLogOptions {
    /// `labels.id`; a random UUID when `None`.
    pub instance_id: Option<String>,
    /// JSON pointers into the input (`/arguments/message`) dropped before logging; the
    /// ones that were present are listed in the line's `erased` as `/input/...`.
    pub erase: Vec<String>,
}

/// The decision log writer. Cheap to clone; safe to share across tasks and threads.
#[derive(Clone)]
pub struct DecisionLog {
    inner: Arc<Inner>,
}

struct Inner {
    outputs: Vec<Output>,
    labels: Labels,
    erase: Vec<String>,
    write_errors: AtomicU64,
}

enum Output {
    Stdout,
    File { path: PathBuf, file: Mutex<File> },
}

#[derive(Serialize)]
struct Labels {
    id: String,
    version: &'static str,
}

/// A decision line; field order is the order people read.
#[derive(Serialize)]
struct DecisionLine<'a> {
    decision_id: &'a str,
    timestamp: String,
    path: &'static str,
    input: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    /// What the sidecar enforced, after fail-closed checks and the mode.
    decision: Effective<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    erased: Vec<String>,
    bundles: Bundles<'a>,
    metrics: Metrics,
    labels: &'a Labels,
}

#[derive(Serialize)]
struct Effective<'a> {
    allow: bool,
    reasons: &'a [String],
    approval: Approval,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run_would_deny: bool,
}

#[derive(Serialize)]
struct Bundles<'a> {
    policies: BundleRevision<'a>,
}

#[derive(Serialize)]
struct BundleRevision<'a> {
    revision: &'a str,
}

#[derive(Serialize)]
struct Metrics {
    timer_eval_ns: u64,
}

#[derive(Serialize)]
struct EventLine<'a> {
    decision_id: &'a str,
    timestamp: String,
    path: &'static str,
    event: &'a str,
    data: Value,
    labels: &'a Labels,
}

impl DecisionLog {
    /// Opens `sink` with default options.
    pub fn open(sink: DecisionLogSink) -> Result<Self, PolicyError> {
        Self::open_with(sink, DecisionLogOptions::default())
    }

    /// Opens `sink`; a file is opened once, here, so a bad path fails at start.
    pub fn open_with(
        sink: DecisionLogSink,
        options: DecisionLogOptions,
    ) -> Result<Self, PolicyError> {
        let outputs = match sink {
            DecisionLogSink::Stdout => vec![Output::Stdout],
            DecisionLogSink::File(path) => vec![Output::file(path)?],
            DecisionLogSink::StdoutAndFile(path) => vec![Output::Stdout, Output::file(path)?],
            DecisionLogSink::Discard => Vec::new(),
        };
        let id = options
            .instance_id
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        Ok(Self {
            inner: Arc::new(Inner {
                outputs,
                labels: Labels {
                    id,
                    version: env!("CARGO_PKG_VERSION"),
                },
                erase: options.erase,
                write_errors: AtomicU64::new(0),
            }),
        })
    }

    /// Logs a decision and the input it was made on.
    pub fn record(&self, decision: &Decision, input: &PolicyInput) {
        if self.inner.outputs.is_empty() {
            return;
        }
        let (input, erased) = self.erase(input);
        let line = DecisionLine {
            decision_id: &decision.decision_id,
            timestamp: rfc3339_nanos(SystemTime::now()),
            path: DECISION_PATH,
            input,
            result: decision.raw_result(),
            decision: Effective {
                allow: decision.allow,
                reasons: &decision.reasons,
                approval: decision.approval,
                dry_run_would_deny: decision.dry_run_would_deny,
            },
            erased,
            bundles: Bundles {
                policies: BundleRevision {
                    revision: &decision.revision,
                },
            },
            metrics: Metrics {
                timer_eval_ns: decision.eval_ns,
            },
            labels: &self.inner.labels,
        };
        self.write(&line);
    }

    /// Logs a later event of the call `decision_id`: `event` is e.g. `approval` or
    /// `zabbix_result`, `data` its details (outcome, Zabbix error code...).
    pub fn event(&self, decision_id: &str, event: &str, data: Value) {
        if self.inner.outputs.is_empty() {
            return;
        }
        self.write(&EventLine {
            decision_id,
            timestamp: rfc3339_nanos(SystemTime::now()),
            path: DECISION_PATH,
            event,
            data,
            labels: &self.inner.labels,
        });
    }

    /// Lines that could not be written since start (each failure is also logged).
    pub fn write_errors(&self) -> u64 {
        self.inner.write_errors.load(Ordering::Relaxed)
    }

    /// `labels.id` of this instance.
    pub fn instance_id(&self) -> &str {
        &self.inner.labels.id
    }

    fn erase(&self, input: &PolicyInput) -> (Value, Vec<String>) {
        let mut value = serde_json::to_value(input).unwrap_or(Value::Null);
        let mut erased = Vec::new();
        for pointer in &self.inner.erase {
            if remove_pointer(&mut value, pointer) {
                erased.push(format!("/input{pointer}"));
            }
        }
        (value, erased)
    }

    fn write<T: Serialize>(&self, line: &T) {
        let mut buf = match serde_json::to_vec(line) {
            Ok(buf) => buf,
            Err(e) => {
                self.failed("<serialize>", &e);
                return;
            }
        };
        buf.push(b'\n');
        for output in &self.inner.outputs {
            if let Err(e) = output.write_line(&buf) {
                self.failed(output.name(), &e);
            }
        }
    }

    fn failed(&self, target: &str, error: &dyn std::fmt::Display) {
        self.inner.write_errors.fetch_add(1, Ordering::Relaxed);
        tracing::error!(target_sink = target, error = %error, "decision log line lost");
    }
}

impl Output {
    fn file(path: PathBuf) -> Result<Self, PolicyError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| PolicyError::Log {
                target: path.display().to_string(),
                source,
            })?;
        Ok(Self::File {
            path,
            file: Mutex::new(file),
        })
    }

    fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        match self {
            Self::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(line)?;
                out.flush()
            }
            Self::File { file, .. } => file
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .write_all(line),
        }
    }

    fn name(&self) -> &str {
        match self {
            Self::Stdout => "stdout",
            Self::File { path, .. } => path.to_str().unwrap_or("<decision log file>"),
        }
    }
}

/// Removes the value at `pointer` (RFC 6901); true if something was removed.
fn remove_pointer(value: &mut Value, pointer: &str) -> bool {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return false;
    };
    let key = last.replace("~1", "/").replace("~0", "~");
    match value.pointer_mut(parent) {
        Some(Value::Object(map)) => map.shift_remove(&key).is_some(),
        Some(Value::Array(items)) => match key.parse::<usize>() {
            Ok(i) if i < items.len() => {
                items.remove(i);
                true
            }
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
