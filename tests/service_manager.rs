//! The real binary under a service manager's notification socket (what systemd's
//! `Type=notify` and `WatchdogSec=` give it), against the 7.0 lab: READY=1 only once MCP
//! is served, the watchdog fed, RELOADING=1 then READY=1 around a SIGHUP with the change
//! in force when READY=1 comes, a failed reload said in STATUS=, STOPPING=1 at SIGTERM;
//! a malformed NOTIFY_SOCKET stops the start with its name. The MCP client is the
//! official Python SDK.

mod common;

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// Long enough for a cold start of the binary on a loaded CI machine.
const WAIT: Duration = Duration::from_secs(30);

/// The manager's end: every notification the sidecar sends, and how many were watchdog pings.
struct Manager {
    socket: UnixDatagram,
    watchdog_pings: usize,
}

impl Manager {
    fn bind(path: &Path) -> Manager {
        let socket = UnixDatagram::bind(path).expect("bind the notify socket");
        socket.set_read_timeout(Some(WAIT)).expect("timeout");
        Manager {
            socket,
            watchdog_pings: 0,
        }
    }

    /// The next notification other than a watchdog ping (counted), waiting at most WAIT.
    fn next(&mut self) -> String {
        let mut buf = [0u8; 4096];
        loop {
            let n = self.socket.recv(&mut buf).expect("a notification in time");
            let text = String::from_utf8(buf[..n].to_vec()).expect("text");
            if text == "WATCHDOG=1\n" {
                self.watchdog_pings += 1;
                continue;
            }
            return text;
        }
    }
}

fn field<'a>(message: &'a str, name: &str) -> Option<&'a str> {
    message
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
}

fn python(port: u16, token: &str) -> Value {
    let url = format!("http://127.0.0.1:{port}/mcp");
    common::python_sdk_blocking("reload_python.py", &[&url, token, "host_get"])
}

#[test]
fn a_service_manager_hears_ready_reloads_watchdog_and_stopping() {
    let lab = common::lab(7);
    let dir = common::scratch_dir("service-manager");
    let mut manager = Manager::bind(&dir.join("notify"));
    let conf = dir.join("guard.conf");
    std::fs::write(&conf, "DebugLevel=3\n").expect("conf");
    let port = common::free_port();
    let child = common::binary(&lab.url, port, &dir.join("guard.log"))
        .arg("--config")
        .arg(&conf)
        .arg("--decision-log")
        .arg(dir.join("decisions.log"))
        .env("NOTIFY_SOCKET", dir.join("notify"))
        .env("WATCHDOG_USEC", "400000")
        .env_remove("WATCHDOG_PID")
        .spawn()
        .expect("the binary starts");
    let mut child = common::Running(child);

    // READY=1 comes once MCP answers: a client started at that moment is served.
    let ready = manager.next();
    assert_eq!(field(&ready, "READY"), Some("1"), "{ready}");
    assert_eq!(
        field(&ready, "STATUS"),
        Some(format!("serving MCP on 127.0.0.1:{port}").as_str()),
        "{ready}"
    );
    let before = python(port, &lab.token);
    assert!(
        common::listed_tools(&before).contains(&"host_get"),
        "{before}"
    );
    assert_eq!(before["calls"][0]["ok"], true, "{before}");

    // Fed at half of WATCHDOG_USEC while it serves.
    let deadline = std::time::Instant::now() + WAIT;
    while manager.watchdog_pings < 2 {
        assert!(std::time::Instant::now() < deadline, "watchdog fed");
        let mut buf = [0u8; 64];
        let n = manager.socket.recv(&mut buf).expect("a ping in time");
        assert_eq!(&buf[..n], b"WATCHDOG=1\n");
        manager.watchdog_pings += 1;
    }

    // A reload: RELOADING=1 (with the monotonic time systemd 253 matches), then READY=1,
    // and by then the withdrawn tool is gone.
    std::fs::write(&conf, "DebugLevel=3\nDenyTool=host_get\n").expect("conf");
    common::signal(&child.0, "HUP");
    let reloading = manager.next();
    assert_eq!(field(&reloading, "RELOADING"), Some("1"), "{reloading}");
    let usec: u64 = field(&reloading, "MONOTONIC_USEC")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("MONOTONIC_USEC in {reloading}"));
    assert!(usec > 0);
    let reloaded = manager.next();
    assert_eq!(field(&reloaded, "READY"), Some("1"), "{reloaded}");
    let status = field(&reloaded, "STATUS").expect("STATUS");
    assert!(
        status.contains("last reload: configuration applied DenyTool, restart required for none; policy revision"),
        "{status}"
    );
    let after = python(port, &lab.token);
    assert!(
        !common::listed_tools(&after).contains(&"host_get"),
        "{after}"
    );
    assert!(
        after["calls"][0]["ok"].is_null(),
        "host_get refused: {after}"
    );

    // A file that does not load: the running configuration stays, and STATUS= says why.
    std::fs::write(&conf, "DebugLevel=3\nNoSuchParameter=1\n").expect("conf");
    common::signal(&child.0, "HUP");
    let reloading = manager.next();
    assert_eq!(field(&reloading, "RELOADING"), Some("1"), "{reloading}");
    let failed = manager.next();
    assert_eq!(field(&failed, "READY"), Some("1"), "{failed}");
    let status = field(&failed, "STATUS").expect("STATUS");
    assert!(
        status.contains("configuration failed, the running one is kept")
            && status.contains("NoSuchParameter"),
        "{status}"
    );
    assert!(!common::listed_tools(&python(port, &lab.token)).contains(&"host_get"));

    // SIGTERM: STOPPING=1 first, then a clean exit.
    common::signal(&child.0, "TERM");
    let stopping = manager.next();
    assert_eq!(field(&stopping, "STOPPING"), Some("1"), "{stopping}");
    let status = child.0.wait().expect("exit");
    assert!(status.success(), "{status}");
}

#[test]
fn a_malformed_notify_socket_stops_the_start_and_is_named() {
    let lab = common::lab(7);
    let dir = common::scratch_dir("service-manager-bad");
    let out = common::binary(&lab.url, common::free_port(), &dir.join("guard.log"))
        .env("NOTIFY_SOCKET", "run/systemd/notify")
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("NOTIFY_SOCKET=\"run/systemd/notify\" is neither an absolute path"),
        "{stderr}"
    );
}
