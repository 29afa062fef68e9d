//! `PidFile`: the file naming the running process, as Zabbix daemons keep one.
//!
//! Start-up refuses when the file names a live process, replaces a stale one (the
//! process is gone, the content is not a pid, or it is our own pid: a container's
//! pid 1 restarting), and writes the pid atomically (temp file + rename) so a reader
//! never sees a half-written file. Drop removes the file if it still names us.
//!
//! Liveness is `/proc/<pid>` existing (Linux); without `/proc` we cannot tell and
//! assume the process is alive, because refusing is safer than running twice. Between
//! the check and the rename two instances starting at once could both pass; the
//! listening port, which only one of them can bind, is the real guard against that.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PidFileError {
    #[error(
        "PID file \"{}\" names process {pid}, which is running: is zabbix-mcp-guard already running?",
        path.display()
    )]
    AlreadyRunning { path: PathBuf, pid: u32 },
    #[error("cannot read PID file \"{}\": {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write PID file \"{}\": {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The written PID file; removed when dropped.
#[derive(Debug)]
pub struct PidFile {
    path: PathBuf,
    pid: u32,
}

impl PidFile {
    /// Checks for a running instance, then writes our pid to `path`.
    pub fn create(path: impl AsRef<Path>) -> Result<PidFile, PidFileError> {
        let path = path.as_ref().to_path_buf();
        let pid = std::process::id();
        match fs::read_to_string(&path) {
            Ok(content) => {
                if let Ok(other) = content.trim().parse::<u32>()
                    && other != pid
                    && is_running(other)
                {
                    return Err(PidFileError::AlreadyRunning { path, pid: other });
                }
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(PidFileError::Read { path, source }),
        }
        write_atomically(&path, pid).map_err(|source| PidFileError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(PidFile { path, pid })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        // Another instance may have replaced the file (thinking ours stale): leave its.
        let ours = fs::read_to_string(&self.path)
            .is_ok_and(|content| content.trim() == self.pid.to_string());
        if ours && let Err(error) = fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), %error, "cannot remove PID file");
        }
    }
}

fn is_running(pid: u32) -> bool {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return true;
    }
    proc.join(pid.to_string()).exists()
}

/// Writes `<pid>\n` to a temp file beside `path` (same file system, so the rename is
/// atomic), then renames it over `path`.
fn write_atomically(path: &Path, pid: u32) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{pid}.tmp"));
    let temp = path.with_file_name(temp_name);
    let written = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)
        .and_then(|mut file| {
            file.write_all(format!("{pid}\n").as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| fs::rename(&temp, path));
    if written.is_err() {
        // Best effort: the temp file is ours and useless now; the write error matters more.
        let _ = fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::{PidFile, PidFileError};
    use crate::scratch::Scratch;

    /// Above Linux's largest possible pid_max (2^22), so never a live process.
    const DEAD_PID: u32 = 4_194_305;

    fn test_dir(name: &str) -> Scratch {
        Scratch::new(&format!("pidfile-{name}"))
    }

    fn content(path: &std::path::Path) -> String {
        fs::read_to_string(path).expect("pid file")
    }

    #[test]
    fn writes_our_pid_and_removes_it_on_drop() {
        let dir = test_dir("create");
        let path = dir.join("guard.pid");
        let pid_file = PidFile::create(&path).expect("created");
        assert_eq!(pid_file.path(), path);
        assert_eq!(content(&path), format!("{}\n", std::process::id()));
        let leftovers = fs::read_dir(&*dir).expect("dir").count();
        assert_eq!(leftovers, 1, "no temp file left behind");
        drop(pid_file);
        assert!(!path.exists());
    }

    #[test]
    fn replaces_a_stale_file() {
        let dir = test_dir("stale");
        let path = dir.join("guard.pid");
        for stale in [
            format!("{DEAD_PID}\n"),
            "not a pid".to_owned(),
            String::new(),
        ] {
            fs::write(&path, &stale).expect("stale file");
            let pid_file = PidFile::create(&path).expect("stale replaced");
            assert_eq!(content(&path), format!("{}\n", std::process::id()));
            drop(pid_file);
        }
    }

    #[test]
    fn our_own_pid_counts_as_stale() {
        let dir = test_dir("own");
        let path = dir.join("guard.pid");
        fs::write(&path, std::process::id().to_string()).expect("own pid");
        PidFile::create(&path).expect("replaced");
    }

    #[test]
    fn refuses_when_the_named_process_runs() {
        let dir = test_dir("live");
        let path = dir.join("guard.pid");
        // Our parent (cargo or the shell) outlives this test.
        let parent = std::os::unix::process::parent_id();
        fs::write(&path, format!("{parent}\n")).expect("live pid");
        let error = PidFile::create(&path).expect_err("refused");
        assert!(matches!(error, PidFileError::AlreadyRunning { pid, .. } if pid == parent));
        assert!(
            error.to_string().contains(&path.display().to_string()),
            "{error}"
        );
        assert_eq!(content(&path), format!("{parent}\n"), "left untouched");
    }

    #[test]
    fn drop_leaves_a_file_that_names_another_process() {
        let dir = test_dir("replaced");
        let path = dir.join("guard.pid");
        let pid_file = PidFile::create(&path).expect("created");
        fs::write(&path, format!("{DEAD_PID}\n")).expect("taken over");
        drop(pid_file);
        assert_eq!(content(&path), format!("{DEAD_PID}\n"));
    }

    #[test]
    fn errors_name_the_path() {
        let dir = test_dir("nodir");
        let path = dir.join("missing").join("guard.pid");
        let error = PidFile::create(&path).expect_err("no such directory");
        assert!(matches!(error, PidFileError::Write { .. }));
        assert!(
            error.to_string().contains(&path.display().to_string()),
            "{error}"
        );
        let dir_as_file = dir.to_path_buf();
        let error = PidFile::create(&dir_as_file).expect_err("a directory");
        assert!(matches!(error, PidFileError::Read { .. }), "{error}");
    }
}
