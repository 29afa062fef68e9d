//! Proxy overhead benchmark: what the sidecar adds to a `host_get` call.
//!
//! Part 1 ([`lab`]) compares `host_get` through the sidecar (one stateless MCP `tools/call`
//! POST) with the same `host.get` JSON-RPC request sent straight to the lab Zabbix 7.0,
//! interleaved so both see the same Zabbix load. Part 2 ([`stub_bench`]) puts an instant stub
//! Zabbix (a hyper server in this process) behind the sidecar, so the difference is the
//! sidecar's own cost, at concurrency 1 and 64. Part 3 ([`policy_bench`]) runs the same
//! sidecar call against the stub with a trivial policy and no decision log, the shipped
//! default policy and the `tier1_operations` example, each with a decision log file: the
//! differences are what policy evaluation and the decision log cost per call. Every HTTP
//! client keeps its connections alive; connection setup is not measured.
//!
//! Run: `cargo bench --bench proxy`. Knobs (environment): `BENCH_N` (part 1 calls per side,
//! default 300), `BENCH_STUB_N` (part 2 calls per side at concurrency 1, default 2000),
//! `BENCH_STUB_PER_TASK` (part 2 calls per task at concurrency 64, default 100),
//! `BENCH_POLICY_N` (part 3 calls per variant, default 2000), `BENCH_PART` (`1`, `2` or `3`
//! to run one part only; default all), `BENCH_LOG` (a DebugLevel 0-5: install the sidecar's
//! log subscriber, to stderr, as the binary does; default: none).

mod client;
mod lab;
mod policy_bench;
mod sidecar;
mod stats;
mod stub;
mod stub_bench;

use std::time::Duration;

use zabbix_mcp_guard::config::DecisionLogSink;

use crate::sidecar::{decision_log_sink, default_decision_log};

/// The allocator the binary ships with (src/main.rs), so the sidecar's code costs here what
/// it costs there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Part 2's concurrent tasks, and the client's idle connections per host.
const CONCURRENCY: usize = 64;
/// No measured loop runs longer than this; a loop that hits it reports how far it got.
const PHASE_BUDGET: Duration = Duration::from_secs(120);

fn main() {
    let part = std::env::var("BENCH_PART").unwrap_or_default();
    let only = ["1", "2", "3"].contains(&part.trim()).then(|| part.trim());
    let runs = |p: &str| only.is_none_or(|o| o == p);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Some(level) = env_number("BENCH_LOG") {
        let _ = zabbix_mcp_guard::telemetry::try_init_console(u8::try_from(level).unwrap_or(3));
    }
    println!("zabbix-mcp-guard proxy benchmark");
    println!(
        "  build: {}, CPUs: {}, tokio multi-thread runtime ({} workers), load average at start: {}",
        if cfg!(debug_assertions) {
            "debug (numbers are not meaningful)"
        } else {
            "release"
        },
        cpus(),
        cpus(),
        load_average()
    );
    println!(
        "  client, sidecar (in-process) and stub share this process and its CPUs; log subscriber: {}",
        match env_number("BENCH_LOG") {
            Some(level) => format!("DebugLevel={level} to stderr"),
            None => "none (set BENCH_LOG=3 for the binary's default)".into(),
        }
    );
    println!(
        "  sidecar (parts 1, 2): default configuration, policy set {}/policies (evaluated on every call), decision log: {}",
        env!("CARGO_MANIFEST_DIR"),
        match decision_log_sink() {
            DecisionLogSink::Stdout => "stdout".to_owned(),
            DecisionLogSink::File(path) => format!("file {}", path.display()),
        }
    );
    runtime.block_on(async {
        if runs("1") {
            lab::part1().await;
        }
        if runs("2") {
            stub_bench::part2().await;
        }
        if runs("3") {
            policy_bench::part3().await;
        }
    });
    println!();
    println!("load average at end: {}", load_average());
    let default_log = default_decision_log();
    if let Ok(meta) = std::fs::metadata(&default_log) {
        println!(
            "decision log: {} bytes written to {} (removed)",
            meta.len(),
            default_log.display()
        );
        let _ = std::fs::remove_file(&default_log);
    }
}

fn env_number(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.trim().parse().ok()
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
