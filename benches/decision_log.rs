//! Decision-log and `tools/list` cost, in process, no HTTP: what one decision line costs
//! the request path and the process, and what one `tools/list` decision set costs.
//!
//! Rows (each run with the shipped default policy, the decision log to a temp file):
//! - `record()`: one call-phase decision line per call. `caller` is the time spent on the
//!   calling (request) thread; `cpu` is the whole process's CPU per line (writer thread
//!   included, the log dropped, hence flushed, before the CPU is read).
//! - `tools/list, same caller`: `mcp::tools::offered` for one caller again and again, the
//!   way a client that lists tools before every call does.
//! - `tools/list, new caller each`: a different `token_id` every time, so no earlier
//!   decision set applies.
//!
//! Run: `cargo bench --bench decision_log [-- ITERATIONS]` (default 20000; the last row
//! runs a tenth). CPU comes from `/proc/self/stat` (10 ms ticks): keep ITERATIONS large
//! enough for a few hundred ms. `BENCH_ROW=record|list|new` runs one row, e.g. under
//! `valgrind --tool=callgrind` at two iteration counts: the difference of the totals over
//! the difference of the counts is the instructions per call, setup excluded.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use zabbix_mcp_guard::app::App;
use zabbix_mcp_guard::config::{Config, DecisionLogSink as ConfigSink};
use zabbix_mcp_guard::mcp::gate::Subject;
use zabbix_mcp_guard::mcp::tools::{ToolList, offered};
use zabbix_mcp_guard::policy::{
    CallerInfo, ClientInfo, DecisionLog, DecisionLogSink, Phase, PolicyEngine, PolicyInput,
    PolicyMode, ToolInfo, ToolKind, ZabbixInfo,
};
use zabbix_mcp_guard::zabbix::ZabbixVersion;

// Scratch files as the tests keep them: one directory per process, swept once it is gone.
#[path = "../src/scratch.rs"]
mod scratch;

const DEFAULT_ITERATIONS: usize = 20_000;

struct Row {
    label: &'static str,
    per_call: Vec<Duration>,
    cpu: Duration,
    lines: usize,
}

