//! What the real binary writes to its log: one warning line per weakening setting at
//! start, and Zabbix error messages (which echo agent text) with control characters
//! escaped, so an agent cannot forge log lines.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

const DRY_RUN: &str = "PolicyMode=dry-run: policy denials are logged but not enforced";
const PLAIN_HTTP: &str =
    "FrontendURL is http:// to a non-loopback host: API tokens cross the network unencrypted";
const UNASKED: &str = "SessionMode=stateless with a policy that approves writes if_supported: clients are never asked (elicitation needs SessionMode=stateful)";

/// The binary, logging to a file, with the built-in policy (no PolicyDir).
struct Sidecar {
    child: Child,
    log: PathBuf,
    base: String,
}

impl Sidecar {
    fn start(frontend_url: &str, extra: &[&str]) -> Sidecar {
        let log = common::temp_path("guard.log");
        let port = common::free_port();
        let child = common::binary(frontend_url, port, &log)
            .arg("--decision-log")
            .arg(log.with_file_name("decisions.log"))
            .args(extra)
            .env_remove("ZABBIX_MCP_GUARD_POLICY_DIR")
            .current_dir(log.parent().unwrap_or(Path::new("/")))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log.with_file_name("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let mut sidecar = Sidecar {
            child,
            log,
            base: format!("http://127.0.0.1:{port}"),
        };
        sidecar.wait_for("listening");
        sidecar
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_for(&mut self, needle: &str) {
        let what = format!("{needle:?} in the log");
        common::wait_until_blocking(&what, Duration::from_secs(30), || {
            if let Ok(Some(status)) = self.child.try_wait() {
                let stderr = std::fs::read_to_string(self.log.with_file_name("stderr.log"));
                panic!(
                    "the sidecar exited ({status}):\n{}{}",
                    self.text(),
                    stderr.unwrap_or_default()
                );
            }
            self.text().contains(needle)
        });
    }

    /// SIGTERM, wait, and the whole log.
    fn stop(mut self) -> String {
        let _ = common::terminate(&mut self.child);
        self.text()
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn warn_lines<'a>(log: &'a str, message: &str) -> Vec<&'a str> {
    log.lines()
        .filter(|l| l.contains(" WARN ") && l.contains(message))
        .collect()
}

#[test]
fn weakening_settings_are_warned_about_once_each() {
    // Dry-run, plain http to a remote host, stateless with the default policy's
    // if_supported writes. The host does not exist: the sidecar starts anyway.
    let sidecar = Sidecar::start(
        "http://zabbix.example.invalid/",
        &["--policy-mode", "dry-run"],
    );
    let log = sidecar.stop();
    for message in [DRY_RUN, PLAIN_HTTP, UNASKED] {
        assert_eq!(warn_lines(&log, message).len(), 1, "{message:?} in\n{log}");
    }
    // None of them for a loopback URL, enforce and stateful sessions.
    let lab = common::lab(7);
    let sidecar = Sidecar::start(&lab.url, &["--session-mode", "stateful"]);
    let log = sidecar.stop();
    for message in [DRY_RUN, PLAIN_HTTP, UNASKED] {
        assert!(
            warn_lines(&log, message).is_empty(),
            "{message:?} in\n{log}"
        );
    }
}

#[tokio::test]
async fn zabbix_errors_echoing_agent_text_are_escaped_in_the_log() {
    common::init();
    let lab = common::lab(7);
    let mut sidecar = Sidecar::start(&lab.url, &[]);
    let guard = common::Guard::external(&sidecar.base);
    let client = common::client(&guard, &lab.token).await;
    let host = common::seed_id(&lab, "hosts", "mcp-web-01");
    let since = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 60)
        * 60;
    // Zabbix refuses a second maintenance of the same name, quoting the name. JSON
    // quoting alone leaves C1 controls (NEL, CSI) as they are. (Line and paragraph
    // separators never get this far: text arguments holding them are refused.)
    let name = format!(
        "MCP h2 log {}\nFORGED\u{85}FORGED \u{9b}31m \u{1b}[0m",
        std::process::id()
    );
    let args = json!({"name": name, "hostids": [host], "active_since": since,
                      "active_till": since + 3600});
    let created = common::call(&client, "maintenance_create", args.clone()).await;
    assert_ne!(created.is_error, Some(true), "{created:?}");
    let id = created.structured_content.as_ref().unwrap()["maintenanceids"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let err = common::tool_error(&client, "maintenance_create", args).await;
    let deleted = common::call(
        &client,
        "maintenance_delete",
        json!({"maintenanceids": [id]}),
    )
    .await;
    assert_ne!(deleted.is_error, Some(true), "{deleted:?}");
    assert!(
        err["message"]
            .as_str()
            .unwrap_or_default()
            .contains("FORGED"),
        "{err}"
    );
    sidecar.wait_for("tool call failed");
    drop(client);
    let log = sidecar.stop();
    assert!(
        log.lines().all(|l| !l.starts_with("FORGED")),
        "a forged line:\n{log}"
    );
    let failed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("tool call failed"))
        .collect();
    assert_eq!(failed.len(), 1, "{log}");
    for raw in ['\u{1b}', '\u{85}', '\u{9b}', '\u{2028}'] {
        assert!(!log.contains(raw), "raw {raw:?} in the log:\n{log}");
    }
    assert!(
        failed[0].contains("FORGED\\u{0085}FORGED \\u{009B}31m"),
        "{log}"
    );
}

