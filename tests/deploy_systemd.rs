//! deploy/systemd: the unit passes `systemd-analyze verify`, keeps its hardening and its
//! readiness and watchdog settings, and the packaged configuration reads the seal key from
//! systemd's credentials directory.

use std::path::{Path, PathBuf};
use std::process::Command;

// Scratch directories as tests/common keeps them, without the rest of tests/common.
#[path = "../src/scratch.rs"]
mod scratch;
use scratch::dir as temp_dir;

const UNIT: &str = "deploy/systemd/zabbix-mcp-guard.service";
const PACKAGED_CONF: &str = "deploy/debian/zabbix_mcp_guard.conf";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The unit with ExecStart pointing at the binary under test (verify checks that the
/// command exists; /usr/bin/zabbix-mcp-guard exists only once the package is installed).
fn unit_for_test(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo(UNIT)).expect("unit");
    let text = text.replace(
        "/usr/bin/zabbix-mcp-guard",
        env!("CARGO_BIN_EXE_zabbix-mcp-guard"),
    );
    let path = dir.join("zabbix-mcp-guard.service");
    std::fs::write(&path, text).expect("write unit");
    path
}

fn systemd_analyze(args: &[&str], unit: &Path) -> std::process::Output {
    Command::new("systemd-analyze")
        .args(args)
        .arg(unit)
        .output()
        .expect("systemd-analyze runs (apt-get install systemd; deploy/lab/start-zabbix.sh all)")
}

#[test]
fn unit_passes_systemd_analyze_verify_without_warnings() {
    let unit = unit_for_test(&temp_dir("verify"));
    let out = systemd_analyze(&["verify"], &unit);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "verify failed: {stderr}");
    assert!(stderr.trim().is_empty(), "verify warned: {stderr}");
}

#[test]
fn unit_is_hardened() {
    let text = std::fs::read_to_string(repo(UNIT)).expect("unit");
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    for wanted in [
        "DynamicUser=yes",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "PrivateTmp=yes",
        "CapabilityBoundingSet=",
        "AmbientCapabilities=",
        "LoadCredential=seal-key:/etc/zabbix/mcp-guard/seal-key",
        // tests/service_manager.rs: what the binary sends for these two.
        "Type=notify",
        "WatchdogSec=30s",
    ] {
        assert!(lines.contains(&wanted), "the unit lacks {wanted}");
    }
    // systemd's own score: 0 is best, 10 worst; "OK" is below 2.
    let unit = unit_for_test(&temp_dir("security"));
    let out = systemd_analyze(&["security", "--offline=yes", "--threshold=20"], &unit);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let level: f64 = stdout
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for zabbix-mcp-guard.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in: {stdout}"));
    assert!(level < 2.0, "exposure level {level}: {stdout}");
}

/// The packaged configuration, with its /etc/zabbix/mcp-guard paths moved to `root`, and
/// the policies the package installs there (`-T` compiles them).
fn packaged_conf_in(root: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo(PACKAGED_CONF)).expect("packaged conf");
    let text = text.replace("/etc/zabbix/mcp-guard", &root.display().to_string());
    std::fs::create_dir_all(root.join("zabbix_mcp_guard.d")).expect("include dir");
    std::fs::create_dir_all(root.join("policies")).expect("policy dir");
    for file in ["default.rego", "default_test.rego"] {
        std::fs::copy(
            repo(&format!("policies/{file}")),
            root.join("policies").join(file),
        )
        .expect("packaged policy");
    }
    let path = root.join("zabbix_mcp_guard.conf");
    std::fs::write(&path, text).expect("write conf");
    path
}

fn test_config(conf: &Path, credentials: Option<&Path>) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zabbix-mcp-guard"));
    cmd.arg("--config")
        .arg(conf)
        .arg("-T")
        .env_remove("CREDENTIALS_DIRECTORY");
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("ZABBIX_MCP_GUARD_") {
            cmd.env_remove(name);
        }
    }
    if let Some(dir) = credentials {
        cmd.env("CREDENTIALS_DIRECTORY", dir);
    }
    cmd.output().expect("binary runs")
}

#[test]
fn packaged_config_reads_the_seal_key_from_the_credentials_directory() {
    let root = temp_dir("credentials");
    let conf = packaged_conf_in(&root);
    let credentials = root.join("credentials");
    std::fs::create_dir_all(&credentials).expect("credentials dir");
    let key = credentials.join("seal-key");
    std::fs::write(&key, format!("{}\n", "ab".repeat(32))).expect("key");
    // systemd hands credentials over read-only to the service user.
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o400);
    std::fs::set_permissions(&key, mode).expect("chmod");

    let out = test_config(&conf, Some(&credentials));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("configuration OK"), "{stdout}");
    assert!(
        stdout.contains(&format!("ApprovalSealKeyFile={}", key.display())),
        "the key file is the credential: {stdout}"
    );
    assert!(
        !stdout.contains(&"ab".repeat(32)),
        "the key is never printed"
    );

    // Outside systemd (no credentials directory) the start fails and says why.
    let out = test_config(&conf, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("CREDENTIALS_DIRECTORY"), "{stderr}");
}
