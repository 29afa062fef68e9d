//! The table of configuration parameters: their file names, how often they may
//! appear, and the flag and environment variable derived from each name.

/// Every parameter the configuration file accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Param {
    FrontendUrl,
    AllowedIp,
    ListenIp,
    ListenPort,
    TlsAccept,
    TlsCertFile,
    TlsKeyFile,
    TlsCaFile,
    IgnoreUrlCertErrors,
    Timeout,
    MaxResponseSize,
    ToolPrefix,
    AllowTool,
    DenyTool,
    AllowToolRegexp,
    DenyToolRegexp,
    AllowedHost,
    LogType,
    LogFile,
    LogFileSize,
    DebugLevel,
    PidFile,
    PolicyDir,
    PolicyMode,
    DecisionLog,
    DecisionLogFileSize,
    SessionMode,
    ApprovalSealKey,
    ApprovalSealKeyFile,
    SharedStore,
    SharedStoreFile,
    ApprovalListenIp,
    ApprovalListenPort,
    ApprovalAllowedIp,
    ApprovalUrl,
    ApprovalTimeout,
    TlsHandshakeTimeout,
    HeaderTimeout,
    BodyTimeout,
    IdleTimeout,
    Http2KeepAlive,
    MaxConnections,
    MaxZabbixResponseSize,
    MaxZabbixConcurrency,
    MaxZabbixConnectionAge,
    MaxSessions,
    MaxSessionsPerToken,
    MaxRequestsPerSession,
    MaxPendingApprovals,
    MaxRejectedTokens,
    SessionIdleTimeout,
    ElicitationTimeout,
    WorkerThreads,
    RateLimit,
    MaxConcurrent,
    StatusListenIp,
    StatusListenPort,
    Include,
}

/// How a parameter behaves when given more than once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// At most once per file; a repeat is an error, as in Zabbix.
    Single,
    /// One entry of the ordered exposure rule list per occurrence.
    Rule,
    /// Repeatable, and each value may also be a comma list.
    List,
    /// `Include=`: only meaningful in a file.
    Include,
}

/// Prefix of every environment variable that overrides a parameter.
pub const ENV_PREFIX: &str = "ZABBIX_MCP_GUARD_";

/// The variables with [`ENV_PREFIX`] that the command line reads (`-c`, `--env-contract`)
/// rather than a parameter.
pub const PROCESS_VARIABLES: [&str; 2] =
    ["ZABBIX_MCP_GUARD_CONFIG", "ZABBIX_MCP_GUARD_ENV_CONTRACT"];

