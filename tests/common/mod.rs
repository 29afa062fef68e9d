//! Shared test harness: the real Zabbix lab (deploy/lab), an in-process sidecar on a free
//! loopback port, and a real rmcp client over streamable HTTP.
#![allow(dead_code)]

pub mod fault;
pub mod hangup;
pub mod metrics;
pub mod process;
pub mod recorder;
pub mod redis_server;
pub mod stub;
pub mod tls;
pub mod trapper;
pub mod version_front;
pub mod write_suite;
pub mod zapi;

// Scratch directories as src's unit tests keep them: one root per test process.
#[path = "../../src/scratch.rs"]
mod scratch;

// Used through `common::` by the tests that spawn the binary.
#[allow(unused_imports)]
pub use process::{Running, binary, signal, terminate, wait_listening};
pub(crate) use scratch::dir as scratch_dir;

use std::collections::HashMap;
use std::path::PathBuf;

use rmcp::RoleClient;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitationCapability,
    FormElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use zabbix_mcp_guard::app::App;
use zabbix_mcp_guard::config::{Config, DecisionLogSink};
use zabbix_mcp_guard::server::Server;

pub type Client = RunningService<RoleClient, ClientConfig>;

/// One lab Zabbix (6 or 7) as written by deploy/lab/start-zabbix.sh.
#[derive(Debug, Clone)]
pub struct Lab {
    pub major: u8,
    pub url: String,
    pub token: String,
    pub token_operator: String,
    pub token_viewer: String,
    pub api_version: String,
    pub seed: Value,
}

pub fn state_dir() -> PathBuf {
    std::env::var_os("ZBX_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/zbx-test"))
}

/// The lab Zabbix of this major version. Panics (never skips) when the lab is not up.
pub fn lab(major: u8) -> Lab {
    // A test's own reqwest client may come before any sidecar or rmcp client is started.
    init();
    let env_file = state_dir().join(format!("zabbix{major}.env"));
    let text = std::fs::read_to_string(&env_file).unwrap_or_else(|e| {
        panic!(
            "the Zabbix lab is not set up ({}: {e}); run `bash deploy/lab/start-zabbix.sh all` first",
            env_file.display()
        )
    });
    let env: HashMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
    let get = |k: &str| {
        env.get(k)
            .map(|v| v.to_string())
            .unwrap_or_else(|| panic!("{} lacks {k}", env_file.display()))
    };
    let seed_path = get("ZBX_SEED_MANIFEST");
    let seed: Value = serde_json::from_str(
        &std::fs::read_to_string(&seed_path)
            .unwrap_or_else(|e| panic!("cannot read the seed manifest {seed_path}: {e}")),
    )
    .expect("seed manifest is JSON");
    Lab {
        major,
        url: get("ZBX_URL"),
        token: get("ZBX_TOKEN"),
        token_operator: get("ZBX_TOKEN_OPERATOR"),
        token_viewer: get("ZBX_TOKEN_VIEWER"),
        api_version: get("ZBX_API_VERSION"),
        seed,
    }
}

pub fn labs() -> Vec<Lab> {
    vec![lab(6), lab(7)]
}

/// A sidecar serving in this process on 127.0.0.1:<free port>.
pub struct Guard {
    pub url: String,
    pub base: String,
    server: Option<Server>,
}

impl Guard {
    /// A sidecar serving from another process (the real binary) at `base`.
    pub fn external(base: &str) -> Guard {
        Guard {
            url: format!("{base}/mcp"),
            base: base.to_owned(),
            server: None,
        }
    }

    /// The running sidecar's app (its counters, its policy engine).
    pub fn app(&self) -> &std::sync::Arc<App> {
        self.server.as_ref().expect("the sidecar is running").app()
    }

    /// The status listener's addresses (`StatusListenPort`), if it runs.
    pub fn status_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.server
            .as_ref()
            .map(|s| s.status_addrs().to_vec())
            .unwrap_or_default()
    }

    pub async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
    }
}

