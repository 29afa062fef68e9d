//! Connections that go quiet or lose their trust: a relay that stops passing bytes (a path
//! lost without a reset, a hung frontend), a frontend that never finishes the TLS
//! handshake, a CA taken out of `TLSCAFile`. After each, no call is sent on a connection
//! that cannot carry it, and a write is said possibly applied only if it was sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use zabbix_mcp_guard::zabbix::{ClientSettings, Method, ZabbixClient, ZabbixError};

use super::{Keep, Seen, client, plain_front, read, tls_front, write};
use crate::common;

/// A TCP relay to `upstream` (host:port) whose connections can go silent: after
/// [`Relay::go_silent`], the connections it carries then pass nothing either way and stay
/// open (a path lost without a reset: a firewall or NAT that forgot the flow, a frontend
/// host gone), while connections made after it are relayed; what the client still sends on
/// a silent one is read and dropped, and its close counted. Returns the relay's port.
async fn relay(upstream: String) -> (u16, Relay) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (silence, _) = tokio::sync::watch::channel(0u64);
    let relay = Relay {
        silence: Arc::new(silence),
        closed_silent: Arc::default(),
    };
    let (silence, closed_silent) = (relay.silence.clone(), relay.closed_silent.clone());
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let mut silenced = silence.subscribe();
            let made_in = *silenced.borrow();
            let (upstream, closed_silent) = (upstream.clone(), closed_silent.clone());
            tokio::spawn(async move {
                let Ok(mut outbound) = TcpStream::connect(upstream).await else {
                    return;
                };
                let silent = async { silenced.wait_for(|round| *round > made_in).await.is_ok() };
                let went_silent = tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => false,
                    silent = silent => silent,
                };
                if went_silent {
                    // Nothing more goes through; the frontend's end stays open.
                    let mut dropped = [0u8; 4096];
                    while inbound.read(&mut dropped).await.is_ok_and(|n| n > 0) {}
                    closed_silent.fetch_add(1, Ordering::SeqCst);
                    std::future::pending::<()>().await;
                }
            });
        }
    });
    (port, relay)
}

struct Relay {
    silence: Arc<tokio::sync::watch::Sender<u64>>,
    /// Silent connections the client closed.
    closed_silent: Arc<AtomicUsize>,
}

impl Relay {
    /// Every connection relayed so far passes nothing from now on.
    fn go_silent(&self) {
        self.silence.send_modify(|round| *round += 1);
    }

    fn closed_silent(&self) -> usize {
        self.closed_silent.load(Ordering::SeqCst)
    }
}

/// A TLS frontend speaking HTTP/2 behind a [`relay`], and an impatient client of it.
async fn relayed_h2_front(name: &str) -> (ZabbixClient, Relay, Seen) {
    let pki = common::tls::pki(name);
    let (front_url, seen) = tls_front(&pki, &[b"h2"]).await;
    let front_port = front_url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let (port, relay) = relay(format!("127.0.0.1:{front_port}")).await;
    let url = format!("https://localhost:{port}/api_jsonrpc.php");
    (
        impatient_client(&url, Some(pki.ca_file.clone())),
        relay,
        seen,
    )
}

/// A client with a short `Timeout`, trusting `ca_file`.
fn impatient_client(url: &str, ca_file: Option<std::path::PathBuf>) -> ZabbixClient {
    common::init();
    ZabbixClient::new(&ClientSettings {
        api_url: url.to_owned(),
        timeout: Duration::from_secs(1),
        ca_file,
        ignore_cert_errors: false,
        max_response_bytes: 1 << 20,
        max_concurrency: 16,
        max_connection_age: Duration::from_secs(300),
    })
    .unwrap()
}

