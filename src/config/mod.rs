//! The sidecar's configuration: the official Zabbix MCP server parameters plus ours,
//! read from a Zabbix-style file, `ZABBIX_MCP_GUARD_*` variables and flags (in that
//! order of precedence), validated once at start.

mod build;
mod caller_limits;
mod diff;
mod error;
mod file;
mod file_access;
mod image;
mod limits;
mod merge;
mod params;
mod render;
mod seal_key;
mod secret_file;
mod shared_store;
mod values;

#[cfg(test)]
mod image_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_seal_key;
#[cfg(test)]
mod tests_shared_store;
#[cfg(test)]
mod tests_sources;

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;

use crate::exposure::ToolRule;

pub(crate) use build::APPROVAL_TIMEOUT_RANGE;
pub use caller_limits::CallerLimits;
pub use diff::changed;
pub use error::{At, ConfigError, Origin};
pub use file::MAX_INCLUDE_DEPTH;
pub use file_access::FileAccess;
pub use image::EnvContract;
pub use limits::Limits;
pub use params::{ENV_PREFIX, PROCESS_VARIABLES, Param};
pub use secret_file::SecretFile;

/// The effective configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// `FrontendURL` as given; see [`Config::api_url`] for the JSON-RPC endpoint.
    pub frontend_url: String,
    pub allowed_ip: Vec<IpNet>,
    pub allowed_ip_raw: String,
    pub listen_ip: Vec<IpAddr>,
    pub listen_port: u16,
    pub tls_accept: TlsAccept,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    /// Extra CA for the connection to Zabbix.
    pub tls_ca_file: Option<PathBuf>,
    pub ignore_url_cert_errors: bool,
    pub timeout: Duration,
    pub max_response_size: usize,
    pub tool_prefix: String,
    /// Exposure rules in first-match order.
    pub tool_rules: Vec<ToolRule>,
    /// `Host`/`Origin` names accepted besides loopback, lower-case.
    pub allowed_hosts: Vec<String>,
    pub log_type: LogType,
    pub log_file: Option<PathBuf>,
    pub log_file_size_mb: u32,
    pub debug_level: u8,
    pub pid_file: Option<PathBuf>,
    /// `PolicyDir`; none means the default policy built into the binary.
    pub policy_dir: Option<PathBuf>,
    pub policy_mode: PolicyMode,
    pub decision_log: DecisionLogSink,
    /// `DecisionLogFileSize`: a decision log file rotates to `<file>.old` at this many MB
    /// (as `LogFile` at `LogFileSize`); 0, the default, never rotates.
    pub decision_log_file_size_mb: u32,
    pub session_mode: SessionMode,
    pub approval_seal_key: Option<Secret>,
    /// `ApprovalSealKeyFile`, when the key came from a file.
    pub approval_seal_key_file: Option<SecretFile>,
    /// `SharedStore`: `memory` (the default) or a `redis://` URL (may hold a password).
    pub shared_store: Option<Secret>,
    /// `SharedStoreFile`, when the `SharedStore` URL came from a file.
    pub shared_store_file: Option<SecretFile>,
    /// The approval page listener; `None` (the default) = page approval unavailable.
    pub approval_page: Option<ApprovalPageConfig>,
    /// `ApprovalTimeout`: how long a page approval can be decided and redeemed.
    pub approval_timeout: Duration,
    /// The resource limits of issue 12 (timeouts per stage, caps).
    pub limits: Limits,
    /// `RateLimit` and `MaxConcurrent`: per-caller ceilings over the policy's `rate`.
    pub caller_limits: CallerLimits,
    /// `StatusListenIP`/`StatusListenPort`: a plain listener for `/metrics`, `/healthz` and
    /// `/readyz`; `None` (the default) serves `/metrics` on the MCP listener.
    pub status_listener: Option<StatusListenerConfig>,
}

/// `StatusListenIP` (default `0.0.0.0`) and `StatusListenPort`: no TLS, no `AllowedIP`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusListenerConfig {
    pub listen_ip: Vec<IpAddr>,
    pub listen_port: u16,
}

