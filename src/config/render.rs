//! The effective configuration as `Parameter=value` lines for `-T`, in the file
//! syntax so the output can be read back, with secrets masked.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::Config;
use super::params::{Arity, Param};
use super::values::format_size;

/// Renders every parameter in table order; the exposure rules are printed as one
/// block in their effective order, where the first rule parameter would be.
pub fn render(config: &Config) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Zabbix API URL: {}", config.api_url());
    for param in Param::all() {
        match param.arity() {
            Arity::Include => {}
            Arity::Rule if param == Param::AllowTool => {
                if config.tool_rules.is_empty() {
                    out.push_str("# no AllowTool/DenyTool rules: every tool is exposed\n");
                }
                for rule in &config.tool_rules {
                    let _ = writeln!(out, "{rule}");
                }
            }
            Arity::Rule => {}
            Arity::Single | Arity::List => {
                if param == Param::PolicyDir && config.policy_dir.is_none() {
                    // Left out, as it must be to mean that: an empty PolicyDir is an error.
                    out.push_str("# no PolicyDir: the built-in policies/default.rego decides\n");
                    continue;
                }
                let _ = writeln!(out, "{}={}", param.name(), value(config, param));
            }
        }
    }
    out
}

pub(super) fn value(config: &Config, param: Param) -> String {
    match param {
        Param::FrontendUrl => config.frontend_url.clone(),
        Param::AllowedIp => config.allowed_ip_raw.clone(),
        Param::ListenIp => join(config.listen_ip.iter()),
        Param::ListenPort => config.listen_port.to_string(),
        Param::TlsAccept => config.tls_accept.as_str().to_owned(),
        Param::TlsCertFile => path(&config.tls_cert_file),
        Param::TlsKeyFile => path(&config.tls_key_file),
        Param::TlsCaFile => path(&config.tls_ca_file),
        Param::IgnoreUrlCertErrors => config.ignore_url_cert_errors.to_string(),
        Param::Timeout => config.timeout.as_secs().to_string(),
        Param::MaxResponseSize => format_size(config.max_response_size as u64),
        Param::ToolPrefix => config.tool_prefix.clone(),
        Param::AllowedHost => config.allowed_hosts.join(","),
        Param::LogType => config.log_type.as_str().to_owned(),
        Param::LogFile => path(&config.log_file),
        Param::LogFileSize => config.log_file_size_mb.to_string(),
        Param::DebugLevel => config.debug_level.to_string(),
        Param::PidFile => path(&config.pid_file),
        Param::PolicyDir => path(&config.policy_dir),
        Param::PolicyMode => config.policy_mode.as_str().to_owned(),
        Param::DecisionLog => config.decision_log.to_string(),
        Param::DecisionLogFileSize => config.decision_log_file_size_mb.to_string(),
        Param::SessionMode => config.session_mode.as_str().to_owned(),
        Param::ApprovalSealKey => config
            .approval_seal_key
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        Param::ApprovalSealKeyFile => config
            .approval_seal_key_file
            .as_ref()
            .map(|f| f.path.display().to_string())
            .unwrap_or_default(),
        // The file's URL is the file's: `SharedStore` shows only what was given inline.
        Param::SharedStore => config
            .shared_store
            .as_ref()
            .filter(|_| config.shared_store_file.is_none())
            .map(ToString::to_string)
            .unwrap_or_default(),
        Param::SharedStoreFile => config
            .shared_store_file
            .as_ref()
            .map(|f| f.path.display().to_string())
            .unwrap_or_default(),
        Param::ApprovalListenIp => config
            .approval_page
            .as_ref()
            .map(|p| join(p.listen_ip.iter()))
            .unwrap_or_default(),
        Param::ApprovalListenPort => config
            .approval_page
            .as_ref()
            .map(|p| p.listen_port.to_string())
            .unwrap_or_default(),
        Param::ApprovalAllowedIp => config
            .approval_page
            .as_ref()
            .map(|p| p.allowed_ip_raw.clone())
            .unwrap_or_default(),
        Param::ApprovalUrl => config
            .approval_page
            .as_ref()
            .map(|p| p.url.clone())
            .unwrap_or_default(),
        Param::ApprovalTimeout => config.approval_timeout.as_secs().to_string(),
        Param::StatusListenIp => config
            .status_listener
            .as_ref()
            .map(|s| join(s.listen_ip.iter()))
            .unwrap_or_default(),
        Param::StatusListenPort => config
            .status_listener
            .as_ref()
            .map(|s| s.listen_port.to_string())
            .unwrap_or_default(),
        Param::AllowTool
        | Param::DenyTool
        | Param::AllowToolRegexp
        | Param::DenyToolRegexp
        | Param::Include => String::new(),
        Param::RateLimit | Param::MaxConcurrent => {
            super::caller_limits::render(&config.caller_limits, param).unwrap_or_default()
        }
        other => super::limits::render(&config.limits, other).unwrap_or_default(),
    }
}

fn path(value: &Option<PathBuf>) -> String {
    value
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

fn join<T: ToString>(items: impl Iterator<Item = T>) -> String {
    items.map(|i| i.to_string()).collect::<Vec<_>>().join(",")
}
