//! The zabbix-image environment contract: the official image's configuration file and
//! variables load unchanged, indexed rules, and errors that name the variable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Config, EnvContract, LogType, Sources, TlsAccept};

/// The image's files as the repository keeps them for tests.
fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The shipped configuration includes the file the image's entrypoint writes at this
/// fixed path; put the image's template there, as the entrypoint does when no indexed
/// rule variable is set. Written through a rename, so concurrent tests never see it
/// half-written (they all write the same bytes).
pub(crate) fn install_tool_access_file() {
    let target = Path::new("/tmp/zabbix_mcp_server_tool_access.conf");
    let text = std::fs::read(data("zabbix_mcp_server_tool_access.conf")).unwrap();
    if std::fs::read(target).is_ok_and(|current| current == text) {
        return;
    }
    let temp = target.with_extension(format!("{}.tmp", uuid::Uuid::new_v4().simple()));
    std::fs::write(&temp, &text).unwrap();
    std::fs::rename(&temp, target).unwrap();
}

fn env(vars: &[(&str, &str)]) -> BTreeMap<String, String> {
    vars.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn load(file: Option<PathBuf>, vars: &[(&str, &str)]) -> Result<Config, String> {
    Config::load(&Sources {
        config_file: file,
        env: env(vars),
        flags: Vec::new(),
        env_contract: EnvContract::ZabbixImage,
    })
    .map_err(|e| e.to_string())
}

fn rules(c: &Config) -> Vec<String> {
    c.tool_rules.iter().map(ToString::to_string).collect()
}

const URL: (&str, &str) = ("ZBX_FRONTEND_URL", "http://127.0.0.1:8081/api_jsonrpc.php");

#[test]
fn the_official_file_loads_unchanged_with_the_official_variables() {
    install_tool_access_file();
    let file = Some(data("zabbix_mcp_server.conf"));
    let c = load(
        file.clone(),
        &[
            URL,
            ("ZBX_ALLOWEDIP", "192.0.2.0/24"),
            ("ZBX_LISTENIP", "127.0.0.1"),
            ("ZBX_LISTENPORT", "9443"),
            ("ZBX_TIMEOUT", "20"),
            ("ZBX_DEBUGLEVEL", "4"),
            ("ZBX_IGNOREURLCERTERRORS", "false"),
            ("ZBX_MAX_RESPONSE_SIZE", "128K"),
            ("ZBX_TOOL_PREFIX", "zabbix_"),
            ("ZBX_TLSACCEPT", "unencrypted"),
        ],
    )
    .unwrap();
    assert_eq!(c.api_url(), "http://127.0.0.1:8081/api_jsonrpc.php");
    assert_eq!(c.allowed_ip_raw, "192.0.2.0/24");
    assert_eq!((c.listen_port, c.debug_level), (9443, 4));
    assert_eq!(c.timeout, Duration::from_secs(20));
    assert!(!c.ignore_url_cert_errors);
    assert_eq!(c.max_response_size, 128 << 10);
    assert_eq!(c.tool_prefix, "zabbix_");
    assert_eq!(c.log_type, LogType::Console);
    assert_eq!(c.policy_dir, None, "the built-in default policy");
    assert_eq!(
        rules(&c),
        [
            "DenyTool=item_get",
            "DenyTool=lld_get",
            "DenyTool=interface_get",
            "DenyTool=macro_get",
            "DenyTool=history_get"
        ]
    );
    // Only the mandatory variable set: the image's defaults, true accepted.
    let c = load(file, &[URL, ("ZBX_IGNOREURLCERTERRORS", "true")]).unwrap();
    assert_eq!(c.allowed_ip_raw, "127.0.0.1,::1");
    assert_eq!(c.listen_ip, [std::net::IpAddr::from([0, 0, 0, 0])]);
    assert_eq!((c.listen_port, c.debug_level), (8443, 3));
    assert_eq!(c.timeout, Duration::from_secs(10));
    assert_eq!(
        (c.max_response_size, c.tls_accept),
        (64 << 10, TlsAccept::Unencrypted)
    );
    assert!(c.ignore_url_cert_errors);
}

#[test]
fn variables_alone_make_a_configuration_with_the_image_defaults() {
    let c = load(None, &[URL]).unwrap();
    assert_eq!(c.allowed_ip_raw, "127.0.0.1,::1");
    assert_eq!(rules(&c).len(), 5, "the image's default deny list");
    // Empty variables are unset, as the image's entrypoint treats them.
    let c = load(None, &[URL, ("ZBX_TIMEOUT", ""), ("ZBX_ALLOWEDIP", "")]).unwrap();
    assert_eq!(c.timeout, Duration::from_secs(10));
    assert_eq!(c.allowed_ip_raw, "127.0.0.1,::1");
    // Without the contract the ZBX_* variables mean nothing.
    let err = Config::load(&Sources {
        env: env(&[URL]),
        ..Sources::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("missing mandatory parameter FrontendURL"),
        "{err}"
    );
}

#[test]
fn indexed_rules_form_one_sequence_and_replace_the_default_list() {
    install_tool_access_file();
    let vars = [
        URL,
        ("ZBX_ALLOWTOOL_REGEXP_0", "^(host|problem)_get$"),
        ("ZBX_ALLOWTOOL_1", "maintenance_*"),
        ("ZBX_DENYTOOL_REGEXP_2", "_(create|delete)$"),
        ("ZBX_DENYTOOL_3", "*"),
        ("ZBX_DENYTOOLS", "not a rule variable"),
    ];
    let expected = [
        "AllowToolRegexp=^(host|problem)_get$",
        "AllowTool=maintenance_*",
        "DenyToolRegexp=_(create|delete)$",
        "DenyTool=*",
    ];
    assert_eq!(rules(&load(None, &vars).unwrap()), expected);
    // They replace the rules of the included file too.
    let c = load(Some(data("zabbix_mcp_server.conf")), &vars).unwrap();
    assert_eq!(rules(&c), expected);
}

#[test]
fn errors_name_the_variable() {
    let cases: [(&[(&str, &str)], &str); 11] = [
        (
            &[URL, ("ZBX_DENYTOOL_0", "a"), ("ZBX_DENYTOOL_2", "*")],
            "environment variable ZBX_DENYTOOL_2: index 2 follows a gap: index 1 is missing",
        ),
        (
            &[URL, ("ZBX_DENYTOOL_1", "*")],
            "environment variable ZBX_DENYTOOL_1: index 1 follows a gap: index 0 is missing",
        ),
        (
            &[
                URL,
                ("ZBX_ALLOWTOOL_0", "host_get"),
                ("ZBX_DENYTOOL_0", "*"),
            ],
            "environment variable ZBX_DENYTOOL_0: index 0 is also used by environment variable ZBX_ALLOWTOOL_0",
        ),
        (
            &[URL, ("ZBX_DENYTOOL_00", "*")],
            "environment variable ZBX_DENYTOOL_00: invalid index",
        ),
        (
            &[URL, ("ZBX_DENYTOOL_REGEX_0", ".*")],
            "environment variable ZBX_DENYTOOL_REGEX_0: invalid index",
        ),
        (
            &[URL, ("ZBX_DENYTOOL", "*")],
            "environment variable ZBX_DENYTOOL: not supported; use indexed variables such as ZBX_DENYTOOL_0",
        ),
        (
            &[URL, ("ZBX_DENYTOOL_0", " ")],
            "environment variable ZBX_DENYTOOL_0: invalid value \" \": a rule must not be empty",
        ),
        (
            &[URL, ("ZBX_TIMEOUT", "45")],
            "environment variable ZBX_TIMEOUT: value 45 is out of range 3-30",
        ),
        (
            &[URL, ("ZBX_IGNOREURLCERTERRORS", "yes")],
            "environment variable ZBX_IGNOREURLCERTERRORS: invalid value \"yes\": expected true or false",
        ),
        (
            &[URL, ("ZBX_TLSCERTFILE", "mcp.crt")],
            "environment variable ZBX_TLSCERTFILE: invalid value \"/var/lib/zabbix/enc/mcp.crt\": no such file",
        ),
        (
            &[],
            "missing mandatory parameter FrontendURL: set it in the configuration file, with --frontend-url or with ZBX_FRONTEND_URL",
        ),
    ];
    for (vars, expected) in cases {
        let err = load(None, vars).unwrap_err();
        assert!(err.starts_with(expected), "\n got: {err}\nwant: {expected}");
    }
    let err = load(None, &[URL, ("ZBX_TLSCERT", "-----BEGIN")]).unwrap_err();
    assert!(
        err.starts_with("environment variable ZBX_TLSCERT: "),
        "{err}"
    );
}

#[test]
fn unset_references_keep_the_default_only_under_the_contract() {
    let dir = crate::scratch::dir("image");
    let file = dir.join("main.conf");
    std::fs::write(
        &file,
        "FrontendURL=${ZBX_FRONTEND_URL}\nAllowedIP=::1\nTimeout=${ZBX_TIMEOUT}\n\
         ToolPrefix=x${UNSET_PART}\n",
    )
    .unwrap();
    // A reference mixed with text is still expanded, so an unset variable there fails.
    let err = load(Some(file.clone()), &[URL]).unwrap_err();
    assert!(
        err.ends_with("environment variable UNSET_PART is not defined"),
        "{err}"
    );
    let c = load(Some(file.clone()), &[URL, ("UNSET_PART", "")]).unwrap();
    assert_eq!(
        (c.timeout, c.tool_prefix.as_str()),
        (Duration::from_secs(10), "x")
    );
    let err = Config::load(&Sources {
        config_file: Some(file),
        env: env(&[URL, ("UNSET_PART", "")]),
        ..Sources::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.ends_with("environment variable ZBX_TIMEOUT is not defined"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
