//! Turning merged parameter values into a validated `Config`: defaults, per-value
//! parsing and the rules that involve several parameters.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::exposure::{Pattern, ToolRule};

use super::error::ConfigError;
use super::file::Entry;
use super::merge::Resolved;
use super::params::Param;
use super::seal_key;
use super::shared_store::SharedStore;
use super::values;
use super::{
    ApprovalPageConfig, Config, DecisionLogSink, LogType, PolicyMode, SessionMode,
    StatusListenerConfig, TlsAccept,
};

pub const DEFAULT_LISTEN_PORT: u16 = 8443;
pub const LISTEN_PORT_RANGE: (u64, u64) = (1024, 32767);
pub const DEFAULT_TIMEOUT_SECS: u64 = 10;
pub const TIMEOUT_RANGE: (u64, u64) = (3, 30);
pub const DEFAULT_MAX_RESPONSE_SIZE: usize = 64 << 10;
pub const MAX_RESPONSE_SIZE_RANGE: (u64, u64) = (16 << 10, 256 << 10);
pub const DEFAULT_LOG_FILE_SIZE_MB: u32 = 1;
pub const LOG_FILE_SIZE_RANGE: (u64, u64) = (0, 1024);
/// The decision log is an audit trail: rotating it (which replaces the previous `.old`)
/// is a choice, so the default keeps one growing file, as before.
pub const DEFAULT_DECISION_LOG_FILE_SIZE_MB: u32 = 0;
pub const DEFAULT_DEBUG_LEVEL: u8 = 3;
pub const DEBUG_LEVEL_RANGE: (u64, u64) = (0, 5);
pub const DEFAULT_APPROVAL_TIMEOUT_SECS: u64 = 900;
pub const APPROVAL_TIMEOUT_RANGE: (u64, u64) = (5, 86_400);

const TLS_ACCEPT: [(&str, TlsAccept); 2] = [
    ("unencrypted", TlsAccept::Unencrypted),
    ("cert", TlsAccept::Cert),
];
const LOG_TYPE: [(&str, LogType); 3] = [
    ("console", LogType::Console),
    ("file", LogType::File),
    ("system", LogType::System),
];
const POLICY_MODE: [(&str, PolicyMode); 2] = [
    ("enforce", PolicyMode::Enforce),
    ("dry-run", PolicyMode::DryRun),
];
const SESSION_MODE: [(&str, SessionMode); 2] = [
    ("stateless", SessionMode::Stateless),
    ("stateful", SessionMode::Stateful),
];

