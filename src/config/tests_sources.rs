//! Where parameters come from: includes, `${NAME}` expansion, errors naming the file,
//! line, variable or flag, and the precedence of flags over variables over the file.

use std::collections::BTreeMap;
use std::fs;
use std::time::Duration;

use super::tests::{BASE, load_text, sources};
use super::{Config, ConfigError, FlagValue, Param, Sources};
use crate::scratch::Scratch;

#[test]
fn includes_files_directories_and_patterns() {
    let dir = Scratch::new("config-include");
    dir.write("conf.d/20-b.conf", "DenyTool=b\n");
    dir.write("conf.d/10-a.conf", "DenyTool=a\n");
    dir.write("conf.d/30-c.conf.bak", "DenyTool=bak\n");
    dir.write("all/2", "DenyTool=all2\n");
    dir.write("all/1", "DenyTool=all1\n");
    dir.write("one.conf", "DenyTool=one\nInclude=all\n");
    let main = format!(
        "{BASE}Include=one.conf\nInclude={}/conf.d/*.conf\nDenyTool=last\n",
        dir.display()
    );
    let c = load_text(&dir, &main).unwrap();
    let rules: Vec<&str> = c.tool_rules.iter().map(|r| r.pattern().as_str()).collect();
    assert_eq!(rules, ["one", "all1", "all2", "a", "b", "last"]);
    // A pattern in a missing directory or a missing file is an error; a pattern
    // matching nothing in an existing directory is not.
    assert!(load_text(&dir, &format!("{BASE}Include=none/*.conf\n")).is_err());
    let dir_ok = format!("{BASE}Include=conf.d/*.none\n");
    assert!(load_text(&dir, &dir_ok).unwrap().tool_rules.is_empty());
    let err = load_text(&dir, &format!("{BASE}Include=missing.conf\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!("{}:3: Include: ", dir.join("main.conf").display())),
        "{err}"
    );
}

#[test]
fn include_cycles_hit_the_depth_limit() {
    let dir = Scratch::new("config-cycle");
    dir.write("loop.conf", "Include=loop.conf\n");
    let err = load_text(&dir, &format!("{BASE}Include=loop.conf\n")).unwrap_err();
    assert!(
        matches!(err, ConfigError::IncludeDepth { limit: 10, .. }),
        "{err}"
    );
}

#[test]
fn expands_environment_variables_in_values() {
    let dir = Scratch::new("config-expand");
    let file = dir.write(
        "main.conf",
        "FrontendURL=https://${ZBX_HOST}/\nAllowedIP=${NETS}\n",
    );
    let env = BTreeMap::from([
        ("ZBX_HOST".to_owned(), "zabbix.example.com".to_owned()),
        ("NETS".to_owned(), "10.0.0.0/8".to_owned()),
    ]);
    let c = Config::load(&Sources {
        env,
        ..sources(&file)
    })
    .unwrap();
    assert_eq!(c.frontend_url, "https://zabbix.example.com/");
    assert_eq!(c.allowed_ip_raw, "10.0.0.0/8");
    let err = Config::load(&sources(&file)).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}:1: FrontendURL: environment variable ZBX_HOST is not defined",
            file.display()
        )
    );
}

#[test]
fn errors_name_file_line_and_parameter() {
    let dir = Scratch::new("config-errors");
    let path = dir.join("main.conf");
    let p = path.display();
    let cases = [
        (format!("{BASE}Timeout=45\n"), format!("{p}:3: Timeout: value 45 is out of range 3-30")),
        (format!("{BASE}\nNoSuch=1\n"), format!("{p}:4: unknown parameter NoSuch")),
        (format!("{BASE}ListenPort=80\n"), format!("{p}:3: ListenPort: value 80 is out of range 1024-32767")),
        (format!("{BASE}MaxResponseSize=8K\n"), format!("{p}:3: MaxResponseSize: value 8K is out of range 16K-256K")),
        (format!("{BASE}DebugLevel=6\n"), format!("{p}:3: DebugLevel: value 6 is out of range 0-5")),
        (format!("{BASE}LogFileSize=1025\n"), format!("{p}:3: LogFileSize: value 1025 is out of range 0-1024")),
        (format!("{BASE}TLSAccept=psk\n"), format!("{p}:3: TLSAccept: invalid value \"psk\": expected one of unencrypted, cert")),
        (format!("{BASE}IgnoreURLCertErrors=yes\n"), format!("{p}:3: IgnoreURLCertErrors: invalid value \"yes\": expected true or false")),
        (format!("{BASE}Timeout=5\nTimeout=6\n"), format!("{p}:4: Timeout: the parameter is given more than once (first at {p}:3)")),
        (format!("{BASE}just text\n"), format!("{p}:3: expected Parameter=value, found \"just text\"")),
        ("AllowedIP=::1\n".to_owned(), "missing mandatory parameter FrontendURL: set it in the configuration file, with --frontend-url or with ZABBIX_MCP_GUARD_FRONTEND_URL".to_owned()),
        (format!("{BASE}DenyToolRegexp=(\n"), format!("{p}:3: DenyToolRegexp: invalid value \"(\": invalid regular expression: ")),
        (format!("{BASE}AllowTool=host_get\n"), format!("{p}:3: AllowTool: allow rules need at least one DenyTool")),
        (format!("{BASE}TLSAccept=cert\n"), format!("{p}:3: TLSAccept: TLSCertFile is required when TLSAccept=cert")),
        (format!("{BASE}LogType=file\n"), format!("{p}:3: LogType: LogFile is required when LogType=file")),
        (format!("{BASE}TLSCAFile=/no/such/ca.pem\n"), format!("{p}:3: TLSCAFile: invalid value \"/no/such/ca.pem\": no such file")),
        (format!("{BASE}ToolPrefix=a b\n"), format!("{p}:3: ToolPrefix: invalid value \"a b\"")),
        (format!("{BASE}ApprovalSealKey=short\n"), format!("{p}:3: ApprovalSealKey: invalid value \"***\": expected at least 32 random bytes written as hex")),
        (format!("{BASE}frontendurl=x\n"), format!("{p}:3: unknown parameter frontendurl")),
    ];
    for (text, expected) in cases {
        let err = load_text(&dir, &text).unwrap_err().to_string();
        assert!(
            err.starts_with(&expected),
            "\n got: {err}\nwant: {expected}"
        );
    }
}

