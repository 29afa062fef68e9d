//! The command line: global options, one flag per configuration parameter and the
//! `serve` / `stdio` / `policy test` / `policy eval` subcommands. Parameter flags are taken as
//! raw text and validated by `config`, so a bad flag value is reported like a bad
//! file value and the merge order (file < environment < flags) lives in one place.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::config::{EnvContract, FlagValue, Param, Sources};

#[derive(Debug, Parser)]
#[command(
    name = "zabbix-mcp-guard",
    version,
    about = "Policy-enforcing MCP sidecar in front of the Zabbix API",
    after_help = "Every parameter can also be set in the configuration file (by its name, \
                  e.g. FrontendURL) or with a ZABBIX_MCP_GUARD_* variable \
                  (e.g. ZABBIX_MCP_GUARD_FRONTEND_URL). Flags win over variables, \
                  variables over the file. With --env-contract zabbix-image the official \
                  image's ZBX_* variables are read too, between the file and the \
                  ZABBIX_MCP_GUARD_* variables."
)]
pub struct Cli {
    /// Configuration file (Zabbix syntax); without it, flags and variables only
    #[arg(
        short = 'c',
        long = "config",
        value_name = "FILE",
        env = "ZABBIX_MCP_GUARD_CONFIG",
        global = true
    )]
    pub config: Option<PathBuf>,

    /// Validate the configuration, print the effective values and exit
    #[arg(short = 'T', long = "test-config", global = true)]
    pub test_config: bool,

    /// Also read the official Zabbix MCP server image's ZBX_* variables
    #[arg(
        long = "env-contract",
        value_name = "CONTRACT",
        env = "ZABBIX_MCP_GUARD_ENV_CONTRACT",
        value_parser = ["zabbix-image"],
        global = true
    )]
    pub env_contract: Option<String>,

    #[command(flatten)]
    pub params: ParamFlags,

    #[command(subcommand)]
    pub command: Option<Command>,

    /// Parameter flags in command-line order, when parsed through this module.
    #[arg(skip)]
    ordered_flags: Option<Vec<FlagValue>>,
}

#[derive(Clone, Debug, Subcommand)]
pub enum Command {
    /// Run the sidecar (the default)
    Serve,
    /// Serve one local agent over stdin/stdout with the token in ZABBIX_API_TOKEN
    Stdio,
    /// Work with Rego policies
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
}

