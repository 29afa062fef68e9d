//! `LogType=file`: appends to `LogFile` and, as Zabbix daemons do, renames it to
//! `<LogFile>.old` (replacing an earlier one) when the next record would take it past
//! `LogFileSize` MB, then starts a new file. `LogFileSize=0` never rotates.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::fallback::{Fallback, Problem, lock};

const MEBIBYTE: u64 = 1024 * 1024;

/// Opens the log file for appending; a seam so tests can make reopening fail.
type Opener = Box<dyn Fn(&Path) -> io::Result<File> + Send + Sync>;

/// A size-rotated log file. Every record is written whole under one lock, so records
/// from concurrent threads never interleave and a rotation never splits one.
pub(crate) struct RotatingFile {
    path: PathBuf,
    old_path: PathBuf,
    /// Bytes; 0 disables rotation.
    limit: u64,
    state: Mutex<State>,
    fallback: Fallback,
    open: Opener,
}

struct State {
    /// `None` once reopening after a rotation failed: records go to the fallback.
    file: Option<File>,
    /// Bytes in the current file, counted rather than `stat`ed before every record.
    size: u64,
}

impl RotatingFile {
    /// Opens (creating if needed) `path` with a limit of `size_mb` MB; an error here
    /// stops the start-up, as Zabbix does when it cannot open its log file.
    pub(crate) fn open(path: &Path, size_mb: u32) -> io::Result<RotatingFile> {
        let limit = u64::from(size_mb) * MEBIBYTE;
        RotatingFile::with_parts(path, limit, Fallback::stderr(), Box::new(open_append))
    }

    /// A file rotated at `limit` bytes, for tests that cannot write megabytes.
    #[cfg(test)]
    pub(crate) fn with_limit_bytes(
        path: &Path,
        limit: u64,
        fallback: Fallback,
        open: Opener,
    ) -> io::Result<RotatingFile> {
        RotatingFile::with_parts(path, limit, fallback, open)
    }

