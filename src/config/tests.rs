//! Loading tests that go through real files: every parameter, defaults, rendering and
//! the rules between parameters (includes, expansion, errors and precedence are in
//! tests_sources.rs).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    Config, ConfigError, DecisionLogSink, FlagValue, LogType, Param, PolicyMode, SessionMode,
    Sources, TlsAccept,
};
use crate::exposure::Exposure;
use crate::scratch::Scratch;

const KEY: &str = "5a1f930c7e44d2813ba60fe92578c4119d6237fa08be53c16a2e947de01548b3";

pub(super) fn sources(file: &Path) -> Sources {
    Sources {
        config_file: Some(file.to_owned()),
        ..Sources::default()
    }
}

pub(super) fn load_text(dir: &Scratch, text: &str) -> Result<Config, ConfigError> {
    Config::load(&sources(&dir.write("main.conf", text)))
}

pub(super) const BASE: &str = "FrontendURL=https://zabbix.example.com\nAllowedIP=127.0.0.1\n";

#[test]
fn defaults() {
    let c = Config::new("http://127.0.0.1:8081/api_jsonrpc.php", "127.0.0.1,::1").unwrap();
    assert_eq!(c.listen_ip, [std::net::IpAddr::from([0, 0, 0, 0])]);
    assert_eq!(c.listen_port, 8443);
    assert_eq!(c.tls_accept, TlsAccept::Unencrypted);
    assert_eq!(c.timeout, Duration::from_secs(10));
    assert_eq!(c.max_response_size, 65536);
    assert_eq!(c.tool_prefix, "");
    assert!(c.tool_rules.is_empty());
    assert!(c.allowed_hosts.is_empty());
    assert!(!c.ignore_url_cert_errors);
    assert_eq!(c.log_type, LogType::Console);
    assert_eq!((c.log_file_size_mb, c.debug_level), (1, 3));
    assert_eq!(
        c.policy_dir, None,
        "no PolicyDir: the built-in default policy"
    );
    assert_eq!(c.policy_mode, PolicyMode::Enforce);
    assert_eq!(c.decision_log, DecisionLogSink::Stdout);
    assert_eq!(c.session_mode, SessionMode::Stateless);
    assert!(c.approval_seal_key.is_none() && c.pid_file.is_none());
    assert_eq!(c.allowed_ip_raw, "127.0.0.1,::1");
    assert_eq!(c.api_url(), "http://127.0.0.1:8081/api_jsonrpc.php");
}

#[test]
fn api_url_joins_the_endpoint() {
    let url = |u: &str| Config::new(u, "::1").unwrap().api_url();
    assert_eq!(
        url("https://z.example.com"),
        "https://z.example.com/api_jsonrpc.php"
    );
    assert_eq!(
        url("https://z.example.com/zabbix/"),
        "https://z.example.com/zabbix/api_jsonrpc.php"
    );
    assert_eq!(
        url("https://z.example.com/zabbix/api_jsonrpc.php"),
        "https://z.example.com/zabbix/api_jsonrpc.php"
    );
}

/// What a URL cannot carry to Zabbix is refused, named, never sent elsewhere.
#[test]
fn frontend_urls_that_cannot_reach_the_api_are_refused() {
    for (url, said) in [
        ("https://z.example.com/#zabbix", "fragment"),
        ("https://z.example.com/zabbix/#", "fragment"),
        ("https://z.example.com/?a=1", "query"),
        ("https://u:p@z.example.com/", "user or password"),
        ("z.example.com", "http:// or https://"),
    ] {
        let Err(error) = Config::new(url, "::1") else {
            panic!("{url} accepted")
        };
        let error = error.to_string();
        assert!(error.contains(said), "{url}: {error}");
    }
}