/// (parameter, name in the file, kebab-case flag without `--`, arity), in the order
/// `-T` prints them.
const TABLE: &[(Param, &str, &str, Arity)] = &[
    (
        Param::FrontendUrl,
        "FrontendURL",
        "frontend-url",
        Arity::Single,
    ),
    (Param::AllowedIp, "AllowedIP", "allowed-ip", Arity::Single),
    (Param::ListenIp, "ListenIP", "listen-ip", Arity::Single),
    (
        Param::ListenPort,
        "ListenPort",
        "listen-port",
        Arity::Single,
    ),
    (Param::TlsAccept, "TLSAccept", "tls-accept", Arity::Single),
    (
        Param::TlsCertFile,
        "TLSCertFile",
        "tls-cert-file",
        Arity::Single,
    ),
    (
        Param::TlsKeyFile,
        "TLSKeyFile",
        "tls-key-file",
        Arity::Single,
    ),
    (Param::TlsCaFile, "TLSCAFile", "tls-ca-file", Arity::Single),
    (
        Param::IgnoreUrlCertErrors,
        "IgnoreURLCertErrors",
        "ignore-url-cert-errors",
        Arity::Single,
    ),
    (Param::Timeout, "Timeout", "timeout", Arity::Single),
    (
        Param::MaxResponseSize,
        "MaxResponseSize",
        "max-response-size",
        Arity::Single,
    ),
    (
        Param::ToolPrefix,
        "ToolPrefix",
        "tool-prefix",
        Arity::Single,
    ),
    (Param::AllowTool, "AllowTool", "allow-tool", Arity::Rule),
    (Param::DenyTool, "DenyTool", "deny-tool", Arity::Rule),
    (
        Param::AllowToolRegexp,
        "AllowToolRegexp",
        "allow-tool-regexp",
        Arity::Rule,
    ),
    (
        Param::DenyToolRegexp,
        "DenyToolRegexp",
        "deny-tool-regexp",
        Arity::Rule,
    ),
    (
        Param::AllowedHost,
        "AllowedHost",
        "allowed-host",
        Arity::List,
    ),
    (Param::LogType, "LogType", "log-type", Arity::Single),
    (Param::LogFile, "LogFile", "log-file", Arity::Single),
    (
        Param::LogFileSize,
        "LogFileSize",
        "log-file-size",
        Arity::Single,
    ),
    (
        Param::DebugLevel,
        "DebugLevel",
        "debug-level",
        Arity::Single,
    ),
    (Param::PidFile, "PidFile", "pid-file", Arity::Single),
    (Param::PolicyDir, "PolicyDir", "policy-dir", Arity::Single),
    (
        Param::PolicyMode,
        "PolicyMode",
        "policy-mode",
        Arity::Single,
    ),
    (
        Param::DecisionLog,
        "DecisionLog",
        "decision-log",
        Arity::Single,
    ),
    (
        Param::DecisionLogFileSize,
        "DecisionLogFileSize",
        "decision-log-file-size",
        Arity::Single,
    ),
    (
        Param::SessionMode,
        "SessionMode",
        "session-mode",
        Arity::Single,
    ),
    (
        Param::ApprovalSealKey,
        "ApprovalSealKey",
        "approval-seal-key",
        Arity::Single,
    ),
    (
        Param::ApprovalSealKeyFile,
        "ApprovalSealKeyFile",
        "approval-seal-key-file",
        Arity::Single,
    ),
    (
        Param::SharedStore,
        "SharedStore",
        "shared-store",
        Arity::Single,
    ),
    (
        Param::SharedStoreFile,
        "SharedStoreFile",
        "shared-store-file",
        Arity::Single,
    ),
    (
        Param::ApprovalListenIp,
        "ApprovalListenIP",
        "approval-listen-ip",
        Arity::Single,
    ),
    (
        Param::ApprovalListenPort,
        "ApprovalListenPort",
        "approval-listen-port",
        Arity::Single,
    ),
    (
        Param::ApprovalAllowedIp,
        "ApprovalAllowedIP",
        "approval-allowed-ip",
        Arity::Single,
    ),
    (
        Param::ApprovalUrl,
        "ApprovalURL",
        "approval-url",
        Arity::Single,
    ),
    (
        Param::ApprovalTimeout,
        "ApprovalTimeout",
        "approval-timeout",
        Arity::Single,
    ),
    (
        Param::TlsHandshakeTimeout,
        "TLSHandshakeTimeout",
        "tls-handshake-timeout",
        Arity::Single,
    ),
    (
        Param::HeaderTimeout,
        "HeaderTimeout",
        "header-timeout",
        Arity::Single,
    ),
    (
        Param::BodyTimeout,
        "BodyTimeout",
        "body-timeout",
        Arity::Single,
    ),
    (
        Param::IdleTimeout,
        "IdleTimeout",
        "idle-timeout",
        Arity::Single,
    ),
    (
        Param::Http2KeepAlive,
        "HTTP2KeepAlive",
        "http2-keep-alive",
        Arity::Single,
    ),
    (
        Param::MaxConnections,
        "MaxConnections",
        "max-connections",
        Arity::Single,
    ),
    (
        Param::MaxZabbixResponseSize,
        "MaxZabbixResponseSize",
        "max-zabbix-response-size",
        Arity::Single,
    ),
    (
        Param::MaxZabbixConcurrency,
        "MaxZabbixConcurrency",
        "max-zabbix-concurrency",
        Arity::Single,
    ),
    (
        Param::MaxZabbixConnectionAge,
        "MaxZabbixConnectionAge",
        "max-zabbix-connection-age",
        Arity::Single,
    ),
    (
        Param::MaxSessions,
        "MaxSessions",
        "max-sessions",
        Arity::Single,
    ),
    (
        Param::MaxSessionsPerToken,
        "MaxSessionsPerToken",
        "max-sessions-per-token",
        Arity::Single,
    ),
    (
        Param::MaxRequestsPerSession,
        "MaxRequestsPerSession",
        "max-requests-per-session",
        Arity::Single,
    ),
    (
        Param::MaxPendingApprovals,
        "MaxPendingApprovals",
        "max-pending-approvals",
        Arity::Single,
    ),
    (
        Param::MaxRejectedTokens,
        "MaxRejectedTokens",
        "max-rejected-tokens",
        Arity::Single,
    ),
    (
        Param::SessionIdleTimeout,
        "SessionIdleTimeout",
        "session-idle-timeout",
        Arity::Single,
    ),
    (
        Param::ElicitationTimeout,
        "ElicitationTimeout",
        "elicitation-timeout",
        Arity::Single,
    ),
    (
        Param::WorkerThreads,
        "WorkerThreads",
        "worker-threads",
        Arity::Single,
    ),
    (Param::RateLimit, "RateLimit", "rate-limit", Arity::Single),
    (
        Param::MaxConcurrent,
        "MaxConcurrent",
        "max-concurrent",
        Arity::Single,
    ),
    (
        Param::StatusListenIp,
        "StatusListenIP",
        "status-listen-ip",
        Arity::Single,
    ),
    (
        Param::StatusListenPort,
        "StatusListenPort",
        "status-listen-port",
        Arity::Single,
    ),
    (Param::Include, "Include", "include", Arity::Include),
];

