//! Who besides the sidecar may read a key file (`ApprovalSealKeyFile`, `TLSKeyFile`): worth
//! a warning at start and in `-T`, never a refusal (a file the sidecar can read works).

use std::path::Path;

/// A file's permission bits, owner and group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileAccess {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// The user and group the sidecar runs as, to tell its own access from others'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Process {
    pub uid: u32,
    pub gid: u32,
}

impl Process {
    #[cfg(unix)]
    pub(crate) fn current() -> Process {
        Process {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
        }
    }

    #[cfg(not(unix))]
    pub(crate) fn current() -> Process {
        Process { uid: 0, gid: 0 }
    }
}

impl FileAccess {
    #[cfg(unix)]
    pub fn of(meta: &std::fs::Metadata) -> FileAccess {
        use std::os::unix::fs::MetadataExt as _;
        FileAccess {
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
        }
    }

    #[cfg(not(unix))]
    pub fn of(_meta: &std::fs::Metadata) -> FileAccess {
        FileAccess {
            mode: 0o600,
            uid: 0,
            gid: 0,
        }
    }

    /// Others' read bit, an owner who is neither root nor the sidecar (an owner can always
    /// read or chmod it), or group read for a group other than the sidecar's own: a
    /// Kubernetes Secret under `fsGroup` is root:<the sidecar's group> 0440 whatever its
    /// `defaultMode`, and no one else holds that group in the pod.
    pub(crate) fn readable_by_others_than(self, process: Process) -> bool {
        self.mode & 0o004 != 0
            || (self.uid != 0 && self.uid != process.uid)
            || (self.mode & 0o040 != 0 && self.gid != process.gid)
    }

    /// The warning for `param`'s file at `path`, if someone besides the sidecar and root
    /// may read it.
    pub fn warning(self, param: &str, path: &Path) -> Option<String> {
        self.readable_by_others_than(Process::current()).then(|| {
            format!(
                "{param} {} (mode {:o}, owner {}:{}) is readable by a user or group other \
                 than the sidecar's own or root; chmod 600 it and give it to root or the \
                 sidecar's user",
                path.display(),
                self.mode,
                self.uid,
                self.gid
            )
        })
    }

    /// As `warning`, for a file read now (`None` too when it cannot be read: loading it
    /// says why).
    pub fn warning_for(param: &str, path: &Path) -> Option<String> {
        let meta = std::fs::metadata(path).ok()?;
        FileAccess::of(&meta).warning(param, path)
    }
}
