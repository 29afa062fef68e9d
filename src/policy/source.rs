//! Where a policy set comes from (a directory, or the default policy built into the
//! binary) and reading it: which files make a set, its revision, and the cheap
//! fingerprint the watcher polls. Directories are never searched recursively, so
//! `policies/` loads exactly its own files and each `policies/examples/<name>/` stands alone.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::PolicyError;

/// The optional data document loaded beside the policies as `data`.
pub(crate) const DATA_FILE: &str = "data.json";

/// The default policy compiled into the binary: the very text of `policies/default.rego`
/// (one source, not a copy), used when no `PolicyDir` is configured.
const BUILT_IN_NAME: &str = "default.rego";
const BUILT_IN_TEXT: &str = include_str!("../../policies/default.rego");

/// Where the running policy set comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicySource {
    /// `policies/default.rego` as built into the binary (no `PolicyDir` configured).
    BuiltIn,
    /// A configured `PolicyDir`; a failure there is never replaced by the built-in set.
    Dir(PathBuf),
}

/// Identifies a policy set: the first 16 hex digits of the SHA-256 over its sorted file
/// names and contents.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Revision(String);

/// The files of one policy set, read into memory, sorted by name.
#[derive(Debug, Clone)]
pub(crate) struct PolicySources {
    pub(crate) dir: PathBuf,
    /// `(file name, contents)` of the Rego modules.
    pub(crate) modules: Vec<(String, String)>,
    /// Contents of `data.json`, if present.
    pub(crate) data: Option<String>,
    pub(crate) revision: Revision,
}

/// Names, sizes and modification times of the files a set is made of; equal
/// fingerprints mean nothing needs to be re-read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Fingerprint(Vec<(String, u64, Option<SystemTime>)>);

/// Which Rego files a directory read includes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Files {
    /// `*.rego` except `*_test.rego`: what decisions run on.
    Policies,
    /// Every `*.rego`: what `policy test` runs on.
    WithTests,
}

impl Revision {
    /// The hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PolicySource {
    /// `built-in` or `directory`, for status documents.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::BuiltIn => "built-in",
            Self::Dir(_) => "directory",
        }
    }

    /// The directory, when the set comes from one.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            Self::BuiltIn => None,
            Self::Dir(dir) => Some(dir),
        }
    }
}

impl fmt::Display for PolicySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BuiltIn => write!(f, "built-in policies/{BUILT_IN_NAME}"),
            Self::Dir(dir) => write!(f, "{}", dir.display()),
        }
    }
}

impl serde::Serialize for PolicySource {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl Files {
    fn includes(self, name: &str) -> bool {
        if name == DATA_FILE {
            return true;
        }
        if !name.ends_with(".rego") {
            return false;
        }
        self == Self::WithTests || !name.ends_with("_test.rego")
    }
}

impl PolicySources {
    /// Reads the set `files` selects from `dir`.
    pub(crate) fn read(dir: &Path, files: Files) -> Result<Self, PolicyError> {
        let mut modules = Vec::new();
        let mut data = None;
        for (name, path) in list(dir, files)? {
            let contents = fs::read_to_string(&path).map_err(|source| PolicyError::Io {
                path: path.clone(),
                source,
            })?;
            if name == DATA_FILE {
                data = Some(contents);
            } else {
                super::nesting::check(&contents)
                    .map_err(|e| PolicyError::Compile(format!("{name}: {e}")))?;
                modules.push((name, contents));
            }
        }
        if modules.is_empty() {
            return Err(PolicyError::NoPolicyFiles(dir.to_path_buf()));
        }
        let revision = revision(&modules, data.as_deref());
        Ok(Self {
            dir: dir.to_path_buf(),
            modules,
            data,
            revision,
        })
    }

    /// The default policy built into the binary.
    pub(crate) fn built_in() -> Self {
        let modules = vec![(BUILT_IN_NAME.to_owned(), BUILT_IN_TEXT.to_owned())];
        let revision = revision(&modules, None);
        Self {
            dir: PathBuf::from("(built-in)"),
            modules,
            data: None,
            revision,
        }
    }