#[test]
fn repeats_across_includes_and_encoding_errors() {
    let dir = Scratch::new("config-repeat");
    let inc = dir.write("inc.conf", "\nTimeout=4\n");
    let err = load_text(&dir, &format!("{BASE}Timeout=3\nInclude=inc.conf\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!(
            "{}:2: Timeout: the parameter is given more than once",
            inc.display()
        )),
        "{err}"
    );
    let bom = dir.write("bom.conf", &format!("\u{feff}{BASE}"));
    let err = Config::load(&sources(&bom)).unwrap_err();
    assert!(matches!(err, ConfigError::Bom { .. }), "{err}");
    let latin1 = dir.join("latin1.conf");
    fs::write(&latin1, b"FrontendURL=https://z\nToolPrefix=\xe9\n").unwrap();
    let err = Config::load(&sources(&latin1)).unwrap_err().to_string();
    assert_eq!(
        err,
        format!("{}:2: the line is not valid UTF-8", latin1.display())
    );
    let err = Config::load(&sources(&dir.join("absent.conf")))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("cannot read "), "{err}");
}

#[test]
fn flags_win_over_variables_and_variables_over_the_file() {
    let dir = Scratch::new("config-precedence");
    let file = dir.write(
        "main.conf",
        &format!(
            "{BASE}Timeout=5\nListenPort=2000\nDebugLevel=1\nDenyTool=file_rule\nAllowedHost=file\n"
        ),
    );
    let env = BTreeMap::from([
        (Param::Timeout.env_var(), "6".to_owned()),
        (Param::ListenPort.env_var(), "3000".to_owned()),
        (Param::DenyTool.env_var(), "env_rule".to_owned()),
        (Param::AllowedHost.env_var(), "env1,env2".to_owned()),
    ]);
    let flags = vec![
        FlagValue::new(Param::Timeout, "7"),
        FlagValue::new(Param::AllowTool, "file_rule"),
    ];
    let c = Config::load(&Sources {
        env: env.clone(),
        flags,
        ..sources(&file)
    })
    .unwrap();
    assert_eq!(c.timeout, Duration::from_secs(7));
    assert_eq!(c.listen_port, 3000);
    assert_eq!(c.debug_level, 1);
    let rules: Vec<String> = c.tool_rules.iter().map(ToString::to_string).collect();
    assert_eq!(
        rules,
        [
            "AllowTool=file_rule",
            "DenyTool=env_rule",
            "DenyTool=file_rule"
        ]
    );
    assert_eq!(c.allowed_hosts, ["env1", "env2"]);
    // An environment error names the variable.
    let env = BTreeMap::from([(Param::ListenPort.env_var(), "x".to_owned())]);
    let err = Config::load(&Sources {
        env,
        ..sources(&file)
    })
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "environment variable ZABBIX_MCP_GUARD_LISTEN_PORT: invalid value \"x\": expected an integer"
    );
}

