//! The load client (issue 12 load and soak, issue 11 memory rows): drives a running sidecar
//! from outside its process. `run` opens `--connections` keep-alive HTTP/1.1 connections
//! that cycle through `tools/list`, `tools/call host_get` and `resources/read` (or
//! `tools/list` only), plus `--slow` clients trickling request heads, for `--secs`
//! seconds; every `--sample-secs` it prints throughput, p50/p99, errors by code and the
//! sidecar's RSS, open descriptors and CPU from /proc/<pid>/. `stub` serves an instant stub
//! Zabbix. `scripts/load/run.sh` builds and starts everything; see README "Reliability ›
//! Load".
//!
//! `cargo bench --bench load -- run --url http://127.0.0.1:8080 --pid <sidecar pid>`

mod clients;
mod proc;
mod stats;
mod stub;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

use crate::clients::{Mix, Shared};
use crate::stats::{Errors, Histogram, Snapshot, ms};

#[derive(Parser)]
#[command(about = "Load client for zabbix-mcp-guard")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve an instant stub Zabbix API.
    Stub {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
    },
    /// Drive a running sidecar.
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// The sidecar's base URL (`/mcp` is appended).
    #[arg(long)]
    url: String,
    /// The sidecar's process id, for RSS, descriptors and CPU.
    #[arg(long)]
    pid: Option<u32>,
    #[arg(long, default_value_t = 1000)]
    connections: usize,
    #[arg(long, default_value_t = 100)]
    slow: usize,
    #[arg(long, default_value_t = 60)]
    secs: u64,
    #[arg(long, default_value_t = 5)]
    sample_secs: u64,
    /// Distinct API tokens the connections use in turn.
    #[arg(long, default_value_t = 50)]
    tokens: usize,
    #[arg(long, value_enum, default_value_t = Mix::All)]
    mix: Mix,
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; ignore it.
    let args = std::env::args().filter(|a| a != "--bench");
    let cli = Cli::parse_from(args);
    match cli.command {
        Command::Stub { listen } => match stub::run(listen) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("stub: {error}");
                ExitCode::FAILURE
            }
        },
        Command::Run(args) => {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    eprintln!("runtime: {error}");
                    return ExitCode::FAILURE;
                }
            };
            runtime.block_on(run(args))
        }
    }
}

async fn run(args: RunArgs) -> ExitCode {
    let addr = args
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let shared = Arc::new(Shared {
        addr,
        stop: AtomicBool::new(false),
        latency: Histogram::new(),
        errors: Errors::default(),
        connected: AtomicU64::new(0),
        slow_cut_off: AtomicU64::new(0),
    });
    let before = args.pid.and_then(proc::sample);
    if let Some(s) = before {
        println!(
            "sidecar before load: rss={}MiB fds={} threads={}",
            s.rss_kib / 1024,
            s.fds,
            s.threads
        );
    }
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..args.slow {
        tasks.spawn(clients::slow(shared.clone()));
    }
    for n in 0..args.connections {
        let token = format!("load-token-{}", n % args.tokens.max(1));
        tasks.spawn(clients::fast(shared.clone(), token, args.mix));
    }
    let began = Instant::now();
    let mut previous = (Snapshot::empty(), began, before);
    let mut samples = Vec::new();
    println!(
        "{:>5} {:>6} {:>8} {:>8} {:>8} {:>7} {:>7} {:>5} {:>7} {:>7}  errors",
        "t_s",
        "conns",
        "req/s",
        "p50_ms",
        "p99_ms",
        "rss_MiB",
        "hwm_MiB",
        "fds",
        "cpu_ms/r",
        "slowcut"
    );
    while began.elapsed() < Duration::from_secs(args.secs) {
        let left = Duration::from_secs(args.secs).saturating_sub(began.elapsed());
        tokio::time::sleep(left.min(Duration::from_secs(args.sample_secs))).await;
        let now = (
            shared.latency.snapshot(),
            Instant::now(),
            args.pid.and_then(proc::sample),
        );
        let window = now.0.since(&previous.0);
        let seconds = now.1.duration_since(previous.1).as_secs_f64();
        let proc_now = now.2.unwrap_or_default();
        let cpu_per_request = match (previous.2, now.2) {
            (Some(a), Some(b)) if window.total() > 0 => format!(
                "{:.3}",
                (b.cpu_ms - a.cpu_ms) as f64 / window.total() as f64
            ),
            _ => "-".into(),
        };
        println!(
            "{:>5} {:>6} {:>8.0} {:>8} {:>8} {:>7.1} {:>7.1} {:>5} {:>8} {:>7}  {}",
            began.elapsed().as_secs(),
            shared.connected.load(Ordering::Relaxed),
            window.total() as f64 / seconds,
            ms(window.quantile(0.50)),
            ms(window.quantile(0.99)),
            proc_now.rss_kib as f64 / 1024.0,
            proc_now.hwm_kib as f64 / 1024.0,
            proc_now.fds,
            cpu_per_request,
            shared.slow_cut_off.load(Ordering::Relaxed),
            shared.errors.summary()
        );
        if let Some(s) = now.2 {
            samples.push(s);
        }
        previous = now;
    }
    shared.stop.store(true, Ordering::Relaxed);
    // Clients finish their request in flight; the timeout covers a stuck one.
    let _ = tokio::time::timeout(Duration::from_secs(35), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    let all = shared.latency.snapshot();
    let elapsed = began.elapsed().as_secs_f64();
    println!(
        "load done: {} requests in {:.0}s ({:.0}/s) over {} connections + {} slow clients; p50={}ms p99={}ms max={}ms; errors: {}; slow clients cut off {} times",
        all.total(),
        elapsed,
        all.total() as f64 / elapsed,
        args.connections,
        args.slow,
        ms(all.quantile(0.50)),
        ms(all.quantile(0.99)),
        ms(all.max()),
        shared.errors.summary(),
        shared.slow_cut_off.load(Ordering::Relaxed)
    );
    if let (Some(first), Some(last)) = (samples.first(), samples.last()) {
        let rss: Vec<u64> = samples.iter().map(|s| s.rss_kib).collect();
        let fds: Vec<usize> = samples.iter().map(|s| s.fds).collect();
        println!(
            "sidecar: rss first={:.1}MiB last={:.1}MiB min={:.1}MiB max={:.1}MiB; fds first={} last={} min={} max={}",
            first.rss_kib as f64 / 1024.0,
            last.rss_kib as f64 / 1024.0,
            rss.iter().min().copied().unwrap_or(0) as f64 / 1024.0,
            rss.iter().max().copied().unwrap_or(0) as f64 / 1024.0,
            first.fds,
            last.fds,
            fds.iter().min().copied().unwrap_or(0),
            fds.iter().max().copied().unwrap_or(0),
        );
    }
    if shared.errors.total() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
