//! The decision log: one JSON object per line in OPA's decision-log shape, so pipelines
//! that read OPA take it unchanged. Later events of a call (approval, Zabbix outcome) are
//! extra lines with the same `decision_id` and an `event` field; a `tools/list` is one
//! line for the whole decision set ([`DecisionLog::record_list`]).
//!
//! A request only serializes its line and queues it; the writer thread
//! ([`super::log_writer`]) writes the queue in batches, counts and reports what a full
//! queue drops, and is flushed on shutdown.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::Value;
use serde_json::value::{RawValue, to_raw_value};

use super::decision::{Approval, Decision};
use super::input::PolicyInput;
use super::log_writer::{Output, QUEUE_LINES, Writer};
use super::timestamp::rfc3339_nanos;
use super::{DECISION_PATH, PolicyError};
use input_text::InputText;
use json::RegoJson;

/// How long a write waits to hear that its decision line was written: beyond it, the
/// destination is stuck and the write is refused.
const WRITTEN_WITHIN: Duration = Duration::from_secs(5);

/// Whether a decision's line is on its way to the log.
pub enum Logged {
    Queued,
    /// Not queued: the queue is full (its destination is not keeping up).
    Dropped,
    /// A write's line: the writer answers once its destination took it, or did not.
    Pending(tokio::sync::oneshot::Receiver<bool>),
}

impl Logged {
    /// Whether the line is queued (not yet whether it was written).
    pub fn queued(&self) -> bool {
        !matches!(self, Logged::Dropped)
    }

    /// Whether the line reached the destination; a `Pending` one waits for the writer,
    /// at most [`WRITTEN_WITHIN`] (fails closed).
    pub async fn written(self) -> bool {
        match self {
            Logged::Queued => true,
            Logged::Dropped => false,
            Logged::Pending(answer) => matches!(
                tokio::time::timeout(WRITTEN_WITHIN, answer).await,
                Ok(Ok(true))
            ),
        }
    }
}

impl From<bool> for Logged {
    fn from(queued: bool) -> Logged {
        if queued {
            Logged::Queued
        } else {
            Logged::Dropped
        }
    }
}

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
#[derive(Debug, Clone)]
pub struct DecisionLogOptions {
    /// `labels.id`; a random UUID when `None`.
    pub instance_id: Option<String>,
    /// JSON pointers into the input (`/arguments/message`) dropped before logging; the
    /// ones that were present are listed in the line's `erased` as `/input/...`.
    pub erase: Vec<String>,
    /// `DecisionLogFileSize`: a file is rotated to `<file>.old` at this many MB, as
    /// `LogFile` is at `LogFileSize`; 0 never rotates.
    pub file_size_mb: u32,
    /// Lines the queue holds before new ones are dropped (and counted).
    pub queue_lines: usize,
}

impl Default for DecisionLogOptions {
    fn default() -> Self {
        Self {
            instance_id: None,
            erase: Vec::new(),
            file_size_mb: 0,
            queue_lines: QUEUE_LINES,
        }
    }
}

/// The decision log writer. Cheap to clone; safe to share across tasks and threads.
#[derive(Clone)]
pub struct DecisionLog {
    inner: Arc<Inner>,
}

struct Inner {
    /// `None` for [`DecisionLogSink::Discard`]: no line is even built.
    writer: Option<Arc<Writer>>,
    /// `labels.id`.
    id: String,
    /// `labels` as JSON, written once: every line carries the same.
    labels: Box<RawValue>,
    erase: Vec<String>,
}

#[derive(Serialize)]
struct Labels<'a> {
    id: &'a str,
    version: &'static str,
}

/// A decision line; field order is the order people read.
#[derive(Serialize)]
struct DecisionLine<'a, I: Serialize> {
    decision_id: &'a str,
    timestamp: String,
    path: &'static str,
    input: I,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<ResultJson<'a>>,
    /// What the sidecar enforced, after fail-closed checks and the mode.
    decision: Effective<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    erased: Vec<String>,
    bundles: Bundles<'a>,
    metrics: Metrics,
    labels: &'a RawValue,
}

