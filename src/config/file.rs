//! The Zabbix-style configuration file: `Parameter=value` lines, `#` comments at line
//! start, UTF-8 without BOM, `${NAME}` environment expansion in values and
//! `Include=` of a file, a directory or a `*` pattern in the file name.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::error::{At, ConfigError, Origin};
use super::image::{self, EnvContract};
use super::params::{Arity, Param};

/// Includes nested deeper than this are an error (Zabbix uses the same limit), which
/// also stops include cycles.
pub const MAX_INCLUDE_DEPTH: usize = 10;

/// A configuration file (each included one too) is at most this long; the shipped
/// example, every parameter documented, is 30 kB. Read whole, `-c /dev/zero` took memory
/// until the process was killed.
pub const MAX_FILE_SIZE: u64 = 1 << 20;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One `Parameter=value` line after expansion, with where it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub param: Param,
    pub value: String,
    pub origin: Origin,
}

impl Entry {
    pub fn at(&self) -> At {
        At::new(self.origin.clone(), self.param)
    }
}

/// What a configuration file and its includes hold.
#[derive(Debug, Default)]
pub struct FileRead {
    /// The parameter lines, in order.
    pub entries: Vec<Entry>,
    /// The variables the values name in `${NAME}`: a `ZABBIX_MCP_GUARD_*` variable that
    /// names no parameter is refused unless the file uses it this way.
    pub referenced: BTreeSet<String>,
}

/// Reads a configuration file and everything it includes, in order. `env` is used
/// for `${NAME}` expansion. A single-valued parameter given twice is an error. Under
/// the zabbix-image contract a value that is only a reference to an unset or empty
/// variable leaves the parameter unset, as the official server does.
pub fn read(
    path: &Path,
    env: &BTreeMap<String, String>,
    contract: EnvContract,
) -> Result<FileRead, ConfigError> {
    let mut out = FileRead::default();
    read_into(path, env, contract, 0, &mut out)?;
    reject_repeats(&out.entries)?;
    Ok(out)
}

fn read_into(
    path: &Path,
    env: &BTreeMap<String, String>,
    contract: EnvContract,
    depth: usize,
    out: &mut FileRead,
) -> Result<(), ConfigError> {
    let bytes = read_bounded(path)?;
    if bytes.starts_with(BOM) {
        return Err(ConfigError::Bom {
            path: path.to_owned(),
        });
    }
    for (index, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = index + 1;
        let text = std::str::from_utf8(raw).map_err(|_| ConfigError::NotUtf8 {
            path: path.to_owned(),
            line,
        })?;
        let text = text.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let Some((key, value)) = text.split_once('=') else {
            return Err(ConfigError::Syntax {
                path: path.to_owned(),
                line,
                text: text.to_owned(),
            });
        };
        let key = key.trim();
        let param = Param::from_name(key).ok_or_else(|| ConfigError::UnknownParameter {
            path: path.to_owned(),
            line,
            name: key.to_owned(),
        })?;
        let origin = Origin::File {
            path: path.to_owned(),
            line,
        };
        let at = At::new(origin.clone(), param);
        out.referenced.extend(references(value).map(str::to_owned));
        if contract == EnvContract::ZabbixImage && image::unset_reference(value, env) {
            continue;
        }
        let value = expand(value.trim(), env, &at)?;
        if param == Param::Include {
            if depth + 1 >= MAX_INCLUDE_DEPTH {
                return Err(ConfigError::IncludeDepth {
                    at,
                    limit: MAX_INCLUDE_DEPTH,
                });
            }
            for included in resolve_include(path, &value, &at)? {
                read_into(&included, env, contract, depth + 1, out)?;
            }
        } else {
            out.entries.push(Entry {
                param,
                value,
                origin,
            });
        }
    }
    Ok(())
}

/// The file's bytes, refused past [`MAX_FILE_SIZE`] before more is read.
fn read_bounded(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let read_error = |source| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let file = fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_SIZE + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_FILE_SIZE {
        return Err(ConfigError::TooLarge {
            path: path.to_owned(),
            limit: MAX_FILE_SIZE,
        });
    }
    Ok(bytes)
}

