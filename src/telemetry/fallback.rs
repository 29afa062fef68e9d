//! The last resort when a log destination fails: stderr, plus a one-time note saying
//! why, so an operator learns about the problem without a note before every line.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Problems reported once each: a second kind of failure still gets its own note.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Problem {
    Rotate = 1,
    Reopen = 2,
    Write = 4,
    Connect = 8,
    Send = 16,
}

/// Stderr (or, in tests, a capture buffer) shared by everything that falls back to it.
pub(crate) struct Fallback {
    out: Mutex<Box<dyn Write + Send>>,
    reported: AtomicU8,
}

impl Fallback {
    pub(crate) fn stderr() -> Fallback {
        Fallback::new(Box::new(io::stderr()))
    }

    pub(crate) fn new(out: Box<dyn Write + Send>) -> Fallback {
        Fallback {
            out: Mutex::new(out),
            reported: AtomicU8::new(0),
        }
    }

    /// Writes `zabbix-mcp-guard: <message>` the first time `problem` happens; later
    /// occurrences are silent.
    pub(crate) fn report_once(&self, problem: Problem, message: &str) {
        let bit = problem as u8;
        if self.reported.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
            self.write(format!("zabbix-mcp-guard: {message}\n").as_bytes());
        }
    }

    /// Writes `zabbix-mcp-guard: <message>` now, and lets `problem` be reported again: the
    /// problem is over, and a later one is news.
    pub(crate) fn report_recovery(&self, problem: Problem, message: &str) {
        self.reported.fetch_and(!(problem as u8), Ordering::Relaxed);
        self.write(format!("zabbix-mcp-guard: {message}\n").as_bytes());
    }

    /// Writes a whole record under the lock, so records never interleave.
    pub(crate) fn write(&self, record: &[u8]) {
        let mut out = lock(&self.out);
        // This is the last resort: a failure here has nowhere left to be reported.
        let _ = out.write_all(record);
        let _ = out.flush();
    }
}

/// Locks a mutex, ignoring poisoning: a thread that panicked while logging leaves the
/// writer usable, and losing all later log lines would be worse.
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
pub(crate) mod capture {
    //! An in-memory stand-in for stderr, and a log destination for tests.

    use std::io::{self, Write};
    use std::sync::{Arc, Mutex};

    use super::{Fallback, lock};

    #[derive(Clone, Default)]
    pub(crate) struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Capture {
        pub(crate) fn fallback(&self) -> Fallback {
            Fallback::new(Box::new(self.clone()))
        }

        pub(crate) fn text(&self) -> String {
            String::from_utf8_lossy(&lock(&self.0)).into_owned()
        }
    }

    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// For a fmt layer of a test's own subscriber.
    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
        type Writer = Capture;
        fn make_writer(&'a self) -> Capture {
            self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Problem;
    use super::capture::Capture;

    #[test]
    fn each_problem_is_reported_once() {
        let capture = Capture::default();
        let fallback = capture.fallback();
        fallback.report_once(Problem::Write, "disk full");
        fallback.report_once(Problem::Write, "disk full again");
        fallback.report_once(Problem::Reopen, "cannot reopen");
        fallback.write(b"a record\n");
        assert_eq!(
            capture.text(),
            "zabbix-mcp-guard: disk full\nzabbix-mcp-guard: cannot reopen\na record\n"
        );
    }
}
