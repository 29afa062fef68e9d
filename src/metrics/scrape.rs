//! Values read at scrape time from counters the app and the server already keep (in-flight
//! calls, open connections and sessions, the decision log writer, the identity and list
//! caches, policy, TLS certificate and Zabbix CA reloads, the last readiness check), so the
//! request path pays nothing extra for them.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::process::Process;
use crate::server::tls::TlsStatus;
use crate::zabbix::TrustStatus;

/// The `Content-Type` of the Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// One scrape's reading of the counters kept elsewhere.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    /// Tool calls and resource reads being served.
    pub in_flight: u64,
    /// Connections open on the MCP listener.
    pub connections_open: u64,
    /// Connections closed at accept because `MaxConnections` were open.
    pub connections_refused: u64,
    /// Stateful MCP sessions open (0 in stateless mode).
    pub sessions_open: u64,
    /// `subscriptions/listen` streams open (protocol 2026-07-28).
    pub listen_streams_open: u64,
    /// Requests inside the MCP gate (answered outside sessions).
    pub mcp_requests_in_progress: u64,
    /// Request-body bytes held now: being received, or waiting for their answer.
    pub request_body_bytes: u64,
    pub decision_log_written: u64,
    pub decision_log_dropped: u64,
    pub decision_log_failed: u64,
    pub identity_cache_hits: u64,
    pub identity_cache_misses: u64,
    /// Unknown tokens not looked up: their address sent too many rejected ones.
    pub identity_lookups_refused: u64,
    pub policy_reloads_ok: u64,
    pub policy_reloads_failed: u64,
    /// Revision of the running policy set; `None`: no set loaded (every call denied).
    pub policy_revision: Option<String>,
    pub list_sets_evaluated: u64,
    pub list_sets_reused: u64,
    /// The served certificate's reloads and expiry (`TLSAccept=cert`; `None`: no TLS).
    pub tls: Option<TlsStatus>,
    /// Reloads of the CAs trusted toward Zabbix (`None`: `http`, or not verified).
    pub zabbix_trust: Option<TrustStatus>,
    /// The process's CPU, memory and descriptors (`None`: no `/proc` to read).
    pub process: Option<Process>,
    /// Whether Zabbix answered the last readiness check (`None`: none ended yet).
    pub zabbix_up: Option<bool>,
    /// Whether the shared store answered it (`None`: memory, or none ended yet).
    pub shared_store_up: Option<bool>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RevisionLabel {
    revision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: &'static str,
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        gauge(
            &mut encoder,
            "calls_in_flight",
            "Tool calls and resource reads being served",
            self.in_flight,
        )?;
        gauge(
            &mut encoder,
            "connections_open",
            "Connections open on the MCP listener",
            self.connections_open,
        )?;
        counter(
            &mut encoder,
            "connections_refused",
            "Connections closed at accept because MaxConnections were open",
            self.connections_refused,
        )?;
        gauge(
            &mut encoder,
            "sessions_open",
            "MCP sessions open (SessionMode=stateful; 0 when stateless)",
            self.sessions_open,
        )?;
        gauge(
            &mut encoder,
            "listen_streams_open",
            "subscriptions/listen streams open (protocol 2026-07-28), capped like sessions",
            self.listen_streams_open,
        )?;
        gauge(
            &mut encoder,
            "mcp_requests_in_progress",
            "MCP requests being answered outside sessions (every stateless request, 2026-07-28 requests when stateful), at most 2 per MaxZabbixConcurrency slot and 32 or more",
            self.mcp_requests_in_progress,
        )?;
        gauge(
            &mut encoder,
            "request_body_bytes",
            "Request-body bytes held now (being received or waiting for their answer); over 64 MiB, new bodies are refused with 503",
            self.request_body_bytes,
        )?;
        counters(
            &mut encoder,
            "decision_log_lines",
            "Decision log lines by result (written, dropped: queue full, failed: write error)",
            &[
                ("written", self.decision_log_written),
                ("dropped", self.decision_log_dropped),
                ("failed", self.decision_log_failed),
            ],
        )?;
        counters(
            &mut encoder,
            "identity_cache_lookups",
            "Caller identity lookups by result (hit: cached, miss: asked Zabbix, refused: not asked, the address sent too many rejected tokens)",
            &[
                ("hit", self.identity_cache_hits),
                ("miss", self.identity_cache_misses),
                ("refused", self.identity_lookups_refused),
            ],
        )?;
        counters(
            &mut encoder,
            "policy_reloads",
            "Policy set loads by result (ok, failed: the running set was kept)",
            &[
                ("ok", self.policy_reloads_ok),
                ("failed", self.policy_reloads_failed),
            ],
        )?;
        counters(
            &mut encoder,
            "list_decision_sets",
            "tools/list decision sets by result (evaluated: policy run, reused: cached)",
            &[
                ("evaluated", self.list_sets_evaluated),
                ("reused", self.list_sets_reused),
            ],
        )?;
        if let Some(tls) = &self.tls {
            counters(
                &mut encoder,
                "tls_certificate_reloads",
                "TLS certificate loads by result (ok, failed: the served one was kept), the first included",
                &[("ok", tls.reloads_ok), ("failed", tls.reloads_failed)],
            )?;
            signed_gauge(
                &mut encoder,
                "tls_certificate_expiry_timestamp_seconds",
                "notAfter of the TLS certificate being served, in seconds since 1970-01-01 UTC",
                tls.not_after,
            )?;
        }
        if let Some(up) = self.zabbix_up {
            gauge(
                &mut encoder,
                "zabbix_up",
                "Whether Zabbix answered apiinfo.version at the last readiness check (every 10 s)",
                u64::from(up),
            )?;
        }
        if let Some(up) = self.shared_store_up {
            gauge(
                &mut encoder,
                "shared_store_up",
                "Whether the shared store (SharedStore=redis://...) answered and took a write at the last readiness check (every 10 s)",
                u64::from(up),
            )?;
        }
        if let Some(trust) = &self.zabbix_trust {
            counters(
                &mut encoder,
                "zabbix_tls_ca_reloads",
                "Loads of the CAs trusted toward Zabbix (TLSCAFile, the system's roots) by result (ok, failed: the trusted ones were kept), the first included",
                &[("ok", trust.reloads_ok), ("failed", trust.reloads_failed)],
            )?;
        }
        encoder
            .encode_descriptor(
                "build",
                "The running binary's version",
                None,
                MetricType::Info,
            )?
            .encode_info(&VersionLabel {
                version: env!("CARGO_PKG_VERSION"),
            })?;
        let mut info = encoder.encode_descriptor(
            "policy",
            "The running policy set's revision (no series: no policy loaded, every call denied)",
            None,
            MetricType::Info,
        )?;
        if let Some(revision) = &self.policy_revision {
            info.encode_info(&RevisionLabel {
                revision: revision.clone(),
            })?;
        }
        Ok(())
    }
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    signed_gauge(
        encoder,
        name,
        help,
        i64::try_from(value).unwrap_or(i64::MAX),
    )
}

fn signed_gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn counters(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: &[(&'static str, u64)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for &(result, value) in values {
        let labels = ResultLabel { result };
        ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// The registered series, then this scrape's values, under the same prefix; then the
/// process's, under their standard names.
pub(super) fn render(registry: &Registry, mut scrape: Scrape) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let mut process = Registry::default();
    if let Some(figures) = scrape.process.take() {
        process.register_collector(Box::new(figures));
    }
    let mut now = Registry::with_prefix(super::PREFIX);
    now.register_collector(Box::new(scrape));
    // Writing into a String cannot fail; the encoders only pass the writer's errors on.
    for registry in [registry, &now, &process] {
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, registry);
    }
    out
}