#[test]
fn every_parameter_from_a_file() {
    let dir = Scratch::new("config-all");
    let cert = dir.write("tls/cert.pem", "x");
    let key = dir.write("tls/key.pem", "x");
    let ca = dir.write("tls/ca.pem", "x");
    let text = format!(
        "# comment\n\n{BASE}ListenIP=127.0.0.1, ::1\nListenPort=9443\nTLSAccept=cert\n\
         TLSCertFile={}\nTLSKeyFile={}\nTLSCAFile={}\nIgnoreURLCertErrors=1\nTimeout=30\n\
         MaxResponseSize=256K\nToolPrefix=zbx_\nAllowTool=host_get\nDenyToolRegexp=_get$\n\
         AllowToolRegexp=^problem\nDenyTool=*\nAllowedHost=MCP.example.com, mcp2\n\
         AllowedHost=mcp3\nLogType=file\nLogFile=/var/log/g.log\nLogFileSize=0\nDebugLevel=5\n\
         PidFile=/run/g.pid\nPolicyDir=/etc/g/policies\nPolicyMode=dry-run\n\
         DecisionLog=/var/log/decisions.jsonl\nSessionMode=stateful\nApprovalSealKey={KEY}\n",
        cert.display(),
        key.display(),
        ca.display()
    );
    let c = load_text(&dir, &text).unwrap();
    assert_eq!(c.listen_ip.len(), 2);
    assert_eq!(c.listen_port, 9443);
    assert_eq!(c.tls_accept, TlsAccept::Cert);
    assert_eq!(
        (c.tls_cert_file, c.tls_key_file, c.tls_ca_file),
        (Some(cert), Some(key), Some(ca))
    );
    assert!(c.ignore_url_cert_errors);
    assert_eq!(c.timeout, Duration::from_secs(30));
    assert_eq!(c.max_response_size, 262144);
    let rules: Vec<String> = c.tool_rules.iter().map(ToString::to_string).collect();
    assert_eq!(
        rules,
        [
            "AllowTool=host_get",
            "DenyToolRegexp=_get$",
            "AllowToolRegexp=^problem",
            "DenyTool=*"
        ]
    );
    let exposure = Exposure::new(c.tool_prefix.clone(), c.tool_rules.clone());
    assert!(exposure.allows("host_get") && exposure.allows("problem_close"));
    assert!(!exposure.allows("problem_get") && !exposure.allows("maintenance_create"));
    assert_eq!(exposure.exposed_name("host_get"), "zbx_host_get");
    assert_eq!(c.allowed_hosts, ["mcp.example.com", "mcp2", "mcp3"]);
    assert_eq!(c.log_type, LogType::File);
    assert_eq!(c.log_file, Some(PathBuf::from("/var/log/g.log")));
    assert_eq!((c.log_file_size_mb, c.debug_level), (0, 5));
    assert_eq!(c.pid_file, Some(PathBuf::from("/run/g.pid")));
    assert_eq!(c.policy_dir, Some(PathBuf::from("/etc/g/policies")));
    assert_eq!(c.policy_mode, PolicyMode::DryRun);
    assert_eq!(
        c.decision_log,
        DecisionLogSink::File("/var/log/decisions.jsonl".into())
    );
    assert_eq!(c.session_mode, SessionMode::Stateful);
    assert_eq!(
        c.approval_seal_key.as_ref().map(|k| k.expose().to_vec()),
        Some(hex::decode(KEY).unwrap())
    );
}

