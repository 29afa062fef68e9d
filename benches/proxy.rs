//! Proxy overhead benchmark: what the sidecar adds to a `host_get` call.
//!
//! Part 1 compares `host_get` through the sidecar (one stateless MCP `tools/call` POST) with
//! the same `host.get` JSON-RPC request sent straight to the lab Zabbix 7.0, interleaved so
//! both see the same Zabbix load. Part 2 puts an instant stub Zabbix (a hyper server in this
//! process) behind the sidecar, so the difference is the sidecar's own cost, at concurrency 1
//! and 64. Every HTTP client keeps its connections alive; connection setup is not measured.
//!
//! Run: `cargo bench --bench proxy`. Knobs (environment): `BENCH_N` (part 1 calls per side,
//! default 300), `BENCH_STUB_N` (part 2 calls per side at concurrency 1, default 2000),
//! `BENCH_STUB_PER_TASK` (part 2 calls per task at concurrency 64, default 100),
//! `BENCH_PART` (`1` or `2` to run one part only), `BENCH_LOG` (a DebugLevel 0-5: install the
//! sidecar's log subscriber, to stderr, as the binary does; default: none).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Barrier;
use zabbix_mcp_guard::app::App;
use zabbix_mcp_guard::catalog;
use zabbix_mcp_guard::config::{Config, DecisionLogSink};
use zabbix_mcp_guard::server::Server;
use zabbix_mcp_guard::zabbix::{Method, ZabbixVersion};

const PART1_WARMUP: usize = 20;
const PART1_DEFAULT_N: usize = 300;
const STUB_WARMUP: usize = 200;
const STUB_DEFAULT_N: usize = 2000;
const CONCURRENCY: usize = 64;
const STUB_DEFAULT_PER_TASK: usize = 100;
const TASK_WARMUP: usize = 5;
/// No measured loop runs longer than this; a loop that hits it reports how far it got.
const PHASE_BUDGET: Duration = Duration::from_secs(120);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const TOOL_ARGS: &str = r#"{"search":"mcp-","limit":10}"#;
const PROTOCOL_VERSION: &str = "2025-11-25";
const STUB_VERSION: &str = "7.0.22";

type HttpClient = Client<HttpConnector, Full<Bytes>>;

