//! Files that hold a secret parameter's value so that it is on no command line and in no
//! environment (`ApprovalSealKeyFile`, `SharedStoreFile`): read whole at load, kept with
//! their permission bits and owner for the warning at start and in `-T`. Their text never
//! appears in an error.

use std::path::{Path, PathBuf};

use super::error::ConfigError;
use super::file::Entry;
use super::file_access::FileAccess;
use super::params::Param;

/// A secret file larger than this holds no key or URL.
const MAX_SECRET_FILE_BYTES: u64 = 4096;

/// A file a secret was read from, with its permission bits and owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretFile {
    /// The parameter that named the file, for the warning.
    pub param: Param,
    pub path: PathBuf,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl SecretFile {
    /// Reads the file `e` names: a regular file of at most 4 KiB, as UTF-8 text with the
    /// surrounding whitespace (a trailing newline) cut. `kind` names it in errors ("key
    /// file").
    pub(super) fn read(
        param: Param,
        e: &Entry,
        kind: &str,
    ) -> Result<(String, SecretFile), ConfigError> {
        let path = Path::new(&e.value);
        let bad = |reason: String| ConfigError::bad_value(&e.at(), &e.value, reason);
        let meta =
            std::fs::metadata(path).map_err(|err| bad(format!("cannot read the {kind}: {err}")))?;
        if !meta.is_file() || meta.len() > MAX_SECRET_FILE_BYTES {
            return Err(bad(format!(
                "not a {kind} (a regular file of at most {MAX_SECRET_FILE_BYTES} bytes)"
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|err| bad(format!("cannot read the {kind}: {err}")))?;
        let access = FileAccess::of(&meta);
        let file = SecretFile {
            param,
            path: path.to_path_buf(),
            mode: access.mode,
            uid: access.uid,
            gid: access.gid,
        };
        Ok((text.trim().to_owned(), file))
    }

    pub fn access(&self) -> FileAccess {
        FileAccess {
            mode: self.mode,
            uid: self.uid,
            gid: self.gid,
        }
    }

    /// The warning `serve` logs and `-T` prints when someone besides the sidecar and root
    /// may read the file.
    pub fn exposure_warning(&self) -> Option<String> {
        self.access().warning(self.param.name(), &self.path)
    }
}
