//! Part 3: policy on vs off. The same MCP `tools/call host_get` through the sidecar to the
//! instant stub Zabbix, at concurrency 1, with four sidecars that differ only in policy set
//! and decision log: (a) a trivial allow-all policy with the log to /dev/null, (b) the
//! shipped default policy and (c) the `tier1_operations` example, both logging to a file,
//! and (a0) the trivial policy with the log discarded before serialization. The calls
//! rotate through the sidecars every round, so machine load falls on all alike; the
//! differences to (a) are what policy evaluation and the decision log cost per call.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use zabbix_mcp_guard::config::DecisionLogSink;

use crate::client::{TOOL_ARGS, Target, http_client};
use crate::sidecar::{LogTo, Sidecar, start_sidecar_with};
use crate::stats::{Stats, Unit, fmt_signed, percentile, print_header, print_row};
use crate::stub::Stub;
use crate::{PHASE_BUDGET, env_number};

const POLICY_WARMUP: usize = 200;
const POLICY_DEFAULT_N: usize = 2000;
const TRIVIAL_POLICY: &str =
    "package zabbix.mcp\nimport rego.v1\ndecision := {\"allow\": true, \"reasons\": []}\n";
/// Indexes of the variants, in the order they are built and printed.
const A: usize = 0;
const B: usize = 1;
const C: usize = 2;
const A0: usize = 3;

/// One sidecar configuration under test.
struct Variant {
    label: &'static str,
    sidecar: Sidecar,
    target: Target,
    log_file: Option<PathBuf>,
    /// Per round: the latency, or `None` when the call failed or the round did not run.
    samples: Vec<Option<Duration>>,
}

pub async fn part3() {
    println!();
    println!("== Part 3: policy on vs off (instant stub Zabbix, concurrency 1) ==");
    let scratch = std::env::temp_dir().join(format!(
        "zabbix-mcp-guard-bench-{}-part3",
        std::process::id()
    ));
    let trivial = scratch.join("trivial");
    if let Err(error) = std::fs::create_dir_all(&trivial)
        .and_then(|()| std::fs::write(trivial.join("policy.rego"), TRIVIAL_POLICY))
    {
        println!(
            "  skipped: cannot write the trivial policy under {}: {error}",
            scratch.display()
        );
        return;
    }
    let stub = Stub::start().await;
    let stub_url = format!("http://{}/api_jsonrpc.php", stub.addr);
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let log_b = scratch.join("b.decisions.log");
    let log_c = scratch.join("c.decisions.log");
    let specs = [
        (
            "(a) trivial, /dev/null",
            "trivial allow-all policy (temp dir), decision log to /dev/null",
            trivial.clone(),
            Some(PathBuf::from("/dev/null")),
        ),
        (
            "(b) default, file",
            "shipped default policy (policies/), decision log to a temp file",
            policies.clone(),
            Some(log_b.clone()),
        ),
        (
            "(c) tier1_ops, file",
            "policies/examples/tier1_operations with its data.json, decision log to a temp file",
            policies.join("examples").join("tier1_operations"),
            Some(log_c.clone()),
        ),
        (
            "(a0) trivial, discard",
            "trivial allow-all policy, decision log discarded (Discard sink: no line is built)",
            trivial.clone(),
            None,
        ),
    ];
    let token = "bench-token-0123456789abcdef";
    let mut variants = Vec::with_capacity(specs.len());
    for (label, what, dir, log_file) in specs {
        let log = match &log_file {
            Some(path) => LogTo::Config(DecisionLogSink::File(path.clone())),
            None => LogTo::Discard,
        };
        let Some(sidecar) = start_sidecar_with(&stub_url, dir, log).await else {
            return shut_down(variants, stub, &scratch).await;
        };
        let status = sidecar.app.policy.status();
        if !status.loaded {
            println!(
                "  skipped: {label}: no policy loaded from {}: {}",
                status.source,
                status.last_error.unwrap_or_default()
            );
            sidecar.server.shutdown().await;
            return shut_down(variants, stub, &scratch).await;
        }
        println!(
            "  {label:<22}  {what}\n  {:<22}  policy dir {}, revision {}, evaluated by {}",
            "",
            status.source,
            status.revision.unwrap_or_default(),
            if status.vm {
                "the compiled VM"
            } else {
                "the interpreter"
            }
        );
        let target = Target::sidecar(sidecar.mcp_uri(), token);
        variants.push(Variant {
            label,
            sidecar,
            target,
            log_file,
            samples: Vec::new(),
        });
    }
    println!(
        "  each: MCP tools/call host_get {TOOL_ARGS} through its own sidecar to the same stub"
    );

    let client = http_client();
    for variant in &variants {
        if let Err(error) = variant.target.call(&client).await {
            println!("  aborted: first call to {} failed: {error}", variant.label);
            return shut_down(variants, stub, &scratch).await;
        }
    }
    for round in 0..POLICY_WARMUP {
        for v in rotation(round, variants.len()) {
            let _ = variants[v].target.call(&client).await;
        }
    }

    let n = env_number("BENCH_POLICY_N")
        .unwrap_or(POLICY_DEFAULT_N)
        .max(1);
    let mut errors = 0usize;
    let mut rounds = 0usize;
    let started = Instant::now();
    for round in 0..n {
        if started.elapsed() > PHASE_BUDGET {
            println!("  note: time budget reached after {round} of {n} rounds");
            break;
        }
        for v in rotation(round, variants.len()) {
            let sample = match variants[v].target.call(&client).await {
                Ok((elapsed, ..)) => Some(elapsed),
                Err(error) => {
                    errors += 1;
                    eprintln!("part 3 call to {} failed: {error}", variants[v].label);
                    None
                }
            };
            variants[v].samples.push(sample);
        }
        rounds += 1;
    }
    let wall = started.elapsed();
    report(&variants, rounds, errors, wall);
    let calls = 1 + POLICY_WARMUP + rounds;
    for variant in &variants {
        if let Some(path) = variant
            .log_file
            .as_ref()
            .filter(|p| *p != Path::new("/dev/null"))
        {
            print_log_size(variant.label, path, calls);
        }
    }
    shut_down(variants, stub, &scratch).await;
}

