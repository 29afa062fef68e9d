//! Network behaviour: TLS inbound (real MCP client, generated CA), TLS toward a TLS front
//! of the real lab (verification on, failing, off), Host/Origin checks (of `/mcp` and of
//! `/readyz` and `/metrics`), graceful shutdown.

mod common;

use std::time::Duration;

use common::{config_for, read, start_with};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use zabbix_mcp_guard::config::{StatusListenerConfig, TlsAccept};

#[tokio::test]
async fn tls_inbound_with_a_real_mcp_client() {
    let lab = common::lab(7);
    let pki = common::tls::pki("inbound");
    let mut config = config_for(&lab.url);
    config.tls_accept = TlsAccept::Cert;
    config.tls_cert_file = Some(pki.cert_file.clone());
    config.tls_key_file = Some(pki.key_file.clone());
    let guard = start_with(config).await;
    let url = guard.url.replace("http://127.0.0.1", "https://localhost");

    let trusting = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pki.ca_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let transport = StreamableHttpClientTransport::with_client(
        trusting,
        StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(lab.token.clone()),
    );
    let client = rmcp::model::ClientConfig::default()
        .serve(transport)
        .await
        .unwrap();
    let env = read(&client, "host_get", json!({"search": "mcp-web-01"})).await;
    assert_eq!(env["count"], 1);

    // A client that does not trust the CA cannot connect.
    let plain = reqwest::Client::new();
    let refused = plain.get(url.replace("/mcp", "/healthz")).send().await;
    assert!(refused.is_err(), "untrusted certificate must fail");
    guard.stop().await;
}

#[tokio::test]
async fn tls_toward_zabbix_verified_failing_and_ignored() {
    let lab = common::lab(7);
    let pki = common::tls::pki("outbound");
    let upstream = common::host_port(&lab.url);
    let port = common::tls::front(&pki, upstream).await.port;
    let https_url = format!("https://localhost:{port}/api_jsonrpc.php");

    // Verified against TLSCAFile.
    let mut config = config_for(&https_url);
    config.tls_ca_file = Some(pki.ca_file.clone());
    let guard = start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    let env = read(&client, "host_get", json!({"search": "mcp-web-01"})).await;
    assert_eq!(env["count"], 1);
    guard.stop().await;

    // Without the CA the handshake fails, and says why.
    let guard = start_with(config_for(&https_url)).await;
    let ready = reqwest::get(format!("{}/readyz", guard.base))
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let body = ready.text().await.unwrap();
    assert!(body.to_lowercase().contains("certificate"), "{body}");
    guard.stop().await;

    // IgnoreURLCertErrors=1 turns verification off.
    let mut config = config_for(&https_url);
    config.ignore_url_cert_errors = true;
    let guard = start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    let env = read(&client, "host_get", json!({"search": "mcp-web-01"})).await;
    assert_eq!(env["count"], 1);
    guard.stop().await;
}

#[tokio::test]
async fn foreign_host_and_origin_get_403() {
    let lab = common::lab(7);
    let mut config = config_for(&lab.url);
    config.allowed_hosts = vec!["mcp.example.com".into()];
    let guard = start_with(config).await;
    common::init();
    let http = reqwest::Client::new();
    let post = |host: &str, origin: Option<&str>| {
        let mut r = http
            .post(&guard.url)
            .header("host", host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {}", lab.token))
            .body(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}})
                .to_string(),
            );
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        r.send()
    };
    assert_eq!(post("evil.example:8443", None).await.unwrap().status(), 403);
    assert_eq!(
        post("127.0.0.1", Some("https://evil.example"))
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(
        post("mcp.example.com:8443", None).await.unwrap().status(),
        200
    );
    assert_eq!(
        post("localhost", Some("http://localhost:6274"))
            .await
            .unwrap()
            .status(),
        200
    );
    guard.stop().await;
}

/// GET `base` + `path` with these `Host` and `Origin` headers (`Host` from the URL without
/// one): its status.
async fn status_of(base: &str, path: &str, host: Option<&str>, origin: Option<&str>) -> u16 {
    let mut request = reqwest::Client::new().get(format!("{base}{path}"));
    if let Some(host) = host {
        request = request.header("host", host);
    }
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.send().await.expect("an answer").status().as_u16()
}