/// `-T -c FILE` plus flags, with no variables of ours from the environment.
fn test_config(args: &[&std::ffi::OsStr]) -> std::process::Output {
    test_config_command(args).output().unwrap()
}

/// A reader that stopped early (`-T | head`, `policy eval … | head`) ends the output
/// quietly; before, the first line written after it panicked ("failed printing to
/// stdout: Broken pipe", exit 101).
#[test]
fn printing_subcommands_stop_quietly_when_their_reader_does() {
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let input = common::scratch_dir("closed-stdout").join("input.json");
    std::fs::write(&input, "{}").unwrap();
    let eval = [
        "policy".as_ref(),
        "eval".as_ref(),
        "--input".as_ref(),
        input.as_os_str(),
        "--dir".as_ref(),
        policies.as_os_str(),
    ];
    let mut commands = [
        test_config_command(&["--policy-dir".as_ref(), policies.as_os_str()]),
        Command::new(env!("CARGO_BIN_EXE_zabbix-mcp-guard")),
    ];
    commands[1].args(eval);
    for mut command in commands {
        // The read end is closed before the child starts: its first write meets EPIPE.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = command.stdout(writer).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.is_empty(), "{command:?}: {stderr}");
        assert!(out.status.success(), "{command:?}: {out:?}");
    }
}

fn test_config_command(args: &[&std::ffi::OsStr]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_zabbix-mcp-guard"));
    command
        .args(["-T", "--frontend-url", "https://localhost:8443"])
        .args(["--allowed-ip", "127.0.0.1"])
        .args(args);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("ZABBIX_MCP_GUARD_") {
            command.env_remove(name);
        }
    }
    command
}

/// A self-signed localhost certificate valid for three more days, and its key, as files.
fn expiring_pair(dir: &Path) -> (PathBuf, PathBuf) {
    let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
    let today = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 86_400;
    let soon = zabbix_mcp_guard::calendar::civil_from_days(today + 3);
    params.not_after = rcgen::date_time_ymd(soon.0 as i32, soon.1 as u8, soon.2 as u8);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_file, key_file) = (dir.join("soon.crt"), dir.join("soon.key"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    (cert_file, key_file)
}

/// `-T` loads what a start would load from files: the policy set, the TLS pair and the
/// Zabbix CAs. Every failure is named at once (a policy set that does not compile would
/// start a sidecar denying every call), and nothing passes unless all of them load.
#[test]
fn test_config_loads_the_files_a_start_would_load() {
    let (a, b) = (
        common::tls::pki("preflight-a"),
        common::tls::pki("preflight-b"),
    );
    let dir = common::scratch_dir("preflight");
    let policies = dir.join("policies");
    std::fs::create_dir(&policies).unwrap();
    let default = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.rego");
    std::fs::copy(&default, policies.join("default.rego")).unwrap();
    let (soon_cert, soon_key) = expiring_pair(&dir);
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let good = test_config(&[
        os("--policy-dir"),
        policies.as_os_str(),
        os("--tls-accept"),
        os("cert"),
        os("--tls-cert-file"),
        soon_cert.as_os_str(),
        os("--tls-key-file"),
        soon_key.as_os_str(),
        os("--tls-ca-file"),
        a.ca_file.as_os_str(),
    ]);
    let stdout = String::from_utf8_lossy(&good.stdout);
    assert!(
        good.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&good.stderr)
    );
    for line in [
        "policies loaded: /",
        "TLS certificate loaded: ",
        "TLSCAFile loaded: ",
        "warning: the TLS certificate in ",
        "configuration OK",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(line)),
            "{line}: {stdout}"
        );
    }
    assert!(stdout.contains(" days, at "), "{stdout}");

    // A policy that does not compile, a key that is not the certificate's, a CA file
    // without a certificate: all three named, and no "configuration OK".
    std::fs::write(
        policies.join("broken.rego"),
        "package zabbix.mcp\nallow if {\n",
    )
    .unwrap();
    let not_a_ca = dir.join("not-a-ca.pem");
    std::fs::write(&not_a_ca, "no certificate here\n").unwrap();
    let bad = test_config(&[
        os("--policy-dir"),
        policies.as_os_str(),
        os("--tls-accept"),
        os("cert"),
        os("--tls-cert-file"),
        a.cert_file.as_os_str(),
        os("--tls-key-file"),
        b.key_file.as_os_str(),
        os("--tls-ca-file"),
        not_a_ca.as_os_str(),
    ]);
    assert!(!bad.status.success());
    let stdout = String::from_utf8_lossy(&bad.stdout);
    assert!(!stdout.contains("configuration OK"), "{stdout}");
    let stderr = String::from_utf8_lossy(&bad.stderr);
    for said in [
        "broken.rego",
        "a start would deny every call until a set loads",
        "is not the key of the certificate in",
        "not-a-ca.pem holds no PEM certificate",
    ] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
    let failures = stderr
        .lines()
        .filter(|l| l.starts_with("zabbix-mcp-guard: "));
    assert_eq!(failures.count(), 3, "{stderr}");
}

