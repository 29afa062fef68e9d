//! `LogType=system`: RFC 3164 datagrams to the local syslog socket (`/dev/log`), in the
//! form glibc's `syslog(3)` sends there: `<PRI>Mmm dd hh:mm:ss TAG[PID]: MESSAGE`,
//! facility `daemon`. No hostname: the local daemon (journald, rsyslog's imuxsock) adds
//! its own and would otherwise read the hostname as the tag.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::Level;

use super::fallback::{Fallback, Problem, lock};
use crate::calendar::civil_from_days;

/// The local syslog socket on Linux and the BSDs.
pub(crate) const DEV_LOG: &str = "/dev/log";
const FACILITY_DAEMON: u8 = 3;
/// A syslog daemon that stops reading must not stall every thread that logs.
const SEND_TIMEOUT: Duration = Duration::from_secs(1);
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

pub(crate) struct Syslog {
    socket_path: PathBuf,
    /// `zabbix-mcp-guard[<pid>]`.
    tag: String,
    /// `None` when the socket was absent at start: everything goes to the fallback.
    socket: Mutex<Option<UnixDatagram>>,
    fallback: Fallback,
}

impl Syslog {
    /// Connects to `socket_path`; when that fails, says so once on the fallback and
    /// writes every record there instead.
    pub(crate) fn connect(socket_path: &Path, fallback: Fallback) -> Syslog {
        let socket = match connect(socket_path) {
            Ok(socket) => Some(socket),
            Err(error) => {
                let message = format!(
                    "cannot connect to syslog at \"{}\": {error}; logging to stderr instead",
                    socket_path.display()
                );
                fallback.report_once(Problem::Connect, &message);
                None
            }
        };
        Syslog {
            socket_path: socket_path.to_path_buf(),
            tag: format!("zabbix-mcp-guard[{}]", std::process::id()),
            socket: Mutex::new(socket),
            fallback,
        }
    }

    pub(crate) fn socket_path(&self) -> &Path {
        &self.socket_path
    }

    pub(crate) fn is_connected(&self) -> bool {
        lock(&self.socket).is_some()
    }

    /// Sends each line of a formatted record as one datagram with `level`'s severity;
    /// a line that cannot be sent goes to the fallback, so nothing is lost.
    pub(crate) fn write_record(&self, level: Level, record: &[u8]) {
        let text = String::from_utf8_lossy(record);
        let header = format!("{} {}:", timestamp(SystemTime::now()), self.tag);
        let mut socket = lock(&self.socket);
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            let datagram = format!("<{}>{header} {line}", priority(level));
            if !self.deliver(&mut socket, datagram.as_bytes()) {
                self.fallback.write(format!("{header} {line}\n").as_bytes());
            }
        }
    }

    /// Sends on the current socket and, if that fails, once more on a new connection:
    /// a restarted daemon listens on a new socket at the same path.
    fn deliver(&self, socket: &mut Option<UnixDatagram>, datagram: &[u8]) -> bool {
        let Some(current) = socket.as_ref() else {
            return false;
        };
        let Err(error) = current.send(datagram) else {
            return true;
        };
        if let Ok(fresh) = connect(&self.socket_path) {
            let sent = fresh.send(datagram).is_ok();
            *socket = Some(fresh);
            if sent {
                return true;
            }
        }
        let message = format!(
            "cannot send to syslog at \"{}\": {error}; such records go to stderr",
            self.socket_path.display()
        );
        self.fallback.report_once(Problem::Send, &message);
        false
    }
}

fn connect(path: &Path) -> io::Result<UnixDatagram> {
    let socket = UnixDatagram::unbound()?;
    socket.connect(path)?;
    socket.set_write_timeout(Some(SEND_TIMEOUT))?;
    Ok(socket)
}

/// `facility * 8 + severity`, severities from RFC 3164 table 2.
fn priority(level: Level) -> u8 {
    let severity = match level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        _ => 7,
    };
    FACILITY_DAEMON * 8 + severity
}

