//! Tests of the queue: overflow accounting, flush and drop, rotation.

use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use serde_json::{Value, json};

use super::Output;
use crate::policy::decision::Decision;
use crate::policy::input::tests::sample_input;
use crate::policy::log::{DecisionLog, DecisionLogOptions, DecisionLogSink};
use crate::policy::source::tests::temp_dir;

/// Collects what the writer writes; the first write waits until the test releases it,
/// after saying it has started (a stuck disk, on demand).
#[derive(Clone)]
struct Held {
    bytes: Arc<Mutex<Vec<u8>>>,
    entered: Sender<()>,
    release: Receiver<()>,
}

impl Write for Held {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _ = self.entered.try_send(());
        // Returns at once when released or when the release side is gone.
        let _ = self.release.recv();
        self.bytes.lock().expect("bytes").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

struct Harness {
    log: DecisionLog,
    bytes: Arc<Mutex<Vec<u8>>>,
    entered: Receiver<()>,
    release: Option<Sender<()>>,
}

fn harness(queue_lines: usize) -> Harness {
    let bytes = Arc::new(Mutex::new(Vec::new()));
    let (entered_tx, entered) = unbounded();
    let (release, release_rx) = bounded(0);
    let held = Held {
        bytes: Arc::clone(&bytes),
        entered: entered_tx,
        release: release_rx,
    };
    let options = DecisionLogOptions {
        instance_id: Some("guard-q".into()),
        queue_lines,
        ..DecisionLogOptions::default()
    };
    let log = DecisionLog::open_outputs(vec![Output::Test(Box::new(held))], options)
        .expect("writer starts");
    Harness {
        log,
        bytes,
        entered,
        release: Some(release),
    }
}

impl Harness {
    /// Lets every write through from now on.
    fn release(&mut self) {
        self.release.take();
    }

