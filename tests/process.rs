//! The real binary: LogType=file, PidFile, SIGTERM shutdown.

mod common;

use std::time::Duration;

#[test]
fn binary_logs_to_file_writes_pid_and_stops_on_sigterm() {
    let lab = common::lab(7);
    let dir = std::env::temp_dir().join(format!("zmg-process-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("guard.log");
    let pid = dir.join("guard.pid");
    let port = common::free_port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_zabbix-mcp-guard"))
        .args([
            "--frontend-url",
            &lab.url,
            "--allowed-ip",
            "127.0.0.1",
            "--listen-ip",
            "127.0.0.1",
        ])
        .args(["--listen-port", &port.to_string(), "--log-type", "file"])
        .arg("--log-file")
        .arg(&log)
        .arg("--pid-file")
        .arg(&pid)
        .arg("--decision-log")
        .arg(dir.join("decisions.log"))
        .env_remove("RUST_LOG")
        .spawn()
        .unwrap();
    common::wait_until_blocking("the sidecar to start", Duration::from_secs(20), || {
        pid.exists()
            && std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("listening")
    });
    let written: u32 = std::fs::read_to_string(&pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(written, child.id());
    // SIGHUP reloads the policy set at once.
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    common::wait_until_blocking(
        "a reload logged after SIGHUP",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("SIGHUP: reloading policies")
        },
    );
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!pid.exists(), "the PID file is removed on exit");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("shutting down"), "{text}");
    assert!(!text.contains(&lab.token));
}
