//! The released binary as a process of its own: started against a Zabbix, watched through
//! its log, signalled, and killed and reaped on every exit path of a test.

/// The released binary in front of `frontend_url`, on 127.0.0.1:`port` (allowed from
/// loopback), logging to the file `log`; the caller adds its own flags and spawns it.
pub fn binary(frontend_url: &str, port: u16, log: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_zabbix-mcp-guard"));
    command
        .args(["--frontend-url", frontend_url, "--allowed-ip", "127.0.0.1"])
        .args([
            "--listen-ip",
            "127.0.0.1",
            "--listen-port",
            &port.to_string(),
        ])
        .args(["--log-type", "file"])
        .arg("--log-file")
        .arg(log)
        .env_remove("RUST_LOG");
    command
}

/// Waits until the binary started by [`binary`] logged to `log` that it listens.
pub fn wait_listening(log: &std::path::Path) {
    super::wait_until_blocking(
        "the sidecar to start",
        std::time::Duration::from_secs(20),
        || {
            std::fs::read_to_string(log)
                .unwrap_or_default()
                .contains("listening")
        },
    );
}

/// A spawned process (the binary, a client), killed and reaped on every exit path of the
/// test.
pub struct Running(pub std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends the signal `name` (`HUP`, `TERM`, …) to `child`.
pub fn signal(child: &std::process::Child, name: &str) {
    let sent = std::process::Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "kill -{name}");
}

/// Sends the binary SIGTERM (its graceful shutdown) and waits for it to exit.
pub fn terminate(child: &mut std::process::Child) -> std::io::Result<std::process::ExitStatus> {
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    if !sent.success() {
        return Err(std::io::Error::other(format!("kill -TERM: {sent}")));
    }
    child.wait()
}
