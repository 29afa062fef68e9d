//! `LogType=file` and a `DecisionLog` file: appends to the file and, as Zabbix daemons do,
//! renames it to `<file>.old` (replacing an earlier one) when the next record would take it
//! past the size limit (`LogFileSize`, `DecisionLogFileSize` MB), then starts a new file;
//! 0 never rotates. It also follows a rotation done by others (logrotate): a file moved
//! away or removed is created anew at its path, a truncated one is counted from its size.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::fallback::{Fallback, Problem, lock};

const MEBIBYTE: u64 = 1024 * 1024;

/// A file this creates is readable by its owner's group at most, never by others, whatever
/// the umask (which can only take more away): the logs name callers, tools and arguments,
/// and the decision log is an audit trail. A file that exists keeps its mode.
const FILE_MODE: u32 = 0o640;

/// How often a write first looks whether the path still names the open file: a `stat` at
/// most twice a second (the decision log writes at most once a second, so each of its
/// writes looks). A record written meanwhile to a file just moved away lands in it, and
/// logrotate's `delaycompress` keeps that file as it is until the next rotation.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// Opens the log file for appending; a seam so tests can make reopening fail.
type Opener = Box<dyn Fn(&Path) -> io::Result<File> + Send + Sync>;

/// A size-rotated log file. Every record is written whole under one lock, so records
/// from concurrent threads never interleave and a rotation never splits one.
pub(crate) struct RotatingFile {
    path: PathBuf,
    old_path: PathBuf,
    /// Bytes; 0 disables rotation.
    limit: u64,
    /// How often to look for a rotation done by others ([`FOLLOW_EVERY`]).
    follow_every: Duration,
    state: Mutex<State>,
    fallback: Fallback,
    open: Opener,
}

struct State {
    /// `None` while reopening after a rotation fails: records go to the fallback.
    file: Option<File>,
    /// Device and inode of `file`: whether the path still names it.
    id: (u64, u64),
    /// Bytes in the current file, counted rather than `stat`ed before every record.
    size: u64,
    /// When the path was last compared with the open file.
    followed: Instant,
    /// Whether `file` is a regular file. Only one is rotated: renaming a path that names
    /// a pipe or a device (`/dev/stdout`) would move the name, and the next record would
    /// create a regular file in its place, which nothing reads.
    regular: bool,
}

impl RotatingFile {
    /// Opens (creating if needed) `path` with a limit of `size_mb` MB; an error here
    /// stops the start-up, as Zabbix does when it cannot open its log file.
    pub(crate) fn open(path: &Path, size_mb: u32) -> io::Result<RotatingFile> {
        let limit = u64::from(size_mb) * MEBIBYTE;
        let open = Box::new(open_append);
        RotatingFile::with_parts(path, limit, FOLLOW_EVERY, Fallback::stderr(), open)
    }

    /// A file rotated at `limit` bytes that looks for others' rotations before every
    /// record, for tests that cannot write megabytes or wait.
    #[cfg(test)]
    pub(crate) fn with_limit_bytes(
        path: &Path,
        limit: u64,
        fallback: Fallback,
        open: Opener,
    ) -> io::Result<RotatingFile> {
        RotatingFile::with_parts(path, limit, Duration::ZERO, fallback, open)
    }