#[test]
fn rendering_masks_the_secret() {
    let flags = vec![
        FlagValue::new(Param::FrontendUrl, "https://z.example.com"),
        FlagValue::new(Param::AllowedIp, "127.0.0.1,::1"),
        FlagValue::new(Param::ApprovalSealKey, KEY),
        FlagValue::new(Param::DenyTool, "item_get"),
    ];
    let c = Config::load(&Sources {
        flags,
        ..Sources::default()
    })
    .unwrap();
    let text = c.render_effective();
    assert!(!text.contains(KEY), "{text}");
    assert!(!format!("{c:?}").contains(KEY));
    for line in [
        "FrontendURL=https://z.example.com",
        "AllowedIP=127.0.0.1,::1",
        "ListenIP=0.0.0.0",
        "ListenPort=8443",
        "MaxResponseSize=64K",
        "DenyTool=item_get",
        "ApprovalSealKey=***",
        "DecisionLog=stdout",
        "# no PolicyDir: the built-in policies/default.rego decides",
        "# Zabbix API URL: https://z.example.com/api_jsonrpc.php",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    assert!(!text.lines().any(|l| l.starts_with("PolicyDir=")), "{text}");
    // Every other parameter is printed; rules only when present.
    let rules = [
        Param::AllowTool,
        Param::AllowToolRegexp,
        Param::DenyToolRegexp,
    ];
    for param in Param::all().filter(|p| p.overridable() && !rules.contains(p)) {
        // PolicyDir, not set here, is left out (named in its comment).
        let shown = format!(
            "{}{}",
            param.name(),
            if param == Param::PolicyDir { "" } else { "=" }
        );
        assert!(text.contains(&shown), "{param:?}");
    }
}

#[test]
fn shipped_example_is_valid() {
    let dir = Scratch::new("config-example");
    let file = dir.write(
        "zabbix_mcp_guard.conf",
        include_str!("../../examples/zabbix_mcp_guard.conf"),
    );
    let c = Config::load(&sources(&file)).unwrap();
    assert_eq!(c.api_url(), "http://127.0.0.1:8081/api_jsonrpc.php");
    assert_eq!(c.allowed_ip_raw, "127.0.0.1,::1");
    let denied: Vec<&str> = c.tool_rules.iter().map(|r| r.pattern().as_str()).collect();
    assert_eq!(
        denied,
        [
            "item_get",
            "lld_get",
            "interface_get",
            "macro_get",
            "history_get"
        ]
    );
    assert!(c.tool_rules.iter().all(|r| !r.is_allow()));
}

#[test]
fn decision_log_file_size_is_read_in_megabytes_and_ranged() {
    let dir = Scratch::new("config-decision-log-size");
    assert_eq!(load_text(&dir, BASE).unwrap().decision_log_file_size_mb, 0);
    let c = load_text(&dir, &format!("{BASE}DecisionLogFileSize=64\n")).unwrap();
    assert_eq!(c.decision_log_file_size_mb, 64);
    let err = load_text(&dir, &format!("{BASE}DecisionLogFileSize=1025\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("DecisionLogFileSize: value 1025 is out of range 0-1024"),
        "{err}"
    );
}

#[test]
fn approval_page_and_shared_store() {
    let dir = Scratch::new("config-approval-page");
    let base = "FrontendURL=http://127.0.0.1/\nAllowedIP=127.0.0.1\n";
    let off = load_text(&dir, base).unwrap();
    assert!(off.approval_page.is_none() && off.shared_store.is_none());
    assert_eq!(off.approval_timeout, Duration::from_secs(900));
    let on = load_text(
        &dir,
        &format!(
            "{base}ApprovalListenPort=8444\nApprovalAllowedIP=10.0.0.0/8\n\
             ApprovalURL=https://approvals.example.com/\nApprovalTimeout=60\n\
             SharedStore=redis://:pw@127.0.0.1:6390/\nApprovalSealKey={KEY}\n"
        ),
    )
    .unwrap();
    let page = on.approval_page.as_ref().expect("page on");
    assert_eq!(page.listen_port, 8444);
    assert_eq!(page.url, "https://approvals.example.com");
    assert_eq!(on.approval_timeout, Duration::from_secs(60));
    assert!(!format!("{:?}", on.shared_store).contains("pw"));
    let partial = load_text(&dir, &format!("{base}ApprovalListenPort=8444\n")).unwrap_err();
    assert!(
        partial.to_string().contains("ApprovalAllowedIP"),
        "{partial}"
    );
    let store = load_text(&dir, &format!("{base}SharedStore=postgres://u:pw@x/\n")).unwrap_err();
    assert!(!store.to_string().contains("pw"), "{store}");
    let unsigned = load_text(&dir, &format!("{base}SharedStore=redis://:pw@x/\n")).unwrap_err();
    let unsigned = unsigned.to_string();
    assert!(
        unsigned.contains(":3: SharedStore: a Redis store needs ApprovalSealKey")
            && !unsigned.contains("pw"),
        "{unsigned}"
    );
}

#[test]
fn status_listener_is_off_by_default_and_needs_its_port() {
    let dir = Scratch::new("config-status-listener");
    let off = load_text(&dir, BASE).unwrap();
    assert!(off.status_listener.is_none());
    assert!(off.render_effective().contains("\nStatusListenPort=\n"));
    let on = load_text(&dir, &format!("{BASE}StatusListenPort=9101\n")).unwrap();
    let status = on.status_listener.as_ref().expect("status listener on");
    assert_eq!(status.listen_port, 9101);
    assert_eq!(
        status.listen_ip,
        ["0.0.0.0".parse::<std::net::IpAddr>().unwrap()]
    );
    let both = load_text(
        &dir,
        &format!("{BASE}StatusListenIP=127.0.0.1,::1\nStatusListenPort=9101\n"),
    )
    .unwrap();
    let text = both.render_effective();
    assert!(
        text.contains("\nStatusListenIP=127.0.0.1,::1\nStatusListenPort=9101\n"),
        "{text}"
    );
    // A flag turns it on like the file does.
    let flags = vec![
        FlagValue::new(Param::FrontendUrl, "https://z.example.com"),
        FlagValue::new(Param::AllowedIp, "127.0.0.1"),
        FlagValue::new(Param::StatusListenPort, "9102"),
    ];
    let c = Config::load(&Sources {
        flags,
        ..Sources::default()
    })
    .unwrap();
    assert_eq!(c.status_listener.map(|s| s.listen_port), Some(9102));
    let ip_only = load_text(&dir, &format!("{BASE}StatusListenIP=127.0.0.1\n")).unwrap_err();
    assert!(
        ip_only
            .to_string()
            .contains("StatusListenIP needs StatusListenPort"),
        "{ip_only}"
    );
    let same = load_text(&dir, &format!("{BASE}StatusListenPort=8443\n")).unwrap_err();
    assert!(
        same.to_string().contains("must differ from ListenPort"),
        "{same}"
    );
    let range = load_text(&dir, &format!("{BASE}StatusListenPort=80\n")).unwrap_err();
    assert!(range.to_string().contains("out of range"), "{range}");
}

/// An empty PolicyDir (a template's variable that came out empty, a flag given `''`) is an
/// error naming where it was given, never the permissive built-in policy.
#[test]
fn an_empty_policy_dir_is_refused() {
    let dir = Scratch::new("config");
    for line in ["PolicyDir=", "PolicyDir=  "] {
        let error = load_text(&dir, &format!("{BASE}{line}\n"))
            .expect_err(line)
            .to_string();
        assert!(
            error.contains("main.conf:3: PolicyDir") && error.contains("empty"),
            "{error}"
        );
    }
    let unset = load_text(&dir, BASE).unwrap();
    assert!(unset.policy_dir.is_none(), "left out: the built-in policy");
}

/// The decision log and the process log file cannot be one file, however it is spelled.
#[test]
fn the_decision_log_is_a_file_of_its_own() {
    let dir = Scratch::new("config");
    let log = dir.write("sidecar.log", "");
    let other = format!("{}/./sidecar.log", log.parent().unwrap().display());
    for decisions in [log.display().to_string(), other] {
        let text = format!(
            "{BASE}LogType=file\nLogFile={}\nDecisionLog={decisions}\n",
            log.display()
        );
        let error = load_text(&dir, &text).expect_err(&decisions).to_string();
        assert!(
            error.contains("main.conf:5: DecisionLog") && error.contains("a file of its own"),
            "{error}"
        );
    }
    let apart = format!(
        "{BASE}LogType=file\nLogFile={}\nDecisionLog={}/decisions.log\n",
        log.display(),
        log.parent().unwrap().display()
    );
    assert!(load_text(&dir, &apart).is_ok());
}

/// Rules name tools without `ToolPrefix`; one written with the prefix (matching no tool as
/// rules match them) is refused, naming the rule it means. Rules naming tools this sidecar
/// does not have (an official configuration's) still load.
#[test]
fn rules_written_with_the_tool_prefix_are_refused() {
    let dir = Scratch::new("config");
    let error = load_text(
        &dir,
        &format!("{BASE}ToolPrefix=zbx_\nDenyTool=zbx_history_get\n"),
    )
    .expect_err("prefixed")
    .to_string();
    assert!(
        error.contains("main.conf:4: DenyTool")
            && error.contains("without ToolPrefix (zbx_), e.g. DenyTool=history_get"),
        "{error}"
    );
    let regex = format!("{BASE}ToolPrefix=zbx_\nDenyToolRegexp=^zbx_maintenance_\n");
    assert!(load_text(&dir, &regex).is_err());
    for fine in [
        "ToolPrefix=zbx_\nDenyTool=history_get\n",
        "ToolPrefix=zbx_\nDenyTool=no_such_tool\n",
        "DenyTool=zbx_history_get\n",
    ] {
        assert!(load_text(&dir, &format!("{BASE}{fine}")).is_ok(), "{fine}");
    }
}

/// `LogFile` without `LogType` is written to, as the official server (whose `LogType`
/// defaults to file) writes it; before, it was ignored and the log went to stderr. Without
/// either, the log is stderr; `LogType=console` keeps it there whatever `LogFile` says.
#[test]
fn a_log_file_without_log_type_is_written_to() {
    let dir = Scratch::new("config-log-file-alone");
    let c = load_text(&dir, &format!("{BASE}LogFile=/var/log/g.log\n")).unwrap();
    assert_eq!(c.log_type, LogType::File);
    assert!(c.render_effective().contains("\nLogType=file\n"));
    assert_eq!(load_text(&dir, BASE).unwrap().log_type, LogType::Console);
    let console = format!("{BASE}LogType=console\nLogFile=/var/log/g.log\n");
    assert_eq!(
        load_text(&dir, &console).unwrap().log_type,
        LogType::Console
    );
    // Written to, it is the process log's file, and the decision log cannot share it.
    let shared = format!("{BASE}LogFile=/var/log/g.log\nDecisionLog=/var/log/g.log\n");
    assert!(load_text(&dir, &shared).is_err());
}
