//! `-T`: what a start would load from files, loaded now the same way, without binding a port
//! or connecting anywhere. The configuration parser has already checked the syntax, the
//! ranges, that named files exist and the seal key; this adds the policy set (compiled and
//! smoke-tested), the TLS certificate and key, and the CAs trusted toward Zabbix, with the
//! start-up warnings. A problem a start would only log (a policy set that does not load
//! starts a sidecar denying every call) fails here, so that it is seen before a restart.

use crate::app::{policy_mode, policy_source};
use std::path::Path;

use crate::config::{Config, DecisionLogSink, FileAccess, LogType, TlsAccept};
use crate::policy::PolicyEngine;
use crate::server::tls::{Expiry, ServerCertificate, TlsError};
use crate::startup::StartupWarning;
use crate::zabbix::ZabbixError;
use crate::zabbix::trust::ZabbixTrust;

/// One line of `-T`'s report.
#[derive(Debug)]
pub enum Finding {
    /// Loaded as a start would load it.
    Loaded(String),
    /// Loads, but weakens the guard or soon stops working.
    Warning(String),
    /// Does not load: a start would fail, or deny every call.
    Failed(PreflightError),
}

#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error(
        "PolicyDir: policies from {source_name}: {reason}; a start would deny every call until a set loads"
    )]
    Policy { source_name: String, reason: String },
    #[error("TLSAccept=cert needs both TLSCertFile and TLSKeyFile")]
    TlsFilesMissing,
    #[error("TLSCertFile/TLSKeyFile: {0}; a start would fail")]
    Certificate(TlsError),
    #[error("TLSCAFile: {0}; a start would fail")]
    Trust(ZabbixError),
}

/// Loads what a start would load from `config`'s files. Blocking file reads.
pub fn check(config: &Config) -> Vec<Finding> {
    let mut found = Vec::new();
    let engine = PolicyEngine::load_or_deny_all(policy_source(config), policy_mode(config));
    let policy = engine.status();
    match (policy.revision, policy.last_error) {
        (Some(revision), None) => found.push(Finding::Loaded(format!(
            "policies loaded: {}, revision {revision}",
            policy.source
        ))),
        (_, error) => found.push(Finding::Failed(PreflightError::Policy {
            source_name: policy.source.to_string(),
            reason: error.unwrap_or_else(|| "no policy set".to_owned()),
        })),
    }
    if config.tls_accept == TlsAccept::Cert {
        found.extend(certificate(config));
    }
    if let Some(ca_file) = config.tls_ca_file.as_deref()
        && !config.ignore_url_cert_errors
    {
        found.push(match ZabbixTrust::load(Some(ca_file), false) {
            Ok(_) => Finding::Loaded(format!("TLSCAFile loaded: {}", ca_file.display())),
            Err(error) => Finding::Failed(PreflightError::Trust(error)),
        });
    }
    found.extend(log_files(config));
    // As `serve` warns at start: an operator checking a change sees it before the restart.
    found.extend(
        config
            .secret_file_warnings()
            .into_iter()
            .map(Finding::Warning),
    );
    found.extend(
        StartupWarning::check(config, &engine)
            .into_iter()
            .map(|warning| Finding::Warning(warning.message().to_owned())),
    );
    found
}

/// The served certificate's line, and a warning if it expires within two weeks (as the
/// running sidecar warns).
fn certificate(config: &Config) -> Vec<Finding> {
    let (Some(cert_file), Some(key_file)) = (&config.tls_cert_file, &config.tls_key_file) else {
        return vec![Finding::Failed(PreflightError::TlsFilesMissing)];
    };
    let served = match ServerCertificate::load(cert_file, key_file) {
        Ok(served) => served,
        Err(error) => return vec![Finding::Failed(PreflightError::Certificate(error))],
    };
    let not_after = served.not_after_text();
    let mut found = vec![Finding::Loaded(format!(
        "TLS certificate loaded: {}, sha256 {}, valid until {not_after}",
        cert_file.display(),
        served.sha256()
    ))];
    found.extend(FileAccess::warning_for("TLSKeyFile", key_file).map(Finding::Warning));
    match served.expiry() {
        Expiry::Later => {}
        Expiry::Soon { days_left } => found.push(Finding::Warning(format!(
            "the TLS certificate in {} expires in {days_left} days, at {not_after}",
            cert_file.display()
        ))),
        Expiry::Passed => found.push(Finding::Warning(format!(
            "the TLS certificate in {} expired at {not_after}: clients refuse it",
            cert_file.display()
        ))),
    }
    found
}

/// The process log and decision log files a start opens, creating them: a directory that
/// does not exist, or a file that cannot be opened for appending, fails that start.
/// Warned of, not failed: `-T` often runs before the directory is made (the package checks
/// its configuration before systemd's `LogsDirectory=` exists).
fn log_files(config: &Config) -> Vec<Finding> {
    let process_log = match config.log_type {
        LogType::File => config.log_file.as_deref().map(|path| ("LogFile", path)),
        LogType::Console | LogType::System => None,
    };
    let decision_log = match &config.decision_log {
        DecisionLogSink::File(path) => Some(("DecisionLog", path.as_path())),
        DecisionLogSink::Stdout => None,
    };
    process_log
        .into_iter()
        .chain(decision_log)
        .filter_map(|(param, path)| {
            unwritable(path).map(|why| {
                Finding::Warning(format!(
                    "{param} {}: {why}; a start would fail unless that changes first",
                    path.display()
                ))
            })
        })
        .collect()
}

/// Why a start could not open `path` for appending, if it could not. Only regular files
/// are opened here: opening a FIFO for writing waits for its reader.
fn unwritable(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => None,
        Ok(_) => std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .err()
            .map(|error| format!("cannot be opened for writing ({error})")),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let dir = path
                .parent()
                .filter(|dir| !dir.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            match std::fs::metadata(dir) {
                Ok(meta) if meta.is_dir() => None,
                Ok(_) => Some(format!("{} is not a directory", dir.display())),
                Err(error) => Some(format!("directory {}: {error}", dir.display())),
            }
        }
        Err(error) => Some(error.to_string()),
    }
}
