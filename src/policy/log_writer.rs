//! The decision log's writer: a bounded queue of finished lines, drained by one thread
//! that writes them in batches, so a request only serializes its line and enqueues it.
//!
//! - Wake-ups: after a write the thread sleeps [`LINGER`] before it drains again, so the
//!   lines of calls arriving meanwhile cost their requests no wake-up (a futex call and a
//!   context switch each, two per call before) and the thread one write for all of them.
//!   An idle thread blocks on the queue; a queue filling up to [`WAKE_AT_FRACTION`] and a
//!   flush wake it at once. Lines reach the destination at most [`LINGER`] after their
//!   call (rsyslog's file output flushes every second by default too).
//! - Overflow: when the queue is full, the newest line is dropped and counted. The writer
//!   then puts a `decision_log_overflow` line with the count into the log itself (a gap is
//!   visible where it happened) and warns on the process log at most every
//!   [`WARN_EVERY`], naming how many lines were dropped since the last warning.
//! - Nothing queued is lost on shutdown: [`Writer::flush`] (called by the server's
//!   graceful shutdown, and when the last handle is dropped) returns once every line
//!   queued before it is written.
//! - Files rotate as `LogFile` does (`telemetry::file::RotatingFile`, at
//!   `DecisionLogFileSize` MB); their write failures go to stderr, said once.
//! - A destination that fails (a pipe whose reader is gone, a full disk) makes the log
//!   `failing` until a batch lands whole again: said on the process log when it starts,
//!   every [`WARN_EVERY`] while it lasts and when it ends. While failing, the writer tries
//!   the destination again every [`RETRY_EVERY`] by itself with a `decision_log_unwritten`
//!   line counting the lines it did not take, so recovery is seen without traffic (a
//!   sidecar not ready gets none), and that line marks the gap in the log.
//! - A write's line is sent with [`Writer::send_confirmed`]: the writer is woken at once
//!   and answers whether the destination took the batch holding it, so no write is sent
//!   with its line lost.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded};
use tokio::sync::oneshot;

use super::timestamp::rfc3339_nanos;
use super::{DECISION_PATH, PolicyError};
use crate::telemetry::fallback::lock;
use crate::telemetry::file::RotatingFile;

/// Lines the queue holds (a call line is about 1 KB: a few MB at most).
pub(crate) const QUEUE_LINES: usize = 8192;
/// The writer collects up to this many bytes into one write.
const BATCH_BYTES: usize = 256 * 1024;
/// How long the writer lets lines gather after a write before it drains the queue again.
/// At 50 ms the thread woke for nearly every call of a sidecar waiting 40 ms per call on
/// Zabbix, and each wake-up, on a core PHP had used meanwhile, cost 50–65 µs.
const LINGER: Duration = Duration::from_secs(1);
/// A send that leaves the queue this full (a fraction of its capacity) wakes the writer
/// before its linger ends, so a burst is written rather than dropped.
const WAKE_AT_FRACTION: usize = 4;
/// How long a flush waits for the writer before giving up (a stuck disk).
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);
/// The overflow warning on the process log is said at most this often, and so is the
/// error of a destination that goes on failing.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// How often a failing destination is tried again while no line comes.
const RETRY_EVERY: Duration = Duration::from_secs(5);

/// The sending side, shared by every clone of one `DecisionLog`.
pub(crate) struct Writer {
    tx: Sender<Message>,
    counters: Arc<Counters>,
    /// The writer thread, woken early by flushes and a filling queue.
    thread: std::thread::Thread,
    /// Queued messages at which a send wakes the writer.
    wake_at: usize,
}

/// Counts the writer keeps; read by tests and `zabbix://about`-like reports.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) dropped: AtomicU64,
    /// Lines every destination took.
    pub(crate) written: AtomicU64,
    /// Lines some destination did not take (a file's went to stderr instead).
    pub(crate) write_errors: AtomicU64,
    /// Whether the last batch failed somewhere: until one is written whole again.
    pub(crate) failing: AtomicBool,
}

