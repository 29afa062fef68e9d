//! Configuration errors and where a value came from, so every message names the
//! file and line, the environment variable or the flag that holds the bad value.

use std::fmt;
use std::path::PathBuf;

use super::params::Param;

/// Where one value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    File {
        path: PathBuf,
        line: usize,
    },
    Env {
        var: String,
    },
    Flag {
        flag: String,
    },
    /// A value the sidecar supplies itself, e.g. the zabbix-image default rules.
    Default {
        what: &'static str,
    },
}

/// A parameter at its origin; displays as `/etc/x.conf:12: Timeout`,
/// `environment variable ZABBIX_MCP_GUARD_TIMEOUT` or `option --timeout`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct At {
    pub origin: Origin,
    pub param: Param,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {}: longer than {limit} bytes; not a configuration file", path.display())]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{}: the file starts with a byte order mark; only UTF-8 without BOM is supported", path.display())]
    Bom { path: PathBuf },
    #[error("{}:{line}: the line is not valid UTF-8", path.display())]
    NotUtf8 { path: PathBuf, line: usize },
    #[error("{}:{line}: expected Parameter=value, found {text:?}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        text: String,
    },
    #[error("{}:{line}: unknown parameter {name}", path.display())]
    UnknownParameter {
        path: PathBuf,
        line: usize,
        name: String,
    },
    #[error(
        "environment variable {var} names no parameter{}",
        meant.as_ref().map(|m| format!(" (did you mean {m}?)")).unwrap_or_default()
    )]
    UnknownVariable { var: String, meant: Option<String> },
    #[error("{at}: the parameter is given more than once (first at {first})")]
    Repeated { at: At, first: String },
    #[error("{at}: environment variable {var} is not defined")]
    UndefinedVariable { at: At, var: String },
    #[error("{at}: {message}")]
    Expansion { at: At, message: String },
    #[error("{at}: includes are nested deeper than {limit} levels")]
    IncludeDepth { at: At, limit: usize },
    #[error("{at}: invalid value {value:?}: {reason}")]
    BadValue {
        at: At,
        value: String,
        reason: String,
    },
    #[error("{at}: value {value} is out of range {min}-{max}")]
    OutOfRange {
        at: At,
        value: String,
        min: String,
        max: String,
    },
    #[error(
        "missing mandatory parameter {name}: set it in the configuration file, with --{flag} or with {env}"
    )]
    Missing {
        name: &'static str,
        flag: &'static str,
        env: String,
    },
    #[error("{at}: {message}")]
    Conflict { at: At, message: String },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line } => write!(f, "{}:{line}", path.display()),
            Origin::Env { var } => write!(f, "environment variable {var}"),
            Origin::Flag { flag } => write!(f, "option {flag}"),
            Origin::Default { what } => f.write_str(what),
        }
    }
}

impl At {
    pub fn new(origin: Origin, param: Param) -> At {
        At { origin, param }
    }
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Origin::File { .. } | Origin::Default { .. } => {
                write!(f, "{}: {}", self.origin, self.param.name())
            }
            // The variable or flag already names the parameter.
            Origin::Env { .. } | Origin::Flag { .. } => write!(f, "{}", self.origin),
        }
    }
}

impl ConfigError {
    /// A rejected value; secrets are masked so they never reach a log.
    pub fn bad_value(at: &At, value: &str, reason: impl Into<String>) -> ConfigError {
        let value = if at.param.is_secret() { "***" } else { value };
        ConfigError::BadValue {
            at: at.clone(),
            value: value.to_owned(),
            reason: reason.into(),
        }
    }

    pub fn out_of_range(at: &At, value: impl fmt::Display, min: &str, max: &str) -> ConfigError {
        ConfigError::OutOfRange {
            at: at.clone(),
            value: value.to_string(),
            min: min.to_owned(),
            max: max.to_owned(),
        }
    }

    pub fn conflict(at: &At, message: impl Into<String>) -> ConfigError {
        ConfigError::Conflict {
            at: at.clone(),
            message: message.into(),
        }
    }

    pub fn missing(param: Param) -> ConfigError {
        ConfigError::Missing {
            name: param.name(),
            flag: param.flag(),
            env: param.env_var(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{At, ConfigError, Origin};
    use crate::config::params::Param;

    #[test]
    fn messages_name_the_origin() {
        let file = At::new(
            Origin::File {
                path: "/etc/x.conf".into(),
                line: 12,
            },
            Param::Timeout,
        );
        let err = ConfigError::out_of_range(&file, 45, "3", "30");
        assert_eq!(
            err.to_string(),
            "/etc/x.conf:12: Timeout: value 45 is out of range 3-30"
        );
        let env = At::new(
            Origin::Env {
                var: Param::Timeout.env_var(),
            },
            Param::Timeout,
        );
        assert_eq!(
            ConfigError::out_of_range(&env, 45, "3", "30").to_string(),
            "environment variable ZABBIX_MCP_GUARD_TIMEOUT: value 45 is out of range 3-30"
        );
        let flag = At::new(
            Origin::Flag {
                flag: "--timeout".into(),
            },
            Param::Timeout,
        );
        assert_eq!(
            ConfigError::bad_value(&flag, "x", "expected an integer").to_string(),
            "option --timeout: invalid value \"x\": expected an integer"
        );
    }

    #[test]
    fn secrets_are_masked_in_errors() {
        let at = At::new(
            Origin::Flag {
                flag: "--approval-seal-key".into(),
            },
            Param::ApprovalSealKey,
        );
        let text = ConfigError::bad_value(&at, "hunter2", "too short").to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("***"));
    }
}