/// `-T` warns of a secret file (`ApprovalSealKeyFile`, `SharedStoreFile`) others can read,
/// as a start does; before, only the start said so, after the restart `-T` was run to check.
/// The URL file's password is never shown.
#[test]
fn test_config_warns_of_secret_files_others_can_read() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = common::scratch_dir("preflight-secret-files");
    let key = dir.join("seal-key");
    std::fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
    let url = dir.join("store-url");
    std::fs::write(&url, "redis://:s3cret@127.0.0.1:6390/2\n").unwrap();
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let args = [
        "--policy-dir".as_ref(),
        policies.as_os_str(),
        "--approval-seal-key-file".as_ref(),
        key.as_os_str(),
        "--shared-store-file".as_ref(),
        url.as_os_str(),
    ];
    let files = [("ApprovalSealKeyFile", &key), ("SharedStoreFile", &url)];
    for (open, _) in files {
        for (param, path) in files {
            let mode = if param == open { 0o644 } else { 0o600 };
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let out = test_config(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(!stdout.contains("s3cret"), "{stdout}");
        for (param, path) in files {
            let warning = format!("warning: {param} {} (mode 644", path.display());
            assert_eq!(
                stdout.contains(&warning),
                param == open,
                "{param}: {stdout}"
            );
        }
        assert!(
            stdout.contains(&format!("SharedStoreFile={}\n", url.display())),
            "{stdout}"
        );
    }
}

/// `-T` warns of a secret given as a flag (`--approval-seal-key`, a `--shared-store` URL
/// with a password), as a start does: every local user reads a command line (`ps`). The
/// warning names the flag, never the value; a URL without a password is no secret. Before,
/// nothing said so, and `ps` as nobody showed the Redis password and the seal key.
#[test]
fn test_config_warns_of_secrets_on_the_command_line() {
    use std::os::unix::fs::PermissionsExt as _;
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let key = "ab".repeat(32);
    let key_file = common::scratch_dir("secret-flags").join("seal-key");
    std::fs::write(&key_file, &key).unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let key_file = key_file.to_string_lossy().into_owned();
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &[
                "--approval-seal-key",
                &key,
                "--shared-store",
                "redis://:s3cret@127.0.0.1:6390/2",
            ],
            &["--approval-seal-key", "--shared-store"],
        ),
        (
            &[
                "--shared-store",
                "redis://user:s3cret@127.0.0.1:6390/2",
                "--approval-seal-key-file",
                &key_file,
            ],
            &["--shared-store"],
        ),
        (
            &[
                "--approval-seal-key",
                &key,
                "--shared-store",
                "redis://127.0.0.1:6390/2",
            ],
            &["--approval-seal-key"],
        ),
    ];
    for (flags, warned) in cases {
        let mut args: Vec<&std::ffi::OsStr> = vec!["--policy-dir".as_ref(), policies.as_os_str()];
        args.extend(flags.iter().map(std::ffi::OsStr::new));
        let out = test_config(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{flags:?}: {stdout}");
        for flag in ["--approval-seal-key", "--shared-store"] {
            let warning = format!("warning: {flag} puts a secret on the command line");
            assert_eq!(
                stdout.contains(&warning),
                warned.contains(&flag),
                "{flags:?}: {stdout}"
            );
        }
        assert!(
            !stdout.contains("s3cret") && !stdout.contains(&key),
            "{stdout}"
        );
    }
}

