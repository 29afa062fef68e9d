//! Samples of another process from /proc/<pid>/: resident memory, open descriptors, and
//! CPU time (user + system).

/// One reading of the sidecar's process.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub rss_kib: u64,
    pub hwm_kib: u64,
    pub fds: usize,
    pub threads: u64,
    /// User + system CPU time in milliseconds.
    pub cpu_ms: u64,
}

/// Linux reports CPU times in clock ticks; 100 per second on every common configuration.
const TICKS_PER_SEC: u64 = 100;

pub fn sample(pid: u32) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is field 3.
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let cpu_ms = (ticks(11) + ticks(12)) * 1000 / TICKS_PER_SEC;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    Some(Sample {
        rss_kib: field("VmRSS:"),
        hwm_kib: field("VmHWM:"),
        fds,
        threads: field("Threads:"),
        cpu_ms,
    })
}
