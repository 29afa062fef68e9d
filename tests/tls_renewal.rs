//! A renewed TLS certificate is served without a restart: the watcher takes a new pair
//! once its files stay unchanged, SIGHUP takes it at once, and a pair that does not load
//! (a key that is not the certificate's) leaves the served one in place. Real clients
//! check which certificate they get by trusting one test CA at a time: rmcp's, and the
//! official MCP Python SDK's.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::tls::{Pki, pki};
use common::{config_for, read, start_with};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use zabbix_mcp_guard::config::TlsAccept;

/// Long enough for two polls of the watcher (every 2 s) and a slow machine.
const RELOADED: Duration = Duration::from_secs(30);

/// The files the sidecar serves from, laid out and replaced as the kubelet does it for a
/// Secret volume: `tls.crt` and `tls.key` are links into `..data`, a link to the current
/// version's directory, and a renewal renames a new `..data` link over the old one, so a
/// reader sees the old pair or the new one, never one file of each.
struct Served {
    dir: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    versions: std::cell::Cell<u32>,
}

impl Served {
    fn new(name: &str, from: &Pki) -> Served {
        let dir = common::scratch_dir(name);
        let served = Served {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            dir,
            versions: std::cell::Cell::new(0),
        };
        served.install(from);
        for file in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{file}"), served.dir.join(file)).unwrap();
        }
        served
    }

    fn install(&self, from: &Pki) {
        let version = format!("..v{}", self.versions.get());
        self.versions.set(self.versions.get() + 1);
        std::fs::create_dir(self.dir.join(&version)).unwrap();
        std::fs::copy(&from.cert_file, self.dir.join(&version).join("tls.crt")).unwrap();
        std::fs::copy(&from.key_file, self.dir.join(&version).join("tls.key")).unwrap();
        let next = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&version, &next).unwrap();
        std::fs::rename(&next, self.dir.join("..data")).unwrap();
    }
}

/// An HTTPS client trusting only `ca`'s certificates.
fn trusting(ca: &Pki) -> reqwest::Client {
    common::init();
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.ca_pem.as_bytes()).unwrap())
        .build()
        .unwrap()
}

/// Whether a new connection trusting only `ca` gets through the handshake to an answer
/// (any status: the approval page's root is not a page).
async fn accepted(ca: &Pki, base: &str) -> bool {
    trusting(ca)
        .get(format!("{base}/healthz"))
        .send()
        .await
        .is_ok()
}

async fn metrics(ca: &Pki, base: &str) -> common::metrics::Scraped {
    let text = trusting(ca)
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    common::metrics::parse(&text)
}

#[tokio::test]
async fn a_renewed_certificate_is_served_without_a_restart() {
    let lab = common::lab(7);
    let (old, new) = (pki("renewal-old"), pki("renewal-new"));
    let served = Served::new("renewal-served", &old);
    let mut config = config_for(&lab.url);
    config.tls_accept = TlsAccept::Cert;
    config.tls_cert_file = Some(served.cert.clone());
    config.tls_key_file = Some(served.key.clone());
    // The approval page's listener serves the same certificate.
    let page_port = common::free_port();
    let page = format!("https://localhost:{page_port}");
    config.approval_page = Some(zabbix_mcp_guard::config::ApprovalPageConfig {
        listen_ip: vec!["127.0.0.1".parse().unwrap()],
        listen_port: page_port,
        allowed_ip: vec!["127.0.0.1/32".parse().unwrap()],
        allowed_ip_raw: "127.0.0.1".into(),
        url: page.clone(),
    });
    let guard = start_with(config).await;
    let base = guard.base.replace("http://127.0.0.1", "https://localhost");
    let url = format!("{base}/mcp");
    for listener in [&base, &page] {
        assert!(accepted(&old, listener).await, "{listener}");
        assert!(!accepted(&new, listener).await, "{listener}");
    }
    let before = metrics(&old, &base).await;
    assert_eq!(
        before.get("tls_certificate_reloads_total{result=\"ok\"}"),
        1.0
    );

    // An MCP client connected before the renewal.
    let transport = StreamableHttpClientTransport::with_client(
        trusting(&old),
        StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(lab.token.clone()),
    );
    let client = rmcp::model::ClientConfig::default()
        .serve(transport)
        .await
        .unwrap();
    assert_eq!(
        read(&client, "host_get", json!({"search": "mcp-web-01"})).await["count"],
        1
    );

    served.install(&new);
    common::wait_until("the renewed certificate", RELOADED, async || {
        accepted(&new, &base).await
    })
    .await;
    assert!(
        !accepted(&old, &base).await,
        "new connections get the new certificate"
    );
    // The connection made before keeps its session and its calls.
    assert_eq!(
        read(&client, "host_get", json!({"search": "mcp-web-01"})).await["count"],
        1
    );
    let _ = client.cancel().await;

    // The official Python SDK, trusting only the new CA, calls a tool over the new pair.
    let seen = common::python_sdk(
        "tls_python.py",
        vec![url.clone(), lab.token.clone(), path(&new.ca_file)],
    )
    .await;
    assert_eq!(seen["is_error"], false, "{seen}");
    assert_eq!(seen["count"], 1, "{seen}");

    // A key that is not the certificate's, copied over the served one in place: refused,
    // the renewed pair stays served.
    std::fs::copy(&old.key_file, &served.key).unwrap();
    let refused = common::eventually("the mismatched key refused", RELOADED, async || {
        let scraped = metrics(&new, &base).await;
        (scraped.get("tls_certificate_reloads_total{result=\"failed\"}") == 1.0).then_some(scraped)
    })
    .await;
    assert_eq!(
        refused.get("tls_certificate_reloads_total{result=\"ok\"}"),
        2.0
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(refused.get("tls_certificate_expiry_timestamp_seconds") > now);
    assert!(accepted(&new, &base).await, "the served pair is kept");
    guard.stop().await;
}

fn path(file: &Path) -> String {
    file.display().to_string()
}

/// The released binary: SIGHUP loads the new pair at once (the watcher would too, later),
/// and says so in its log with the new certificate's SHA-256.
#[test]
fn sighup_loads_a_renewed_certificate() {
    let lab = common::lab(7);
    let (old, new) = (pki("sighup-old"), pki("sighup-new"));
    let served = Served::new("sighup-served", &old);
    let dir = common::scratch_dir("sighup");
    let log = dir.join("guard.log");
    let port = common::free_port();
    let mut child = common::binary(&lab.url, port, &log)
        .args(["--tls-accept", "cert"])
        .arg("--tls-cert-file")
        .arg(&served.cert)
        .arg("--tls-key-file")
        .arg(&served.key)
        .arg("--decision-log")
        .arg(dir.join("decisions.log"))
        .spawn()
        .unwrap();
    let base = format!("https://localhost:{port}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let logged = |text: &str| {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(text)
    };
    common::wait_until_blocking("the sidecar to serve", Duration::from_secs(20), || {
        runtime.block_on(accepted(&old, &base))
    });
    assert!(logged("TLS certificate loaded"));

    served.install(&new);
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    common::wait_until_blocking("the new certificate after SIGHUP", RELOADED, || {
        runtime.block_on(accepted(&new, &base))
    });
    assert!(logged("SIGHUP: reloading the TLS certificate"));
    assert!(
        logged("SIGHUP: reloading policies"),
        "one signal reloads both"
    );
    let status = common::terminate(&mut child).expect("SIGTERM and exit");
    assert!(status.success(), "{status}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("TLS certificate loaded").count(), 2, "{text}");
    assert!(!text.contains("BEGIN"), "no key or certificate in the log");
}