impl Param {
    /// All parameters in display order.
    pub fn all() -> impl Iterator<Item = Param> {
        TABLE.iter().map(|row| row.0)
    }

    /// Looks a file parameter name up; names are case-sensitive, as in Zabbix.
    pub fn from_name(name: &str) -> Option<Param> {
        TABLE.iter().find(|row| row.1 == name).map(|row| row.0)
    }

    fn row(self) -> &'static (Param, &'static str, &'static str, Arity) {
        // The table lists every variant in declaration order, so the index is the
        // discriminant; the test below keeps the two in step.
        &TABLE[self as usize]
    }

    /// The name used in the configuration file, e.g. `FrontendURL`.
    pub fn name(self) -> &'static str {
        self.row().1
    }

    /// The long flag without dashes, e.g. `frontend-url`.
    pub fn flag(self) -> &'static str {
        self.row().2
    }

    pub fn arity(self) -> Arity {
        self.row().3
    }

    /// Whether the parameter can come from a flag or an environment variable
    /// (everything except `Include`).
    pub fn overridable(self) -> bool {
        self.arity() != Arity::Include
    }

    /// The overriding environment variable, e.g. `ZABBIX_MCP_GUARD_FRONTEND_URL`.
    pub fn env_var(self) -> String {
        format!(
            "{ENV_PREFIX}{}",
            self.flag().to_ascii_uppercase().replace('-', "_")
        )
    }

    /// Secrets are never printed.
    pub fn is_secret(self) -> bool {
        // A SharedStore URL may carry the Redis password.
        matches!(self, Param::ApprovalSealKey | Param::SharedStore)
    }
}

#[cfg(test)]
mod tests {
    use super::{Param, TABLE};

    #[test]
    fn table_follows_declaration_order() {
        for (index, row) in TABLE.iter().enumerate() {
            assert_eq!(row.0 as usize, index, "{}", row.1);
            assert_eq!(Param::from_name(row.1), Some(row.0));
        }
    }

    #[test]
    fn flags_and_variables_derive_from_names() {
        assert_eq!(Param::FrontendUrl.flag(), "frontend-url");
        assert_eq!(
            Param::FrontendUrl.env_var(),
            "ZABBIX_MCP_GUARD_FRONTEND_URL"
        );
        assert_eq!(
            Param::IgnoreUrlCertErrors.env_var(),
            "ZABBIX_MCP_GUARD_IGNORE_URL_CERT_ERRORS"
        );
        assert_eq!(Param::TlsCaFile.env_var(), "ZABBIX_MCP_GUARD_TLS_CA_FILE");
        // Kebab-case of the CamelCase name, acronyms kept as one word.
        for param in Param::all() {
            let kebab: String = param.flag().split('-').collect();
            assert_eq!(kebab, param.name().to_ascii_lowercase(), "{param:?}");
        }
    }

    #[test]
    fn names_are_case_sensitive() {
        assert_eq!(Param::from_name("frontendurl"), None);
        assert_eq!(Param::from_name("Timeout"), Some(Param::Timeout));
    }
}