/// A test configuration: loopback, a free port, the shipped default policy, and a decision
/// log file of its own (stdout would mix into the test output).
pub fn config_for(zabbix_url: &str) -> Config {
    let mut config = Config::new(zabbix_url, "127.0.0.1,::1").expect("valid test config");
    config.listen_ip = vec!["127.0.0.1".parse().expect("ip")];
    config.listen_port = 0;
    config.policy_dir = Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies"));
    config.decision_log = DecisionLogSink::File(temp_path("decisions.log"));
    config
}

/// A free loopback port below the kernel's ephemeral range (32768 and up), for listeners
/// whose port must be known before they start (the approval page's URL, the binary's
/// `ListenPort`). A port taken with `bind(":0")` and released lies in the ephemeral range,
/// where any `:0` bind or outgoing connect of the same tests can take it before the sidecar
/// binds it again; below that range only explicit binds compete. Each call starts elsewhere,
/// so two sidecars of one test binary never race for the same port.
pub fn free_port() -> u16 {
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let seed = std::process::id()
        .wrapping_mul(7919)
        .wrapping_add(call.wrapping_mul(997));
    (0..2000u32)
        .map(|i| 20000 + (seed.wrapping_add(i * 13) % 12000) as u16)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port")
}

/// `host:port` of an `http://` URL, as relays and TLS fronts connect to it.
pub fn host_port(url: &str) -> String {
    let rest = url.trim_start_matches("http://");
    rest.split('/').next().unwrap_or(rest).to_owned()
}

/// A fresh path (not made yet) in a directory of its own, unique per call.
pub fn temp_path(name: &str) -> PathBuf {
    scratch_dir(name).join(name)
}

pub async fn start(lab: &Lab) -> Guard {
    start_with(config_for(&lab.url)).await
}

/// reqwest (the rmcp client's transport) is built without a bundled crypto provider.
pub fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
        if std::env::var_os("TEST_LOG").is_some() {
            let _ = zabbix_mcp_guard::telemetry::try_init_console(4);
        }
    });
}

pub async fn start_with(config: Config) -> Guard {
    init();
    let app = App::new(config).expect("app");
    let server = Server::start(app).await.expect("server starts");
    let addr = server.local_addrs()[0];
    Guard {
        url: format!("http://{addr}/mcp"),
        base: format!("http://{addr}"),
        server: Some(server),
    }
}

pub fn client_info(version: ProtocolVersion) -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("zabbix-mcp-guard-tests", "1.0"),
    )
    .with_protocol_version(version)
}

/// What a test's MCP client that answers form elicitations (approvals in the client)
/// says of itself, at protocol 2025-11-25.
pub fn form_elicitation_client(name: &str) -> ClientConfig {
    let elicitation = ElicitationCapability::new().with_form(FormElicitationCapability::new());
    let capabilities = ClientCapabilities::builder()
        .enable_elicitation_with(elicitation)
        .build();
    ClientConfig::new(capabilities, Implementation::new(name, "1.0"))
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
}

/// A real MCP client (protocol 2025-11-25) using `token`.
pub async fn client(guard: &Guard, token: &str) -> Client {
    client_with(guard, token, ProtocolVersion::V_2025_11_25).await
}

pub async fn client_with(guard: &Guard, token: &str, version: ProtocolVersion) -> Client {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(guard.url.as_str()).auth_header(token),
    );
    let info = client_info(version.clone());
    if version.has_initialize() {
        info.serve(transport).await.expect("MCP client connects")
    } else {
        info.serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![version],
            },
        )
        .await
        .expect("MCP client connects (discover)")
    }
}

/// Calls a tool and returns its result (tool errors included).
pub async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Value::Object(map) = args {
        params = params.with_arguments(map);
    }
    client
        .call_tool(params)
        .await
        .unwrap_or_else(|e| panic!("tools/call {tool} failed at the protocol level: {e}"))
}

/// The names of the tools offered to `client`, sorted.
pub async fn tool_names(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}

