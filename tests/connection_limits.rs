//! Issue 12, connections: a raw TCP client that stalls at each stage (TLS handshake,
//! HTTP/1-or-2 detection, request head, body, keep-alive gap) or trickles its head or body
//! is closed by the sidecar within its limit, and connections beyond `MaxConnections` are
//! refused; on the MCP listener and on the approval page's. Each test waits for the close
//! itself; the only bound is a generous one that turns a hang into a failure.

mod common;

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zabbix_mcp_guard::config::{ApprovalPageConfig, Config, TlsAccept};

use common::{Guard, start_with};

/// Far above every limit set below: reaching it means the sidecar never closed.
const GENEROUS: Duration = Duration::from_secs(60);

async fn guard_with(adjust: impl FnOnce(&mut Config)) -> Guard {
    let (url, _stub) = common::stub::start(Duration::ZERO).await;
    let mut config = common::config_for(&url);
    config.limits.tls_handshake = Duration::from_secs(1);
    config.limits.header = Duration::from_secs(1);
    config.limits.body = Duration::from_secs(1);
    config.limits.idle = Duration::from_secs(1);
    adjust(&mut config);
    start_with(config).await
}

fn addr(guard: &Guard) -> String {
    guard.base.trim_start_matches("http://").to_owned()
}

/// Reads until the server closes (EOF or reset); returns what it sent before.
async fn until_closed(stream: &mut (impl AsyncRead + Unpin)) -> Vec<u8> {
    let mut seen = Vec::new();
    let read_all = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(GENEROUS, read_all)
        .await
        .expect("the sidecar closed the stalled connection");
    seen
}

async fn stalled_after(guard: &Guard, bytes: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr(guard)).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    until_closed(&mut stream).await
}

