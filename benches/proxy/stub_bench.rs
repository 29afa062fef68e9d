//! Part 2: an instant stub Zabbix behind the sidecar, so what remains is the sidecar's own
//! cost. (a) a plain POST of the sidecar's `host.get` body straight to the stub against (b)
//! MCP `tools/call host_get` through the sidecar, at concurrency 1 (interleaved) and 64.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Barrier;
use zabbix_mcp_guard::zabbix::ZabbixVersion;

use crate::client::{TOOL_ARGS, Target, http_client, without_id};
use crate::sidecar::{host_get_body, start_sidecar};
use crate::stats::{Stats, Unit, fmt_signed, pass, print_header, print_row, yes_no};
use crate::stub::{STUB_VERSION, Stub};
use crate::{CONCURRENCY, PHASE_BUDGET, env_number};

const STUB_WARMUP: usize = 200;
const STUB_DEFAULT_N: usize = 2000;
const STUB_DEFAULT_PER_TASK: usize = 100;
const TASK_WARMUP: usize = 5;

pub async fn part2() {
    println!();
    println!("== Part 2: instant stub Zabbix (in-process hyper server) ==");
    let stub = Stub::start().await;
    let stub_url = format!("http://{}/api_jsonrpc.php", stub.addr);
    let Some(sidecar) = start_sidecar(&stub_url).await else {
        return;
    };
    let token = "bench-token-0123456789abcdef";
    let version: ZabbixVersion = STUB_VERSION.parse().expect("version");
    let direct = Target::direct(
        stub_url.parse().expect("stub URL"),
        token,
        host_get_body(&sidecar.app, version),
    );
    let through = Target::sidecar(sidecar.mcp_uri(), token);
    println!(
        "  stub at {} answers apiinfo.version {STUB_VERSION}, user.checkAuthentication, usergroup.get, host.get (10 hosts)",
        stub.addr
    );
    println!("  (a) plain POST of the sidecar's host.get body straight to the stub");
    println!("  (b) MCP tools/call host_get {TOOL_ARGS} through the sidecar (to the same stub)");

    // The first sidecar call records what the sidecar sends, to check (a) sends the same.
    let client = http_client();
    let (direct_len, sidecar_len) = match (through.call(&client).await, direct.call(&client).await)
    {
        (Ok(s), Ok(d)) => (d.2.len(), s.2.len()),
        (s, d) => {
            println!(
                "  aborted: first calls failed: {:?} / {:?}",
                s.err(),
                d.err()
            );
            sidecar.server.shutdown().await;
            return;
        }
    };
    let same = stub
        .state
        .sidecar_host_get
        .get()
        .map(|sent| without_id(sent) == without_id(&direct.body));
    println!(
        "  (a) body equals the host.get the sidecar sent (apart from \"id\"): {}; responses: (a) {direct_len} bytes, (b) {sidecar_len} bytes",
        match same {
            Some(same) => yes_no(same),
            None => "unknown (no host.get seen)",
        }
    );

    // Concurrency 1, interleaved.
    let n = env_number("BENCH_STUB_N").unwrap_or(STUB_DEFAULT_N).max(1);
    for _ in 0..STUB_WARMUP {
        let _ = direct.call(&client).await;
        let _ = through.call(&client).await;
    }
    let mut lat_a = Vec::with_capacity(n);
    let mut lat_b = Vec::with_capacity(n);
    let mut errors = 0usize;
    let started = Instant::now();
    for i in 0..n {
        if started.elapsed() > PHASE_BUDGET {
            println!("  note: time budget reached after {i} of {n} pairs at concurrency 1");
            break;
        }
        let (a, b) = if i % 2 == 0 {
            let a = direct.call(&client).await;
            (a, through.call(&client).await)
        } else {
            let b = through.call(&client).await;
            (direct.call(&client).await, b)
        };
        for (result, into) in [(a, &mut lat_a), (b, &mut lat_b)] {
            match result {
                Ok((elapsed, ..)) => into.push(elapsed),
                Err(error) => {
                    errors += 1;
                    eprintln!("part 2 call failed: {error}");
                }
            }
        }
    }
    let a1 = Stats::of(&mut lat_a);
    let b1 = Stats::of(&mut lat_b);

    // Concurrency 64: one phase per target, each task with its own keep-alive connection.
    let per_task = env_number("BENCH_STUB_PER_TASK")
        .unwrap_or(STUB_DEFAULT_PER_TASK)
        .max(1);
    let a64 = concurrent(&direct, per_task).await;
    let b64 = concurrent(&through, per_task).await;
    sidecar.server.shutdown().await;
    let stub_state = stub.stop();

    println!();
    println!(
        "  concurrency 1: {} interleaved pairs after {STUB_WARMUP} warm-up pairs, {errors} failed calls",
        a1.n
    );
    print_header(Unit::Us);
    print_row("(a) direct to stub", &a1, Unit::Us);
    print_row("(b) sidecar to stub", &b1, Unit::Us);
    print_added(&a1, &b1);
    println!(
        "  throughput (sequential, one connection): (a) {:.0} calls/s, (b) {:.0} calls/s",
        1.0 / a1.mean,
        1.0 / b1.mean
    );

    println!();
    println!(
        "  concurrency {CONCURRENCY}: {CONCURRENCY} tasks x {per_task} sequential calls each (after {TASK_WARMUP} warm-up calls per task), own connection per task; (a) phase then (b) phase"
    );
    print_header(Unit::Us);
    print_row("(a) direct to stub", &a64.stats, Unit::Us);
    print_row("(b) sidecar to stub", &b64.stats, Unit::Us);
    print_added(&a64.stats, &b64.stats);
    println!(
        "  throughput: (a) {:.0} calls/s ({} calls in {:.2}s, {} failed), (b) {:.0} calls/s ({} calls in {:.2}s, {} failed)",
        a64.stats.n as f64 / a64.wall.as_secs_f64(),
        a64.stats.n,
        a64.wall.as_secs_f64(),
        a64.errors,
        b64.stats.n as f64 / b64.wall.as_secs_f64(),
        b64.stats.n,
        b64.wall.as_secs_f64(),
        b64.errors,
    );
    if let (Some(a_cpu), Some(b_cpu)) = (a64.cpu, b64.cpu) {
        let per_call = |cpu: Duration, n: usize| cpu.as_secs_f64() / n.max(1) as f64;
        let a_per = per_call(a_cpu, a64.stats.n + a64.errors);
        let b_per = per_call(b_cpu, b64.stats.n + b64.errors);
        println!(
            "  process CPU per call (user+sys, /proc/self/stat): (a) {:.1} µs, (b) {:.1} µs; the sidecar's share {:.1} µs",
            a_per * 1e6,
            b_per * 1e6,
            (b_per - a_per) * 1e6,
        );
    }
    println!(
        "  stub saw {} requests: {}",
        stub_state.total(),
        stub_state.summary()
    );
}