/// A policy directory that does not load is named by its parameter.
#[test]
fn test_config_names_policy_dir() {
    let missing = common::scratch_dir("preflight-no-policies").join("absent");
    let out = test_config(&["--policy-dir".as_ref(), missing.as_os_str()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("PolicyDir: policies from {}:", missing.display())),
        "{stderr}"
    );
}

/// `-T` warns of a TLS key others can read; before, nothing was said of it.
#[test]
fn test_config_warns_of_a_tls_key_others_can_read() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = common::scratch_dir("preflight-tls-key");
    let (cert, key) = expiring_pair(&dir);
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let args = [
        "--policy-dir".as_ref(),
        policies.as_os_str(),
        "--tls-accept".as_ref(),
        "cert".as_ref(),
        "--tls-cert-file".as_ref(),
        cert.as_os_str(),
        "--tls-key-file".as_ref(),
        key.as_os_str(),
    ];
    let warning = format!("warning: TLSKeyFile {} (mode 644", key.display());
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = test_config(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(&warning),
        "{stdout}"
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = test_config(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !stdout.contains("warning: TLSKeyFile"),
        "{stdout}"
    );
}

/// A misspelt `ZABBIX_MCP_GUARD_*` variable stops `-T` (and a start: both load the
/// configuration the same way), named; before, the binary ignored it, so
/// `ZABBIX_MCP_GUARD_DENYTOOL=host_get` passed `-T` with `configuration OK` and `host_get`
/// stayed exposed.
#[test]
fn a_variable_that_names_no_parameter_stops_test_config() {
    let expected = "zabbix-mcp-guard: configuration error: environment variable \
                    ZABBIX_MCP_GUARD_DENYTOOL names no parameter (did you mean \
                    ZABBIX_MCP_GUARD_DENY_TOOL?)";
    let out = test_config_command(&[])
        .env("ZABBIX_MCP_GUARD_DENYTOOL", "host_get")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(stderr.trim_end(), expected);
    assert!(out.stdout.is_empty(), "{out:?}");
    // Spelt right, the rule is read.
    let out = test_config_command(&[])
        .env("ZABBIX_MCP_GUARD_DENY_TOOL", "host_get")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("\nDenyTool=host_get\n"), "{stdout}");
}

/// Certificate files that `TLSAccept` leaves unused are warned of by `-T` (and at start:
/// one list of warnings); before, MCP went out over plain HTTP and nothing said so.
#[test]
fn test_config_warns_of_certificate_files_tls_accept_leaves_unused() {
    const UNUSED: &str = "warning: TLSCertFile/TLSKeyFile are set but TLSAccept=unencrypted";
    let (cert, key) = expiring_pair(&common::scratch_dir("preflight-unused-pair"));
    let files = [
        "--tls-cert-file".as_ref(),
        cert.as_os_str(),
        "--tls-key-file".as_ref(),
        key.as_os_str(),
    ];
    let out = test_config(&files);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains(UNUSED), "{stdout}");
    let served = [&files[..], &["--tls-accept".as_ref(), "cert".as_ref()]].concat();
    let out = test_config(&served);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(!stdout.contains(UNUSED), "{stdout}");
}

/// A decision log (or process log) a start could not open is warned of by `-T`, which
/// still passes: the package checks its configuration before systemd's `LogsDirectory=`
/// exists. Before, `-T` said "configuration OK" and the start failed.
#[test]
fn test_config_warns_of_log_files_a_start_could_not_open() {
    let dir = common::scratch_dir("preflight-log-files");
    let missing = dir.join("no-such-dir").join("decisions.log");
    let out = test_config(&["--decision-log".as_ref(), missing.as_os_str()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains(&format!(
            "warning: DecisionLog {}: directory ",
            missing.display()
        )) && stdout.contains("No such file or directory")
            && stdout.contains("configuration OK"),
        "{stdout}"
    );
    let present = dir.join("decisions.log");
    let out = test_config(&["--decision-log".as_ref(), present.as_os_str()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("warning: DecisionLog"), "{stdout}");
}