fn main() {
    let part = std::env::var("BENCH_PART").unwrap_or_default();
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
        "  sidecar: default configuration, policy set {}/policies (evaluated on every call), decision log: {}",
        env!("CARGO_MANIFEST_DIR"),
        match decision_log_sink() {
            DecisionLogSink::Stdout => "stdout".to_owned(),
            DecisionLogSink::File(path) => format!("file {}", path.display()),
        }
    );
    runtime.block_on(async {
        if part != "2" {
            part1().await;
        }
        if part != "1" {
            part2().await;
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

// ---------------------------------------------------------------------------------------
// Part 1: the real Zabbix 7.0 lab.

async fn part1() {
    println!();
    println!("== Part 1: real Zabbix 7.0 (lab) ==");
    let env_file = state_dir().join("zabbix7.env");
    let env = match std::fs::read_to_string(&env_file) {
        Ok(text) => parse_env(&text),
        Err(error) => {
            println!(
                "  skipped: cannot read {} ({error}).\n  Start the lab first: `bash deploy/lab/start-zabbix.sh all` \
                 (see deploy/lab/README.md), or set ZBX_STATE_DIR.",
                env_file.display()
            );
            return;
        }
    };
    let (Some(url), Some(token)) = (env.get("ZBX_URL"), env.get("ZBX_TOKEN")) else {
        println!(
            "  skipped: {} lacks ZBX_URL or ZBX_TOKEN",
            env_file.display()
        );
        return;
    };
    let n = env_number("BENCH_N").unwrap_or(PART1_DEFAULT_N).max(1);
    let Some(sidecar) = start_sidecar(url).await else {
        return;
    };
    let version = match sidecar.app.zabbix.version().await {
        Ok(version) => version,
        Err(error) => {
            println!(
                "  skipped: Zabbix at {url} does not answer apiinfo.version ({error}); is the lab running?"
            );
            sidecar.server.shutdown().await;
            return;
        }
    };
    let zabbix_uri: Uri = sidecar.app.config.api_url().parse().expect("API URL");
    let direct = Target::direct(zabbix_uri, token, host_get_body(&sidecar.app, version));
    let through = Target::sidecar(sidecar.mcp_uri(), token);
    println!(
        "  Zabbix {version} at {url}; sidecar in-process at {}",
        through.uri
    );
    println!(
        "  sidecar: MCP tools/call host_get {TOOL_ARGS} (one stateless POST, MCP-Protocol-Version {PROTOCOL_VERSION})"
    );
    println!(
        "  direct:  the same host.get JSON-RPC the sidecar builds ({} bytes): {}",
        direct.body.len(),
        String::from_utf8_lossy(&direct.body)
    );

    let client = http_client();
    // Warm-up: connections on both sides, the sidecar's caller cache, tool list, version.
    let mut first = None;
    for i in 0..PART1_WARMUP {
        let d = direct.call(&client).await;
        let s = through.call(&client).await;
        match (d, s) {
            (Ok(d), Ok(s)) if i == 0 => first = Some((d.2, s.2)),
            (Ok(_), Ok(_)) => {}
            (Err(e), _) | (_, Err(e)) => {
                println!("  skipped: warm-up call failed: {e}");
                sidecar.server.shutdown().await;
                return;
            }
        }
    }
    if let Some((direct_body, sidecar_body)) = first {
        let direct_ids = direct_hostids(&direct_body);
        let sidecar_ids = sidecar_hostids(&sidecar_body);
        println!(
            "  responses: direct {} bytes, {} hosts; sidecar {} bytes, {} hosts; same hosts in the same order: {}",
            direct_body.len(),
            direct_ids.len(),
            sidecar_body.len(),
            sidecar_ids.len(),
            yes_no(direct_ids.iter().take(10).eq(sidecar_ids.iter()))
        );
    }

    // Interleaved: direct and sidecar alternate (ABBA), so both see the same Zabbix load.
    let mut lat_direct = Vec::with_capacity(n);
    let mut lat_sidecar = Vec::with_capacity(n);
    let mut paired = Vec::with_capacity(n);
    let started = Instant::now();
    let mut errors = 0usize;
    for i in 0..n {
        if started.elapsed() > PHASE_BUDGET {
            println!(
                "  note: time budget ({}s) reached after {i} of {n} pairs",
                PHASE_BUDGET.as_secs()
            );
            break;
        }
        let (d, s) = if i % 2 == 0 {
            let d = direct.call(&client).await;
            (d, through.call(&client).await)
        } else {
            let s = through.call(&client).await;
            (direct.call(&client).await, s)
        };
        match (d, s) {
            (Ok(d), Ok(s)) => {
                lat_direct.push(d.0);
                lat_sidecar.push(s.0);
                paired.push(s.0.as_secs_f64() - d.0.as_secs_f64());
            }
            (d, s) => {
                errors += 1;
                for e in [d.err(), s.err()].into_iter().flatten() {
                    eprintln!("part 1 call failed: {e}");
                }
            }
        }
    }
    let wall = started.elapsed();
    sidecar.server.shutdown().await;
    let d = Stats::of(&mut lat_direct);
    let s = Stats::of(&mut lat_sidecar);
    println!(
        "  {} interleaved pairs after {PART1_WARMUP} warm-up pairs, {:.1}s, {errors} failed pairs",
        d.n,
        wall.as_secs_f64()
    );
    println!();
    print_header(Unit::Ms);
    print_row("direct host.get", &d, Unit::Ms);
    print_row("sidecar host_get", &s, Unit::Ms);
    if d.n == 0 {
        return;
    }
    let ratio_p50 = s.p50 / d.p50;
    let ratio_p99 = s.p99 / d.p99;
    println!();
    println!(
        "  ratio sidecar/direct  p50 {ratio_p50:.3}   p99 {ratio_p99:.3}   mean {:.3}   (target <= 1.02: p50 {}, p99 {})",
        s.mean / d.mean,
        pass(ratio_p50 <= 1.02),
        pass(ratio_p99 <= 1.02)
    );
    paired.sort_by(f64::total_cmp);
    println!(
        "  added latency         p50 {}   p99 {}   median of per-pair differences {}",
        fmt_signed(s.p50 - d.p50, Unit::Ms),
        fmt_signed(s.p99 - d.p99, Unit::Ms),
        fmt_signed(percentile(&paired, 0.50), Unit::Ms),
    );
}

// ---------------------------------------------------------------------------------------
// Part 2: an instant stub Zabbix.

async fn part2() {
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

// ---------------------------------------------------------------------------------------
// The stub Zabbix.

struct Stub {
    addr: SocketAddr,
    state: Arc<StubState>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct StubState {
    /// The first host.get body received (the sidecar's: it calls first).
    sidecar_host_get: OnceLock<Bytes>,
    counts: std::sync::Mutex<HashMap<String, usize>>,
}

#[derive(serde::Deserialize)]
struct RpcHead {
    method: String,
    #[serde(default)]
    id: Value,
}

impl StubState {
    fn count(&self, method: &str) {
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry(method.to_owned()).or_default() += 1;
        }
    }

    fn total(&self) -> usize {
        self.counts.lock().map(|c| c.values().sum()).unwrap_or(0)
    }

    fn summary(&self) -> String {
        let Ok(counts) = self.counts.lock() else {
            return String::new();
        };
        let mut pairs: Vec<_> = counts.iter().collect();
        pairs.sort();
        pairs
            .iter()
            .map(|(m, c)| format!("{m} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn stub_hosts() -> String {
    let hosts: Vec<Value> = (1..=10)
        .map(|i| {
            json!({
                "hostid": format!("{}", 10100 + i),
                "host": format!("mcp-stub-{i:02}"),
                "name": format!("MCP Stub {i:02}"),
                "status": "0",
                "description": "",
                "maintenance_status": "0",
                "flags": "0",
                "hostgroups": [{"groupid": "2", "name": "Linux servers"}],
                "tags": [{"tag": "env", "value": "bench"}],
                "parentTemplates": [{"templateid": "10001", "name": "Linux by Zabbix agent"}],
                "triggers": [],
            })
        })
        .collect();
    Value::Array(hosts).to_string()
}

impl Stub {
    async fn start() -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("stub binds");
        let addr = listener.local_addr().expect("stub address");
        let state = Arc::new(StubState::default());
        let hosts: Arc<str> = stub_hosts().into();
        let task_state = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let state = task_state.clone();
                let hosts = hosts.clone();
                let service =
                    service_fn(move |request| stub_answer(request, state.clone(), hosts.clone()));
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Stub { addr, state, task }
    }

    /// Stops accepting; returns the request counts.
    fn stop(self) -> Arc<StubState> {
        self.task.abort();
        self.state
    }
}

async fn stub_answer(
    request: Request<Incoming>,
    state: Arc<StubState>,
    hosts: Arc<str>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let (method, id) = match serde_json::from_slice::<RpcHead>(&body) {
        Ok(head) => (head.method, head.id),
        Err(_) => (String::from("?"), Value::Null),
    };
    let result: &str = match method.as_str() {
        "apiinfo.version" => "\"7.0.22\"",
        "user.checkAuthentication" => r#"{"userid":"1","username":"Admin","type":3,"roleid":"3"}"#,
        "usergroup.get" => r#"[{"name":"Zabbix administrators"}]"#,
        "host.get" => {
            let _ = state.sidecar_host_get.set(body.clone());
            &hosts
        }
        _ => "[]",
    };
    state.count(&method);
    let text = format!(r#"{{"jsonrpc":"2.0","result":{result},"id":{id}}}"#);
    let mut response = Response::new(Full::new(Bytes::from(text)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}

// ---------------------------------------------------------------------------------------
// Requests, the sidecar, and the clients.

struct Sidecar {
    app: Arc<App>,
    server: Server,
}

impl Sidecar {
    fn mcp_uri(&self) -> Uri {
        format!("http://{}/mcp", self.server.local_addrs()[0])
            .parse()
            .expect("MCP URI")
    }
}

async fn start_sidecar(frontend_url: &str) -> Option<Sidecar> {
    let mut config = match Config::new(frontend_url, "127.0.0.1") {
        Ok(config) => config,
        Err(error) => {
            println!("  skipped: sidecar configuration error: {error}");
            return None;
        }
    };
    config.listen_ip = vec!["127.0.0.1".parse().expect("ip")];
    config.listen_port = 0;
    config.policy_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    config.decision_log = decision_log_sink();
    let app = match App::new(config) {
        Ok(app) => app,
        Err(error) => {
            println!("  skipped: sidecar cannot start: {error}");
            return None;
        }
    };
    match Server::start(app.clone()).await {
        Ok(server) => Some(Sidecar { app, server }),
        Err(error) => {
            println!("  skipped: sidecar cannot listen: {error}");
            None
        }
    }
}

/// The decision log goes to a file (a write per line, as in production) so that it does not
/// mix with the report; `BENCH_DECISION_LOG` names another file, or `stdout`.
fn decision_log_sink() -> DecisionLogSink {
    match std::env::var("BENCH_DECISION_LOG") {
        Ok(v) if v == "stdout" => DecisionLogSink::Stdout,
        Ok(v) if !v.is_empty() => DecisionLogSink::File(PathBuf::from(v)),
        _ => DecisionLogSink::File(default_decision_log()),
    }
}

fn default_decision_log() -> PathBuf {
    std::env::temp_dir().join(format!(
        "zabbix-mcp-guard-bench-{}.decisions.log",
        std::process::id()
    ))
}

/// The host.get request the sidecar sends for `host_get` with [`TOOL_ARGS`], built by the
/// sidecar's own catalog and client code.
fn host_get_body(app: &App, version: ZabbixVersion) -> Bytes {
    let tool = catalog::find("host_get").expect("host_get in the catalog");
    let query = tool.query.as_ref().expect("host_get is a read tool");
    let raw: Value = serde_json::from_str(TOOL_ARGS).expect("tool arguments");
    let now = zabbix_mcp_guard::mcp::tools::unix_now();
    let mut args =
        catalog::args::validate(tool, raw.as_object(), version, now).expect("valid arguments");
    catalog::args::enforce_limits(tool, &mut args, &catalog::args::Limits::default(), now)
        .expect("within limits");
    let params = catalog::params::read_params(tool, query, &args, version);
    app.zabbix
        .payload(Method::HostGet, &params)
        .expect("payload")
        .body
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Direct,
    Sidecar,
}

#[derive(Clone)]
struct Target {
    kind: Kind,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

impl Target {
    fn direct(uri: Uri, token: &str, body: Bytes) -> Target {
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json-rpc"),
        );
        headers.insert(AUTHORIZATION, bearer(token));
        Target {
            kind: Kind::Direct,
            uri,
            headers,
            body,
        }
    }

    fn sidecar(uri: Uri, token: &str) -> Target {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_static(PROTOCOL_VERSION),
        );
        headers.insert(AUTHORIZATION, bearer(token));
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"host_get","arguments":{TOOL_ARGS}}}}}"#
        );
        Target {
            kind: Kind::Sidecar,
            uri,
            headers,
            body: Bytes::from(body),
        }
    }

    fn request(&self) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(self.body.clone()));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }

    /// One timed call: from sending the request to the last byte of the response body.
    /// The answer is checked after the clock stops.
    async fn call(&self, client: &HttpClient) -> Result<(Duration, StatusCode, Bytes), String> {
        let request = self.request();
        let started = Instant::now();
        let exchange = async {
            let response = client.request(request).await.map_err(|e| e.to_string())?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok::<_, String>((status, body))
        };
        let (status, body) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()))??;
        let elapsed = started.elapsed();
        let ok = status == StatusCode::OK
            && match self.kind {
                Kind::Direct => contains(&body, b"\"result\"") && !contains(&body, b"\"error\""),
                Kind::Sidecar => {
                    contains(&body, b"\"structuredContent\"")
                        && !contains(&body, b"\"isError\":true")
                }
            };
        if !ok {
            return Err(format!(
                "{} answered {status}: {}",
                self.uri,
                String::from_utf8_lossy(&body[..body.len().min(500)])
            ));
        }
        Ok((elapsed, status, body))
    }
}