    /// Path of `data.json` in the directory, for error messages.
    pub(crate) fn data_path(&self) -> PathBuf {
        self.dir.join(DATA_FILE)
    }
}

impl Fingerprint {
    /// Stats the files of the decision set (no contents are read).
    pub(crate) fn of(dir: &Path) -> Result<Self, PolicyError> {
        let mut entries = Vec::new();
        for (name, path) in list(dir, Files::Policies)? {
            let meta = fs::metadata(&path).map_err(|source| PolicyError::Io { path, source })?;
            entries.push((name, meta.len(), meta.modified().ok()));
        }
        Ok(Self(entries))
    }
}

/// Regular files of `dir` (symlinks followed, subdirectories skipped) that `files`
/// includes, sorted by name so that the revision does not depend on directory order.
fn list(dir: &Path, files: Files) -> Result<Vec<(String, PathBuf)>, PolicyError> {
    let io = |source| PolicyError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let path = entry.path();
        if !files.includes(&name) || !path.is_file() {
            continue;
        }
        found.push((name, path));
    }
    found.sort();
    Ok(found)
}

fn revision(modules: &[(String, String)], data: Option<&str>) -> Revision {
    let mut hash = Sha256::new();
    let data = data.map(|d| (DATA_FILE, d));
    let mut files: Vec<(&str, &str)> = modules
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .chain(data)
        .collect();
    files.sort_unstable();
    for (name, contents) in files {
        // Length prefixes keep ("a", "bc") and ("ab", "c") apart.
        hash.update((name.len() as u64).to_le_bytes());
        hash.update(name.as_bytes());
        hash.update((contents.len() as u64).to_le_bytes());
        hash.update(contents.as_bytes());
    }
    let digest = hex::encode(hash.finalize());
    Revision(digest.get(..16).unwrap_or(&digest).to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::fs;
    use std::path::PathBuf;

    use super::{Files, Fingerprint, PolicySources};
    use crate::policy::PolicyError;

    /// A fresh empty directory, under this process's scratch root.
    pub(crate) fn temp_dir(tag: &str) -> PathBuf {
        crate::scratch::dir(&format!("policy-{tag}"))
    }

    #[test]
    fn reads_only_top_level_policy_files() {
        let dir = temp_dir("sources");
        fs::write(dir.join("b.rego"), "package b").expect("write");
        fs::write(dir.join("a.rego"), "package a").expect("write");
        fs::write(dir.join("a_test.rego"), "package a_test").expect("write");
        fs::write(dir.join("notes.md"), "# notes").expect("write");
        fs::write(dir.join("data.json"), "{}").expect("write");
        fs::create_dir(dir.join("sub")).expect("mkdir");
        fs::write(dir.join("sub").join("c.rego"), "package c").expect("write");

        let set = PolicySources::read(&dir, Files::Policies).expect("read");
        let names: Vec<&str> = set.modules.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a.rego", "b.rego"]);
        assert_eq!(set.data.as_deref(), Some("{}"));
        assert_eq!(set.revision.as_str().len(), 16);

        let with_tests = PolicySources::read(&dir, Files::WithTests).expect("read");
        assert_eq!(with_tests.modules.len(), 3);
        // Test files are not part of the decision set's revision.
        assert_ne!(with_tests.revision, set.revision);

        let before = Fingerprint::of(&dir).expect("stat");
        fs::write(dir.join("a_test.rego"), "package a_test # changed").expect("write");
        assert_eq!(Fingerprint::of(&dir).expect("stat"), before);
        fs::write(dir.join("b.rego"), "package b # changed").expect("write");
        assert_ne!(Fingerprint::of(&dir).expect("stat"), before);
        let changed = PolicySources::read(&dir, Files::Policies).expect("read");
        assert_ne!(changed.revision, set.revision);
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn built_in_set_is_the_shipped_default_policy() {
        let built_in = PolicySources::built_in();
        let shipped = PolicySources::read(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies"),
            Files::Policies,
        )
        .expect("read");
        assert_eq!(built_in.modules, shipped.modules);
        assert_eq!(built_in.revision, shipped.revision);
        assert!(built_in.data.is_none());
    }

    #[test]
    fn empty_or_missing_directory_is_an_error() {
        let dir = temp_dir("empty");
        assert!(matches!(
            PolicySources::read(&dir, Files::Policies),
            Err(PolicyError::NoPolicyFiles(_))
        ));
        fs::remove_dir_all(&dir).ok();
        assert!(matches!(
            PolicySources::read(&dir, Files::Policies),
            Err(PolicyError::Io { .. })
        ));
    }
}