/// `zabbix://about` as JSON.
pub async fn about(client: &Client) -> Value {
    let about = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "zabbix://about",
        ))
        .await
        .unwrap();
    match &about.contents[0] {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => {
            serde_json::from_str(text).unwrap()
        }
        other => panic!("{other:?}"),
    }
}

/// Calls a read tool that must succeed and returns its structured envelope.
pub async fn read(client: &Client, tool: &str, args: Value) -> Value {
    let result = call(client, tool, args.clone()).await;
    assert_ne!(
        result.is_error,
        Some(true),
        "{tool} {args} failed: {:?}",
        result.structured_content
    );
    let envelope = result
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("{tool}: no structuredContent"));
    // The text block carries the same document.
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .expect("text block");
    let from_text: Value = serde_json::from_str(&text).expect("text block is JSON");
    assert_eq!(
        from_text, envelope,
        "{tool}: text and structuredContent differ"
    );
    envelope
}

/// Calls a tool that must fail; returns the error body.
pub async fn tool_error(client: &Client, tool: &str, args: Value) -> Value {
    let result = call(client, tool, args.clone()).await;
    assert_eq!(result.is_error, Some(true), "{tool} {args} should fail");
    error_body(&result)
}

/// The error body `{code, message, data?, decision_id?}` of a failed call: the JSON text of
/// its one text block (errors carry no structuredContent, see src/mcp/errors.rs).
pub fn error_body(result: &CallToolResult) -> Value {
    assert!(
        result.structured_content.is_none(),
        "an error result carries no structuredContent: {result:?}"
    );
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.as_str())
        .unwrap_or_else(|| panic!("an error result has a text block: {result:?}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("the error text is JSON ({e}): {text}"))
}

pub fn results(envelope: &Value) -> &Vec<Value> {
    envelope["results"].as_array().expect("results array")
}

pub fn names(envelope: &Value, field: &str) -> Vec<String> {
    results(envelope)
        .iter()
        .map(|r| r[field].as_str().unwrap_or_default().to_owned())
        .collect()
}

pub fn seed_id(lab: &Lab, section: &str, key: &str) -> String {
    lab.seed[section][key]
        .as_str()
        .unwrap_or_else(|| panic!("seed manifest lacks {section}.{key}"))
        .to_owned()
}

/// The decision log file's text once every line queued so far is written (the log is
/// written off the request path).
pub fn decision_log_text(path: &std::path::Path) -> String {
    zabbix_mcp_guard::policy::flush_decision_logs();
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The decision log's lines as JSON, once every queued line is written.
pub fn decision_log_lines(path: &std::path::Path) -> Vec<Value> {
    decision_log_text(path)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every decision log line is JSON"))
        .collect()
}

/// How often the shared helpers below look again.
const POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Polls `check` until it returns `Some`, for at most `limit`: how tests wait for a
/// condition (never a fixed sleep).
pub async fn eventually<T, F, Fut>(what: &str, limit: std::time::Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let mut found = None;
    wait_until(what, limit, async || {
        found = check().await;
        found.is_some()
    })
    .await;
    found.expect("wait_until returns only once the check answered")
}

/// `eventually` for a yes/no condition that needs `&mut` state of its own.
pub async fn wait_until<F: AsyncFnMut() -> bool>(what: &str, limit: std::time::Duration, done: F) {
    wait_until_every(what, limit, POLL, done).await;
}

/// `wait_until` looking only every `every`: for a condition that looking disturbs (a probe
/// that counts as traffic against an idle limit).
pub async fn wait_until_every<F: AsyncFnMut() -> bool>(
    what: &str,
    limit: std::time::Duration,
    every: std::time::Duration,
    mut done: F,
) {
    let deadline = std::time::Instant::now() + limit;
    while !done().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(every).await;
    }
}

/// `wait_until` for tests without a runtime (a spawned binary watched from a plain thread).
pub fn wait_until_blocking(what: &str, limit: std::time::Duration, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The lab's Redis (`start-zabbix.sh approval` writes it), or `ZMG_TEST_REDIS_URL`.
pub fn redis_url() -> String {
    if let Ok(url) = std::env::var("ZMG_TEST_REDIS_URL") {
        return url;
    }
    let path = state_dir().join("approval.env");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `bash deploy/lab/start-zabbix.sh approval`",
            path.display()
        )
    });
    text.lines()
        .find_map(|l| l.strip_prefix("ZMG_TEST_REDIS_URL="))
        .expect("ZMG_TEST_REDIS_URL")
        .to_owned()
}

