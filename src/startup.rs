//! Start-up checks: settings that weaken the guard without being errors, each logged
//! once at start as one warning with a fixed message.

use std::net::IpAddr;

use crate::config::{Config, PolicyMode, SessionMode, TlsAccept};
use crate::policy::{Approval, PolicyEngine};

/// One setting worth a warning at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartupWarning {
    /// `PolicyMode=dry-run`: denials are logged, not enforced.
    DryRun,
    /// `FrontendURL` is `http://` to a host that is not loopback: every caller's API token
    /// crosses the network unencrypted.
    PlainHttpFrontend,
    /// `SessionMode=stateless` while the policy answers `if_supported` for writes: the
    /// server cannot elicit without a session, so 2025 clients are never asked.
    UnaskedWrites,
    /// `IgnoreURLCertErrors=true`: the Zabbix API certificate is not verified.
    IgnoredCertErrors,
    /// `TLSCertFile` or `TLSKeyFile` set while `TLSAccept=unencrypted` (its default): the
    /// files are not used and MCP is served over plain HTTP; said, since whoever set them
    /// most likely meant TLS.
    CertificateUnused,
}

impl StartupWarning {
    /// Every warning that applies to `config` with the policy `policy` has loaded.
    pub fn check(config: &Config, policy: &PolicyEngine) -> Vec<StartupWarning> {
        let mut found = Vec::new();
        if config.policy_mode == PolicyMode::DryRun {
            found.push(StartupWarning::DryRun);
        }
        if plain_http_to_remote(&config.frontend_url) {
            found.push(StartupWarning::PlainHttpFrontend);
        }
        if config.session_mode == SessionMode::Stateless
            && policy.sample_write_approval() == Some(Approval::IfSupported)
        {
            found.push(StartupWarning::UnaskedWrites);
        }
        if config.ignore_url_cert_errors {
            found.push(StartupWarning::IgnoredCertErrors);
        }
        if config.tls_accept == TlsAccept::Unencrypted
            && (config.tls_cert_file.is_some() || config.tls_key_file.is_some())
        {
            found.push(StartupWarning::CertificateUnused);
        }
        found
    }

    /// The warning's fixed message.
    pub fn message(self) -> &'static str {
        match self {
            StartupWarning::DryRun => {
                "PolicyMode=dry-run: policy denials are logged but not enforced"
            }
            StartupWarning::PlainHttpFrontend => {
                "FrontendURL is http:// to a non-loopback host: API tokens cross the network unencrypted"
            }
            StartupWarning::UnaskedWrites => {
                "SessionMode=stateless with a policy that approves writes if_supported: clients are never asked (elicitation needs SessionMode=stateful)"
            }
            StartupWarning::IgnoredCertErrors => {
                "IgnoreURLCertErrors=true: the Zabbix API certificate is not verified"
            }
            StartupWarning::CertificateUnused => {
                "TLSCertFile/TLSKeyFile are set but TLSAccept=unencrypted: MCP is served without TLS and API tokens cross the network unencrypted (TLSAccept=cert serves it)"
            }
        }
    }

    /// Logs the warning: one line, a fixed message.
    pub fn log(self) {
        tracing::warn!("{}", self.message());
    }
}

/// Whether `url` is `http://` to a host other than `localhost` or a loopback address.
fn plain_http_to_remote(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return false;
    };
    if uri.scheme_str() != Some("http") {
        return false;
    }
    let host = uri.host().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    !loopback
}

#[cfg(test)]
mod tests {
    use super::{StartupWarning, plain_http_to_remote};
    use crate::config::{Config, PolicyMode, SessionMode};
    use crate::policy::{PolicyEngine, PolicyMode as EngineMode, PolicySource};

    #[test]
    fn plain_http_is_only_flagged_off_loopback() {
        for remote in [
            "http://zabbix.example.com/",
            "http://10.0.0.5:8080/api_jsonrpc.php",
            "http://[2001:db8::1]/",
        ] {
            assert!(plain_http_to_remote(remote), "{remote}");
        }
        for local in [
            "https://zabbix.example.com/",
            "http://127.0.0.1:8081/api_jsonrpc.php",
            "http://localhost/",
            "http://[::1]:8080/",
        ] {
            assert!(!plain_http_to_remote(local), "{local}");
        }
    }

    /// Certificate files that TLSAccept leaves unused are said; before, MCP went out over
    /// plain HTTP with nothing in the log but `tls=false`.
    #[test]
    fn certificate_files_without_tls_accept_are_warned_of() {
        let built_in = PolicyEngine::load_or_deny_all(PolicySource::BuiltIn, EngineMode::Enforce);
        let mut config = Config::new("http://127.0.0.1:8081/", "127.0.0.1").unwrap();
        config.session_mode = SessionMode::Stateful;
        config.tls_cert_file = Some("/etc/x/tls.crt".into());
        assert_eq!(
            StartupWarning::check(&config, &built_in),
            [StartupWarning::CertificateUnused]
        );
        config.tls_cert_file = None;
        config.tls_key_file = Some("/etc/x/tls.key".into());
        assert_eq!(
            StartupWarning::check(&config, &built_in),
            [StartupWarning::CertificateUnused]
        );
        config.tls_accept = crate::config::TlsAccept::Cert;
        config.tls_cert_file = Some("/etc/x/tls.crt".into());
        assert!(StartupWarning::check(&config, &built_in).is_empty());
    }

    #[test]
    fn warnings_follow_the_settings_and_the_policy() {
        let built_in = PolicyEngine::load_or_deny_all(PolicySource::BuiltIn, EngineMode::Enforce);
        let mut config = Config::new("http://127.0.0.1:8081/", "127.0.0.1").unwrap();
        // The default policy approves writes if_supported and the default mode is stateless.
        assert_eq!(
            StartupWarning::check(&config, &built_in),
            [StartupWarning::UnaskedWrites]
        );
        config.session_mode = SessionMode::Stateful;
        assert!(StartupWarning::check(&config, &built_in).is_empty());
        config.policy_mode = PolicyMode::DryRun;
        config.frontend_url = "http://zabbix.example.com/".into();
        config.ignore_url_cert_errors = true;
        assert_eq!(
            StartupWarning::check(&config, &built_in),
            [
                StartupWarning::DryRun,
                StartupWarning::PlainHttpFrontend,
                StartupWarning::IgnoredCertErrors
            ]
        );
        // A policy that requires approval, or denies writes, is not "never asked".
        config.session_mode = SessionMode::Stateless;
        let dir = crate::scratch::dir("startup");
        std::fs::write(
            dir.join("p.rego"),
            "package zabbix.mcp\ndecision := {\"allow\": true, \"approval\": \"required\"}\n",
        )
        .unwrap();
        let required = PolicyEngine::load(&dir, EngineMode::Enforce).unwrap();
        assert!(
            !StartupWarning::check(&config, &required).contains(&StartupWarning::UnaskedWrites)
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