enum Message {
    /// A line, and for a write's, who waits to know whether it was written.
    Line(Vec<u8>, Option<oneshot::Sender<bool>>),
    /// Answered once every message before it is written.
    Flush(Sender<()>),
}

/// One destination of the lines.
pub(crate) enum Output {
    Stdout,
    File(RotatingFile),
    /// Any writer, for tests (a blocked disk, a capture buffer).
    #[cfg(test)]
    Test(Box<dyn Write + Send>),
}

/// What the writer thread owns.
struct Drain {
    rx: Receiver<Message>,
    outputs: Vec<Output>,
    counters: Arc<Counters>,
    /// `labels` of the overflow lines, serialized once.
    labels_json: String,
    /// Drops already reported in an overflow line.
    reported: u64,
    /// Drops already named in a warning, and when that warning was.
    warned: u64,
    last_warn: Option<Instant>,
    /// Lines in the batch being gathered (the overflow line is not one of the calls').
    batch_lines: u64,
    /// Who waits for the lines of the batch being gathered.
    batch_acks: Vec<oneshot::Sender<bool>>,
    /// Lines a failing destination did not take since the last batch it took whole.
    unwritten: u64,
    /// When the failure was last said on the process log.
    last_error: Option<Instant>,
}

/// Every writer in the process, so [`flush_all`] can reach them.
static LIVE: Mutex<Vec<Weak<Writer>>> = Mutex::new(Vec::new());