fn main() {
    let iterations = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(DEFAULT_ITERATIONS)
        .max(1);
    let scratch = scratch::dir("bench-log");
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    println!(
        "decision log and tools/list cost: {iterations} per row, build {}, load average {}",
        if cfg!(debug_assertions) {
            "debug (not meaningful)"
        } else {
            "release"
        },
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    // BENCH_ROW=record|list|new runs one row (for instruction counts under callgrind).
    let only = std::env::var("BENCH_ROW").unwrap_or_default();
    let runs = |row: &str| only.is_empty() || only == row;
    let mut rows = Vec::new();
    if runs("record") {
        rows.push(record_row(
            &policies,
            &scratch.join("record.log"),
            iterations,
        ));
    }
    if runs("list") {
        rows.push(list_row(
            &policies,
            &scratch.join("list-same.log"),
            iterations,
            false,
        ));
    }
    if runs("new") {
        let n = (iterations / 10).max(1);
        rows.push(list_row(&policies, &scratch.join("list-new.log"), n, true));
    }
    println!(
        "{:<28} {:>8} {:>10} {:>10} {:>10} {:>12}",
        "row", "n", "caller p50", "caller p99", "cpu/call", "log lines/call"
    );
    for row in rows {
        let mut samples = row.per_call.clone();
        samples.sort();
        let n = samples.len().max(1);
        let pick = |q: f64| samples[((n - 1) as f64 * q) as usize];
        println!(
            "{:<28} {:>8} {:>10} {:>10} {:>10} {:>12.2}",
            row.label,
            samples.len(),
            fmt(pick(0.5)),
            fmt(pick(0.99)),
            fmt(row.cpu / u32::try_from(n).unwrap_or(u32::MAX)),
            row.lines as f64 / n as f64
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

fn record_row(policies: &Path, path: &Path, iterations: usize) -> Row {
    let engine = PolicyEngine::load(policies, PolicyMode::Enforce).unwrap_or_else(|e| fail(e));
    let log =
        DecisionLog::open(DecisionLogSink::File(path.to_path_buf())).unwrap_or_else(|e| fail(e));
    let input = call_input();
    let decision = engine.decide(&input);
    let mut per_call = Vec::with_capacity(iterations);
    let cpu_before = process_cpu();
    for _ in 0..iterations {
        let started = Instant::now();
        log.record(black_box(&decision), black_box(&input));
        per_call.push(started.elapsed());
    }
    // The last handle: everything queued is written before the drop returns.
    drop(log);
    let cpu = process_cpu().saturating_sub(cpu_before);
    Row {
        label: "record(), call line",
        per_call,
        cpu,
        lines: count_lines(path),
    }
}

fn list_row(policies: &Path, path: &Path, iterations: usize, new_caller: bool) -> Row {
    let mut config =
        Config::new("http://127.0.0.1:9/zabbix", "127.0.0.1").unwrap_or_else(|e| fail(e));
    config.policy_dir = Some(policies.to_path_buf());
    config.decision_log = ConfigSink::File(path.to_path_buf());
    let app: Arc<App> = App::new(config).unwrap_or_else(|e| fail(e));
    let version: ZabbixVersion = "7.0.22".parse().unwrap_or_else(|e| fail(e));
    let (exposure, generation) = app.exposure();
    let tools = ToolList::build(&exposure, generation, version);
    let mut subject = subject();
    let offered_count = offered(&app, &tools, &subject).len();
    let mut per_call = Vec::with_capacity(iterations);
    let cpu_before = process_cpu();
    for i in 0..iterations {
        if new_caller {
            subject.caller.token_id = format!("{i:016x}");
        }
        let started = Instant::now();
        black_box(offered(&app, &tools, black_box(&subject)));
        per_call.push(started.elapsed());
    }
    drop(app);
    let cpu = process_cpu().saturating_sub(cpu_before);
    println!(
        "  tools/list: {offered_count} of {} tools offered to the bench caller",
        tools.tools.len()
    );
    Row {
        label: if new_caller {
            "tools/list, new caller each"
        } else {
            "tools/list, same caller"
        },
        per_call,
        cpu,
        // The line of the warm-up list above is not a measured call.
        lines: count_lines(path).saturating_sub(if new_caller { 1 } else { 0 }),
    }
}

fn subject() -> Subject {
    Subject {
        caller: caller(),
        client: client(),
        zabbix: ZabbixInfo {
            version: "7.0.22".into(),
        },
    }
}

fn caller() -> CallerInfo {
    CallerInfo {
        userid: "1".into(),
        username: "Admin".into(),
        user_type: 3,
        roleid: "3".into(),
        usrgrps: vec!["Zabbix administrators".into()],
        token_id: "0123456789abcdef".into(),
    }
}

fn client() -> ClientInfo {
    ClientInfo {
        address: "127.0.0.1".into(),
        name: Some("bench".into()),
        version: Some("1.0".into()),
        protocol_version: Some("2025-11-25".into()),
        elicitation: vec!["form".into()],
    }
}

fn call_input() -> PolicyInput {
    let mut input = PolicyInput::new(
        Phase::Call,
        ToolInfo {
            name: "host_get".into(),
            exposed_name: "host_get".into(),
            kind: ToolKind::Read,
            method: "host.get".into(),
            destructive: false,
            idempotent: true,
        },
        caller(),
        client(),
        ZabbixInfo {
            version: "7.0.22".into(),
        },
    );
    if let serde_json::Value::Object(map) = json!({"search": {"host": "mcp-"}, "limit": 10}) {
        input.arguments = map;
    }
    input
}

fn count_lines(path: &Path) -> usize {
    std::fs::read(path)
        .map(|b| b.iter().filter(|c| **c == b'\n').count())
        .unwrap_or(0)
}

/// User + system CPU of this process from `/proc/self/stat` (fields 14 and 15, in ticks
/// of 1/100 s).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After the name, field 3 (state) is index 0, so utime (14) is 11 and stime (15) 12.
    Duration::from_millis((tick(11) + tick(12)) * 10)
}

fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 1000.0 {
        format!("{:.2}ms", us / 1000.0)
    } else {
        format!("{us:.1}µs")
    }
}

fn fail(error: impl std::fmt::Display) -> ! {
    eprintln!("{error}");
    std::process::exit(1)
}
