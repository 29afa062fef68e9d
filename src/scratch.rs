//! Scratch files of tests: all under one directory per test process,
//! `<temp>/zmg-tests/<pid>`. The test harness has no teardown, so a process's directory is
//! removed by the next test process that starts after it is gone (and by `.ci/run` at its
//! end); a live process's directory is never touched, so test binaries may overlap.
//!
//! One file serves the unit tests (`crate::scratch`), the integration tests (included by
//! `tests/common`) and the benchmarks that write files (included by path).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh empty directory for one test, `<root>/<n>-<name>`, unique per call.
pub(crate) fn dir(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = root().join(format!("{n}-{name}"));
    fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A scratch directory ([`dir`]) removed when dropped, for tests that make many.
#[allow(dead_code)] // not every file that includes this one needs it
pub(crate) struct Scratch(PathBuf);

#[allow(dead_code)]
impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        Scratch(dir(name))
    }

    /// Writes `text` to `name` under the directory (parents made as needed).
    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("scratch subdirectory");
        }
        fs::write(&path, text).expect("scratch file");
        path
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// This process's directory, made on first use after sweeping the ones of processes gone.
fn root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let parent = shared_parent();
        sweep(&parent);
        let root = parent.join(std::process::id().to_string());
        // Made by an earlier process with our pid (pids are reused); start empty.
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).expect("scratch root");
        root
    })
}

/// `<temp>/zmg-tests`, writable by every user like /tmp itself, so a root-run and a
/// user-run test suite can share it.
fn shared_parent() -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let parent = std::env::temp_dir().join("zmg-tests");
    if fs::create_dir(&parent).is_ok() {
        let _ = fs::set_permissions(&parent, fs::Permissions::from_mode(0o1777));
    }
    parent
}

/// Removes the directories whose process no longer runs: one killed, crashed or simply
/// finished before this one started. Without /proc every process would look gone.
fn sweep(parent: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|n| n.parse::<u32>().is_ok()) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}