#[derive(Clone, Debug, Subcommand)]
pub enum PolicyCommand {
    /// Run the policy unit tests (*_test.rego) in a directory
    Test {
        /// Policy directory (default: PolicyDir)
        dir: Option<PathBuf>,
    },
    /// Evaluate the policy decision for one input document
    Eval {
        /// JSON input document
        #[arg(long, value_name = "FILE")]
        input: PathBuf,
        /// Policy directory (default: PolicyDir)
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// One flag per configuration parameter, the kebab-case of its name. Field names
/// are the flag names with `_`, which `ordered_flags` relies on. They go before the
/// subcommand: clap's global arguments would let a repeat after the subcommand
/// silently replace the earlier values of a repeatable rule flag.
#[derive(Clone, Debug, Default, Args)]
pub struct ParamFlags {
    /// FrontendURL: Zabbix frontend or API URL [ZABBIX_MCP_GUARD_FRONTEND_URL]
    #[arg(long, value_name = "URL")]
    pub frontend_url: Option<String>,
    /// AllowedIP: client IPs, CIDRs, DNS names, comma-separated [ZABBIX_MCP_GUARD_ALLOWED_IP]
    #[arg(long, value_name = "LIST")]
    pub allowed_ip: Option<String>,
    /// ListenIP: addresses to listen on, comma-separated [ZABBIX_MCP_GUARD_LISTEN_IP]
    #[arg(long, value_name = "LIST")]
    pub listen_ip: Option<String>,
    /// ListenPort: port to listen on [ZABBIX_MCP_GUARD_LISTEN_PORT]
    #[arg(long, value_name = "PORT")]
    pub listen_port: Option<String>,
    /// TLSAccept: unencrypted or cert [ZABBIX_MCP_GUARD_TLS_ACCEPT]
    #[arg(long, value_name = "MODE")]
    pub tls_accept: Option<String>,
    /// TLSCertFile: server certificate chain (PEM) [ZABBIX_MCP_GUARD_TLS_CERT_FILE]
    #[arg(long, value_name = "FILE")]
    pub tls_cert_file: Option<String>,
    /// TLSKeyFile: server private key (PEM) [ZABBIX_MCP_GUARD_TLS_KEY_FILE]
    #[arg(long, value_name = "FILE")]
    pub tls_key_file: Option<String>,
    /// TLSCAFile: extra CA for the Zabbix connection [ZABBIX_MCP_GUARD_TLS_CA_FILE]
    #[arg(long, value_name = "FILE")]
    pub tls_ca_file: Option<String>,
    /// IgnoreURLCertErrors: true or false; alone means true [ZABBIX_MCP_GUARD_IGNORE_URL_CERT_ERRORS]
    #[arg(long, value_name = "true|false", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub ignore_url_cert_errors: Option<String>,
    /// Timeout: seconds to wait for the Zabbix API [ZABBIX_MCP_GUARD_TIMEOUT]
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<String>,
    /// MaxResponseSize: read tool response limit, e.g. 64K [ZABBIX_MCP_GUARD_MAX_RESPONSE_SIZE]
    #[arg(long, value_name = "SIZE")]
    pub max_response_size: Option<String>,
    /// ToolPrefix: prefix added to every tool name [ZABBIX_MCP_GUARD_TOOL_PREFIX]
    #[arg(long, value_name = "PREFIX")]
    pub tool_prefix: Option<String>,
    /// AllowTool: wildcard allow rule, repeatable [ZABBIX_MCP_GUARD_ALLOW_TOOL, one per line]
    #[arg(long, value_name = "PATTERN")]
    pub allow_tool: Vec<String>,
    /// DenyTool: wildcard deny rule, repeatable [ZABBIX_MCP_GUARD_DENY_TOOL, one per line]
    #[arg(long, value_name = "PATTERN")]
    pub deny_tool: Vec<String>,
    /// AllowToolRegexp: regexp allow rule, repeatable [ZABBIX_MCP_GUARD_ALLOW_TOOL_REGEXP]
    #[arg(long, value_name = "REGEXP")]
    pub allow_tool_regexp: Vec<String>,
    /// DenyToolRegexp: regexp deny rule, repeatable [ZABBIX_MCP_GUARD_DENY_TOOL_REGEXP]
    #[arg(long, value_name = "REGEXP")]
    pub deny_tool_regexp: Vec<String>,
    /// AllowedHost: Host/Origin names accepted besides loopback, repeatable [ZABBIX_MCP_GUARD_ALLOWED_HOST]
    #[arg(long, value_name = "LIST")]
    pub allowed_host: Vec<String>,
    /// LogType: console, file or system [ZABBIX_MCP_GUARD_LOG_TYPE]
    #[arg(long, value_name = "TYPE")]
    pub log_type: Option<String>,
    /// LogFile: log file when LogType=file [ZABBIX_MCP_GUARD_LOG_FILE]
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<String>,
    /// LogFileSize: MB before rotation, 0 disables [ZABBIX_MCP_GUARD_LOG_FILE_SIZE]
    #[arg(long, value_name = "MB")]
    pub log_file_size: Option<String>,
    /// DebugLevel: 0-5 [ZABBIX_MCP_GUARD_DEBUG_LEVEL]
    #[arg(long, value_name = "LEVEL")]
    pub debug_level: Option<String>,
    /// PidFile: PID file [ZABBIX_MCP_GUARD_PID_FILE]
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<String>,
    /// PolicyDir: Rego policy directory [ZABBIX_MCP_GUARD_POLICY_DIR]
    #[arg(long, value_name = "DIR")]
    pub policy_dir: Option<String>,
    /// PolicyMode: enforce or dry-run [ZABBIX_MCP_GUARD_POLICY_MODE]
    #[arg(long, value_name = "MODE")]
    pub policy_mode: Option<String>,
    /// DecisionLog: stdout or a file path [ZABBIX_MCP_GUARD_DECISION_LOG]
    #[arg(long, value_name = "SINK")]
    pub decision_log: Option<String>,
    /// DecisionLogFileSize: MB before the decision log file rotates, 0 (default) never
    /// [ZABBIX_MCP_GUARD_DECISION_LOG_FILE_SIZE]
    #[arg(long, value_name = "MB")]
    pub decision_log_file_size: Option<String>,
    /// SessionMode: stateless or stateful [ZABBIX_MCP_GUARD_SESSION_MODE]
    #[arg(long, value_name = "MODE")]
    pub session_mode: Option<String>,
    /// ApprovalSealKey: secret, 32+ random bytes as hex or base64; prefer ApprovalSealKeyFile or the variable [ZABBIX_MCP_GUARD_APPROVAL_SEAL_KEY]
    #[arg(long, value_name = "KEY")]
    pub approval_seal_key: Option<String>,
    /// ApprovalSealKeyFile: file holding the key (hex or base64) [ZABBIX_MCP_GUARD_APPROVAL_SEAL_KEY_FILE]
    #[arg(long, value_name = "FILE")]
    pub approval_seal_key_file: Option<String>,
    /// SharedStore: memory or redis://… for replicas [ZABBIX_MCP_GUARD_SHARED_STORE]
    #[arg(long, value_name = "URL")]
    pub shared_store: Option<String>,
    /// SharedStoreFile: file holding the SharedStore URL, kept off command lines and environments [ZABBIX_MCP_GUARD_SHARED_STORE_FILE]
    #[arg(long, value_name = "FILE")]
    pub shared_store_file: Option<String>,
    /// ApprovalListenIP: approval page listen addresses [ZABBIX_MCP_GUARD_APPROVAL_LISTEN_IP]
    #[arg(long, value_name = "LIST")]
    pub approval_listen_ip: Option<String>,
    /// ApprovalListenPort: approval page port; the page is off without it [ZABBIX_MCP_GUARD_APPROVAL_LISTEN_PORT]
    #[arg(long, value_name = "PORT")]
    pub approval_listen_port: Option<String>,
    /// ApprovalAllowedIP: addresses allowed to reach the approval page [ZABBIX_MCP_GUARD_APPROVAL_ALLOWED_IP]
    #[arg(long, value_name = "LIST")]
    pub approval_allowed_ip: Option<String>,
    /// ApprovalURL: external base URL of the approval page, for links [ZABBIX_MCP_GUARD_APPROVAL_URL]
    #[arg(long, value_name = "URL")]
    pub approval_url: Option<String>,
    /// ApprovalTimeout: seconds a page approval can be decided and redeemed [ZABBIX_MCP_GUARD_APPROVAL_TIMEOUT]
    #[arg(long, value_name = "SECONDS")]
    pub approval_timeout: Option<String>,
    /// TLSHandshakeTimeout: see README "Reliability" [ZABBIX_MCP_GUARD_TLS_HANDSHAKE_TIMEOUT]
    #[arg(long, value_name = "VALUE")]
    pub tls_handshake_timeout: Option<String>,
    /// HeaderTimeout: see README "Reliability" [ZABBIX_MCP_GUARD_HEADER_TIMEOUT]
    #[arg(long, value_name = "VALUE")]
    pub header_timeout: Option<String>,
    /// BodyTimeout: see README "Reliability" [ZABBIX_MCP_GUARD_BODY_TIMEOUT]
    #[arg(long, value_name = "VALUE")]
    pub body_timeout: Option<String>,
    /// IdleTimeout: see README "Reliability" [ZABBIX_MCP_GUARD_IDLE_TIMEOUT]
    #[arg(long, value_name = "VALUE")]
    pub idle_timeout: Option<String>,
    /// HTTP2KeepAlive: see README "Reliability" [ZABBIX_MCP_GUARD_HTTP2_KEEP_ALIVE]
    #[arg(long, value_name = "VALUE")]
    pub http2_keep_alive: Option<String>,
    /// MaxConnections: see README "Reliability" [ZABBIX_MCP_GUARD_MAX_CONNECTIONS]
    #[arg(long, value_name = "VALUE")]
    pub max_connections: Option<String>,
    /// MaxZabbixResponseSize: see README "Reliability" [ZABBIX_MCP_GUARD_MAX_ZABBIX_RESPONSE_SIZE]
    #[arg(long, value_name = "VALUE")]
    pub max_zabbix_response_size: Option<String>,
    /// MaxZabbixConcurrency: see README "Reliability" [ZABBIX_MCP_GUARD_MAX_ZABBIX_CONCURRENCY]
    #[arg(long, value_name = "VALUE")]
    pub max_zabbix_concurrency: Option<String>,
    /// MaxZabbixConnectionAge: see README "How it talks to Zabbix" [ZABBIX_MCP_GUARD_MAX_ZABBIX_CONNECTION_AGE]
    #[arg(long, value_name = "VALUE")]
    pub max_zabbix_connection_age: Option<String>,
    /// WorkerThreads: see README "Performance" [ZABBIX_MCP_GUARD_WORKER_THREADS]
    #[arg(long, value_name = "VALUE")]
    pub worker_threads: Option<String>,
    /// MaxSessions: see README "Reliability" [ZABBIX_MCP_GUARD_MAX_SESSIONS]
    #[arg(long, value_name = "VALUE")]
    pub max_sessions: Option<String>,
    /// MaxSessionsPerToken: see README "Reliability" [ZABBIX_MCP_GUARD_MAX_SESSIONS_PER_TOKEN]
    #[arg(long, value_name = "VALUE")]
    pub max_sessions_per_token: Option<String>,
    /// MaxRequestsPerSession: see README "Reliability" [ZABBIX_MCP_GUARD_MAX_REQUESTS_PER_SESSION]
    #[arg(long, value_name = "VALUE")]
    pub max_requests_per_session: Option<String>,
    /// MaxPendingApprovals: see README "Approval page" [ZABBIX_MCP_GUARD_MAX_PENDING_APPROVALS]
    #[arg(long, value_name = "VALUE")]
    pub max_pending_approvals: Option<String>,
    /// MaxRejectedTokens: see README "Connecting an MCP client" [ZABBIX_MCP_GUARD_MAX_REJECTED_TOKENS]
    #[arg(long, value_name = "VALUE")]
    pub max_rejected_tokens: Option<String>,
    /// SessionIdleTimeout: see README "Reliability" [ZABBIX_MCP_GUARD_SESSION_IDLE_TIMEOUT]
    #[arg(long, value_name = "VALUE")]
    pub session_idle_timeout: Option<String>,
    /// ElicitationTimeout: see README "Reliability" [ZABBIX_MCP_GUARD_ELICITATION_TIMEOUT]
    #[arg(long, value_name = "VALUE")]
    pub elicitation_timeout: Option<String>,
    /// RateLimit: per-caller ceiling <calls>/<seconds>, e.g. 600/60 [ZABBIX_MCP_GUARD_RATE_LIMIT]
    #[arg(long, value_name = "CALLS/SECONDS")]
    pub rate_limit: Option<String>,
    /// MaxConcurrent: per-caller ceiling of calls in flight [ZABBIX_MCP_GUARD_MAX_CONCURRENT]
    #[arg(long, value_name = "N")]
    pub max_concurrent: Option<String>,
    /// StatusListenIP: status listener addresses (/metrics, /healthz, /readyz) [ZABBIX_MCP_GUARD_STATUS_LISTEN_IP]
    #[arg(long, value_name = "LIST")]
    pub status_listen_ip: Option<String>,
    /// StatusListenPort: status listener port; without it /metrics is on the MCP listener [ZABBIX_MCP_GUARD_STATUS_LISTEN_PORT]
    #[arg(long, value_name = "PORT")]
    pub status_listen_port: Option<String>,
}

/// Parses the process arguments; prints help, version or an error and exits as clap
/// does.
/// Writes `text` and a newline to standard output for the subcommands that print (`-T`,
/// `policy test`, `policy eval`). A reader that stops early (`| head`) ends the output
/// quietly: `println!` panicked on the closed pipe.
pub fn print_line(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(error) = writeln!(out, "{text}").and_then(|()| out.flush())
        && error.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("zabbix-mcp-guard: cannot write to standard output: {error}");
    }
}

pub fn parse() -> Cli {
    parse_from(std::env::args_os())
}

/// Like [`parse`] with explicit arguments (the first is the program name).
pub fn parse_from<I, T>(args: I) -> Cli
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    try_parse_from(args).unwrap_or_else(|e| e.exit())
}