    fn lines(&self) -> Vec<Value> {
        String::from_utf8(self.bytes.lock().expect("bytes").clone())
            .expect("utf-8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect()
    }
}

fn event(log: &DecisionLog, n: usize) {
    log.event(&format!("id-{n}"), "zabbix_result", json!({"n": n}));
}

#[test]
fn a_full_queue_drops_the_newest_and_says_how_many_in_the_log() {
    let mut h = harness(2);
    event(&h.log, 0);
    // The writer holds line 0 in a stuck write: the queue has room for exactly 2 more.
    h.entered.recv().expect("the writer started writing");
    for n in 1..=10 {
        event(&h.log, n);
    }
    assert_eq!(h.log.dropped(), 8);
    h.release();
    assert!(h.log.flush());
    let lines = h.lines();
    let ns: Vec<&Value> = lines.iter().filter_map(|l| l["data"].get("n")).collect();
    assert_eq!(
        ns,
        [&json!(0), &json!(1), &json!(2)],
        "oldest kept, newest dropped"
    );
    let overflow: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "decision_log_overflow")
        .collect();
    assert_eq!(overflow.len(), 1, "{lines:?}");
    assert_eq!(
        overflow[0]["data"],
        json!({"dropped": 8, "dropped_total": 8})
    );
    assert_eq!(overflow[0]["labels"]["id"], "guard-q");
    assert!(overflow[0]["timestamp"].is_string());
    assert_eq!(h.log.write_errors(), 0);
}

#[test]
fn flush_waits_for_every_line_queued_before_it() {
    let mut h = harness(1000);
    for n in 0..500 {
        event(&h.log, n);
    }
    h.entered.recv().expect("writing");
    let log = h.log.clone();
    let flusher = std::thread::spawn(move || log.flush());
    h.release();
    assert!(flusher.join().expect("flush thread"));
    assert_eq!(h.lines().len(), 500);
    assert_eq!(h.log.dropped(), 0);
}

/// Hands every write to the test as it happens.
struct Sent(Sender<Vec<u8>>);

impl Write for Sent {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _ = self.0.send(buf.to_vec());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn lines_sent_while_the_writer_lingers_are_written_without_a_flush() {
    let (tx, writes) = unbounded();
    let options = DecisionLogOptions {
        instance_id: Some("guard-l".into()),
        ..DecisionLogOptions::default()
    };
    let log = DecisionLog::open_outputs(vec![Output::Test(Box::new(Sent(tx)))], options)
        .expect("writer starts");
    let next_write = || {
        let bytes = writes
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a write, without a flush");
        String::from_utf8(bytes).expect("utf-8")
    };
    event(&log, 0);
    let mut text = next_write();
    // The writer lingers after that write: these lines wait for it, not for a flush.
    for n in 1..=3 {
        event(&log, n);
    }
    while text.lines().count() < 4 {
        text.push_str(&next_write());
    }
    let ns: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON line")["data"]["n"].clone())
        .collect();
    assert_eq!(ns, [json!(0), json!(1), json!(2), json!(3)]);
}

#[test]
fn dropping_the_last_handle_writes_what_is_queued() {
    let Harness {
        log,
        bytes,
        entered,
        release,
        ..
    } = harness(1000);
    for n in 0..300 {
        event(&log, n);
    }
    entered
        .recv()
        .expect("the writer is stuck on the first write");
    let releaser = std::thread::spawn(move || drop(release));
    // The last handle: its drop waits until the queue is written.
    drop(log);
    releaser.join().expect("releaser");
    let text = String::from_utf8(bytes.lock().expect("bytes").clone()).expect("utf-8");
    assert_eq!(text.lines().count(), 300);
}

#[test]
fn decision_log_files_rotate_like_the_log_file() {
    let dir = temp_dir("log-rotate");
    let path = dir.join("d.jsonl");
    let options = DecisionLogOptions {
        file_size_mb: 1,
        ..DecisionLogOptions::default()
    };
    let log = DecisionLog::open_with(DecisionLogSink::File(path.clone()), options).expect("open");
    let mut input = sample_input();
    input
        .arguments
        .insert("description".into(), json!("y".repeat(4000)));
    // One line first, to learn its size.
    log.record(&Decision::deny("rotate me"), &input);
    assert!(log.flush());
    let line = std::fs::metadata(&path).expect("written").len();
    // About 1.3 MB in all: past the 1 MB limit once, and never twice, even when the writer
    // rotates early because a batch (up to 256 KB) would not fit.
    let lines = usize::try_from((13 * 1024 * 1024 / 10) / line).expect("a line count");
    for _ in 1..lines {
        log.record(&Decision::deny("rotate me"), &input);
    }
    assert!(log.flush());
    let old = std::fs::read_to_string(dir.join("d.jsonl.old")).expect("rotated to .old");
    let current = std::fs::read_to_string(&path).expect("current file");
    assert!(old.len() <= 1024 * 1024, "{}", old.len());
    let all: Vec<Value> = old
        .lines()
        .chain(current.lines())
        .map(|l| serde_json::from_str(l).expect("whole JSON lines on both sides"))
        .collect();
    assert_eq!(all.len(), lines);
    std::fs::remove_dir_all(&dir).ok();
}

/// A file that cannot be written (here /dev/full: every write fails with ENOSPC) does not
/// count its lines as written: they are `failed` (gone to stderr) and the log says it is
/// failing. A later batch that lands clears it.
#[test]
fn lines_a_file_did_not_take_are_failed_not_written() {
    let log = DecisionLog::open_with(
        DecisionLogSink::File("/dev/full".into()),
        DecisionLogOptions::default(),
    )
    .expect("/dev/full opens");
    for n in 0..3 {
        event(&log, n);
    }
    assert!(log.flush());
    assert_eq!((log.written(), log.write_errors()), (0, 3));
    assert!(log.failing());

    let (fails, ok) = (Arc::new(Mutex::new(true)), Arc::new(Mutex::new(Vec::new())));
    let log = flaky_log(Flaky(Arc::clone(&fails), Arc::clone(&ok)));
    event(&log, 0);
    assert!(log.flush());
    assert!(log.failing());
    *fails.lock().expect("flag") = false;
    event(&log, 1);
    assert!(log.flush());
    assert_eq!((log.written(), log.write_errors()), (1, 1));
    assert!(!log.failing(), "a batch landed whole again");
}

/// A destination that fails while `.0` is set (a broken pipe), keeping what it takes.
struct Flaky(Arc<Mutex<bool>>, Arc<Mutex<Vec<u8>>>);

impl Write for Flaky {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if *self.0.lock().expect("flag") {
            return Err(io::Error::from(io::ErrorKind::BrokenPipe));
        }
        self.1.lock().expect("bytes").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn flaky_log(flaky: Flaky) -> DecisionLog {
    DecisionLog::open_outputs(vec![Output::Test(Box::new(flaky))], Default::default())
        .expect("writer starts")
}

/// A write's line is answered: not written while the destination fails (the write is
/// refused), written once it takes lines again. The writer tries a failing destination
/// again by itself, and the first lines it takes begin with the count of those it did not.
#[tokio::test]
async fn a_writes_line_is_answered_and_a_failing_destination_is_tried_again() {
    let (fails, took) = (Arc::new(Mutex::new(true)), Arc::new(Mutex::new(Vec::new())));
    let log = flaky_log(Flaky(Arc::clone(&fails), Arc::clone(&took)));
    let input = sample_input();
    let started = std::time::Instant::now();
    let logged = log.record_written(&Decision::deny("a write"), &input);
    assert!(!logged.written().await, "the pipe took nothing");
    assert!(
        started.elapsed() < std::time::Duration::from_millis(500),
        "answered at once, not after a linger"
    );
    assert!(log.failing());
    assert_eq!(log.write_errors(), 1);

    *fails.lock().expect("flag") = false;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while log.failing() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!log.failing(), "tried again with no line queued");
    let text = String::from_utf8(took.lock().expect("bytes").clone()).expect("utf-8");
    let gap: Value = serde_json::from_str(text.lines().next().expect("a line")).expect("JSON");
    assert_eq!(gap["event"], "decision_log_unwritten", "{text}");
    assert_eq!(gap["data"], json!({"lines": 1, "lines_total": 1}));

    let logged = log.record_written(&Decision::deny("another write"), &input);
    assert!(logged.written().await);
}