/// Builds and validates the configuration.
pub fn build(r: &Resolved) -> Result<Config, ConfigError> {
    let frontend = r
        .get(Param::FrontendUrl)
        .ok_or_else(|| ConfigError::missing(Param::FrontendUrl))?;
    let allowed = r
        .get(Param::AllowedIp)
        .ok_or_else(|| ConfigError::missing(Param::AllowedIp))?;
    let (approval_seal_key, approval_seal_key_file) = seal_key::load(r)?;
    let store = SharedStore::load(r)?;
    if let Some(given) = &store.given
        && store.is_redis()
        && approval_seal_key.is_none()
    {
        let message = "a Redis store needs ApprovalSealKey (or ApprovalSealKeyFile), the same \
                       on every replica: approvals kept in Redis are signed with it";
        return Err(ConfigError::conflict(&given.at(), message));
    }
    let log_file = path(r, Param::LogFile);
    // The official server's LogType defaults to file; ours to console (stderr), except that
    // a LogFile given without LogType is written to, as there: an official configuration
    // relying on that default had its LogFile ignored and logged to stderr.
    let default_log_type = match log_file {
        Some(_) => LogType::File,
        None => LogType::Console,
    };
    let config = Config {
        frontend_url: values::frontend_url(&frontend.at(), &frontend.value)?,
        allowed_ip: values::allowed_ip(&allowed.at(), &allowed.value)?,
        allowed_ip_raw: allowed.value.clone(),
        listen_ip: match r.get(Param::ListenIp) {
            Some(e) => values::listen_ip(&e.at(), &e.value)?,
            None => vec![std::net::Ipv4Addr::UNSPECIFIED.into()],
        },
        // The ranges below fit their types, so the conversions cannot fail.
        listen_port: int(r, Param::ListenPort, LISTEN_PORT_RANGE)?
            .map_or(DEFAULT_LISTEN_PORT, |v| {
                u16::try_from(v).unwrap_or(DEFAULT_LISTEN_PORT)
            }),
        tls_accept: keyword(r, Param::TlsAccept, &TLS_ACCEPT)?.unwrap_or(TlsAccept::Unencrypted),
        tls_cert_file: existing_file(r, Param::TlsCertFile)?,
        tls_key_file: existing_file(r, Param::TlsKeyFile)?,
        tls_ca_file: existing_file(r, Param::TlsCaFile)?,
        ignore_url_cert_errors: match r.get(Param::IgnoreUrlCertErrors) {
            Some(e) => values::boolean(&e.at(), &e.value)?,
            None => false,
        },
        timeout: Duration::from_secs(
            int(r, Param::Timeout, TIMEOUT_RANGE)?.unwrap_or(DEFAULT_TIMEOUT_SECS),
        ),
        max_response_size: match r.get(Param::MaxResponseSize) {
            Some(e) => {
                let (min, max) = MAX_RESPONSE_SIZE_RANGE;
                let bytes = values::size(&e.at(), &e.value, min, max)?;
                usize::try_from(bytes).unwrap_or(DEFAULT_MAX_RESPONSE_SIZE)
            }
            None => DEFAULT_MAX_RESPONSE_SIZE,
        },
        tool_prefix: match r.get(Param::ToolPrefix) {
            Some(e) => values::tool_prefix(&e.at(), &e.value)?,
            None => String::new(),
        },
        tool_rules: tool_rules(r.rules())?,
        allowed_hosts: allowed_hosts(r.allowed_hosts())?,
        log_type: keyword(r, Param::LogType, &LOG_TYPE)?.unwrap_or(default_log_type),
        log_file,
        log_file_size_mb: int(r, Param::LogFileSize, LOG_FILE_SIZE_RANGE)?
            .map_or(DEFAULT_LOG_FILE_SIZE_MB, |v| {
                u32::try_from(v).unwrap_or(DEFAULT_LOG_FILE_SIZE_MB)
            }),
        debug_level: int(r, Param::DebugLevel, DEBUG_LEVEL_RANGE)?
            .map_or(DEFAULT_DEBUG_LEVEL, |v| {
                u8::try_from(v).unwrap_or(DEFAULT_DEBUG_LEVEL)
            }),
        pid_file: path(r, Param::PidFile),
        policy_dir: policy_dir(r)?,
        policy_mode: keyword(r, Param::PolicyMode, &POLICY_MODE)?.unwrap_or(PolicyMode::Enforce),
        decision_log: decision_log(r)?,
        decision_log_file_size_mb: int(r, Param::DecisionLogFileSize, LOG_FILE_SIZE_RANGE)?
            .map_or(DEFAULT_DECISION_LOG_FILE_SIZE_MB, |v| {
                u32::try_from(v).unwrap_or(DEFAULT_DECISION_LOG_FILE_SIZE_MB)
            }),
        session_mode: keyword(r, Param::SessionMode, &SESSION_MODE)?
            .unwrap_or(SessionMode::Stateless),
        approval_seal_key,
        approval_seal_key_file,
        shared_store: store.url,
        shared_store_file: store.file,
        approval_page: approval_page(r)?,
        approval_timeout: Duration::from_secs(
            int(r, Param::ApprovalTimeout, APPROVAL_TIMEOUT_RANGE)?
                .unwrap_or(DEFAULT_APPROVAL_TIMEOUT_SECS),
        ),
        limits: super::limits::build(r)?,
        caller_limits: super::caller_limits::build(r)?,
        status_listener: status_listener(r)?,
    };
    check_cross_rules(r, &config)?;
    Ok(config)
}

fn int(r: &Resolved, param: Param, (min, max): (u64, u64)) -> Result<Option<u64>, ConfigError> {
    r.get(param)
        .map(|e| values::integer(&e.at(), &e.value, min, max))
        .transpose()
}

fn keyword<T: Copy>(
    r: &Resolved,
    param: Param,
    choices: &[(&str, T)],
) -> Result<Option<T>, ConfigError> {
    r.get(param)
        .map(|e| values::keyword(&e.at(), &e.value, choices))
        .transpose()
}

/// An optional path; an empty value means "not set", so a variable or flag can
/// clear a path the file set.
fn path(r: &Resolved, param: Param) -> Option<PathBuf> {
    r.get(param)
        .filter(|e| !e.value.is_empty())
        .map(|e| PathBuf::from(&e.value))
}

/// `PolicyDir`: unlike other paths, given empty it is an error, not "not set". Not set, the
/// permissive built-in policy decides: a template whose variable came out empty must not
/// swap a security team's policies for it.
fn policy_dir(r: &Resolved) -> Result<Option<PathBuf>, ConfigError> {
    match r.get(Param::PolicyDir) {
        Some(entry) if entry.value.trim().is_empty() => Err(ConfigError::bad_value(
            &entry.at(),
            &entry.value,
            "empty: name the policy directory, or leave PolicyDir out for the built-in policy",
        )),
        Some(entry) => Ok(Some(PathBuf::from(&entry.value))),
        None => Ok(None),
    }
}

