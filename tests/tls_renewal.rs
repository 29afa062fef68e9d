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

/// Files laid out and replaced as the kubelet does it for a Secret or ConfigMap volume:
/// each file is a link into `..data`, a link to the current version's directory, and an
/// update renames a new `..data` link over the old one, so a reader sees the old files or
/// the new ones, never some of each.
struct Volume {
    dir: PathBuf,
    versions: std::cell::Cell<u32>,
}

impl Volume {
    fn new(name: &str, files: &[(&str, Vec<u8>)]) -> Volume {
        let volume = Volume {
            dir: common::scratch_dir(name),
            versions: std::cell::Cell::new(0),
        };
        volume.install(files);
        for (file, _) in files {
            std::os::unix::fs::symlink(format!("..data/{file}"), volume.path(file)).unwrap();
        }
        volume
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    fn install(&self, files: &[(&str, Vec<u8>)]) {
        let version = format!("..v{}", self.versions.get());
        self.versions.set(self.versions.get() + 1);
        std::fs::create_dir(self.dir.join(&version)).unwrap();
        for (file, bytes) in files {
            std::fs::write(self.dir.join(&version).join(file), bytes).unwrap();
        }
        let next = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&version, &next).unwrap();
        std::fs::rename(&next, self.dir.join("..data")).unwrap();
    }
}