/// The shared HTTP/2 connection went silent (no reset, no close): the call on it times
/// out, and the calls after it go out on a new connection. Before, every call was sent on
/// the silent connection and timed out, for as long as it stayed open (the kernel gives up
/// on a lost path after about 15 minutes; a frontend that hangs, never).
#[tokio::test]
async fn a_silent_http2_connection_is_left_after_a_timeout() {
    let (client, relay, seen) = relayed_h2_front("connections-silent-h2").await;
    assert_eq!(read(&client).await["method"], "apiinfo.version");
    relay.go_silent();
    let lost = client.call(Method::ApiInfoVersion, &json!({}), None).await;
    assert!(matches!(lost, Err(ZabbixError::Timeout(_))), "{lost:?}");
    for _ in 0..3 {
        let next = client.call(Method::ApiInfoVersion, &json!({}), None).await;
        assert!(next.is_ok(), "the call after the timeout: {next:?}");
    }
    assert_eq!(
        seen.connections(),
        2,
        "one new connection after the timeout"
    );
}

/// Kept-open HTTP/1.1 connections made at the same time as one that went silent are as
/// likely to be dead: after a timeout on one, none is reused. Before, each call after it
/// took the next idle connection and timed out in turn (up to `MAX_IDLE` of them), and a
/// write among them was reported as possibly applied when it had reached nothing.
#[tokio::test]
async fn idle_http1_connections_are_left_after_a_timeout() {
    let (front_url, seen) = plain_front(Keep::Open).await;
    let front = common::host_port(&front_url);
    let (port, relay) = relay(front).await;
    let client = Arc::new(impatient_client(
        &format!("http://127.0.0.1:{port}/api_jsonrpc.php"),
        None,
    ));
    // Three connections open at once, then idle.
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let client = Arc::clone(&client);
            tokio::spawn(async move { read(&client).await })
        })
        .collect();
    for call in calls {
        call.await.unwrap();
    }
    let opened = seen.connections();
    relay.go_silent();
    let lost = client.call(Method::ApiInfoVersion, &json!({}), None).await;
    assert!(matches!(lost, Err(ZabbixError::Timeout(_))), "{lost:?}");
    let next = write(&client).await;
    assert!(next.is_ok(), "the write after the timeout: {next:?}");
    assert_eq!(read(&client).await["method"], "apiinfo.version");
    assert_eq!(
        seen.connections(),
        opened + 1,
        "one new connection after the timeout"
    );
}

/// A CA taken out of `TLSCAFile` is trusted no longer, on the connections made under it
/// too: once the file is loaded again, a kept-open connection (HTTP/2, shared, or HTTP/1.1,
/// idle) is not reused, and the next call connects anew and is refused, as a frontend whose
/// certificate that CA signed must be. Before, the kept connection carried every call for
/// as long as it stayed open (an HTTP/2 one for good), under the CA the operator removed.
#[tokio::test]
async fn a_ca_removed_from_the_ca_file_no_longer_carries_calls() {
    for alpn in [&b"h2"[..], &b"http/1.1"[..]] {
        let (removed, kept) = (
            common::tls::pki("connections-ca-removed"),
            common::tls::pki("connections-ca-kept"),
        );
        let (url, seen) = tls_front(&removed, &[alpn]).await;
        let ca_file = common::temp_path("ca.pem");
        std::fs::write(&ca_file, &removed.ca_pem).unwrap();
        let client = client(&url, Some(ca_file.clone()));
        let watcher = client
            .spawn_trust_watcher(Duration::from_millis(50))
            .unwrap();
        assert_eq!(read(&client).await["method"], "apiinfo.version");
        std::fs::write(&ca_file, &kept.ca_pem).unwrap();
        common::wait_until(
            "the CA file loaded again",
            Duration::from_secs(30),
            async || client.trust_status().is_some_and(|s| s.reloads_ok >= 2),
        )
        .await;
        let refused = client.call(Method::ApiInfoVersion, &json!({}), None).await;
        let error = refused
            .expect_err("the removed CA's certificate")
            .to_string();
        assert!(error.contains("UnknownIssuer"), "{alpn:?}: {error}");
        assert_eq!(seen.requests().len(), 1, "{alpn:?}: {:?}", seen.requests());
        watcher.abort();
    }
}

