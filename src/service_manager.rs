//! What the sidecar tells its service manager, in systemd's notification protocol
//! (`sd_notify(3)`; podman's `--sdnotify=container` speaks it too): `READY=1` once every
//! listener is bound, `RELOADING=1` and `READY=1` around a SIGHUP reload, `STOPPING=1`
//! when shutdown starts, `WATCHDOG=1` while the runtime turns, and a `STATUS=` line for
//! `systemctl status`.
//!
//! Why: with `Type=notify` a unit ordered after the sidecar starts only once it serves,
//! a start that fails is reported by `systemctl start` rather than after the fact, and
//! with `WatchdogSec=` a runtime that stops turning (every call is served by one thread)
//! is killed and restarted instead of holding its connections unanswered.
//!
//! Without `NOTIFY_SOCKET` in the environment nothing is sent. A variable that is set but
//! malformed stops the start with an error naming it: a manager that waits for a
//! readiness that never comes would only kill the sidecar later, without saying why.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::policy::{PolicyError, Revision};
use crate::reconfigure::{ReconfigureError, Reloaded};
use crate::server::Server;
use crate::telemetry;

/// The variables the protocol reads, as the process found them.
#[derive(Debug, Default, Clone)]
pub struct NotifyEnv {
    /// `NOTIFY_SOCKET`: an absolute path, or `@name` for an abstract socket.
    pub socket: Option<String>,
    /// `WATCHDOG_USEC`: the watchdog's timeout in microseconds.
    pub watchdog_usec: Option<String>,
    /// `WATCHDOG_PID`: the process the watchdog is meant for, when the manager says.
    pub watchdog_pid: Option<String>,
}

/// The channel to the service manager, or none when the sidecar runs without one.
#[derive(Debug)]
pub struct ServiceManager {
    channel: Option<Channel>,
    /// How often to send `WATCHDOG=1`: half the manager's timeout, as `sd_watchdog_enabled(3)` advises.
    watchdog_every: Option<Duration>,
    /// What `STATUS=` says while serving (the listen addresses).
    serving: Mutex<String>,
}

#[derive(Debug)]
struct Channel {
    socket: UnixDatagram,
    addr: SocketAddr,
    /// A failed send is logged once: the watchdog would otherwise repeat it every tick.
    warned: AtomicBool,
}

#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("NOTIFY_SOCKET={0:?} is neither an absolute path nor an abstract socket (@name)")]
    Socket(String),
    #[error("NOTIFY_SOCKET={value:?}: {source}")]
    Open {
        value: String,
        #[source]
        source: std::io::Error,
    },
    #[error("WATCHDOG_USEC={0:?} is not a positive number of microseconds")]
    WatchdogUsec(String),
    #[error("WATCHDOG_PID={0:?} is not a process id")]
    WatchdogPid(String),
}

impl NotifyEnv {
    /// The variables of this process's environment.
    pub fn current() -> NotifyEnv {
        let var = |name| std::env::var(name).ok();
        NotifyEnv {
            socket: var("NOTIFY_SOCKET"),
            watchdog_usec: var("WATCHDOG_USEC"),
            watchdog_pid: var("WATCHDOG_PID"),
        }
    }
}

impl ServiceManager {
    /// The channel `env` describes for the process `pid`; none without `NOTIFY_SOCKET`.
    pub fn open(env: &NotifyEnv, pid: u32) -> Result<ServiceManager, NotifyError> {
        let Some(value) = env.socket.as_deref() else {
            return Ok(ServiceManager::none());
        };
        let addr = socket_addr(value)?;
        let opened = UnixDatagram::unbound().and_then(|socket| {
            // Sends are never waited on: a full queue drops the message (logged).
            socket.set_nonblocking(true)?;
            Ok(socket)
        });
        let socket = opened.map_err(|source| NotifyError::Open {
            value: value.to_owned(),
            source,
        })?;
        Ok(ServiceManager {
            channel: Some(Channel {
                socket,
                addr,
                warned: AtomicBool::new(false),
            }),
            watchdog_every: watchdog_every(env, pid)?,
            serving: Mutex::new(String::new()),
        })
    }

    /// No service manager: every notification is a no-op.
    pub fn none() -> ServiceManager {
        ServiceManager {
            channel: None,
            watchdog_every: None,
            serving: Mutex::new(String::new()),
        }
    }

    /// Whether a service manager listens.
    pub fn is_active(&self) -> bool {
        self.channel.is_some()
    }

    /// How often the watchdog is fed, when the manager asked for it.
    pub fn watchdog_every(&self) -> Option<Duration> {
        self.watchdog_every
    }

    /// Start-up is done: every listener is bound. `serving` says where, for `STATUS=`.
    pub fn ready(&self, serving: String) {
        let message = format!("READY=1\nSTATUS={}\n", status_text(&serving));
        *self.serving.lock().unwrap_or_else(PoisonError::into_inner) = serving;
        self.send(&message);
    }