    fn with_parts(
        path: &Path,
        limit: u64,
        follow_every: Duration,
        fallback: Fallback,
        open: Opener,
    ) -> io::Result<RotatingFile> {
        let file = open(path)?;
        // Appending to an existing log: its bytes count towards the limit.
        let meta = file.metadata()?;
        Ok(RotatingFile {
            path: path.to_path_buf(),
            old_path: old_path(path),
            limit,
            follow_every,
            state: Mutex::new(State {
                file: Some(file),
                id: (meta.dev(), meta.ino()),
                size: meta.len(),
                followed: Instant::now(),
                regular: meta.is_file(),
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
    /// Appends `record`; false if it went to stderr instead (no file, or the write failed).
    pub(crate) fn write_record(&self, record: &[u8]) -> bool {
        let mut state = lock(&self.state);
        if state.followed.elapsed() >= self.follow_every {
            self.follow(&mut state);
        }
        let len = u64::try_from(record.len()).unwrap_or(u64::MAX);
        // An empty file is never rotated, so a record larger than the limit still
        // lands whole, alone in a fresh file; after falling back to stderr there is
        // no file left to rotate.
        let full = state.size > 0 && state.size.saturating_add(len) > self.limit;
        if self.limit > 0 && full && state.regular && state.file.is_some() {
            self.rotate(&mut state);
        }
        let Some(file) = state.file.as_mut() else {
            self.fallback.write(record);
            return false;
        };
        match append_whole(file, record) {
            Ok(()) => {
                state.size = state.size.saturating_add(len);
                true
            }
            Err(error) => {
                let message = format!(
                    "cannot write to log file \"{}\": {error}; such records go to stderr",
                    self.path.display()
                );
                self.fallback.report_once(Problem::Write, &message);
                self.fallback.write(record);
                false
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
        self.reopen(state);
    }

    /// Compares the path with the open file: moved away or removed (logrotate's `create`
    /// or `nocreate`), the path is opened anew; truncated in place (`copytruncate`), the
    /// size is taken from the file. After a failed reopen, tries again, silently until it
    /// works.
    fn follow(&self, state: &mut State) {
        state.followed = Instant::now();
        if state.file.is_none() {
            if let Ok(opened) = self.open_file() {
                state.adopt(opened);
                let message = format!(
                    "log file \"{}\" opened again; logging there from now on",
                    self.path.display()
                );
                self.fallback.report_recovery(Problem::Reopen, &message);
            }
            return;
        }
        match fs::metadata(&self.path) {
            Ok(meta) if (meta.dev(), meta.ino()) == state.id => {
                state.size = state.size.min(meta.len());
            }
            Ok(_) => self.reopen(state),
            Err(error) if error.kind() == io::ErrorKind::NotFound => self.reopen(state),
            // Cannot tell (a directory without search permission): keep the open file.
            Err(_) => {}
        }
    }

    fn open_file(&self) -> io::Result<(File, fs::Metadata)> {
        let file = (self.open)(&self.path)?;
        let meta = file.metadata()?;
        Ok((file, meta))
    }

    fn reopen(&self, state: &mut State) {
        match self.open_file() {
            Ok(opened) => state.adopt(opened),
            Err(error) => {
                let message = format!(
                    "cannot reopen log file \"{}\" after rotation: {error}; logging to stderr until it opens again",
                    self.path.display()
                );
                self.fallback.report_once(Problem::Reopen, &message);
                state.file = None;
            }
        }
    }
}

impl State {
    /// Writes go to `file` from now on; its bytes count towards the limit.
    fn adopt(&mut self, (file, meta): (File, fs::Metadata)) {
        self.file = Some(file);
        self.id = (meta.dev(), meta.ino());
        self.size = meta.len();
        self.regular = meta.is_file();
    }
}

/// Appends `record` whole or not at all. A disk that fills up during a write takes what
/// fits and refuses the rest: the part left in the file would be a line without its end,
/// and the next record written once there is room again would be glued to it, so the
/// first line after a full disk read as garbage (counted as written, lost to a line
/// parser). The part written is cut off again; the caller sends the whole record to the
/// fallback. Only a file that cannot be cut (not a regular one: a pipe, where a short
/// write needs a signal or a non-blocking end) keeps the part.
fn append_whole(file: &mut File, record: &[u8]) -> io::Result<()> {
    let mut written = 0;
    let error = loop {
        let Some(rest) = record.get(written..).filter(|rest| !rest.is_empty()) else {
            return Ok(());
        };
        match file.write(rest) {
            Ok(0) => break io::Error::from(io::ErrorKind::WriteZero),
            Ok(n) => written += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => break error,
        }
    };
    if written > 0 {
        let cut = u64::try_from(written).unwrap_or(u64::MAX);
        // Best effort: the record goes to the fallback whole either way.
        let _ = file
            .metadata()
            .and_then(|meta| file.set_len(meta.len().saturating_sub(cut)));
    }
    Err(error)
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .open(path)
}

/// `<LogFile>.old`, appended to the whole name (`a.log` → `a.log.old`) as Zabbix does.
fn old_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".old");
    PathBuf::from(name)
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
