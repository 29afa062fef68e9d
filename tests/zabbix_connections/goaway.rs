//! An HTTP/2 frontend that sends GOAWAY as a write arrives (a server or proxy shutting down
//! gracefully, a reload). Its last-stream-id says which streams it may have processed: the
//! write's stream above it was not (RFC 9113 §6.8) and may be sent again on a new
//! connection; at or below it, the write may have been applied and is never sent again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use zabbix_mcp_guard::zabbix::ZabbixError;

use super::{client, read, write};
use crate::common;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const RST_STREAM: u8 = 0x3;
const REFUSED_STREAM: u32 = 0x7;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// Where the frontend's GOAWAY puts its last-stream-id as the write arrives.
#[derive(Clone, Copy)]
enum LastStream {
    /// Below the write's stream: the write was not processed.
    Below,
    /// The write's own stream, with this error code: it may have been processed, and the
    /// connection then closes.
    Its(u32),
    /// No GOAWAY: the write's stream is reset with REFUSED_STREAM (not processed).
    Refused,
}

/// What the frontend saw: connections, and the `event.acknowledge` requests it answered.
#[derive(Clone, Default)]
struct Counts {
    connections: Arc<AtomicUsize>,
    writes_answered: Arc<AtomicUsize>,
}

async fn frame(
    tls: &mut (impl AsyncWriteExt + Unpin),
    kind: u8,
    flags: u8,
    stream: u32,
    payload: &[u8],
) {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut head = vec![len[1], len[2], len[3], kind, flags];
    head.extend_from_slice(&stream.to_be_bytes());
    head.extend_from_slice(payload);
    let _ = tls.write_all(&head).await;
    let _ = tls.flush().await;
}

/// A frontend speaking HTTP/2 by hand over TLS (hyper's server sends GOAWAY only with the
/// highest stream id): it answers every request, but on its first connection it answers
/// the first `event.acknowledge` HEADERS with a GOAWAY placed as `last` says.
async fn goaway_front(pki: &common::tls::Pki, last: LastStream) -> (String, Counts) {
    let mut config = common::tls::server_config(pki);
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://localhost:{}/api_jsonrpc.php",
        listener.local_addr().unwrap().port()
    );
    let counts = Counts::default();
    let state = counts.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let first = state.connections.fetch_add(1, Ordering::SeqCst) == 0;
            let (acceptor, state) = (acceptor.clone(), state.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                serve_h2(tls, first, last, state).await;
            });
        }
    });
    (url, counts)
}

async fn serve_h2(
    mut tls: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    first: bool,
    last: LastStream,
    counts: Counts,
) {
    let mut preface = [0u8; 24];
    if tls.read_exact(&mut preface).await.is_err() || preface != PREFACE {
        return;
    }
    frame(&mut tls, SETTINGS, 0, 0, &[]).await;
    let mut bodies: std::collections::HashMap<u32, Vec<u8>> = Default::default();
    let mut gone_away = false;
    loop {
        let mut head = [0u8; 9];
        if tls.read_exact(&mut head).await.is_err() {
            return;
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        if tls.read_exact(&mut payload).await.is_err() {
            return;
        }
        match kind {
            SETTINGS if flags & ACK == 0 => frame(&mut tls, SETTINGS, ACK, 0, &[]).await,
            PING if flags & ACK == 0 => frame(&mut tls, PING, ACK, 0, &payload).await,
            HEADERS | DATA => {
                let body = bodies.entry(stream).or_default();
                if kind == DATA {
                    body.extend_from_slice(&payload);
                }
                if flags & END_STREAM == 0 {
                    continue;
                }
                let body = bodies.remove(&stream).unwrap_or_default();
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let method = request["method"].as_str().unwrap_or_default();
                if method == "event.acknowledge" && first && !gone_away {
                    gone_away = true;
                    let (last_id, code) = match last {
                        LastStream::Below => (stream - 2, 0),
                        LastStream::Its(code) => (stream, code),
                        LastStream::Refused => {
                            let code = REFUSED_STREAM.to_be_bytes();
                            frame(&mut tls, RST_STREAM, 0, stream, &code).await;
                            continue;
                        }
                    };
                    let mut goaway = last_id.to_be_bytes().to_vec();
                    goaway.extend_from_slice(&code.to_be_bytes());
                    frame(&mut tls, GOAWAY, 0, 0, &goaway).await;
                    if let LastStream::Its(_) = last {
                        // Processed, perhaps, and the answer lost with the connection.
                        return;
                    }
                    continue;
                }
                if method == "event.acknowledge" {
                    counts.writes_answered.fetch_add(1, Ordering::SeqCst);
                }
                let result = if method == "apiinfo.version" {
                    json!("7.0.0")
                } else {
                    json!({"eventids": ["1"]})
                };
                let answer = json!({"jsonrpc": "2.0", "result": result, "id": request["id"]});
                // HPACK: `:status: 200` is index 8 of the static table.
                frame(&mut tls, HEADERS, END_HEADERS, stream, &[0x88]).await;
                let text = answer.to_string();
                frame(&mut tls, DATA, END_STREAM, stream, text.as_bytes()).await;
            }
            _ => {}
        }
    }
}

/// The write's stream is above the GOAWAY's last-stream-id, or reset with REFUSED_STREAM:
/// the frontend says it did not process it. The client sends it again on a new connection,
/// once, where it is answered. Before, the write failed as possibly applied (`AnswerLost:
/// sending the request: http2 error: connection error received: not a result of an error`).
#[tokio::test]
async fn a_write_refused_by_goaway_is_sent_again_on_a_new_connection() {
    for (name, last) in [("below", LastStream::Below), ("reset", LastStream::Refused)] {
        let pki = common::tls::pki(&format!("connections-goaway-{name}"));
        let (url, counts) = goaway_front(&pki, last).await;
        let client = client(&url, Some(pki.ca_file.clone()));
        read(&client).await;
        let written = write(&client).await;
        assert!(written.is_ok(), "{name}: {written:?}");
        assert_eq!(counts.writes_answered.load(Ordering::SeqCst), 1, "{name}");
        assert_eq!(counts.connections.load(Ordering::SeqCst), 2, "{name}");
    }
}

/// The write's own stream is the GOAWAY's last-stream-id, and the connection then closes
/// unanswered: the frontend may have applied it, so it is never sent again, and the caller
/// is told its answer was lost. Also when the GOAWAY carries an error (INTERNAL_ERROR).
#[tokio::test]
async fn a_write_the_goaway_may_have_let_through_is_not_sent_again() {
    for code in [0, 2] {
        let pki = common::tls::pki(&format!("connections-goaway-its-{code}"));
        let (url, counts) = goaway_front(&pki, LastStream::Its(code)).await;
        let client = client(&url, Some(pki.ca_file.clone()));
        read(&client).await;
        let written = write(&client).await;
        assert!(
            matches!(written, Err(ZabbixError::AnswerLost(_))),
            "{code}: {written:?}"
        );
        assert_eq!(counts.writes_answered.load(Ordering::SeqCst), 0, "{code}");
        assert_eq!(counts.connections.load(Ordering::SeqCst), 1, "{code}");
    }
}