/// An idle HTTP/2 connection that went silent is found out by its pings (every `Timeout`,
/// unanswered for `Timeout`) and closed, so the next call, a write here, goes out on a new
/// connection at once: reaching the frontend once, answered, not timed out. Before, nothing
/// was sent on an idle connection, and the first call after the silence learnt of it by
/// timing out (the write reported as possibly applied, having reached nothing).
#[tokio::test]
async fn a_silent_idle_http2_connection_is_closed_by_its_pings() {
    let (client, relay, seen) = relayed_h2_front("connections-ping-h2").await;
    assert_eq!(read(&client).await["method"], "apiinfo.version");
    relay.go_silent();
    common::wait_until(
        "the silent connection closed",
        Duration::from_secs(10),
        async || relay.closed_silent() == 1,
    )
    .await;
    let written = write(&client).await;
    assert!(written.is_ok(), "{written:?}");
    assert_eq!(seen.connections(), 2);
    let methods: Vec<String> = seen.requests().into_iter().map(|(_, m)| m).collect();
    assert_eq!(methods, ["apiinfo.version", "event.acknowledge"]);
}

/// A frontend that takes the connection and never answers the TLS handshake (an
/// overloaded host): the call ends at `Timeout` with nothing sent, and says so; a write is
/// not reported as possibly applied. Before, it was `Timeout`, "the write was sent and may
/// have been applied".
#[tokio::test]
async fn a_call_still_connecting_at_its_timeout_was_not_sent() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let pki = common::tls::pki("connections-stalled-tls");
    let client = impatient_client(
        &format!("https://localhost:{port}/api_jsonrpc.php"),
        Some(pki.ca_file.clone()),
    );
    let written = write(&client).await.expect_err("nothing answers");
    assert!(!written.outcome_unknown(), "{written:?}");
    let text = written.to_string();
    assert!(
        text.contains(&format!(
            "connecting to localhost:{port}: no connection within 1s"
        )),
        "{text}"
    );
}

/// An HTTP/2 TLS frontend (`pki`'s certificate) for the lab's plain-HTTP Zabbix: each
/// request is sent on to `lab_url` with its body, `Content-Type` and `Authorization`, and
/// its answer sent back. Returns its port.
async fn h2_front_for_lab(pki: &common::tls::Pki, lab_url: String) -> u16 {
    let mut config = common::tls::server_config(pki);
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let upstream = reqwest::Client::new();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, upstream, lab_url) =
                (acceptor.clone(), upstream.clone(), lab_url.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = service_fn(move |request: hyper::Request<Incoming>| {
                    forward(upstream.clone(), lab_url.clone(), request)
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}

async fn forward(
    upstream: reqwest::Client,
    lab_url: String,
    request: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Box<dyn std::error::Error + Send + Sync>> {
    let mut sent = upstream.post(lab_url);
    for name in [http::header::CONTENT_TYPE, http::header::AUTHORIZATION] {
        if let Some(value) = request.headers().get(&name) {
            sent = sent.header(name, value.clone());
        }
    }
    let body = request.into_body().collect().await?.to_bytes();
    let answer = sent.body(body).send().await?;
    let mut response = hyper::Response::new(Full::new(answer.bytes().await?));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// Through rmcp and the sidecar, against the 7.0 lab behind an HTTP/2 frontend: the
/// connection goes silent, the call on it gets `upstream_timeout`, and the next call is
/// answered on a new connection. Before, the calls after it went on the silent connection
/// and timed out as well.
#[tokio::test]
async fn an_rmcp_call_after_a_silent_http2_connection_is_answered() {
    let lab = common::lab(7);
    let pki = common::tls::pki("silence-lab-h2");
    let front = h2_front_for_lab(&pki, lab.url.clone()).await;
    let (port, relay) = relay(format!("127.0.0.1:{front}")).await;
    let mut config = common::config_for(&format!("https://localhost:{port}/api_jsonrpc.php"));
    config.tls_ca_file = Some(pki.ca_file.clone());
    config.timeout = Duration::from_secs(2);
    let guard = common::start_with(config).await;
    let client = common::client(&guard, &lab.token).await;
    let host_get = || common::read(&client, "host_get", json!({"search": "mcp-web-01"}));
    assert_eq!(host_get().await["count"], 1);
    relay.go_silent();
    let lost = common::tool_error(&client, "host_get", json!({"search": "mcp-web-01"})).await;
    assert_eq!(lost["code"], "upstream_timeout", "{lost}");
    assert_eq!(host_get().await["count"], 1);
    guard.stop().await;
}
