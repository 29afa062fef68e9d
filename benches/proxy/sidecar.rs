//! The sidecar under test, in this process: started on a free loopback port with a chosen
//! policy directory and decision log, and the `host.get` body it sends for the benchmark's
//! `host_get` call, built by its own catalog and client code.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http::Uri;
use serde_json::Value;
use zabbix_mcp_guard::app::App;
use zabbix_mcp_guard::catalog;
use zabbix_mcp_guard::config::{Config, DecisionLogSink};
use zabbix_mcp_guard::policy::{self, DecisionLog};
use zabbix_mcp_guard::server::Server;
use zabbix_mcp_guard::zabbix::{Method, ZabbixVersion};

use crate::client::TOOL_ARGS;

pub struct Sidecar {
    pub app: Arc<App>,
    pub server: Server,
}

/// Where a sidecar's decision log goes.
pub enum LogTo {
    /// A sink the configuration can name: stdout or a file.
    Config(DecisionLogSink),
    /// Nowhere: the policy module's `Discard` sink, which the configuration cannot name,
    /// put into the app before the server starts. No line is serialized or written.
    Discard,
}

impl Sidecar {
    pub fn mcp_uri(&self) -> Uri {
        format!("http://{}/mcp", self.server.local_addrs()[0])
            .parse()
            .expect("MCP URI")
    }
}

/// A sidecar with the default configuration, the shipped policy set and the benchmark's
/// decision log (see [`decision_log_sink`]).
pub async fn start_sidecar(frontend_url: &str) -> Option<Sidecar> {
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    start_sidecar_with(frontend_url, policies, LogTo::Config(decision_log_sink())).await
}

/// A sidecar with the default configuration but `policy_dir` and `log`.
pub async fn start_sidecar_with(
    frontend_url: &str,
    policy_dir: PathBuf,
    log: LogTo,
) -> Option<Sidecar> {
    let mut config = match Config::new(frontend_url, "127.0.0.1") {
        Ok(config) => config,
        Err(error) => {
            println!("  skipped: sidecar configuration error: {error}");
            return None;
        }
    };
    config.listen_ip = vec!["127.0.0.1".parse().expect("ip")];
    config.listen_port = 0;
    config.policy_dir = Some(policy_dir);
    config.decision_log = match &log {
        LogTo::Config(sink) => sink.clone(),
        // Opens nothing; replaced below.
        LogTo::Discard => DecisionLogSink::Stdout,
    };
    let mut app = match App::new(config) {
        Ok(app) => app,
        Err(error) => {
            println!("  skipped: sidecar cannot start: {error}");
            return None;
        }
    };
    if let LogTo::Discard = log {
        let Some(only) = Arc::get_mut(&mut app) else {
            println!("  skipped: the new app is shared; cannot replace its decision log");
            return None;
        };
        only.decisions =
            DecisionLog::open(policy::DecisionLogSink::Discard).expect("discard sink opens");
    }
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
pub fn decision_log_sink() -> DecisionLogSink {
    match std::env::var("BENCH_DECISION_LOG") {
        Ok(v) if v == "stdout" => DecisionLogSink::Stdout,
        Ok(v) if !v.is_empty() => DecisionLogSink::File(PathBuf::from(v)),
        _ => DecisionLogSink::File(default_decision_log()),
    }
}

pub fn default_decision_log() -> PathBuf {
    std::env::temp_dir().join(format!(
        "zabbix-mcp-guard-bench-{}.decisions.log",
        std::process::id()
    ))
}

/// The host.get request the sidecar sends for `host_get` with [`TOOL_ARGS`], built by the
/// sidecar's own catalog and client code.
pub fn host_get_body(app: &App, version: ZabbixVersion) -> Bytes {
    let tool = catalog::find("host_get").expect("host_get in the catalog");
    let query = tool.query().expect("host_get is a read tool");
    let raw: Value = serde_json::from_str(TOOL_ARGS).expect("tool arguments");
    let now = zabbix_mcp_guard::mcp::tools::unix_now();
    let args =
        catalog::args::validate(tool, raw.as_object(), version, now).expect("valid arguments");
    catalog::args::enforce_limits(tool, &args, &catalog::args::Limits::default(), now)
        .expect("within limits");
    let params = catalog::params::read_params(tool, query, &args, version).expect("params");
    app.zabbix
        .payload_text(Method::HostGet, params)
        .expect("payload")
        .body
}