#[tokio::test]
async fn a_client_that_stalls_at_any_stage_is_closed() {
    let guard = guard_with(|_| {}).await;
    // Nothing at all: the HTTP/1-or-2 detection is under the header timeout.
    assert!(stalled_after(&guard, b"").await.is_empty());
    // Half the HTTP/2 preface: still detecting.
    assert!(
        stalled_after(&guard, b"PRI * HTTP/2.0\r\n")
            .await
            .is_empty()
    );
    // A full HTTP/2 preface and then silence: no stream is ever opened.
    stalled_after(&guard, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await;
    // Half an HTTP/1 request head.
    assert!(
        stalled_after(&guard, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .is_empty()
    );
    // A complete request, then an idle keep-alive connection.
    let answer = stalled_after(
        &guard,
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
    // A body that never arrives: 408, then the connection closes.
    let answer = stalled_after(
        &guard,
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer slow-body\r\n\
          Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
          Content-Length: 100\r\n\r\n{\"jsonrpc\":",
    )
    .await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("BodyTimeout"), "{text}");
    guard.stop().await;
}

/// An HTTP/2 connection with prior knowledge (h2c) to `addr`, driven by a task of its own.
async fn h2c<B>(
    addr: &str,
) -> (
    hyper::client::conn::http2::SendRequest<B>,
    tokio::task::JoinHandle<hyper::Result<()>>,
)
where
    B: hyper::body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = TcpStream::connect(addr).await.unwrap();
    let (sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    (sender, tokio::spawn(connection))
}

/// Opens an HTTP/2 connection to `addr`, answers one `GET path`, then keeps its side open
/// until the sidecar closes the idle connection.
async fn idle_http2_closed(addr: &str, path: &str) {
    let (mut sender, connection) = h2c::<http_body_util::Empty<bytes::Bytes>>(addr).await;
    let request = http::Request::get(format!("http://{addr}{path}"))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200, "{addr}{path}");
    drop(response);
    tokio::time::timeout(GENEROUS, connection)
        .await
        .expect("the sidecar closed the idle HTTP/2 connection")
        .unwrap()
        .ok();
    drop(sender);
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed() {
    let (guard, page) = guard_with_page(|_| {}).await;
    idle_http2_closed(&addr(&guard), "/healthz").await;
    idle_http2_closed(&page, "/approvals/login").await;
    guard.stop().await;
}

/// A peer that opens streams but never lets the answers through (HTTP/2 stream window 0,
/// PINGs answered) holds each response in memory; the connection makes no progress, so
/// it is closed after `IdleTimeout` like an idle one, and what it held is freed. Before,
/// its answers counted as requests in flight and the connection stayed open for good.
#[tokio::test]
async fn a_peer_that_takes_no_answer_is_closed() {
    let guard = guard_with(|_| {}).await;
    let stream = TcpStream::connect(addr(&guard)).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(0)
            .handshake::<_, http_body_util::Empty<bytes::Bytes>>(hyper_util::rt::TokioIo::new(
                stream,
            ))
            .await
            .unwrap();
    let connection = tokio::spawn(connection);
    let mut held = Vec::new();
    for _ in 0..20 {
        let request = http::Request::get(format!("{}/healthz", guard.base))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        // The head arrives (not flow-controlled); the body cannot, and is never read.
        held.push(response);
    }
    tokio::time::timeout(GENEROUS, connection)
        .await
        .expect("the sidecar closed the connection that took no answer")
        .unwrap()
        .ok();
    drop(held);
    guard.stop().await;
}

/// A call that runs longer than `IdleTimeout` (Zabbix answering in 2 s, the timeout 1 s)
/// is in flight, not idle: it completes on its connection.
#[tokio::test]
async fn a_call_longer_than_the_idle_timeout_completes() {
    let (url, _stub) = common::stub::start(Duration::from_secs(2)).await;
    let mut config = common::config_for(&url);
    config.limits.idle = Duration::from_secs(1);
    let guard = start_with(config).await;
    let client = common::client(&guard, "slow-zabbix").await;
    let result = common::call(&client, "host_get", serde_json::json!({"limit": 1})).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    guard.stop().await;
}

/// On HTTP/2 the `:authority` and a `Host` header both name the server: each must be
/// allowed, so DNS-rebinding protection cannot be passed with one while the other names
/// another server.
#[tokio::test]
async fn http2_authority_and_host_must_both_be_allowed() {
    let guard = guard_with(|_| {}).await;
    let addr = addr(&guard);
    let (mut sender, _connection) = h2c::<http_body_util::Empty<bytes::Bytes>>(&addr).await;
    for (authority, host, status) in [
        (addr.as_str(), None, 401),
        (addr.as_str(), Some("localhost"), 401),
        (addr.as_str(), Some("evil.example"), 403),
        ("evil.example:80", Some(addr.as_str()), 403),
    ] {
        let mut request = http::Request::post(format!("http://{authority}/mcp"))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        if let Some(host) = host {
            request.headers_mut().insert("host", host.parse().unwrap());
        }
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(
            response.status(),
            status,
            ":authority {authority}, Host {host:?}"
        );
    }
    guard.stop().await;
}

#[tokio::test]
async fn a_stalled_tls_handshake_is_closed() {
    let pki = common::tls::pki("conn-limits");
    let (guard, page) = guard_with_page(|c| {
        c.tls_accept = TlsAccept::Cert;
        c.tls_cert_file = Some(pki.cert_file.clone());
        c.tls_key_file = Some(pki.key_file.clone());
    })
    .await;
    for listener in [addr(&guard), page] {
        for sent in [&b""[..], &[0x16, 0x03, 0x01]] {
            // Nothing, or half a ClientHello record header.
            let mut stream = TcpStream::connect(&listener).await.unwrap();
            stream.write_all(sent).await.unwrap();
            assert!(until_closed(&mut stream).await.is_empty(), "{listener}");
        }
    }
    guard.stop().await;
}

#[tokio::test]
async fn connections_beyond_max_connections_are_refused() {
    let guard = guard_with(|c| {
        c.limits.max_connections = 2;
        // Long enough that the two holders keep their slots while the third knocks.
        c.limits.header = Duration::from_secs(30);
    })
    .await;
    let first = TcpStream::connect(addr(&guard)).await.unwrap();
    let second = TcpStream::connect(addr(&guard)).await.unwrap();
    // The two above were accepted once a third one is refused: wait for that refusal.
    let app = guard.app().clone();
    common::wait_until("a third connection refused", GENEROUS, async || {
        let mut third = TcpStream::connect(addr(&guard)).await.unwrap();
        let _ = third
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await;
        until_closed(&mut third).await.is_empty()
    })
    .await;
    assert!(
        app.refused_connections
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );
    // Freed slots serve again.
    drop(first);
    drop(second);
    let http = reqwest::Client::new();
    common::wait_until("the sidecar serves again", GENEROUS, async || {
        http.get(format!("{}/healthz", guard.base))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
    })
    .await;
    guard.stop().await;
}

// ---------------------------------------------------------------------------------------
// The approval page's listener has the same limits (its own MaxConnections pool).

/// A sidecar with the approval page on a port of its own; returns it and the page's address.
async fn guard_with_page(adjust: impl FnOnce(&mut Config)) -> (Guard, String) {
    let port = common::free_port();
    let guard = guard_with(|c| {
        c.approval_page = Some(ApprovalPageConfig {
            listen_ip: vec!["127.0.0.1".parse().unwrap()],
            listen_port: port,
            allowed_ip: vec!["127.0.0.1/32".parse().unwrap()],
            allowed_ip_raw: "127.0.0.1".into(),
            url: format!("http://127.0.0.1:{port}"),
        });
        adjust(c);
    })
    .await;
    (guard, format!("127.0.0.1:{port}"))
}

/// Sends `head`, then one byte of `trickle` every 200 ms (a byte arrives well inside every
/// limit, the whole never does) until the server closes; returns what it answered.
async fn trickled(addr: &str, head: &[u8], trickle: &'static [u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let drip = tokio::spawn(async move {
        // Pacing of the slow client, not a wait for a condition.
        let mut ticker = tokio::time::interval(Duration::from_millis(200));
        ticker.tick().await;
        for byte in trickle.iter().cycle() {
            ticker.tick().await;
            if writer.write_all(&[*byte]).await.is_err() {
                break;
            }
        }
    });
    let answer = until_closed(&mut reader).await;
    drip.abort();
    answer
}

#[tokio::test]
async fn slow_clients_of_the_approval_page_are_closed() {
    let (guard, page) = guard_with_page(|_| {}).await;
    // Silent after connect; half a head; a head that trickles in forever.
    let mut silent = TcpStream::connect(&page).await.unwrap();
    assert!(until_closed(&mut silent).await.is_empty());
    let mut half = TcpStream::connect(&page).await.unwrap();
    half.write_all(b"GET /approvals/login HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    assert!(until_closed(&mut half).await.is_empty());
    let answer = trickled(
        &page,
        b"GET /approvals/login HTTP/1.1\r\n",
        b"X-Slow: a\r\n",
    )
    .await;
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    // A form body that trickles in forever: 408 naming BodyTimeout, then closed.
    let answer = trickled(
        &page,
        b"POST /approvals/login HTTP/1.1\r\nHost: 127.0.0.1\r\n\
          Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 10000\r\n\r\n",
        b"a=b&",
    )
    .await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("BodyTimeout"), "{text}");
    // An answered request, then an idle keep-alive connection.
    let mut idle = TcpStream::connect(&page).await.unwrap();
    idle.write_all(b"GET /approvals/login HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let answer = until_closed(&mut idle).await;
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
    guard.stop().await;
}

#[tokio::test]
async fn slow_clients_of_the_mcp_listener_are_closed_while_trickling() {
    let guard = guard_with(|_| {}).await;
    let addr = addr(&guard);
    let answer = trickled(&addr, b"GET /healthz HTTP/1.1\r\n", b"X-Slow: a\r\n").await;
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    let answer = trickled(
        &addr,
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer slow-body\r\n\
          Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
          Content-Length: 10000\r\n\r\n",
        b" ",
    )
    .await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    guard.stop().await;
}

#[tokio::test]
async fn approval_page_connections_beyond_max_connections_are_refused() {
    let (guard, page) = guard_with_page(|c| {
        c.limits.max_connections = 2;
        c.limits.header = Duration::from_secs(30);
    })
    .await;
    let app = guard.app().clone();
    let refused = || {
        app.refused_connections
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let first = TcpStream::connect(&page).await.unwrap();
    let second = TcpStream::connect(&page).await.unwrap();
    // Once both holders are accepted a third is closed unanswered.
    let mut attempts = 0;
    common::wait_until("a third page connection refused", GENEROUS, async || {
        attempts += 1;
        let mut third = TcpStream::connect(&page).await.unwrap();
        let _ = third
            .write_all(b"GET /approvals/login HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await;
        until_closed(&mut third).await.is_empty()
    })
    .await;
    assert!(refused() >= 1);
    // The page's pool is its own: the MCP listener still serves.
    let http = reqwest::Client::new();
    let health = http
        .get(format!("{}/healthz", guard.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    // Freed slots serve the page again.
    drop(first);
    drop(second);
    common::wait_until("the page serves again", GENEROUS, async || {
        http.get(format!("http://{page}/approvals/login"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
    })
    .await;
    eprintln!(
        "approval page: refused {} connection(s) over MaxConnections=2 in {attempts} attempt(s)",
        refused()
    );
    guard.stop().await;
}

/// A request body fed from a channel: open until its sender is dropped.
struct Fed(tokio::sync::mpsc::Receiver<bytes::Bytes>);

impl hyper::body::Body for Fed {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|data| Ok(hyper::body::Frame::data(data))))
    }
}

/// Request bodies held at once are bounded in total. One HTTP/2 connection with a valid
/// token opens 80 requests, each sending 1 MB of its body and never ending it: those past
/// the 64 MiB budget are answered 503 `overloaded` while the others wait, `/metrics` shows
/// the budget held and no more, and once the connection is gone the budget is free again
/// and calls go through. Before the budget, the same flood grew the process by 500 MB.
#[tokio::test]
async fn request_bodies_held_at_once_are_bounded_in_total() {
    let lab = common::lab(7);
    let mut config = common::config_for(&lab.url);
    // The bodies stay open for the test; the budget, not BodyTimeout, must refuse them.
    config.limits.body = Duration::from_secs(120);
    let guard = start_with(config).await;
    let (mut sender, connection) = h2c::<Fed>(&addr(&guard)).await;
    let mut feeds = Vec::new();
    let mut answers = tokio::task::JoinSet::new();
    for _ in 0..80 {
        let (feed, body) = tokio::sync::mpsc::channel(1);
        let request = http::Request::post(format!("{}/mcp", guard.base))
            .header("authorization", format!("Bearer {}", lab.token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Fed(body))
            .unwrap();
        sender.ready().await.unwrap();
        let answer = sender.send_request(request);
        answers.spawn(async move { answer.await.map(|r| r.status()) });
        feed.send(bytes::Bytes::from(vec![b' '; 1_000_000]))
            .await
            .unwrap();
        feeds.push(feed);
    }
    let budget = 64.0 * 1024.0 * 1024.0;
    let held = common::eventually("the bodies to fill the budget", GENEROUS, async || {
        let held = common::metrics::scrape(&guard.base)
            .await
            .get("request_body_bytes");
        (held > budget - 1_000_000.0).then_some(held)
    })
    .await;
    assert!(held <= budget, "{held}");
    // The requests answered are the refused ones: of 80 MB sent, 64 MiB (67 bodies) held.
    let mut refused = 0;
    common::wait_until("the bodies past the budget refused", GENEROUS, async || {
        while let Some(answer) = answers.try_join_next() {
            assert_eq!(answer.unwrap().unwrap(), 503);
            refused += 1;
        }
        refused >= 13
    })
    .await;
    let held = common::metrics::scrape(&guard.base)
        .await
        .get("request_body_bytes");
    assert!(held <= budget, "{held}");
    assert!(refused <= 16, "{refused} refused");
    // What is left of the budget (67 bodies of 1 MB hold all but 108 kB) still takes a
    // small request; a body larger than that is refused: nothing done, retry later. It says
    // its length, so it is read to its end (none of it kept) and refused as its request's
    // error in a 200; the flood's bodies say none and get 503 as their bytes arrive.
    let post = |padding: usize| {
        let body = format!(
            r#"{{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}}{}"#,
            " ".repeat(padding)
        );
        reqwest::Client::new()
            .post(format!("{}/mcp", guard.base))
            .bearer_auth(&lab.token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
            .send()
    };
    assert_eq!(post(0).await.unwrap().status(), 200);
    let response = post(300_000).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["retry-after"], "1");
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["id"], 1, "{body}");
    assert_eq!(body["error"]["code"], -32005, "{body}");
    assert_eq!(body["error"]["data"]["code"], "overloaded", "{body}");

    drop((feeds, sender, answers));
    connection.abort();
    common::wait_until("the budget free again", GENEROUS, async || {
        common::metrics::scrape(&guard.base)
            .await
            .get("request_body_bytes")
            == 0.0
    })
    .await;
    let client = common::client(&guard, &lab.token).await;
    let hosts = common::read(&client, "host_get", serde_json::json!({"limit": 1})).await;
    assert_eq!(hosts["count"], 1);
    guard.stop().await;
}
