//! Issue 12, load and soak (bounded, self-stopping, not part of the normal suite):
//! `SOAK_CLIENTS` real MCP clients (default 1000, each its own connection pool) mix
//! `tools/list`, a read and a resource read against a stub Zabbix for `SOAK_SECS`
//! (default 60; the soak is 600), while `SOAK_SLOW` raw clients (default 100)
//! trickle request heads one byte at a time. It reports errors, p50/p99 latency, and RSS
//! and open descriptors sampled every 10 s (of this process: sidecar and clients together).
//!
//! `SOAK_SECS=600 cargo test --release --test soak -- --ignored --nocapture`
//!
//! This one checks the sidecar with real rmcp clients in one process, so its figures
//! include the clients' cost and memory. The published load figures come from
//! `scripts/load/run.sh` (benches/load): the released binary driven from another process,
//! its own RSS and descriptors read from /proc.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::ReadResourceRequestParams;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "load test: run by hand, see the module doc"]
async fn soak() {
    let secs = env("SOAK_SECS", 60);
    let clients = env("SOAK_CLIENTS", 1000) as usize;
    let slow = env("SOAK_SLOW", 100) as usize;
    // The keep-alive stub: a Zabbix frontend keeps its connections open too.
    let (stub_url, _stub) = common::stub::start_answering(
        Duration::ZERO,
        json!([{"hostid": "1", "host": "web-01", "name": "web-01"}]),
    )
    .await;
    let mut config = common::config_for(&stub_url);
    config.decision_log =
        zabbix_mcp_guard::config::DecisionLogSink::File(common::temp_path("d.log"));
    config.limits.max_connections = clients + slow + 100;
    let guard = common::start_with(config).await;
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(std::sync::Mutex::new(Vec::<u32>::new()));

    // Slow clients: one header byte every 500 ms, reconnecting when cut off.
    let address = guard.base.trim_start_matches("http://").to_owned();
    let cut_off = Arc::new(AtomicUsize::new(0));
    for _ in 0..slow {
        let (address, stop, cut_off) = (address.clone(), stop.clone(), cut_off.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut stream) = TcpStream::connect(&address).await else {
                    continue;
                };
                for byte in b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
                    .iter()
                    .cycle()
                {
                    if stop.load(Ordering::Relaxed) || stream.write_all(&[*byte]).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                cut_off.fetch_add(1, Ordering::Relaxed);
            }
        });
    }

    // Connect every client first (concurrently), then start the clock.
    let start = Instant::now();
    let mut connecting = tokio::task::JoinSet::new();
    for n in 0..clients {
        let base = guard.base.clone();
        connecting.spawn(async move {
            let guard = common::Guard::external(&base);
            common::client(&guard, &format!("soak-{}", n % 50)).await
        });
    }
    let mut connected = Vec::new();
    while let Some(client) = connecting.join_next().await {
        connected.push(client.unwrap());
    }
    let mut tasks = Vec::new();
    for client in connected {
        let (stop, errors, latencies) = (stop.clone(), errors.clone(), latencies.clone());
        tasks.push(tokio::spawn(async move {
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let began = Instant::now();
                let failure: Option<String> = match round % 3 {
                    0 => client
                        .list_all_tools()
                        .await
                        .err()
                        .map(|e| format!("tools/list: {e}")),
                    1 => {
                        let r = common::call(&client, "host_get", json!({"limit": 1})).await;
                        (r.is_error == Some(true))
                            .then(|| format!("host_get: {}", common::error_body(&r)["code"]))
                    }
                    _ => client
                        .read_resource(ReadResourceRequestParams::new("zabbix://about"))
                        .await
                        .err()
                        .map(|e| format!("resources/read: {e}")),
                };
                if let Some(kind) = failure
                    && errors.fetch_add(1, Ordering::Relaxed) < 5
                {
                    println!("soak error: {kind}");
                }
                let micros = u32::try_from(began.elapsed().as_micros()).unwrap_or(u32::MAX);
                latencies.lock().unwrap().push(micros);
                round += 1;
            }
            let _ = client.cancel().await;
        }));
    }
    println!("soak: {clients} clients connected in {:?}", start.elapsed());
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(secs) {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let count = latencies.lock().unwrap().len();
        println!(
            "soak t={:>4}s requests={count} errors={} rss_kib={} fds={} slow_cut_off={}",
            began.elapsed().as_secs(),
            errors.load(Ordering::Relaxed),
            rss_kib(),
            open_fds(),
            cut_off.load(Ordering::Relaxed)
        );
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        let _ = task.await;
    }
    let mut all = latencies.lock().unwrap().clone();
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    println!(
        "soak done: {} requests in {secs}s, errors={}, p50={}ms p99={}ms max={}ms, slow clients cut off {} times",
        all.len(),
        errors.load(Ordering::Relaxed),
        pct(0.50) / 1000,
        pct(0.99) / 1000,
        all.last().copied().unwrap_or(0) / 1000,
        cut_off.load(Ordering::Relaxed)
    );
    assert_eq!(errors.load(Ordering::Relaxed), 0, "unexpected errors");
    guard.stop().await;
}