fn print_added(a: &Stats, b: &Stats) {
    if a.n == 0 || b.n == 0 {
        return;
    }
    let added_p50 = b.p50 - a.p50;
    println!(
        "  sidecar added latency (b)-(a): p50 {} (target <= 100 µs: {})   p99 {}",
        fmt_signed(added_p50, Unit::Us),
        pass(added_p50 <= 100e-6),
        fmt_signed(b.p99 - a.p99, Unit::Us),
    );
}

struct Concurrent {
    stats: Stats,
    wall: Duration,
    errors: usize,
    /// CPU time of the whole process during the measured phase.
    cpu: Option<Duration>,
}

async fn concurrent(target: &Target, per_task: usize) -> Concurrent {
    let barrier = Arc::new(Barrier::new(CONCURRENCY + 1));
    let mut tasks = Vec::with_capacity(CONCURRENCY);
    for _ in 0..CONCURRENCY {
        let target = target.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            // Each task has its own client, hence its own keep-alive connection.
            let client = http_client();
            for _ in 0..TASK_WARMUP {
                let _ = target.call(&client).await;
            }
            barrier.wait().await;
            let started = Instant::now();
            let mut latencies = Vec::with_capacity(per_task);
            let mut errors = 0usize;
            for _ in 0..per_task {
                if started.elapsed() > PHASE_BUDGET {
                    break;
                }
                match target.call(&client).await {
                    Ok((elapsed, ..)) => latencies.push(elapsed),
                    Err(_) => errors += 1,
                }
            }
            (latencies, errors, Instant::now())
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let cpu_before = process_cpu();
    let mut all = Vec::with_capacity(CONCURRENCY * per_task);
    let mut errors = 0;
    let mut last = started;
    for task in tasks {
        if let Ok((latencies, task_errors, done)) = task.await {
            all.extend(latencies);
            errors += task_errors;
            last = last.max(done);
        } else {
            errors += per_task;
        }
    }
    let cpu = match (cpu_before, process_cpu()) {
        (Some(before), Some(after)) => after.checked_sub(before),
        _ => None,
    };
    Concurrent {
        stats: Stats::of(&mut all),
        wall: last.duration_since(started),
        errors,
        cpu,
    }
}

/// User plus system CPU time of this process (all threads), from /proc/self/stat.
fn process_cpu() -> Option<Duration> {
    const TICKS_PER_SECOND: u64 = 100;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis(
        (utime + stime) * 1000 / TICKS_PER_SECOND,
    ))
}