/// The policy's result: its text kept from an earlier line ([`super::memo::text`]), or
/// written in place.
enum ResultJson<'a> {
    Kept(Arc<RawValue>),
    Value(RegoJson<'a>),
}

impl Serialize for ResultJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ResultJson::Kept(text) => RawValue::serialize(text, serializer),
            ResultJson::Value(value) => value.serialize(serializer),
        }
    }
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
    /// Policy evaluations behind the line (a `tools/list` evaluates one per tool).
    #[serde(skip_serializing_if = "Option::is_none")]
    evaluations: Option<usize>,
}

#[derive(Serialize)]
struct EventLine<'a, D: Serialize> {
    decision_id: &'a str,
    timestamp: String,
    path: &'static str,
    event: &'a str,
    data: D,
    labels: &'a RawValue,
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
        Self::open_outputs(outputs(sink, options.file_size_mb)?, options)
    }

    pub(crate) fn open_outputs(
        outputs: Vec<Output>,
        options: DecisionLogOptions,
    ) -> Result<Self, PolicyError> {
        let id = options
            .instance_id
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let labels = to_raw_value(&Labels {
            id: &id,
            version: env!("CARGO_PKG_VERSION"),
        })
        .map_err(|e| PolicyError::Log {
            target: "labels".into(),
            source: e.into(),
        })?;
        let writer = if outputs.is_empty() {
            None
        } else {
            let labels_json = labels.get().to_owned();
            Some(Writer::start(outputs, labels_json, options.queue_lines)?)
        };
        Ok(Self {
            inner: Arc::new(Inner {
                writer,
                id,
                labels,
                erase: options.erase,
            }),
        })
    }

    /// Logs a decision and the input it was made on. Whether its line is on its way:
    /// false when the queue was full (the destination is not keeping up) or the line could
    /// not be made; true without a decision log.
    pub fn record(&self, decision: &Decision, input: &PolicyInput) -> bool {
        let Some(writer) = &self.inner.writer else {
            return true;
        };
        self.send(writer, self.decision_line(decision, input))
    }

    /// Logs the decision of a write (or of an approver on the page): the writer writes it
    /// at once and answers whether its destination took it, for the write to wait on.
    pub fn record_written(&self, decision: &Decision, input: &PolicyInput) -> Logged {
        let Some(writer) = &self.inner.writer else {
            return Logged::Queued;
        };
        match self.decision_line(decision, input) {
            Ok(mut line) => {
                line.push(b'\n');
                writer
                    .send_confirmed(line)
                    .map_or(Logged::Dropped, Logged::Pending)
            }
            Err(error) => Logged::from(self.send(writer, Err(error))),
        }
    }

    fn decision_line(
        &self,
        decision: &Decision,
        input: &PolicyInput,
    ) -> Result<Vec<u8>, serde_json::Error> {
        let raw = &decision.raw;
        let result = (*raw != regorus::Value::Undefined).then(|| {
            match super::memo::text(raw, |raw| to_raw_value(&RegoJson(raw))) {
                Some(text) => ResultJson::Kept(text),
                None => ResultJson::Value(RegoJson(raw)),
            }
        });
        let decision_part = Effective {
            allow: decision.allow,
            reasons: &decision.reasons,
            approval: decision.approval,
            dry_run_would_deny: decision.dry_run_would_deny,
        };
        let bundles = Bundles {
            policies: BundleRevision {
                revision: &decision.revision,
            },
        };
        let metrics = Metrics {
            timer_eval_ns: decision.eval_ns,
            evaluations: None,
        };
        let timestamp = rfc3339_nanos(SystemTime::now());
        let labels = &self.inner.labels;
        let decision_id = decision.decision_id.as_str();
        // Without erase pointers the input is serialized as it is, not copied first.
        if self.inner.erase.is_empty() {
            serialize(&DecisionLine {
                decision_id,
                timestamp,
                path: DECISION_PATH,
                input: InputText(input),
                result,
                decision: decision_part,
                erased: Vec::new(),
                bundles,
                metrics,
                labels,
            })
        } else {
            let (input, erased) = self.erase(input);
            serialize(&DecisionLine {
                decision_id,
                timestamp,
                path: DECISION_PATH,
                input,
                result,
                decision: decision_part,
                erased,
                bundles,
                metrics,
                labels,
            })
        }
    }

    /// Logs a later event of the call `decision_id`: `event` is e.g. `approval` or
    /// `zabbix_result`, `data` its details (outcome, Zabbix error code...).
    pub fn event(&self, decision_id: &str, event: &str, data: impl Serialize) {
        let Some(writer) = &self.inner.writer else {
            return;
        };
        let line = serialize(&EventLine {
            decision_id,
            timestamp: rfc3339_nanos(SystemTime::now()),
            path: DECISION_PATH,
            event,
            data,
            labels: &self.inner.labels,
        });
        self.send(writer, line);
    }

    /// Returns once every line logged before the call is written (or after a few
    /// seconds if the destination is stuck; then false). Blocks the calling thread.
    pub fn flush(&self) -> bool {
        self.inner.writer.as_ref().is_none_or(|w| w.flush())
    }

    /// Lines that could not be written since start (each failure is also logged).
    pub fn write_errors(&self) -> u64 {
        self.counter(|c| c.write_errors.load(Ordering::Relaxed))
    }

    /// Lines written since start.
    pub fn written(&self) -> u64 {
        self.counter(|c| c.written.load(Ordering::Relaxed))
    }

    /// Whether the last lines written did not all land (a file's went to stderr instead):
    /// until a batch lands whole again.
    pub fn failing(&self) -> bool {
        self.counter(|c| u64::from(c.failing.load(Ordering::Relaxed))) == 1
    }

    /// Lines dropped because the queue was full (each drop is also in the log itself).
    pub fn dropped(&self) -> u64 {
        self.counter(|c| c.dropped.load(Ordering::Relaxed))
    }

    /// `labels.id` of this instance.
    pub fn instance_id(&self) -> &str {
        &self.inner.id
    }

    fn counter(&self, read: impl Fn(&super::log_writer::Counters) -> u64) -> u64 {
        self.inner.writer.as_ref().map_or(0, |w| read(w.counters()))
    }

    fn send(&self, writer: &Writer, line: Result<Vec<u8>, serde_json::Error>) -> bool {
        match line {
            Ok(mut buf) => {
                buf.push(b'\n');
                writer.send(buf)
            }
            Err(error) => {
                writer
                    .counters()
                    .write_errors
                    .fetch_add(1, Ordering::Relaxed);
                tracing::error!(%error, "decision log line lost: it does not serialize");
                false
            }
        }
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
}

fn serialize<T: Serialize>(line: &T) -> Result<Vec<u8>, serde_json::Error> {
    // A call's decision line is 1.1–1.5 kB: one allocation, not a second and a copy.
    let mut buf = Vec::with_capacity(2048);
    serde_json::to_writer(&mut buf, line)?;
    Ok(buf)
}

fn outputs(sink: DecisionLogSink, file_size_mb: u32) -> Result<Vec<Output>, PolicyError> {
    Ok(match sink {
        DecisionLogSink::Stdout => vec![Output::Stdout],
        DecisionLogSink::File(path) => vec![Output::file(&path, file_size_mb)?],
        DecisionLogSink::StdoutAndFile(path) => {
            vec![Output::Stdout, Output::file(&path, file_size_mb)?]
        }
        DecisionLogSink::Discard => Vec::new(),
    })
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

#[path = "log_input.rs"]
mod input_text;
#[path = "log_json.rs"]
mod json;
#[path = "log_list.rs"]
pub(crate) mod list;

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
