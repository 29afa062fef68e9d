//! Policy evaluation benchmark: `PolicyEngine::decide` latency (p50/p99/max) for the
//! default policy and every example, on realistic inputs, measured per call with
//! `std::time::Instant` (no criterion). Run: `cargo bench --bench policy [-- ITERATIONS]`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use zabbix_mcp_guard::policy::{
    CallerInfo, ClientInfo, DecisionLog, DecisionLogSink, Phase, PolicyEngine, PolicyInput,
    PolicyMode, TargetGroup, TargetHost, Targets, ToolInfo, ToolKind, ZabbixInfo,
};

const DEFAULT_ITERATIONS: usize = 200_000;
const WARMUP: usize = 2_000;

fn main() {
    // `cargo bench` passes `--bench`; the first numeric argument is the iteration count.
    let iterations = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(DEFAULT_ITERATIONS);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let mut dirs = vec![root.clone()];
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root.join("examples"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    examples.sort();
    dirs.extend(examples);

    println!("decide(): {iterations} evaluations per row, after {WARMUP} warm-up calls");
    println!(
        "{:<34} {:<20} {:>6} {:>9} {:>9} {:>9} {:>10}",
        "policy", "input", "allow", "p50", "p99", "max", "evals/s"
    );
    for dir in &dirs {
        let engine = match PolicyEngine::load(dir, PolicyMode::Enforce) {
            Ok(engine) => engine,
            Err(e) => {
                eprintln!("{}: {e}", dir.display());
                std::process::exit(1);
            }
        };
        let name = dir.strip_prefix(&root).unwrap_or(dir).display().to_string();
        let name = if name.is_empty() {
            "default".to_string()
        } else {
            name
        };
        for (label, input) in [
            ("history_get call", history_get()),
            ("problem_ack call", problem_acknowledge()),
        ] {
            let allow = engine.decide(&input).allow;
            let stats = measure(iterations, || {
                black_box(engine.decide(black_box(&input)));
            });
            println!(
                "{name:<34} {label:<20} {allow:>6} {:>9} {:>9} {:>9} {:>10.0}",
                fmt(stats.p50),
                fmt(stats.p99),
                fmt(stats.max),
                stats.per_second
            );
        }
    }

    // What a call costs end to end on the policy side: decide + one decision log line
    // (serialized, written to /dev/null through the file sink).
    let engine = PolicyEngine::load(&root, PolicyMode::Enforce).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let log = DecisionLog::open(DecisionLogSink::File("/dev/null".into())).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let input = history_get();
    let stats = measure(iterations, || {
        let d = engine.decide(&input);
        log.record(&d, &input);
    });
    println!(
        "{:<34} {:<20} {:>6} {:>9} {:>9} {:>9} {:>10.0}",
        "default + decision log",
        "history_get call",
        true,
        fmt(stats.p50),
        fmt(stats.p99),
        fmt(stats.max),
        stats.per_second
    );

    // Two threads deciding at once: each has its own VM, so no contention is expected.
    let per_thread = iterations / 2;
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..2 {
            let engine = engine.clone();
            let input = history_get();
            s.spawn(move || {
                for _ in 0..per_thread {
                    black_box(engine.decide(&input));
                }
            });
        }
    });
    let elapsed = started.elapsed();
    println!(
        "default, 2 threads: {} decisions in {elapsed:.2?} ({:.0} decisions/s total)",
        per_thread * 2,
        (per_thread * 2) as f64 / elapsed.as_secs_f64()
    );
}

struct Stats {
    p50: Duration,
    p99: Duration,
    max: Duration,
    per_second: f64,
}

fn measure(iterations: usize, mut f: impl FnMut()) -> Stats {
    for _ in 0..WARMUP {
        f();
    }
    let mut samples = Vec::with_capacity(iterations);
    let started = Instant::now();
    for _ in 0..iterations {
        let t = Instant::now();
        f();
        samples.push(t.elapsed());
    }
    let total = started.elapsed();
    samples.sort_unstable();
    let at = |q: f64| {
        let i = ((samples.len() as f64 * q) as usize).min(samples.len().saturating_sub(1));
        samples.get(i).copied().unwrap_or_default()
    };
    Stats {
        p50: at(0.50),
        p99: at(0.99),
        max: samples.last().copied().unwrap_or_default(),
        per_second: iterations as f64 / total.as_secs_f64(),
    }
}

fn fmt(d: Duration) -> String {
    format!("{:.2}µs", d.as_secs_f64() * 1e6)
}

fn caller(usrgrps: &[&str]) -> CallerInfo {
    CallerInfo {
        userid: "7".into(),
        username: "night-shift".into(),
        user_type: 1,
        roleid: "1".into(),
        usrgrps: usrgrps.iter().map(|g| (*g).to_string()).collect(),
        token_id: "3f1c9a7be2d04c55".into(),
    }
}

fn input(
    phase: Phase,
    tool: ToolInfo,
    caller: CallerInfo,
    arguments: serde_json::Value,
) -> PolicyInput {
    let mut input = PolicyInput::new(
        phase,
        tool,
        caller,
        ClientInfo {
            address: "10.0.0.7".into(),
            name: Some("claude-code".into()),
            version: Some("2.1.3".into()),
            protocol_version: Some("2025-11-25".into()),
            elicitation: vec!["form".into()],
        },
        ZabbixInfo {
            version: "7.0.22".into(),
        },
    );
    input.now = 1_767_780_000; // a Wednesday, 10:00 UTC: inside the change window
    input.arguments = arguments.as_object().cloned().unwrap_or_default();
    input
}

fn history_get() -> PolicyInput {
    input(
        Phase::Call,
        ToolInfo {
            name: "history_get".into(),
            exposed_name: "zbx_history_get".into(),
            kind: ToolKind::Read,
            method: "history.get".into(),
            destructive: false,
            idempotent: true,
        },
        caller(&["Operators", "Zabbix administrators"]),
        json!({
            "itemids": ["23296", "23297", "23298"],
            "time_from": 1_767_693_600,
            "time_till": 1_767_780_000,
            "type": "float",
            "limit": 500
        }),
    )
}

fn problem_acknowledge() -> PolicyInput {
    let mut input = input(
        Phase::Call,
        ToolInfo {
            name: "problem_acknowledge".into(),
            exposed_name: "zbx_problem_acknowledge".into(),
            kind: ToolKind::Write,
            method: "event.acknowledge".into(),
            destructive: false,
            idempotent: true,
        },
        caller(&["Tier 1 operators"]),
        json!({
            "eventids": ["40214", "40215"],
            "message": "Investigating; disk cleanup scheduled."
        }),
    );
    // What the sidecar resolves for the events: their host and its groups.
    input.targets = Some(Targets {
        hosts: vec![TargetHost {
            hostid: "10084".into(),
            host: "web-01".into(),
            groups: vec![TargetGroup {
                groupid: "2".into(),
                name: "Linux servers".into(),
            }],
        }],
        groups: Vec::new(),
    });
    input
}