impl Writer {
    /// Starts the writer thread for `outputs`.
    pub(crate) fn start(
        outputs: Vec<Output>,
        labels_json: String,
        capacity: usize,
    ) -> Result<Arc<Writer>, PolicyError> {
        let (tx, rx) = bounded(capacity.max(1));
        let counters = Arc::new(Counters::default());
        let drain = Drain {
            rx,
            outputs,
            counters: Arc::clone(&counters),
            labels_json,
            reported: 0,
            warned: 0,
            last_warn: None,
            batch_lines: 0,
            batch_acks: Vec::new(),
            unwritten: 0,
            last_error: None,
        };
        // Detached: it ends by itself once every sender is gone.
        let thread = std::thread::Builder::new()
            .name("decision-log".into())
            .spawn(move || drain.run())
            .map_err(|source| PolicyError::Log {
                target: "writer thread".into(),
                source,
            })?
            .thread()
            .clone();
        let wake_at = (capacity / WAKE_AT_FRACTION).max(1);
        let writer = Arc::new(Writer {
            tx,
            counters,
            thread,
            wake_at,
        });
        let mut live = lock(&LIVE);
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&writer));
        Ok(writer)
    }

    /// Queues one finished line (ending in `\n`); never blocks. A full queue drops it
    /// and counts it. Whether the line was queued.
    pub(crate) fn send(&self, line: Vec<u8>) -> bool {
        match self.tx.try_send(Message::Line(line, None)) {
            // Unparking a thread that is not parked is one atomic swap.
            Ok(()) if self.tx.len() >= self.wake_at => {
                self.thread.unpark();
                true
            }
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
            // The writer thread is gone (it panicked): nothing can write this line.
            Err(TrySendError::Disconnected(_)) => {
                self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Queues a write's line and wakes the writer; the receiver answers whether the
    /// destination took it (dropped unanswered if the writer is gone). `None`: not queued
    /// (a full queue counts it dropped).
    pub(crate) fn send_confirmed(&self, line: Vec<u8>) -> Option<oneshot::Receiver<bool>> {
        let (ack, written) = oneshot::channel();
        match self.tx.try_send(Message::Line(line, Some(ack))) {
            Ok(()) => {
                // Its call waits: no linger.
                self.thread.unpark();
                Some(written)
            }
            Err(TrySendError::Full(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(TrySendError::Disconnected(_)) => {
                self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Returns once every line queued before this call is written, or after
    /// [`FLUSH_TIMEOUT`]; false on a timeout. Blocks the calling thread.
    pub(crate) fn flush(&self) -> bool {
        let deadline = Instant::now() + FLUSH_TIMEOUT;
        let (ack_tx, ack_rx) = bounded(1);
        if self
            .tx
            .send_deadline(Message::Flush(ack_tx), deadline)
            .is_err()
        {
            return false;
        }
        // A lingering writer would answer only after its linger.
        self.thread.unpark();
        ack_rx.recv_deadline(deadline).is_ok()
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }
}

impl Drop for Writer {
    /// The last handle is gone: write what is queued, then let the thread end.
    fn drop(&mut self) {
        if !self.flush() {
            tracing::error!("decision log: the writer did not finish in time; lines may be lost");
        }
        // Dropping `tx` after this ends the thread's loop: it has nothing left to do.
    }
}

/// Flushes every decision log of this process (see [`Writer::flush`]). Tests call it
/// before reading a log file; the server's shutdown flushes its own log.
pub fn flush_all() {
    let live: Vec<Arc<Writer>> = lock(&LIVE).iter().filter_map(Weak::upgrade).collect();
    for writer in live {
        writer.flush();
    }
}

impl Drain {
    fn run(mut self) {
        let mut batch: Vec<u8> = Vec::with_capacity(BATCH_BYTES);
        let mut acks: Vec<Sender<()>> = Vec::new();
        // Blocks while idle (while failing, for RETRY_EVERY at most); ends when every
        // sender is gone.
        while let Some(first) = self.next() {
            // A retry writes the unwritten line alone; otherwise it only leads lines.
            let mut retry = first.is_none();
            if let Some(first) = first {
                self.take(first, &mut batch, &mut acks);
            }
            // Writes what is queued, then lingers and drains again until a linger brings
            // nothing: the thread is back to blocking on the queue.
            loop {
                while batch.len() < BATCH_BYTES {
                    match self.rx.try_recv() {
                        Ok(message) => self.take(message, &mut batch, &mut acks),
                        Err(_) => break,
                    }
                }
                let full = batch.len() >= BATCH_BYTES;
                self.overflow_line(&mut batch);
                if !batch.is_empty() || retry {
                    self.unwritten_line(&mut batch);
                }
                retry = false;
                let wrote = !batch.is_empty();
                if wrote {
                    self.write(&batch);
                    batch.clear();
                }
                for ack in acks.drain(..) {
                    let _ = ack.send(());
                }
                self.warn_about_drops();
                if !wrote {
                    break;
                }
                if !full {
                    std::thread::park_timeout(LINGER);
                }
            }
        }
    }

    /// The next message, `Some(None)` when a failing destination is due to be tried
    /// again, `None` once every sender is gone.
    fn next(&self) -> Option<Option<Message>> {
        if !self.counters.failing.load(Ordering::Relaxed) {
            return self.rx.recv().ok().map(Some);
        }
        match self.rx.recv_timeout(RETRY_EVERY) {
            Ok(message) => Some(Some(message)),
            Err(RecvTimeoutError::Timeout) => Some(None),
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    fn take(&mut self, message: Message, batch: &mut Vec<u8>, acks: &mut Vec<Sender<()>>) {
        match message {
            Message::Line(line, ack) => {
                batch.extend_from_slice(&line);
                self.batch_lines += 1;
                self.batch_acks.extend(ack);
            }
            Message::Flush(ack) => acks.push(ack),
        }
    }

    /// Appends a line saying how many lines were dropped since the last such line.
    fn overflow_line(&mut self, batch: &mut Vec<u8>) {
        let dropped = self.counters.dropped.load(Ordering::Relaxed);
        if dropped == self.reported {
            return;
        }
        let line = format!(
            "{{\"timestamp\":\"{}\",\"path\":\"{DECISION_PATH}\",\"event\":\"decision_log_overflow\",\
             \"data\":{{\"dropped\":{},\"dropped_total\":{dropped}}},\"labels\":{}}}\n",
            rfc3339_nanos(SystemTime::now()),
            dropped - self.reported,
            self.labels_json
        );
        batch.extend_from_slice(line.as_bytes());
        self.reported = dropped;
    }

    /// Puts first in the batch a line counting the lines a failing destination did not
    /// take; alone, it is the retry of that destination.
    fn unwritten_line(&mut self, batch: &mut Vec<u8>) {
        if self.unwritten == 0 {
            return;
        }
        let line = format!(
            "{{\"timestamp\":\"{}\",\"path\":\"{DECISION_PATH}\",\"event\":\"decision_log_unwritten\",\
             \"data\":{{\"lines\":{},\"lines_total\":{}}},\"labels\":{}}}\n",
            rfc3339_nanos(SystemTime::now()),
            self.unwritten,
            self.counters.write_errors.load(Ordering::Relaxed),
            self.labels_json
        );
        batch.splice(0..0, line.into_bytes());
    }

    fn warn_about_drops(&mut self) {
        let dropped = self.counters.dropped.load(Ordering::Relaxed);
        let due = self.last_warn.is_none_or(|at| at.elapsed() >= WARN_EVERY);
        if dropped > self.warned && due {
            tracing::warn!(
                dropped = dropped - self.warned,
                dropped_total = dropped,
                queue_lines = QUEUE_LINES,
                "decision log queue full: lines dropped"
            );
            self.warned = dropped;
            self.last_warn = Some(Instant::now());
        }
    }

    /// Writes a batch to every destination; its lines count as written only if every one
    /// took them, and the writes waiting on them are told so.
    fn write(&mut self, bytes: &[u8]) {
        let mut failed = None;
        for output in &mut self.outputs {
            if let Err(error) = output.write_all(bytes) {
                failed = Some((output.name(), error));
            }
        }
        let lines = std::mem::take(&mut self.batch_lines);
        let was_failing = self.counters.failing.load(Ordering::Relaxed);
        match &failed {
            None => {
                self.counters.written.fetch_add(lines, Ordering::Relaxed);
                if was_failing {
                    tracing::warn!(
                        lines_not_written = self.unwritten,
                        "decision log destination takes lines again; writes are sent again"
                    );
                }
                self.unwritten = 0;
                self.last_error = None;
            }
            Some((sink, error)) => {
                self.counters
                    .write_errors
                    .fetch_add(lines, Ordering::Relaxed);
                self.unwritten += lines;
                let due = self.last_error.is_none_or(|at| at.elapsed() >= WARN_EVERY);
                if due {
                    tracing::error!(
                        target_sink = %sink,
                        %error,
                        lines_not_written = self.unwritten,
                        "decision log lines not written; writes are refused until the destination takes lines again"
                    );
                    self.last_error = Some(Instant::now());
                }
            }
        }
        self.counters
            .failing
            .store(failed.is_some(), Ordering::Relaxed);
        for ack in self.batch_acks.drain(..) {
            let _ = ack.send(failed.is_none());
        }
    }
}

impl Output {
    /// `path`, rotated at `size_mb` MB (0: never); opened here, so a bad path fails at start.
    pub(crate) fn file(path: &Path, size_mb: u32) -> Result<Output, PolicyError> {
        RotatingFile::open(path, size_mb)
            .map(Output::File)
            .map_err(|source| PolicyError::Log {
                target: path.display().to_string(),
                source,
            })
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Output::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()
            }
            // Failures go to stderr inside, said once: not lost, but not in the file.
            Output::File(file) => match file.write_record(bytes) {
                true => Ok(()),
                false => Err(std::io::Error::other("written to stderr instead")),
            },
            #[cfg(test)]
            Output::Test(out) => out.write_all(bytes),
        }
    }

    fn name(&self) -> String {
        match self {
            Output::Stdout => "stdout".into(),
            Output::File(file) => file.path().display().to_string(),
            #[cfg(test)]
            Output::Test(_) => "test".into(),
        }
    }
}

#[cfg(test)]
#[path = "log_writer_tests.rs"]
mod tests;