/// The order of the variants in `round`: each starts a round in turn.
fn rotation(round: usize, len: usize) -> impl Iterator<Item = usize> {
    (0..len).map(move |i| (round + i) % len)
}

fn report(variants: &[Variant], rounds: usize, errors: usize, wall: Duration) {
    println!();
    println!(
        "  {rounds} rounds x {} sidecars (order rotating each round) after {POLICY_WARMUP} warm-up rounds, {:.1}s, {errors} failed calls",
        variants.len(),
        wall.as_secs_f64()
    );
    print_header(Unit::Us);
    let stats: Vec<Stats> = variants
        .iter()
        .map(|v| Stats::of(&mut v.samples.iter().flatten().copied().collect::<Vec<_>>()))
        .collect();
    for (variant, s) in variants.iter().zip(&stats) {
        print_row(variant.label, s, Unit::Us);
    }
    println!();
    println!(
        "  {:<34} {:>12} {:>12} {:>24}",
        "difference", "p50", "p99", "median per-round diff"
    );
    let pairs = [
        (B, A, "(b)-(a) default policy + log file"),
        (C, A, "(c)-(a) tier1_ops + log file"),
        (A, A0, "(a)-(a0) log line to /dev/null"),
        (B, A0, "(b)-(a0) default, all costs"),
        (C, A0, "(c)-(a0) tier1_ops, all costs"),
    ];
    for (x, y, label) in pairs {
        if x >= variants.len() || y >= variants.len() {
            continue;
        }
        let (sx, sy) = (&stats[x], &stats[y]);
        if sx.n == 0 || sy.n == 0 {
            continue;
        }
        println!(
            "  {label:<34} {:>12} {:>12} {:>24}",
            fmt_signed(sx.p50 - sy.p50, Unit::Us),
            fmt_signed(sx.p99 - sy.p99, Unit::Us),
            fmt_signed(paired_median(&variants[x], &variants[y]), Unit::Us),
        );
    }
}

/// Median of `x - y` over the rounds in which both calls succeeded, in seconds.
fn paired_median(x: &Variant, y: &Variant) -> f64 {
    let mut diffs: Vec<f64> = x
        .samples
        .iter()
        .zip(&y.samples)
        .filter_map(|(a, b)| Some(a.as_ref()?.as_secs_f64() - b.as_ref()?.as_secs_f64()))
        .collect();
    diffs.sort_by(f64::total_cmp);
    percentile(&diffs, 0.50)
}

fn print_log_size(label: &str, path: &Path, calls: usize) {
    match std::fs::read(path) {
        Ok(bytes) => {
            let lines = bytes.iter().filter(|b| **b == b'\n').count();
            println!(
                "  {label}: decision log {} bytes, {lines} lines for {calls} calls ({:.1} lines, {:.0} bytes per call)",
                bytes.len(),
                lines as f64 / calls.max(1) as f64,
                bytes.len() as f64 / calls.max(1) as f64
            );
        }
        Err(error) => println!("  {label}: decision log {}: {error}", path.display()),
    }
}

/// Stops the sidecars and the stub, reports the stub's request counts and removes the
/// temporary policy and log files.
async fn shut_down(variants: Vec<Variant>, stub: Stub, scratch: &Path) {
    for variant in variants {
        variant.sidecar.server.shutdown().await;
    }
    let stub_state = stub.stop();
    println!(
        "  stub saw {} requests: {}",
        stub_state.total(),
        stub_state.summary()
    );
    match std::fs::remove_dir_all(scratch) {
        Ok(()) => println!("  temporary files under {} removed", scratch.display()),
        Err(error) => println!("  could not remove {}: {error}", scratch.display()),
    }
}
