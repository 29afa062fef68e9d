//! The notification channel against a real datagram socket: the variables it accepts and
//! refuses, and the messages a manager receives.

use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::time::Duration;

use super::{NotifyEnv, NotifyError, ServiceManager};
use crate::scratch::Scratch;

/// A manager's socket bound in a scratch directory, and the variables naming it.
fn manager_socket(dir: &Scratch) -> (UnixDatagram, NotifyEnv) {
    let path = dir.join("notify");
    let socket = UnixDatagram::bind(&path).expect("bind");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let env = NotifyEnv {
        socket: Some(path.display().to_string()),
        ..NotifyEnv::default()
    };
    (socket, env)
}

fn receive(socket: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = socket.recv(&mut buf).expect("a notification");
    String::from_utf8(buf[..n].to_vec()).expect("text")
}

#[test]
fn without_notify_socket_nothing_is_sent() {
    let manager = ServiceManager::open(&NotifyEnv::default(), 1).expect("no manager");
    assert!(!manager.is_active());
    assert_eq!(manager.watchdog_every(), None);
    manager.ready("serving".to_owned()); // a no-op, not an error
}

#[test]
fn a_reload_cycle_reaches_the_manager_in_order() {
    let dir = Scratch::new("notify");
    let (socket, env) = manager_socket(&dir);
    let manager = ServiceManager::open(&env, 1).expect("opened");
    assert!(manager.is_active());

    manager.ready("serving MCP on 127.0.0.1:8080".to_owned());
    assert_eq!(
        receive(&socket),
        "READY=1\nSTATUS=serving MCP on 127.0.0.1:8080\n"
    );
    manager.reloading();
    let reloading = receive(&socket);
    assert!(
        reloading.starts_with("RELOADING=1\nMONOTONIC_USEC="),
        "{reloading}"
    );
    let usec: u64 = reloading
        .lines()
        .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
        .and_then(|v| v.parse().ok())
        .expect("a number");
    assert!(usec > 0);
    // A failure's text may span lines; STATUS= stays one field.
    manager.reloaded("configuration failed: line 3\nunknown parameter");
    assert_eq!(
        receive(&socket),
        "READY=1\nSTATUS=serving MCP on 127.0.0.1:8080; last reload: configuration failed: line 3 unknown parameter\n"
    );
    manager.stopping();
    assert!(receive(&socket).starts_with("STOPPING=1\n"));
}

#[test]
fn an_abstract_socket_is_reached_by_its_name() {
    let name = format!("zmg-notify-test-{}", std::process::id());
    let addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            name.as_bytes(),
        )
        .expect("abstract address");
    let socket = UnixDatagram::bind_addr(&addr).expect("bind");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let env = NotifyEnv {
        socket: Some(format!("@{name}")),
        ..NotifyEnv::default()
    };
    let manager = ServiceManager::open(&env, 1).expect("opened");
    manager.ready("serving".to_owned());
    assert_eq!(receive(&socket), "READY=1\nSTATUS=serving\n");
}

#[tokio::test]
async fn the_watchdog_is_fed_at_half_its_timeout() {
    let dir = Scratch::new("watchdog");
    let (socket, mut env) = manager_socket(&dir);
    env.watchdog_usec = Some("200000".to_owned());
    env.watchdog_pid = Some("42".to_owned());
    let manager = Arc::new(ServiceManager::open(&env, 42).expect("opened"));
    assert_eq!(manager.watchdog_every(), Some(Duration::from_millis(100)));
    let task = manager.spawn_watchdog().expect("a watchdog");
    let socket = Arc::new(socket);
    for _ in 0..3 {
        let socket = socket.clone();
        let message = tokio::task::spawn_blocking(move || receive(&socket))
            .await
            .expect("received");
        assert_eq!(message, "WATCHDOG=1\n");
    }
    task.abort();
}

#[test]
fn a_watchdog_meant_for_another_process_is_not_fed() {
    let dir = Scratch::new("watchdog-other");
    let (_socket, mut env) = manager_socket(&dir);
    env.watchdog_usec = Some("200000".to_owned());
    env.watchdog_pid = Some("41".to_owned());
    let manager = ServiceManager::open(&env, 42).expect("opened");
    assert_eq!(manager.watchdog_every(), None);
}

#[test]
fn malformed_variables_are_named() {
    let refused = |env: NotifyEnv| ServiceManager::open(&env, 1).expect_err("refused");
    let error = refused(NotifyEnv {
        socket: Some("run/notify".to_owned()),
        ..NotifyEnv::default()
    });
    assert!(matches!(error, NotifyError::Socket(_)));
    assert!(
        error.to_string().contains("NOTIFY_SOCKET=\"run/notify\""),
        "{error}"
    );
    let error = refused(NotifyEnv {
        socket: Some("vsock:2:1234".to_owned()),
        ..NotifyEnv::default()
    });
    assert!(matches!(error, NotifyError::Socket(_)));
    for usec in ["0", "-5", "ten"] {
        let error = refused(NotifyEnv {
            socket: Some("/run/notify".to_owned()),
            watchdog_usec: Some(usec.to_owned()),
            watchdog_pid: None,
        });
        assert!(matches!(error, NotifyError::WatchdogUsec(_)), "{usec}");
        assert!(error.to_string().contains("WATCHDOG_USEC"), "{error}");
    }
    let error = refused(NotifyEnv {
        socket: Some("/run/notify".to_owned()),
        watchdog_usec: Some("1000000".to_owned()),
        watchdog_pid: Some("self".to_owned()),
    });
    assert!(matches!(error, NotifyError::WatchdogPid(_)));
}