/// TLS material is checked now so that `-T` catches a wrong path before start.
fn existing_file(r: &Resolved, param: Param) -> Result<Option<PathBuf>, ConfigError> {
    let Some(entry) = r.get(param).filter(|e| !e.value.is_empty()) else {
        return Ok(None);
    };
    if !Path::new(&entry.value).is_file() {
        return Err(ConfigError::bad_value(
            &entry.at(),
            &entry.value,
            "no such file",
        ));
    }
    Ok(Some(PathBuf::from(&entry.value)))
}

fn tool_rules(entries: &[Entry]) -> Result<Vec<ToolRule>, ConfigError> {
    entries
        .iter()
        .map(|e| {
            let pattern = match e.param {
                Param::AllowToolRegexp | Param::DenyToolRegexp => Pattern::regex(&e.value),
                _ => Pattern::wildcard(&e.value),
            }
            .map_err(|err| ConfigError::bad_value(&e.at(), &e.value, err.to_string()))?;
            Ok(match e.param {
                Param::AllowTool | Param::AllowToolRegexp => ToolRule::Allow(pattern),
                _ => ToolRule::Deny(pattern),
            })
        })
        .collect()
}

/// Host names accepted in `Host`/`Origin` besides loopback, lower-cased because
/// host names compare case-insensitively.
fn allowed_hosts(entries: &[Entry]) -> Result<Vec<String>, ConfigError> {
    let mut hosts: Vec<String> = Vec::new();
    for e in entries.iter().filter(|e| !e.value.is_empty()) {
        for item in values::comma_list(&e.at(), &e.value)? {
            let ok = item
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
            if !ok {
                return Err(ConfigError::bad_value(
                    &e.at(),
                    &e.value,
                    format!("{item:?} is not a host name (no scheme, port or path)"),
                ));
            }
            let host = item.to_ascii_lowercase();
            if !hosts.contains(&host) {
                hosts.push(host);
            }
        }
    }
    Ok(hosts)
}

fn decision_log(r: &Resolved) -> Result<DecisionLogSink, ConfigError> {
    match r.get(Param::DecisionLog) {
        None => Ok(DecisionLogSink::Stdout),
        Some(e) if e.value == "stdout" => Ok(DecisionLogSink::Stdout),
        Some(e) if e.value.is_empty() => Err(ConfigError::bad_value(
            &e.at(),
            &e.value,
            "expected stdout or a file path",
        )),
        Some(e) => Ok(DecisionLogSink::File(PathBuf::from(&e.value))),
    }
}

/// The approval page is off unless configured; once any of its parameters is given, the
/// port, the allowed addresses and the external URL are all required.
fn approval_page(r: &Resolved) -> Result<Option<ApprovalPageConfig>, ConfigError> {
    let port = r
        .get(Param::ApprovalListenPort)
        .filter(|e| !e.value.is_empty());
    let allowed = r
        .get(Param::ApprovalAllowedIp)
        .filter(|e| !e.value.is_empty());
    let url = r.get(Param::ApprovalUrl).filter(|e| !e.value.is_empty());
    let ip = r
        .get(Param::ApprovalListenIp)
        .filter(|e| !e.value.is_empty());
    let given = [port, allowed, url, ip].into_iter().flatten().next();
    let Some(first) = given else {
        return Ok(None);
    };
    let (Some(port), Some(allowed), Some(url)) = (port, allowed, url) else {
        let message =
            "the approval page needs ApprovalListenPort, ApprovalAllowedIP and ApprovalURL";
        return Err(ConfigError::conflict(&first.at(), message));
    };
    let port_value = values::integer(
        &port.at(),
        &port.value,
        LISTEN_PORT_RANGE.0,
        LISTEN_PORT_RANGE.1,
    )?;
    let base = values::frontend_url(&url.at(), &url.value)?;
    Ok(Some(ApprovalPageConfig {
        listen_ip: match ip {
            Some(e) => values::listen_ip(&e.at(), &e.value)?,
            None => vec![std::net::Ipv4Addr::UNSPECIFIED.into()],
        },
        listen_port: u16::try_from(port_value).unwrap_or(DEFAULT_LISTEN_PORT),
        allowed_ip: values::allowed_ip(&allowed.at(), &allowed.value)?,
        allowed_ip_raw: allowed.value.clone(),
        url: base.trim_end_matches('/').to_owned(),
    }))
}