/// A `ZABBIX_MCP_GUARD_*` variable that names no parameter stops the start, as an unknown
/// parameter in the file does; one the file names in `${…}` is the file's to use.
#[test]
fn variables_that_name_no_parameter_are_refused() {
    let dir = Scratch::new("config-unknown-variable");
    let file = dir.write("main.conf", BASE);
    let load = |vars: &[(&str, &str)], file: &std::path::Path| {
        let env = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::load(&Sources {
            env,
            ..sources(file)
        })
    };
    let err = load(&[("ZABBIX_MCP_GUARD_DENYTOOL", "host_get")], &file)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "environment variable ZABBIX_MCP_GUARD_DENYTOOL names no parameter \
         (did you mean ZABBIX_MCP_GUARD_DENY_TOOL?)"
    );
    let err = load(&[("ZABBIX_MCP_GUARD_DENY_TOOLS", "host_get")], &file)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "environment variable ZABBIX_MCP_GUARD_DENY_TOOLS names no parameter"
    );
    // Spelt right, the rule holds; the command line's own variables and other prefixes
    // pass.
    let vars = [
        ("ZABBIX_MCP_GUARD_DENY_TOOL", "host_get"),
        ("ZABBIX_MCP_GUARD_CONFIG", "/elsewhere.conf"),
        ("ZABBIX_MCP_GUARD_ENV_CONTRACT", "zabbix-image"),
        ("ZABBIX_MCP_GUARDIAN", "x"),
    ];
    let c = load(&vars, &file).unwrap();
    let rules: Vec<String> = c.tool_rules.iter().map(ToString::to_string).collect();
    assert_eq!(rules, ["DenyTool=host_get"]);
    // What the kubelet gives a container for the manifest's Service `zabbix-mcp-guard`
    // (port 8443, named mcp) and for a Service `zabbix-mcp-guard-redis`.
    let kubelet = [
        ("ZABBIX_MCP_GUARD_SERVICE_HOST", "10.96.0.7"),
        ("ZABBIX_MCP_GUARD_SERVICE_PORT", "8443"),
        ("ZABBIX_MCP_GUARD_SERVICE_PORT_MCP", "8443"),
        ("ZABBIX_MCP_GUARD_PORT", "tcp://10.96.0.7:8443"),
        ("ZABBIX_MCP_GUARD_PORT_8443_TCP", "tcp://10.96.0.7:8443"),
        ("ZABBIX_MCP_GUARD_PORT_8443_TCP_PROTO", "tcp"),
        ("ZABBIX_MCP_GUARD_PORT_8443_TCP_PORT", "8443"),
        ("ZABBIX_MCP_GUARD_PORT_8443_TCP_ADDR", "10.96.0.7"),
        ("ZABBIX_MCP_GUARD_REDIS_SERVICE_HOST", "10.96.0.8"),
        ("ZABBIX_MCP_GUARD_REDIS_PORT_6379_TCP_ADDR", "10.96.0.8"),
    ];
    assert!(load(&kubelet, &file).is_ok());
    // A slip that only looks like one of them is still named.
    let err = load(&[("ZABBIX_MCP_GUARD_LISTENPORT", "9000")], &file)
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("(did you mean ZABBIX_MCP_GUARD_LISTEN_PORT?)"),
        "{err}"
    );
    for odd in [
        "ZABBIX_MCP_GUARD_PORT_X_TCP",
        "ZABBIX_MCP_GUARD_PORT_80_TCP_HOST",
    ] {
        assert!(load(&[(odd, "x")], &file).is_err(), "{odd}");
    }
    // A variable of the prefix that the file expands, as the example configuration shows.
    let seal = dir.write(
        "seal.conf",
        &format!("{BASE}ApprovalSealKey=${{ZABBIX_MCP_GUARD_SEAL}}\n"),
    );
    let key = "5a1f930c7e44d2813ba60fe92578c4119d6237fa08be53c16a2e947de01548b3";
    let c = load(&[("ZABBIX_MCP_GUARD_SEAL", key)], &seal).unwrap();
    assert!(c.approval_seal_key.is_some());
}

/// A file (or an include) past 1 MiB is refused, naming it, before more is read: read
/// whole, `-c /dev/zero` took memory until the process was killed.
#[test]
fn files_past_a_mebibyte_are_refused_unread() {
    let dir = Scratch::new("config-too-large");
    let limit = super::file::MAX_FILE_SIZE;
    let at_limit = format!("{BASE}{}\n", "#".repeat(limit as usize - BASE.len() - 1));
    assert!(load_text(&dir, &at_limit).is_ok());
    let past = dir.write("past.conf", &format!("#{at_limit}"));
    let err = Config::load(&sources(&past)).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "cannot read {}: longer than 1048576 bytes; not a configuration file",
            past.display()
        )
    );
    let err = load_text(&dir, &format!("{BASE}Include=/dev/zero\n"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "cannot read /dev/zero: longer than 1048576 bytes; not a configuration file"
    );
    let err = Config::load(&sources(std::path::Path::new("/dev/zero")))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("cannot read /dev/zero: longer than"),
        "{err}"
    );
}