/// `ApprovalListenIP`, `ApprovalListenPort`, `ApprovalAllowedIP`, `ApprovalURL`. TLS is
/// the MCP listener's (`TLSAccept`, `TLSCertFile`, `TLSKeyFile`).
#[derive(Clone, Debug)]
pub struct ApprovalPageConfig {
    pub listen_ip: Vec<IpAddr>,
    pub listen_port: u16,
    pub allowed_ip: Vec<IpNet>,
    pub allowed_ip_raw: String,
    /// External base URL put into links, without a trailing slash.
    pub url: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsAccept {
    Unencrypted,
    Cert,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogType {
    Console,
    File,
    System,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyMode {
    Enforce,
    DryRun,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecisionLogSink {
    Stdout,
    File(PathBuf),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionMode {
    Stateless,
    Stateful,
}

/// Secret bytes that never print: `Debug` and `Display` show `***`.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

/// Where the parameters come from; `Config::load` merges them.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// The `-c` file; none means flags and variables only.
    pub config_file: Option<PathBuf>,
    /// The environment: `ZABBIX_MCP_GUARD_*` overrides and `${NAME}` expansion.
    pub env: BTreeMap<String, String>,
    /// Flag values in command-line order.
    pub flags: Vec<FlagValue>,
    /// Which environment variables are read (`--env-contract`).
    pub env_contract: EnvContract,
}

/// One parameter flag as given on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlagValue {
    pub param: Param,
    pub value: String,
}

impl Config {
    /// The Zabbix JSON-RPC endpoint: `FrontendURL` itself when it names a `.php`
    /// file, otherwise `FrontendURL` joined with `api_jsonrpc.php`.
    pub fn api_url(&self) -> String {
        let url = self.frontend_url.as_str();
        if url.ends_with(".php") {
            url.to_owned()
        } else if url.ends_with('/') {
            format!("{url}api_jsonrpc.php")
        } else {
            format!("{url}/api_jsonrpc.php")
        }
    }

    /// A configuration with every default and the two mandatory parameters.
    pub fn new(frontend_url: &str, allowed_ip: &str) -> Result<Config, ConfigError> {
        Config::load(&Sources {
            config_file: None,
            env: BTreeMap::new(),
            flags: vec![
                FlagValue::new(Param::FrontendUrl, frontend_url),
                FlagValue::new(Param::AllowedIp, allowed_ip),
            ],
            env_contract: EnvContract::Guard,
        })
    }

    /// Reads, merges and validates all sources.
    pub fn load(sources: &Sources) -> Result<Config, ConfigError> {
        let resolved = merge::Resolved::from_sources(sources)?;
        build::build(&resolved).map_err(|error| match (error, sources.env_contract) {
            // Under the image contract, a missing FrontendURL is a missing variable.
            (ConfigError::Missing { name, flag, .. }, EnvContract::ZabbixImage)
                if name == Param::FrontendUrl.name() =>
            {
                ConfigError::Missing {
                    name,
                    flag,
                    env: "ZBX_FRONTEND_URL".to_owned(),
                }
            }
            (error, _) => error,
        })
    }

    /// Every parameter with its effective value, one `Name=value` per line, secrets
    /// masked (for `-T`).
    pub fn render_effective(&self) -> String {
        render::render(self)
    }

    /// The warnings `serve` logs at start and `-T` prints for secret files someone besides
    /// the sidecar and root may read.
    pub fn secret_file_warnings(&self) -> Vec<String> {
        [&self.approval_seal_key_file, &self.shared_store_file]
            .into_iter()
            .flatten()
            .filter_map(SecretFile::exposure_warning)
            .collect()
    }
}

impl TlsAccept {
    pub fn as_str(self) -> &'static str {
        match self {
            TlsAccept::Unencrypted => "unencrypted",
            TlsAccept::Cert => "cert",
        }
    }
}

impl LogType {
    pub fn as_str(self) -> &'static str {
        match self {
            LogType::Console => "console",
            LogType::File => "file",
            LogType::System => "system",
        }
    }
}

impl PolicyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyMode::Enforce => "enforce",
            PolicyMode::DryRun => "dry-run",
        }
    }
}

impl SessionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionMode::Stateless => "stateless",
            SessionMode::Stateful => "stateful",
        }
    }
}

impl fmt::Display for DecisionLogSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecisionLogSink::Stdout => f.write_str("stdout"),
            DecisionLogSink::File(path) => write!(f, "{}", path.display()),
        }
    }
}

impl Secret {
    pub fn new(bytes: Vec<u8>) -> Secret {
        Secret(bytes)
    }

    /// The secret bytes; callers must not log them.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl Sources {
    /// The warnings `serve` logs at start and `-T` prints for secrets given as flags: every
    /// local user can read a process's command line (`ps`, `/proc/<pid>/cmdline`), whatever
    /// the process does. A `SharedStore` URL without a password holds no secret.
    pub fn secret_flag_warnings(&self) -> Vec<String> {
        let mut params: Vec<Param> = Vec::new();
        for flag in &self.flags {
            let secret = match flag.param {
                Param::ApprovalSealKey => true,
                Param::SharedStore => url_has_userinfo(&flag.value),
                _ => false,
            };
            if secret && !params.contains(&flag.param) {
                params.push(flag.param);
            }
        }
        params
            .into_iter()
            .map(|param| {
                format!(
                    "--{} puts a secret on the command line, which every local user can read \
                     (ps, /proc/<pid>/cmdline); give it in a file with --{}-file \
                     ({}File) instead",
                    param.flag(),
                    param.flag(),
                    param.name()
                )
            })
            .collect()
    }

    /// Sources with a snapshot of the process environment. Variables that are not
    /// valid UTF-8 are skipped; they cannot be parameter values.
    pub fn from_process_env(
        config_file: Option<PathBuf>,
        flags: Vec<FlagValue>,
        env_contract: EnvContract,
    ) -> Sources {
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        Sources {
            config_file,
            env,
            flags,
            env_contract,
        }
    }
}

impl FlagValue {
    pub fn new(param: Param, value: impl Into<String>) -> FlagValue {
        FlagValue {
            param,
            value: value.into(),
        }
    }
}

/// Whether a URL may name a user or password (`scheme://user:password@host`): any `@`, so
/// that a password with a `/` not percent-encoded still counts.
fn url_has_userinfo(url: &str) -> bool {
    url.contains('@')
}
