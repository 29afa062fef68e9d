//! The process's own figures at scrape time, under the names every Prometheus client library
//! gives them (`process_cpu_seconds_total`, `process_resident_memory_bytes`, …, without the
//! sidecar's prefix), so dashboards and alerts written for them work unchanged. Read from
//! Linux's `/proc/self` when `/metrics` is scraped; nothing is counted per call.

use std::path::Path;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second in `/proc/*/stat` (`USER_HZ`): 100 on every architecture this
/// builds for. Prometheus' own procfs library fixes it the same way, without `sysconf`.
const USER_HZ: f64 = 100.0;

/// One reading of the process's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Process {
    /// User and system CPU time, in seconds.
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub open_fds: u64,
    /// The soft limit on open files (`None`: unlimited).
    pub max_fds: Option<u64>,
    /// When the process started, in seconds since 1970-01-01 UTC.
    pub start_time_seconds: f64,
}

/// The fields of `/proc/self/stat` this reads.
#[derive(Debug, PartialEq)]
struct Stat {
    ticks: u64,
    start_ticks: u64,
    virtual_bytes: u64,
}

impl Process {
    /// Reads `/proc/self`: blocking file reads (small, in memory, but run them off the
    /// runtime's thread). `None` where there is no `/proc` to read.
    pub fn read() -> Option<Process> {
        Process::read_from(Path::new("/proc"))
    }

    /// As `read`, from a `/proc` mounted at `proc`.
    fn read_from(proc: &Path) -> Option<Process> {
        let text = |file: &str| std::fs::read_to_string(proc.join(file)).ok();
        let stat = parse_stat(&text("self/stat")?)?;
        // The packaged unit's ProcSubset=pid leaves only the process directories in /proc:
        // no /proc/stat there (before, every process_* metric was then missing).
        let boot = text("stat")
            .and_then(|stat| boot_time(&stat))
            .map(|seconds| seconds as f64)
            .or_else(boot_time_from_clocks)?;
        let open_fds = std::fs::read_dir(proc.join("self/fd")).ok()?.count();
        #[allow(clippy::cast_precision_loss)] // ticks fit f64's 53 bits for 2.8 million years
        Some(Process {
            cpu_seconds: stat.ticks as f64 / USER_HZ,
            resident_bytes: resident_bytes(&text("self/status")?)?,
            virtual_bytes: stat.virtual_bytes,
            open_fds: u64::try_from(open_fds).unwrap_or(u64::MAX),
            max_fds: text("self/limits").and_then(|limits| open_files_limit(&limits))?,
            start_time_seconds: boot + stat.start_ticks as f64 / USER_HZ,
        })
    }
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let counter = ConstCounter::new(self.cpu_seconds);
        counter.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            counter.metric_type(),
        )?)?;
        #[allow(clippy::cast_precision_loss)] // byte and descriptor counts far below 2^53
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                self.resident_bytes as f64,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                self.virtual_bytes as f64,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                self.open_fds as f64,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                self.start_time_seconds,
            ),
        ];
        let max_fds = self.max_fds.map(|max| {
            #[allow(clippy::cast_precision_loss)]
            let max = max as f64;
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                max,
            )
        });
        for (name, help, value) in gauges.into_iter().chain(max_fds) {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

/// `/proc/self/stat`: the command name may hold spaces and parentheses, so the fields are
/// counted from its closing parenthesis (field 3, the state, comes first after it).
fn parse_stat(text: &str) -> Option<Stat> {
    let (_, after_name) = text.rsplit_once(')')?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        ticks: field(14)?.checked_add(field(15)?)?,
        start_ticks: field(22)?,
        virtual_bytes: field(23)?,
    })
}

/// `VmRSS` of `/proc/self/status`, given in kB.
fn resident_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// `btime` of `/proc/stat`: when the machine booted, in seconds since 1970.
fn boot_time(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("btime "))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// When the machine booted, in seconds since 1970, without `/proc/stat`: the wall clock
/// less the time since boot (`CLOCK_BOOTTIME`, the clock `/proc/self/stat` counts the start
/// from), as the kernel computes `btime`.
#[cfg(target_os = "linux")]
fn boot_time_from_clocks() -> Option<f64> {
    use rustix::time::{ClockId, clock_gettime};
    let seconds = |t: rustix::time::Timespec| t.tv_sec as f64 + t.tv_nsec as f64 / 1e9;
    let since_boot = seconds(clock_gettime(ClockId::Boottime));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs_f64();
    Some(now - since_boot)
}

#[cfg(not(target_os = "linux"))]
fn boot_time_from_clocks() -> Option<f64> {
    None
}

/// The soft limit of `Max open files` in `/proc/self/limits`: `Some(None)` when unlimited.
fn open_files_limit(limits: &str) -> Option<Option<u64>> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    match line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
    {
        "unlimited" => Some(None),
        soft => soft.parse().ok().map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::{
        Process, Stat, boot_time, boot_time_from_clocks, open_files_limit, parse_stat,
        resident_bytes,
    };

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // A command name with a space and a parenthesis of its own.
        let text = "4242 (a b) c) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    250 75 0 0 20 0 3 0 12345 987654321 2048 18446744073709551615 1";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                ticks: 325,
                start_ticks: 12345,
                virtual_bytes: 987_654_321,
            })
        );
        assert_eq!(parse_stat("4242 (cut short) S 1 2"), None);
    }

    #[test]
    fn status_stat_and_limits_lines_are_read() {
        assert_eq!(
            resident_bytes("Name:\tx\nVmRSS:\t   13100 kB\nVmSwap:\t0 kB\n"),
            Some(13_414_400)
        );
        assert_eq!(resident_bytes("Name:\tx\n"), None);
        assert_eq!(
            boot_time("cpu  1 2 3\nbtime 1796400000\n"),
            Some(1_796_400_000)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(open_files_limit(limits), Some(Some(1024)));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(open_files_limit(unlimited), Some(None));
    }

    #[test]
    fn this_process_reads_as_alive() {
        let process = Process::read().expect("/proc on Linux");
        assert!(process.resident_bytes > 1024 * 1024, "{process:?}");
        assert!(
            process.virtual_bytes >= process.resident_bytes,
            "{process:?}"
        );
        assert!(process.open_fds >= 3, "{process:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        // Started within the last day, and not in the future (ticks are 10 ms).
        assert!(process.start_time_seconds <= now + 1.0, "{process:?}");
        assert!(process.start_time_seconds > now - 86_400.0, "{process:?}");
        assert!(process.cpu_seconds >= 0.0);
    }

    /// Under ProcSubset=pid (the packaged unit) /proc holds only the process directories:
    /// the figures are still read, the boot time from the clocks, as /proc/stat would give it.
    #[test]
    fn a_proc_with_only_process_directories_still_reads() {
        let dir = crate::scratch::dir("proc-subset-pid");
        let _ = std::fs::remove_file(dir.join("self"));
        std::os::unix::fs::symlink("/proc/self", dir.join("self")).expect("self link");
        let process = Process::read_from(&dir).expect("read without /proc/stat");
        let full = Process::read().expect("/proc on Linux");
        assert!(
            (process.start_time_seconds - full.start_time_seconds).abs() < 2.0,
            "{process:?} {full:?}"
        );
        let btime = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
        let btime = boot_time(&btime).expect("btime") as f64;
        let clocks = boot_time_from_clocks().expect("clocks");
        assert!((clocks - btime).abs() < 2.0, "{clocks} {btime}");
    }
}