/// RFC 3164's `Mmm dd hh:mm:ss`, day padded with a space. UTC: std has no time-zone
/// database, and local daemons stamp messages on receipt anyway.
fn timestamp(now: SystemTime) -> String {
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (_, month, day) = civil_from_days(secs / 86_400);
    let month = usize::try_from(month - 1).unwrap_or(0);
    let time = secs % 86_400;
    format!(
        "{} {day:>2} {:02}:{:02}:{:02}",
        MONTHS[month],
        time / 3600,
        time % 3600 / 60,
        time % 60
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixDatagram;
    use std::time::{Duration, UNIX_EPOCH};

    use tracing::Level;

    use super::{Syslog, priority, timestamp};
    use crate::telemetry::fallback::capture::Capture;
    use crate::telemetry::test_dir;

    fn recv(socket: &UnixDatagram) -> String {
        let mut buf = [0_u8; 4096];
        let n = socket.recv(&mut buf).expect("datagram");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn timestamps_follow_rfc_3164() {
        let at = |secs| timestamp(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "Jan  1 00:00:00");
        assert_eq!(at(951_782_400), "Feb 29 00:00:00");
        assert_eq!(at(1_700_000_000), "Nov 14 22:13:20");
        assert_eq!(at(1_704_067_199), "Dec 31 23:59:59");
    }

    #[test]
    fn priorities_use_facility_daemon() {
        assert_eq!(priority(Level::ERROR), 27);
        assert_eq!(priority(Level::WARN), 28);
        assert_eq!(priority(Level::INFO), 30);
        assert_eq!(priority(Level::DEBUG), 31);
        assert_eq!(priority(Level::TRACE), 31);
    }

    #[test]
    fn sends_one_datagram_per_line() {
        let dir = test_dir("syslog");
        let path = dir.join("log.sock");
        let server = UnixDatagram::bind(&path).expect("fake /dev/log");
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let capture = Capture::default();
        let syslog = Syslog::connect(&path, capture.fallback());
        assert!(syslog.is_connected());
        syslog.write_record(Level::WARN, b"first line\nsecond line\n");
        let tag = format!(" zabbix-mcp-guard[{}]: ", std::process::id());
        for expected in ["first line", "second line"] {
            let datagram = recv(&server);
            assert!(datagram.starts_with("<28>"), "{datagram}");
            let stamp = &datagram[4..19];
            assert_eq!(stamp.len(), 15);
            assert_eq!(stamp.as_bytes()[3], b' ');
            assert!(
                datagram.ends_with(&format!("{tag}{expected}")),
                "{datagram}"
            );
        }
        assert_eq!(capture.text(), "");
    }

    #[test]
    fn absent_socket_falls_back_with_one_warning() {
        let dir = test_dir("nosyslog");
        let path = dir.join("missing.sock");
        let capture = Capture::default();
        let syslog = Syslog::connect(&path, capture.fallback());
        assert!(!syslog.is_connected());
        syslog.write_record(Level::INFO, b"one\n");
        syslog.write_record(Level::INFO, b"two\n");
        let text = capture.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("zabbix-mcp-guard: cannot connect to syslog at"));
        assert!(
            lines[1].ends_with("]: one") && lines[2].ends_with("]: two"),
            "{text}"
        );
    }

    #[test]
    fn a_vanished_daemon_sends_records_to_stderr() {
        let dir = test_dir("gonesyslog");
        let path = dir.join("log.sock");
        let server = UnixDatagram::bind(&path).expect("fake /dev/log");
        let capture = Capture::default();
        let syslog = Syslog::connect(&path, capture.fallback());
        drop(server);
        std::fs::remove_file(&path).expect("remove socket");
        syslog.write_record(Level::ERROR, b"lost?\n");
        syslog.write_record(Level::ERROR, b"still here\n");
        let text = capture.text();
        assert!(
            text.starts_with("zabbix-mcp-guard: cannot send to syslog"),
            "{text}"
        );
        assert_eq!(text.matches("cannot send").count(), 1, "{text}");
        assert!(
            text.contains("]: lost?\n") && text.ends_with("]: still here\n"),
            "{text}"
        );
    }
}