/// `pki`'s certificate and key as a `kubernetes.io/tls` Secret names them.
fn tls_secret(pki: &Pki) -> [(&'static str, Vec<u8>); 2] {
    [
        ("tls.crt", std::fs::read(&pki.cert_file).unwrap()),
        ("tls.key", std::fs::read(&pki.key_file).unwrap()),
    ]
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
    let served = Volume::new("renewal-served", &tls_secret(&old));
    let mut config = config_for(&lab.url);
    config.tls_accept = TlsAccept::Cert;
    config.tls_cert_file = Some(served.path("tls.crt"));
    config.tls_key_file = Some(served.path("tls.key"));
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

    served.install(&tls_secret(&new));
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
    std::fs::copy(&old.key_file, served.path("tls.key")).unwrap();
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

/// Toward Zabbix: the frontend's certificate is re-issued by a new CA, which a rotation
/// adds to `TLSCAFile` (a ConfigMap volume, as cert-manager's trust-manager keeps one).
/// Calls fail until then, and go through after it without a restart; a bundle that does
/// not load leaves the CAs trusted until then in place.
#[tokio::test]
async fn a_new_zabbix_ca_is_trusted_without_a_restart() {
    let lab = common::lab(7);
    let (old, new) = (pki("trust-old"), pki("trust-new"));
    let upstream = common::host_port(&lab.url);
    let front = common::tls::front(&old, upstream).await;
    let bundle = Volume::new("trust-bundle", &[("ca.crt", old.ca_pem.clone().into())]);
    let mut config = config_for(&format!("https://localhost:{}/api_jsonrpc.php", front.port));
    config.tls_ca_file = Some(bundle.path("ca.crt"));
    let guard = start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    let host_get = || read(&client, "host_get", json!({"search": "mcp-web-01"}));
    assert_eq!(host_get().await["count"], 1);
    let scrape = || common::metrics::scrape(&guard.base);
    let reloads = |scraped: &common::metrics::Scraped, result: &str| {
        scraped.get(&format!(
            "zabbix_tls_ca_reloads_total{{result=\"{result}\"}}"
        ))
    };
    assert_eq!(reloads(&scrape().await, "ok"), 1.0);

    // The frontend's certificate re-issued by a CA not trusted yet: calls fail, saying why,
    // to rmcp and to the official Python SDK alike.
    front.serve(&new);
    let refused = common::tool_error(&client, "host_get", json!({"search": "mcp-web-01"})).await;
    assert_eq!(refused["code"], "upstream_unavailable", "{refused}");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(message.contains("UnknownIssuer"), "{refused}");
    let python = common::python_sdk(
        "tls_python.py",
        vec![guard.url.clone(), lab.token.clone(), path(&new.ca_file)],
    )
    .await;
    assert_eq!(python["is_error"], true, "{python}");
    assert_eq!(python["code"], "upstream_unavailable", "{python}");

    // The rotation adds the new CA to the bundle.
    let both = format!("{}{}", old.ca_pem, new.ca_pem);
    bundle.install(&[("ca.crt", both.into())]);
    common::wait_until("calls through the new CA", RELOADED, async || {
        let result = client
            .call_tool(
                rmcp::model::CallToolRequestParams::new("host_get")
                    .with_arguments(json!({"search": "mcp-web-01"}).as_object().unwrap().clone()),
            )
            .await;
        result.is_ok_and(|r| r.is_error != Some(true))
    })
    .await;
    assert_eq!(host_get().await["count"], 1);
    let python = common::python_sdk(
        "tls_python.py",
        vec![guard.url.clone(), lab.token.clone(), path(&new.ca_file)],
    )
    .await;
    assert_eq!(python["is_error"], false, "{python}");
    assert_eq!(python["count"], 1, "{python}");

    // A bundle that does not load keeps the CAs trusted until then.
    bundle.install(&[("ca.crt", b"-----BEGIN CERTIFICATE-----\n".to_vec())]);
    let failed = common::eventually("the broken bundle refused", RELOADED, async || {
        let scraped = scrape().await;
        (reloads(&scraped, "failed") == 1.0).then_some(scraped)
    })
    .await;
    assert_eq!(reloads(&failed, "ok"), 2.0);
    assert_eq!(host_get().await["count"], 1);
    let _ = client.cancel().await;
    guard.stop().await;
}

fn path(file: &Path) -> String {
    file.display().to_string()
}

/// The released binary: SIGHUP loads the new pair at once (the watcher would too, later),
/// and says so in its log with the new certificate's SHA-256; the same signal loads the
/// CAs trusted toward Zabbix again.
#[test]
fn sighup_loads_a_renewed_certificate() {
    let lab = common::lab(7);
    let (old, new) = (pki("sighup-old"), pki("sighup-new"));
    let served = Volume::new("sighup-served", &tls_secret(&old));
    let dir = common::scratch_dir("sighup");
    let log = dir.join("guard.log");
    let port = common::free_port();
    // A multi-threaded runtime: the TLS front toward Zabbix runs while the test waits.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let upstream = common::host_port(&lab.url);
    let front = runtime.block_on(common::tls::front(&old, upstream));
    let frontend = format!("https://localhost:{}", front.port);
    let mut child = common::binary(&frontend, port, &log)
        .arg("--tls-ca-file")
        .arg(&old.ca_file)
        .args(["--tls-accept", "cert"])
        .arg("--tls-cert-file")
        .arg(served.path("tls.crt"))
        .arg("--tls-key-file")
        .arg(served.path("tls.key"))
        .arg("--decision-log")
        .arg(dir.join("decisions.log"))
        .spawn()
        .unwrap();
    let base = format!("https://localhost:{port}");
    let logged = |text: &str| {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(text)
    };
    common::wait_until_blocking("the sidecar to serve", Duration::from_secs(20), || {
        runtime.block_on(accepted(&old, &base))
    });
    assert!(logged("TLS certificate loaded"));

    served.install(&tls_secret(&new));
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
        "one signal reloads all three"
    );
    common::wait_until_blocking("the Zabbix CAs loaded again", RELOADED, || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .matches("Zabbix TLS CA file loaded")
            .count()
            == 2
    });
    assert!(logged("SIGHUP: reloading the Zabbix TLS CAs"));
    let status = common::terminate(&mut child).expect("SIGTERM and exit");
    assert!(status.success(), "{status}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("TLS certificate loaded").count(), 2, "{text}");
    assert!(!text.contains("BEGIN"), "no key or certificate in the log");
}