/// Parses and keeps the command-line order of the parameter flags, which decides
/// the order of exposure rules given as flags.
pub fn try_parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let matches = Cli::command().try_get_matches_from(args)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    cli.ordered_flags = Some(ordered_flags(&matches));
    Ok(cli)
}

impl Cli {
    /// The subcommand to run; `serve` when none was given.
    pub fn action(&self) -> Command {
        self.command.clone().unwrap_or(Command::Serve)
    }

    /// Parameter flags in command-line order. A `Cli` built by `Parser::parse_from`
    /// directly does not know the order across different rule flags; it then lists
    /// them parameter by parameter.
    pub fn flag_values(&self) -> Vec<FlagValue> {
        if let Some(ordered) = &self.ordered_flags {
            return ordered.clone();
        }
        Param::all()
            .flat_map(|param| {
                self.params
                    .values(param)
                    .into_iter()
                    .map(move |v| FlagValue::new(param, v))
            })
            .collect()
    }

    /// The configuration sources: the `-c` file, the process environment and the
    /// parameter flags.
    pub fn sources(&self) -> Sources {
        Sources::from_process_env(self.config.clone(), self.flag_values(), self.env_contract())
    }

    /// The environment contract `--env-contract` selects.
    pub fn env_contract(&self) -> EnvContract {
        match self.env_contract.as_deref() {
            Some("zabbix-image") => EnvContract::ZabbixImage,
            _ => EnvContract::Guard,
        }
    }
}