/// The status listener is off unless `StatusListenPort` is given; `StatusListenIP` alone is
/// an error (it would silently do nothing), and so is the MCP listener's port.
fn status_listener(r: &Resolved) -> Result<Option<StatusListenerConfig>, ConfigError> {
    let port = r
        .get(Param::StatusListenPort)
        .filter(|e| !e.value.is_empty());
    let ip = r.get(Param::StatusListenIp).filter(|e| !e.value.is_empty());
    let Some(port) = port else {
        return match ip {
            Some(ip) => Err(ConfigError::conflict(
                &ip.at(),
                "StatusListenIP needs StatusListenPort",
            )),
            None => Ok(None),
        };
    };
    let value = values::integer(
        &port.at(),
        &port.value,
        LISTEN_PORT_RANGE.0,
        LISTEN_PORT_RANGE.1,
    )?;
    let listen_port = u16::try_from(value).unwrap_or(DEFAULT_LISTEN_PORT);
    let mcp_port = int(r, Param::ListenPort, LISTEN_PORT_RANGE)?.map_or(DEFAULT_LISTEN_PORT, |v| {
        u16::try_from(v).unwrap_or(DEFAULT_LISTEN_PORT)
    });
    if listen_port == mcp_port {
        return Err(ConfigError::conflict(
            &port.at(),
            "StatusListenPort must differ from ListenPort",
        ));
    }
    Ok(Some(StatusListenerConfig {
        listen_ip: match ip {
            Some(e) => values::listen_ip(&e.at(), &e.value)?,
            None => vec![std::net::Ipv4Addr::UNSPECIFIED.into()],
        },
        listen_port,
    }))
}

/// Whether two configured paths name one file: the same text, or (both existing) the same
/// file reached another way.
fn same_file(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(a), Ok(b)) if a == b
        )
}

/// Rules match tools by their plain names, as the official server's do. A rule that
/// matches none of them but would match with `ToolPrefix` added was written with the
/// prefix, and would deny (or allow) nothing: refused, naming the name it means.
fn prefixed_rules(r: &Resolved, config: &Config) -> Result<(), ConfigError> {
    let prefix = config.tool_prefix.as_str();
    if prefix.is_empty() {
        return Ok(());
    }
    let names = || crate::catalog::all_tools().map(|tool| tool.name);
    for (entry, rule) in r.rules().iter().zip(&config.tool_rules) {
        let pattern = rule.pattern();
        if names().any(|name| pattern.matches(name)) {
            continue;
        }
        if let Some(meant) = names().find(|name| pattern.matches(&format!("{prefix}{name}"))) {
            let message = format!(
                "{rule} matches no tool: rules name tools without ToolPrefix ({prefix}), e.g. {}={meant}",
                rule.parameter_name()
            );
            return Err(ConfigError::conflict(&entry.at(), message));
        }
    }
    Ok(())
}

fn check_cross_rules(r: &Resolved, config: &Config) -> Result<(), ConfigError> {
    // TLSAccept=cert and LogType=file can only come from an entry, which the
    // message points at.
    if let Some(tls) = r.get(Param::TlsAccept)
        && config.tls_accept == TlsAccept::Cert
    {
        for (param, value) in [
            (Param::TlsCertFile, &config.tls_cert_file),
            (Param::TlsKeyFile, &config.tls_key_file),
        ] {
            if value.is_none() {
                let message = format!("{} is required when TLSAccept=cert", param.name());
                return Err(ConfigError::conflict(&tls.at(), message));
            }
        }
    }
    if let Some(log) = r.get(Param::LogType)
        && config.log_type == LogType::File
        && config.log_file.is_none()
    {
        let message = "LogFile is required when LogType=file";
        return Err(ConfigError::conflict(&log.at(), message));
    }
    // Two writers rotating one file would rename each other's lines away, and process log
    // lines would sit among the audit's.
    if let (Some(log_file), DecisionLogSink::File(decisions)) =
        (&config.log_file, &config.decision_log)
        && config.log_type == LogType::File
        && same_file(log_file, decisions)
        && let Some(entry) = r.get(Param::DecisionLog)
    {
        let message = format!(
            "the decision log must be a file of its own, not LogFile ({})",
            log_file.display()
        );
        return Err(ConfigError::conflict(&entry.at(), message));
    }
    prefixed_rules(r, config)?;
    let has_deny = config.tool_rules.iter().any(|rule| !rule.is_allow());
    if let Some(first_allow) = r
        .rules()
        .iter()
        .find(|e| matches!(e.param, Param::AllowTool | Param::AllowToolRegexp))
        && !has_deny
    {
        let message = "allow rules need at least one DenyTool or DenyToolRegexp rule \
                       (a tool no rule matches is allowed anyway)";
        return Err(ConfigError::conflict(&first_allow.at(), message));
    }
    Ok(())
}