/// `/readyz` and `/metrics` answer only to our own names, as `/mcp` does (a DNS-rebinding
/// page could read them from a browser on an allowed address), on the MCP listener and on
/// the status listener; `/healthz` answers any probe. A probe that names the address it
/// connected to (the kubelet sends `Host: <pod IP>:<port>`) is answered by a sidecar
/// listening on 0.0.0.0, which has no address of its own in the list.
#[tokio::test]
async fn readyz_and_metrics_answer_only_to_our_names() {
    let lab = common::lab(7);
    let mut config = config_for(&lab.url);
    config.listen_ip = vec!["0.0.0.0".parse().unwrap()];
    config.allowed_ip = vec!["127.0.0.0/8".parse().unwrap()];
    config.allowed_ip_raw = "127.0.0.0/8".to_owned();
    let guard = start_with(config).await;
    let port = guard.base.rsplit(':').next().unwrap().to_owned();
    let (loopback, other) = (
        format!("http://127.0.0.1:{port}"),
        format!("http://127.0.0.2:{port}"),
    );
    let evil = format!("evil.example:{port}");
    for path in ["/readyz", "/metrics"] {
        assert_eq!(status_of(&loopback, path, None, None).await, 200, "{path}");
        assert_eq!(
            status_of(&loopback, path, Some(&evil), None).await,
            403,
            "{path}"
        );
        let origin = Some("http://evil.example");
        assert_eq!(
            status_of(&loopback, path, None, origin).await,
            403,
            "{path}"
        );
        // Host: the address the connection came in on, as a probe by pod IP sends.
        assert_eq!(status_of(&other, path, None, None).await, 200, "{path}");
        let elsewhere = format!("127.0.0.3:{port}");
        assert_eq!(
            status_of(&other, path, Some(&elsewhere), None).await,
            403,
            "{path}"
        );
    }
    assert_eq!(
        status_of(&loopback, "/healthz", Some(&evil), None).await,
        200
    );
    guard.stop().await;

    let mut config = config_for(&lab.url);
    config.status_listener = Some(StatusListenerConfig {
        listen_ip: vec!["127.0.0.1".parse().unwrap()],
        listen_port: 0,
    });
    let guard = start_with(config).await;
    let status = format!("http://{}", guard.status_addrs()[0]);
    for path in ["/readyz", "/metrics"] {
        assert_eq!(status_of(&status, path, None, None).await, 200, "{path}");
        let host = Some("evil.example");
        assert_eq!(status_of(&status, path, host, None).await, 403, "{path}");
    }
    assert_eq!(
        status_of(&status, "/healthz", Some("evil.example"), None).await,
        200
    );
    guard.stop().await;
}

#[tokio::test]
async fn shutdown_lets_a_call_in_flight_finish() {
    let (stub_url, stub) = common::stub::start(Duration::from_millis(1500)).await;
    let guard = start_with(config_for(&stub_url)).await;
    let client = common::client(&guard, "stub-token").await;
    let base = guard.base.clone();
    let call = tokio::spawn(async move { common::call(&client, "host_get", json!({})).await });
    // Wait until the call is at Zabbix, then shut down.
    for _ in 0..100 {
        if stub.calls.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stopping = tokio::spawn(guard.stop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    // No new connections once shutdown began.
    assert!(reqwest::get(format!("{base}/healthz")).await.is_err());
    let result = call.await.unwrap();
    assert_ne!(
        result.is_error,
        Some(true),
        "{:?}",
        result.structured_content
    );
    assert_eq!(result.structured_content.unwrap()["count"], 1);
    stopping.await.unwrap();
}

#[tokio::test]
async fn stateful_shutdown_does_not_wait_for_idle_sessions() {
    let lab = common::lab(7);
    let mut config = config_for(&lab.url);
    config.session_mode = zabbix_mcp_guard::config::SessionMode::Stateful;
    let guard = start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    read(&client, "host_get", json!({"limit": 1})).await;
    // The client keeps its session (and its stream) open while the server stops.
    let started = std::time::Instant::now();
    guard.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "shutdown waited {:?} for an idle session",
        started.elapsed()
    );
    drop(client);
}

/// A sidecar listening on `::` takes IPv4 clients as IPv4-mapped IPv6 peers; the policy,
/// the decision log and `AllowedIP` see them as the IPv4 address they are. Before, a rule
/// on `input.client.address == "127.0.0.1"` (or a CIDR of IPv4) did not match them.
#[tokio::test]
async fn a_dual_stack_listener_tells_the_policy_the_ipv4_address() {
    let lab = common::lab(7);
    let mut config = config_for(&lab.url);
    config.listen_ip = vec!["::".parse().unwrap()];
    config.allowed_ip = vec!["127.0.0.0/8".parse().unwrap()];
    config.allowed_ip_raw = "127.0.0.0/8".to_owned();
    let zabbix_mcp_guard::config::DecisionLogSink::File(log) = config.decision_log.clone() else {
        panic!("config_for logs to a file");
    };
    let mut guard = start_with(config).await;
    let port = guard.base.rsplit(':').next().unwrap().to_owned();
    guard.url = format!("http://127.0.0.1:{port}/mcp");
    let client = common::client(&guard, &lab.token).await;
    read(&client, "hostgroup_get", json!({"limit": 1})).await;
    let lines = common::decision_log_lines(&log);
    let addresses: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["input"]["client"]["address"].as_str())
        .collect();
    assert!(!addresses.is_empty(), "{lines:?}");
    assert!(addresses.iter().all(|a| *a == "127.0.0.1"), "{addresses:?}");
    client.cancel().await.ok();
    guard.stop().await;
}

/// An `AllowedIP` entry in the IPv4-mapped form admits the IPv4 peer it names; before, it
/// admitted no one (peers are compared as IPv4), and `-T` took it silently.
#[tokio::test]
async fn an_allowed_ip_in_the_mapped_form_admits_its_ipv4_peer() {
    let lab = common::lab(7);
    let mut config = config_for(&lab.url);
    config.listen_ip = vec!["::".parse().unwrap()];
    config.allowed_ip = vec!["::ffff:127.0.0.1/128".parse().unwrap()];
    config.allowed_ip_raw = "::ffff:127.0.0.1".to_owned();
    let mut guard = start_with(config).await;
    let port = guard.base.rsplit(':').next().unwrap().to_owned();
    guard.url = format!("http://127.0.0.1:{port}/mcp");
    let client = common::client(&guard, &lab.token).await;
    read(&client, "hostgroup_get", json!({"limit": 1})).await;
    client.cancel().await.ok();
    guard.stop().await;
}