    fn with_parts(
        path: &Path,
        limit: u64,
        fallback: Fallback,
        open: Opener,
    ) -> io::Result<RotatingFile> {
        let file = open(path)?;
        // Appending to an existing log: its bytes count towards the limit.
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_path_buf(),
            old_path: old_path(path),
            limit,
            state: Mutex::new(State {
                file: Some(file),
                size,
            }),
            fallback,
            open,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The rotation limit in whole MB, as configured (0: never rotated).
    pub(crate) fn limit_mb(&self) -> u64 {
        self.limit / MEBIBYTE
    }

    /// Appends one formatted record (one or more whole lines).
    pub(crate) fn write_record(&self, record: &[u8]) {
        let mut state = lock(&self.state);
        let len = u64::try_from(record.len()).unwrap_or(u64::MAX);
        // An empty file is never rotated, so a record larger than the limit still
        // lands whole, alone in a fresh file; after falling back to stderr there is
        // no file left to rotate.
        let full = state.size > 0 && state.size.saturating_add(len) > self.limit;
        if self.limit > 0 && full && state.file.is_some() {
            self.rotate(&mut state);
        }
        let Some(file) = state.file.as_mut() else {
            self.fallback.write(record);
            return;
        };
        match file.write_all(record) {
            Ok(()) => state.size = state.size.saturating_add(len),
            Err(error) => {
                let message = format!(
                    "cannot write to log file \"{}\": {error}; such records go to stderr",
                    self.path.display()
                );
                self.fallback.report_once(Problem::Write, &message);
                self.fallback.write(record);
            }
        }
    }

    fn rotate(&self, state: &mut State) {
        match fs::rename(&self.path, &self.old_path) {
            Ok(()) => {}
            // Someone removed the log file: just start a new one.
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => {
                let message = format!(
                    "cannot rotate log file \"{}\" to \"{}\": {error}; it keeps growing",
                    self.path.display(),
                    self.old_path.display()
                );
                self.fallback.report_once(Problem::Rotate, &message);
                // Retry after another LogFileSize of output, not before every record.
                state.size = 0;
                return;
            }
        }
        match (self.open)(&self.path) {
            Ok(file) => {
                state.file = Some(file);
                state.size = 0;
            }
            Err(error) => {
                let message = format!(
                    "cannot reopen log file \"{}\" after rotation: {error}; logging to stderr from now on",
                    self.path.display()
                );
                self.fallback.report_once(Problem::Reopen, &message);
                state.file = None;
            }
        }
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// `<LogFile>.old`, appended to the whole name (`a.log` → `a.log.old`) as Zabbix does.
fn old_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".old");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::fs;
    use std::io;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::{Opener, RotatingFile, old_path, open_append};
    use crate::telemetry::fallback::capture::Capture;
    use crate::telemetry::test_dir;

    fn rotating(path: &Path, limit: u64, capture: &Capture) -> RotatingFile {
        RotatingFile::with_limit_bytes(path, limit, capture.fallback(), Box::new(open_append))
            .expect("log file opens")
    }

    fn lines(path: &Path) -> Vec<String> {
        fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// A 20-byte record: `r<nn> xxxxxxxxxxxxxx\n`.
    fn record(n: usize) -> String {
        format!("r{n:02} {}\n", "x".repeat(15))
    }

    #[test]
    fn old_path_appends_to_the_whole_name() {
        assert_eq!(
            old_path(Path::new("/var/log/guard.log")),
            PathBuf::from("/var/log/guard.log.old")
        );
    }

    #[test]
    fn rotates_to_old_before_a_record_would_pass_the_limit() {
        let dir = test_dir("rotate");
        let path = dir.join("guard.log");
        let capture = Capture::default();
        let log = rotating(&path, 50, &capture);
        for n in 0..5 {
            log.write_record(record(n).as_bytes());
        }
        // 20 + 20 fit in 50, a third would not: r00 r01 | r02 r03 | r04.
        assert_eq!(
            lines(&old_path(&path)),
            vec![record(2).trim_end(), record(3).trim_end()]
        );
        assert_eq!(lines(&path), vec![record(4).trim_end()]);
        assert_eq!(capture.text(), "", "a clean rotation reports nothing");
    }

    #[test]
    fn existing_content_counts_towards_the_limit() {
        let dir = test_dir("existing");
        let path = dir.join("guard.log");
        fs::write(&path, "y".repeat(39) + "\n").expect("prefill");
        let log = rotating(&path, 50, &Capture::default());
        log.write_record(record(0).as_bytes());
        assert_eq!(lines(&old_path(&path)), vec!["y".repeat(39)]);
        assert_eq!(lines(&path), vec![record(0).trim_end()]);
    }

    #[test]
    fn a_record_larger_than_the_limit_is_written_whole() {
        let dir = test_dir("large");
        let path = dir.join("guard.log");
        let log = rotating(&path, 10, &Capture::default());
        log.write_record(record(0).as_bytes());
        log.write_record(record(1).as_bytes());
        assert_eq!(lines(&old_path(&path)), vec![record(0).trim_end()]);
        assert_eq!(lines(&path), vec![record(1).trim_end()]);
    }

    #[test]
    fn zero_limit_never_rotates() {
        let dir = test_dir("norotate");
        let path = dir.join("guard.log");
        let log = rotating(&path, 0, &Capture::default());
        for n in 0..50 {
            log.write_record(record(n).as_bytes());
        }
        assert_eq!(lines(&path).len(), 50);
        assert!(!old_path(&path).exists());
    }

    #[test]
    fn concurrent_records_are_neither_lost_nor_split() {
        let dir = test_dir("concurrent");
        let path = dir.join("guard.log");
        // 4 threads × 50 records × 20 bytes = 4000 bytes: exactly one rotation.
        let log = Arc::new(rotating(&path, 3000, &Capture::default()));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let log = Arc::clone(&log);
                std::thread::spawn(move || {
                    for n in 0..50 {
                        log.write_record(format!("t{t} n{n:02} {}\n", "z".repeat(12)).as_bytes());
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("writer thread");
        }
        let old = lines(&old_path(&path));
        let current = lines(&path);
        assert!(
            !old.is_empty() && !current.is_empty(),
            "one rotation happened"
        );
        assert!(fs::metadata(old_path(&path)).expect("old").len() <= 3000);
        let all: Vec<&String> = old.iter().chain(current.iter()).collect();
        assert!(
            all.iter()
                .all(|line| line.len() == 19 && line.ends_with(&"z".repeat(12)))
        );
        let distinct: BTreeSet<&&String> = all.iter().collect();
        assert_eq!((all.len(), distinct.len()), (200, 200));
    }

    #[test]
    fn failed_reopen_falls_back_to_stderr_and_says_so_once() {
        let dir = test_dir("reopen");
        let path = dir.join("guard.log");
        let calls = AtomicUsize::new(0);
        let open: Opener = Box::new(move |p| {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                open_append(p)
            } else {
                Err(io::Error::other("injected"))
            }
        });
        let capture = Capture::default();
        let log = RotatingFile::with_limit_bytes(&path, 30, capture.fallback(), open)
            .expect("first open works");
        for n in 0..4 {
            log.write_record(record(n).as_bytes());
        }
        assert_eq!(lines(&old_path(&path)), vec![record(0).trim_end()]);
        let text = capture.text();
        let expected = format!(
            "zabbix-mcp-guard: cannot reopen log file \"{}\" after rotation: injected; \
             logging to stderr from now on\n{}{}{}",
            path.display(),
            record(1),
            record(2),
            record(3)
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn failed_rename_keeps_writing_to_the_same_file() {
        let dir = test_dir("rename");
        let path = dir.join("guard.log");
        // A non-empty directory where `.old` should go makes the rename fail, even as root.
        fs::create_dir_all(old_path(&path).join("blocker")).expect("blocker");
        let capture = Capture::default();
        let log = rotating(&path, 30, &capture);
        for n in 0..4 {
            log.write_record(record(n).as_bytes());
        }
        assert_eq!(lines(&path).len(), 4, "nothing lost");
        let text = capture.text();
        assert!(
            text.starts_with("zabbix-mcp-guard: cannot rotate log file"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 1, "reported once: {text}");
    }

    #[test]
    fn failed_writes_go_to_stderr() {
        let dir = test_dir("readonly");
        let path = dir.join("guard.log");
        fs::write(&path, "").expect("create");
        let capture = Capture::default();
        let read_only: Opener = Box::new(|p| fs::File::open(p));
        let log = RotatingFile::with_limit_bytes(&path, 0, capture.fallback(), read_only)
            .expect("opens read-only");
        log.write_record(record(0).as_bytes());
        log.write_record(record(1).as_bytes());
        let text = capture.text();
        assert!(
            text.starts_with("zabbix-mcp-guard: cannot write to log file"),
            "{text}"
        );
        assert!(
            text.ends_with(&format!("{}{}", record(0), record(1))),
            "{text}"
        );
        assert_eq!(text.matches("cannot write").count(), 1);
    }
}