/// `config` sharing state through the Redis at `url`, with the `ApprovalSealKey` every
/// replica sharing it needs (the same for all test sidecars).
pub fn on_redis(mut config: Config, url: &str) -> Config {
    config.shared_store = Some(zabbix_mcp_guard::config::Secret::new(
        url.as_bytes().to_vec(),
    ));
    config.approval_seal_key = Some(zabbix_mcp_guard::config::Secret::new(SEAL_KEY.to_vec()));
    config
}

/// The `ApprovalSealKey` of every test sidecar on Redis.
const SEAL_KEY: [u8; 32] = [0x5e; 32];

/// The name of a Redis key of the test sidecars (`approval:<id>`, `slots:*`): in the key
/// space of their `ApprovalSealKey`.
pub fn redis_key(name: &str) -> String {
    format!("{}{name}", zabbix_mcp_guard::store::key_prefix(&SEAL_KEY))
}

/// Runs `tests/deploy/<script>` with the official MCP Python SDK (PyPI `mcp`, under
/// /opt/mcp-python from `start-zabbix.sh all`; `MCP_PYTHON` names another interpreter) and
/// returns the one JSON summary line it prints.
pub fn python_sdk_blocking(script: &str, args: &[&str]) -> serde_json::Value {
    let python =
        std::env::var("MCP_PYTHON").unwrap_or_else(|_| "/opt/mcp-python/bin/python".into());
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/deploy")
        .join(script);
    let out = std::process::Command::new(&python)
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{python} runs ({e}); run deploy/lab/start-zabbix.sh all"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("the summary line")
}

/// One raw `initialize` POST through `http`: the status and the body (JSON, or its text).
/// The caller's identity is resolved before MCP sees it, so this shows how a token fares.
pub async fn raw_initialize(http: &reqwest::Client, url: &str, token: &str) -> (u16, Value) {
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(token)
        .body(
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "identity-test", "version": "1"}}})
            .to_string(),
        )
        .send()
        .await
        .expect("an answer");
    status_and_body(response).await
}

/// An HTTP answer's status and body: JSON, or its text as a JSON string.
pub async fn status_and_body(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// The tool names of a Python SDK script's summary line (its `tools`).
pub fn listed_tools(summary: &serde_json::Value) -> Vec<&str> {
    summary["tools"]
        .as_array()
        .expect("tools in the summary")
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect()
}

/// `python_sdk_blocking` from async tests: the script talks to a sidecar on this runtime.
pub async fn python_sdk(script: &'static str, args: Vec<String>) -> serde_json::Value {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        python_sdk_blocking(script, &args)
    })
    .await
    .unwrap()
}

/// A copy of the shipped policy set in `dir`, to change while a sidecar runs.
pub fn policy_copy(dir: &std::path::Path) -> PathBuf {
    let policies = dir.join("policies");
    std::fs::create_dir_all(&policies).expect("policy dir");
    for file in ["default.rego", "default_test.rego"] {
        let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("policies")
            .join(file);
        std::fs::copy(from, policies.join(file)).expect("policy copied");
    }
    policies
}

/// Revokes `user`'s token in Zabbix and lets it lapse from `guard`'s identity cache now,
/// as it would within the cache's minute.
pub async fn revoke_now(guard: &Guard, lab: &Lab, user: &zapi::TestUser) {
    user.revoke_token(lab).await;
    guard
        .app()
        .callers
        .forget(&zabbix_mcp_guard::zabbix::ApiToken::new(user.token.clone()))
        .await;
}