impl ParamFlags {
    /// The values given for one parameter.
    pub fn values(&self, param: Param) -> Vec<String> {
        let one = |v: &Option<String>| v.iter().cloned().collect();
        match param {
            Param::FrontendUrl => one(&self.frontend_url),
            Param::AllowedIp => one(&self.allowed_ip),
            Param::ListenIp => one(&self.listen_ip),
            Param::ListenPort => one(&self.listen_port),
            Param::TlsAccept => one(&self.tls_accept),
            Param::TlsCertFile => one(&self.tls_cert_file),
            Param::TlsKeyFile => one(&self.tls_key_file),
            Param::TlsCaFile => one(&self.tls_ca_file),
            Param::IgnoreUrlCertErrors => one(&self.ignore_url_cert_errors),
            Param::Timeout => one(&self.timeout),
            Param::MaxResponseSize => one(&self.max_response_size),
            Param::ToolPrefix => one(&self.tool_prefix),
            Param::AllowTool => self.allow_tool.clone(),
            Param::DenyTool => self.deny_tool.clone(),
            Param::AllowToolRegexp => self.allow_tool_regexp.clone(),
            Param::DenyToolRegexp => self.deny_tool_regexp.clone(),
            Param::AllowedHost => self.allowed_host.clone(),
            Param::LogType => one(&self.log_type),
            Param::LogFile => one(&self.log_file),
            Param::LogFileSize => one(&self.log_file_size),
            Param::DebugLevel => one(&self.debug_level),
            Param::PidFile => one(&self.pid_file),
            Param::PolicyDir => one(&self.policy_dir),
            Param::PolicyMode => one(&self.policy_mode),
            Param::DecisionLog => one(&self.decision_log),
            Param::DecisionLogFileSize => one(&self.decision_log_file_size),
            Param::SessionMode => one(&self.session_mode),
            Param::ApprovalSealKey => one(&self.approval_seal_key),
            Param::ApprovalSealKeyFile => one(&self.approval_seal_key_file),
            Param::SharedStore => one(&self.shared_store),
            Param::SharedStoreFile => one(&self.shared_store_file),
            Param::ApprovalListenIp => one(&self.approval_listen_ip),
            Param::ApprovalListenPort => one(&self.approval_listen_port),
            Param::ApprovalAllowedIp => one(&self.approval_allowed_ip),
            Param::ApprovalUrl => one(&self.approval_url),
            Param::ApprovalTimeout => one(&self.approval_timeout),
            Param::TlsHandshakeTimeout => one(&self.tls_handshake_timeout),
            Param::HeaderTimeout => one(&self.header_timeout),
            Param::BodyTimeout => one(&self.body_timeout),
            Param::IdleTimeout => one(&self.idle_timeout),
            Param::Http2KeepAlive => one(&self.http2_keep_alive),
            Param::MaxConnections => one(&self.max_connections),
            Param::MaxZabbixResponseSize => one(&self.max_zabbix_response_size),
            Param::MaxZabbixConcurrency => one(&self.max_zabbix_concurrency),
            Param::MaxZabbixConnectionAge => one(&self.max_zabbix_connection_age),
            Param::MaxSessions => one(&self.max_sessions),
            Param::MaxSessionsPerToken => one(&self.max_sessions_per_token),
            Param::MaxRequestsPerSession => one(&self.max_requests_per_session),
            Param::MaxPendingApprovals => one(&self.max_pending_approvals),
            Param::MaxRejectedTokens => one(&self.max_rejected_tokens),
            Param::SessionIdleTimeout => one(&self.session_idle_timeout),
            Param::ElicitationTimeout => one(&self.elicitation_timeout),
            Param::WorkerThreads => one(&self.worker_threads),
            Param::RateLimit => one(&self.rate_limit),
            Param::MaxConcurrent => one(&self.max_concurrent),
            Param::StatusListenIp => one(&self.status_listen_ip),
            Param::StatusListenPort => one(&self.status_listen_port),
            Param::Include => Vec::new(),
        }
    }
}