    /// A reload (SIGHUP) starts. `MONOTONIC_USEC` lets systemd 253's `Type=notify-reload`
    /// tell this reload from an earlier one.
    pub fn reloading(&self) {
        let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        let usec = u64::try_from(now.tv_sec).unwrap_or(0) * 1_000_000
            + u64::try_from(now.tv_nsec).unwrap_or(0) / 1_000;
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={usec}\nSTATUS=reloading the configuration and the policy set\n"
        ));
    }

    /// The reload is over, whatever its outcome, which `outcome` says for `STATUS=`.
    pub fn reloaded(&self, outcome: &str) {
        let serving = self
            .serving
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let status = status_text(&format!("{serving}; last reload: {outcome}"));
        self.send(&format!("READY=1\nSTATUS={status}\n"));
    }

    /// Shutdown starts: no new connections, the calls in flight finish.
    pub fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=stopping: finishing the calls in flight\n");
    }

    /// Feeds the watchdog from a task of the runtime that serves the calls, so a runtime
    /// that stops turning stops feeding it. `None` when the manager asked for no watchdog.
    pub fn spawn_watchdog(self: &Arc<ServiceManager>) -> Option<JoinHandle<()>> {
        let every = self.watchdog_every?;
        let manager = self.clone();
        Some(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                manager.send("WATCHDOG=1\n");
            }
        }))
    }

    fn send(&self, message: &str) {
        let Some(channel) = &self.channel else {
            return;
        };
        if let Err(error) = channel
            .socket
            .send_to_addr(message.as_bytes(), &channel.addr)
            && !channel.warned.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                target: telemetry::LIFECYCLE_TARGET,
                %error,
                "cannot notify the service manager (NOTIFY_SOCKET); later failures are not logged"
            );
        }
    }
}

/// What `STATUS=` says while `server` serves: its listen addresses.
pub fn serving(server: &Server) -> String {
    let list = |addrs: &[std::net::SocketAddr]| {
        addrs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut text = format!("serving MCP on {}", list(server.local_addrs()));
    if !server.approval_addrs().is_empty() {
        text.push_str(&format!(
            "; approval page on {}",
            list(server.approval_addrs())
        ));
    }
    if !server.status_addrs().is_empty() {
        text.push_str(&format!("; status on {}", list(server.status_addrs())));
    }
    text
}

/// What a SIGHUP reload did, for `STATUS=`: the configuration's outcome, then the policy set's.
pub fn reload_outcome(
    config: &Result<Reloaded, ReconfigureError>,
    policy: &Result<Revision, PolicyError>,
) -> String {
    let config = match config {
        Ok(reloaded) => format!("configuration {reloaded}"),
        Err(error) => format!("configuration failed, the running one is kept: {error}"),
    };
    let policy = match policy {
        Ok(revision) => format!("policy revision {revision}"),
        Err(error) => format!("policy set failed, the running one is kept: {error}"),
    };
    format!("{config}; {policy}")
}

/// `NOTIFY_SOCKET`'s address: a path, or `@name` for Linux's abstract namespace.
/// (systemd 254's `vsock:` addresses are for virtual machines, not a service's socket.)
fn socket_addr(value: &str) -> Result<SocketAddr, NotifyError> {
    let invalid = |_| NotifyError::Socket(value.to_owned());
    if let Some(name) = value.strip_prefix('@') {
        return SocketAddr::from_abstract_name(name.as_bytes()).map_err(invalid);
    }
    if value.starts_with('/') {
        return SocketAddr::from_pathname(value).map_err(invalid);
    }
    Err(NotifyError::Socket(value.to_owned()))
}

/// Half of `WATCHDOG_USEC`, unless `WATCHDOG_PID` names another process (the variables
/// were inherited, not meant for us).
fn watchdog_every(env: &NotifyEnv, pid: u32) -> Result<Option<Duration>, NotifyError> {
    let Some(usec) = env.watchdog_usec.as_deref() else {
        return Ok(None);
    };
    if let Some(target) = env.watchdog_pid.as_deref() {
        let target: u32 = target
            .parse()
            .map_err(|_| NotifyError::WatchdogPid(target.to_owned()))?;
        if target != pid {
            return Ok(None);
        }
    }
    match usec.parse::<u64>() {
        Ok(usec) if usec > 0 => Ok(Some(Duration::from_micros(usec) / 2)),
        _ => Err(NotifyError::WatchdogUsec(usec.to_owned())),
    }
}

/// One line: a newline would end the `STATUS=` field and start a field of its own.
fn status_text(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

#[cfg(test)]
#[path = "service_manager_tests.rs"]
mod tests;