/// Replaces every `${NAME}` with the variable's value; a lone `$` stays as it is.
pub fn expand(value: &str, env: &BTreeMap<String, String>, at: &At) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(ConfigError::Expansion {
                at: at.clone(),
                message: "unterminated ${ in value".to_owned(),
            });
        };
        let name = &after[..end];
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(ConfigError::Expansion {
                at: at.clone(),
                message: format!("invalid variable name {name:?} in ${{...}}"),
            });
        }
        let replacement = env
            .get(name)
            .ok_or_else(|| ConfigError::UndefinedVariable {
                at: at.clone(),
                var: name.to_owned(),
            })?;
        out.push_str(replacement);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The names inside `${…}` in a value, as [`expand`] reads them (valid or not).
fn references(value: &str) -> impl Iterator<Item = &str> {
    value
        .split("${")
        .skip(1)
        .filter_map(|rest| rest.split_once('}'))
        .map(|(name, _)| name)
}

/// The files an `Include=` value names, sorted. Relative paths are taken from the
/// including file's directory so a configuration tree can be moved as a whole.
fn resolve_include(including: &Path, value: &str, at: &At) -> Result<Vec<PathBuf>, ConfigError> {
    if value.is_empty() {
        return Err(ConfigError::bad_value(
            at,
            value,
            "a file, directory or pattern is required",
        ));
    }
    let target = match including.parent() {
        Some(dir) => dir.join(value),
        None => PathBuf::from(value),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = target.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.to_string_lossy().contains('*') {
        return Err(ConfigError::bad_value(
            at,
            value,
            "wildcards are supported only in the file name",
        ));
    }
    if name.contains('*') {
        return list_files(&dir, at, value, |file| wildcard(&name, file));
    }
    let meta =
        fs::metadata(&target).map_err(|e| ConfigError::bad_value(at, value, e.to_string()))?;
    if meta.is_dir() {
        list_files(&target, at, value, |_| true)
    } else {
        Ok(vec![target])
    }
}

/// Regular files (symlinks followed) directly in `dir` whose names pass `keep`.
fn list_files(
    dir: &Path,
    at: &At,
    value: &str,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<PathBuf>, ConfigError> {
    let read_dir =
        fs::read_dir(dir).map_err(|e| ConfigError::bad_value(at, value, e.to_string()))?;
    let mut files = Vec::new();
    for dirent in read_dir {
        let dirent = dirent.map_err(|e| ConfigError::bad_value(at, value, e.to_string()))?;
        let path = dirent.path();
        let name = dirent.file_name().to_string_lossy().into_owned();
        if keep(&name) && fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// `*` matches any run of characters; the whole name must match.
fn wildcard(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(pos) => rest = &rest[pos + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

fn reject_repeats(entries: &[Entry]) -> Result<(), ConfigError> {
    let mut seen: HashMap<Param, &Origin> = HashMap::new();
    for entry in entries.iter().filter(|e| e.param.arity() == Arity::Single) {
        if let Some(first) = seen.get(&entry.param) {
            return Err(ConfigError::Repeated {
                at: entry.at(),
                first: first.to_string(),
            });
        }
        seen.insert(entry.param, &entry.origin);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{expand, wildcard};
    use crate::config::error::{At, ConfigError, Origin};
    use crate::config::params::Param;

    fn at() -> At {
        At::new(
            Origin::File {
                path: "/x.conf".into(),
                line: 3,
            },
            Param::FrontendUrl,
        )
    }

    #[test]
    fn expands_defined_variables() {
        let env = BTreeMap::from([("HOST".to_owned(), "zbx".to_owned())]);
        let got = expand("https://${HOST}:${HOST}/a$b", &env, &at()).unwrap();
        assert_eq!(got, "https://zbx:zbx/a$b");
    }

    #[test]
    fn undefined_variable_is_named() {
        let err = expand("${NOPE}", &BTreeMap::new(), &at()).unwrap_err();
        assert!(matches!(err, ConfigError::UndefinedVariable { ref var, .. } if var == "NOPE"));
        assert_eq!(
            err.to_string(),
            "/x.conf:3: FrontendURL: environment variable NOPE is not defined"
        );
        assert!(expand("${OPEN", &BTreeMap::new(), &at()).is_err());
        assert!(expand("${1A}", &BTreeMap::new(), &at()).is_err());
    }

    #[test]
    fn file_name_wildcards() {
        assert!(wildcard("*.conf", "a.conf"));
        assert!(!wildcard("*.conf", "a.conf~"));
        assert!(wildcard("10-*", "10-x"));
        assert!(wildcard("a*b*c", "abc"));
        assert!(!wildcard("a*a", "a"));
        assert!(wildcard("*", ""));
    }
}