/// Every parameter flag value with its position on the command line, sorted.
fn ordered_flags(matches: &ArgMatches) -> Vec<FlagValue> {
    let mut found: Vec<(usize, FlagValue)> = Vec::new();
    for param in Param::all().filter(|p| p.overridable()) {
        let id = param.flag().replace('-', "_");
        let (Ok(Some(values)), Some(indices)) =
            (matches.try_get_many::<String>(&id), matches.indices_of(&id))
        else {
            continue;
        };
        found.extend(
            indices
                .zip(values)
                .map(|(index, value)| (index, FlagValue::new(param, value.clone()))),
        );
    }
    found.sort_by_key(|(index, _)| *index);
    found.into_iter().map(|(_, flag)| flag).collect()
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{Cli, Command, PolicyCommand, try_parse_from};
    use crate::config::{Config, FlagValue, Param, Sources};

    #[test]
    fn command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_parameter_has_its_flag() {
        let command = Cli::command();
        for param in Param::all().filter(|p| p.overridable()) {
            let found = command
                .get_arguments()
                .any(|arg| arg.get_long() == Some(param.flag()));
            assert!(found, "no --{} flag", param.flag());
        }
    }

    /// The configuration refuses a `ZABBIX_MCP_GUARD_*` variable that is no parameter's,
    /// except those the command line itself reads.
    #[test]
    fn variables_the_command_line_reads_are_known_to_the_configuration() {
        let command = Cli::command();
        let read: Vec<String> = command
            .get_arguments()
            .filter_map(|arg| arg.get_env())
            .map(|env| env.to_string_lossy().into_owned())
            .collect();
        let mut read_sorted = read.clone();
        read_sorted.sort();
        assert_eq!(read_sorted, crate::config::PROCESS_VARIABLES);
    }

    #[test]
    fn global_options_and_default_command() {
        let cli = try_parse_from(["zabbix-mcp-guard", "-c", "/etc/x.conf", "-T"]).unwrap();
        assert_eq!(
            cli.config.as_deref(),
            Some(std::path::Path::new("/etc/x.conf"))
        );
        assert!(cli.test_config);
        assert!(matches!(cli.action(), Command::Serve));
        let err = try_parse_from(["zabbix-mcp-guard", "-V"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayVersion);
    }

    #[test]
    fn policy_subcommands() {
        let cli = try_parse_from(["zabbix-mcp-guard", "policy", "test", "pol"]).unwrap();
        match cli.action() {
            Command::Policy {
                command: PolicyCommand::Test { dir },
            } => assert_eq!(dir.as_deref(), Some(std::path::Path::new("pol"))),
            other => panic!("{other:?}"),
        }
        let cli =
            try_parse_from(["zabbix-mcp-guard", "policy", "eval", "--input", "in.json"]).unwrap();
        assert!(matches!(
            cli.action(),
            Command::Policy {
                command: PolicyCommand::Eval { dir: None, .. }
            }
        ));
        assert!(try_parse_from(["zabbix-mcp-guard", "policy", "eval"]).is_err());
    }

    #[test]
    fn rule_flags_keep_command_line_order() {
        let cli = try_parse_from([
            "zabbix-mcp-guard",
            "--deny-tool",
            "item_get",
            "--allow-tool-regexp",
            "^history",
            "--deny-tool",
            "*",
            "--timeout",
            "5",
            "serve",
        ])
        .unwrap();
        assert_eq!(
            cli.flag_values(),
            [
                FlagValue::new(Param::DenyTool, "item_get"),
                FlagValue::new(Param::AllowToolRegexp, "^history"),
                FlagValue::new(Param::DenyTool, "*"),
                FlagValue::new(Param::Timeout, "5"),
            ]
        );
        // Built by clap directly, the values are still all there.
        let plain = Cli::parse_from(["zabbix-mcp-guard", "--deny-tool", "a", "--allow-tool", "b"]);
        assert_eq!(plain.flag_values().len(), 2);
    }

    #[test]
    fn boolean_flag_without_value_means_true() {
        let cli =
            try_parse_from(["zabbix-mcp-guard", "--ignore-url-cert-errors", "serve"]).unwrap();
        assert_eq!(cli.params.ignore_url_cert_errors.as_deref(), Some("true"));
        let cli = try_parse_from(["zabbix-mcp-guard", "--ignore-url-cert-errors=false"]).unwrap();
        assert_eq!(cli.params.ignore_url_cert_errors.as_deref(), Some("false"));
    }

    #[test]
    fn flags_alone_make_a_configuration() {
        let cli = try_parse_from([
            "zabbix-mcp-guard",
            "--frontend-url",
            "https://zabbix.example.com/",
            "--allowed-ip",
            "127.0.0.1",
            "--listen-port",
            "9443",
        ])
        .unwrap();
        let sources = Sources {
            env: Default::default(),
            ..cli.sources()
        };
        let config = Config::load(&sources).unwrap();
        assert_eq!(config.listen_port, 9443);
        assert_eq!(
            config.api_url(),
            "https://zabbix.example.com/api_jsonrpc.php"
        );
        let bad = try_parse_from([
            "zabbix-mcp-guard",
            "--frontend-url",
            "https://z",
            "--allowed-ip",
            "::1",
            "--timeout",
            "45",
        ])
        .unwrap();
        let err = Config::load(&Sources {
            env: Default::default(),
            ..bad.sources()
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "option --timeout: value 45 is out of range 3-30"
        );
    }
}