fn http_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(300))
        .pool_max_idle_per_host(CONCURRENCY)
        .build(connector)
}

fn bearer(token: &str) -> HeaderValue {
    let mut value = HeaderValue::try_from(format!("Bearer {token}")).expect("token header");
    value.set_sensitive(true);
    value
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn without_id(body: &[u8]) -> Value {
    let mut value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.remove("id");
    }
    value
}

fn direct_hostids(body: &[u8]) -> Vec<String> {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    ids_of(&value["result"])
}

fn sidecar_hostids(body: &[u8]) -> Vec<String> {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    ids_of(&value["result"]["structuredContent"]["results"])
}

fn ids_of(list: &Value) -> Vec<String> {
    list.as_array()
        .map(|hosts| {
            hosts
                .iter()
                .filter_map(|h| h["hostid"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// Statistics and printing.

/// Latency statistics in seconds (nearest-rank percentiles).
struct Stats {
    n: usize,
    p50: f64,
    p90: f64,
    p99: f64,
    mean: f64,
    min: f64,
    max: f64,
}

impl Stats {
    fn of(samples: &mut [Duration]) -> Stats {
        samples.sort_unstable();
        let secs: Vec<f64> = samples.iter().map(Duration::as_secs_f64).collect();
        let n = secs.len();
        Stats {
            n,
            p50: percentile(&secs, 0.50),
            p90: percentile(&secs, 0.90),
            p99: percentile(&secs, 0.99),
            mean: if n == 0 {
                f64::NAN
            } else {
                secs.iter().sum::<f64>() / n as f64
            },
            min: secs.first().copied().unwrap_or(f64::NAN),
            max: secs.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[derive(Clone, Copy)]
enum Unit {
    Ms,
    Us,
}

impl Unit {
    fn scale(self) -> f64 {
        match self {
            Unit::Ms => 1e3,
            Unit::Us => 1e6,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::Us => "µs",
        }
    }
}

fn print_header(unit: Unit) {
    println!(
        "  {:<22} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}   ({})",
        "",
        "n",
        "p50",
        "p90",
        "p99",
        "mean",
        "min",
        "max",
        unit.name()
    );
}

fn print_row(label: &str, s: &Stats, unit: Unit) {
    let k = unit.scale();
    let digits = match unit {
        Unit::Ms => 3,
        Unit::Us => 1,
    };
    println!(
        "  {label:<22} {:>6} {:>10.digits$} {:>10.digits$} {:>10.digits$} {:>10.digits$} {:>10.digits$} {:>10.digits$}",
        s.n,
        s.p50 * k,
        s.p90 * k,
        s.p99 * k,
        s.mean * k,
        s.min * k,
        s.max * k,
    );
}

fn fmt_signed(seconds: f64, unit: Unit) -> String {
    let digits = match unit {
        Unit::Ms => 3,
        Unit::Us => 1,
    };
    format!("{:+.digits$} {}", seconds * unit.scale(), unit.name())
}

fn pass(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "NO" }
}

// ---------------------------------------------------------------------------------------
// Environment.

fn state_dir() -> PathBuf {
    std::env::var_os("ZBX_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new("/var/lib/zbx-test").to_path_buf())
}

fn parse_env(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
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
