//! The two kinds of client: a fast one that keeps one HTTP/1.1 connection open and sends
//! MCP requests back to back (hyper's client connection directly: no pool, no MCP client
//! library, so the client's own cost per request stays small), and a slow one that trickles
//! a request head one byte at a time, as a hostile or broken peer would.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::stats::{Errors, Histogram};

/// A request gets this long before it counts as `client_timeout`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The slow client's pace: one byte of request head per interval.
const TRICKLE: Duration = Duration::from_millis(500);

/// The requests a fast client cycles through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    /// `tools/list`, `tools/call host_get`, `resources/read` in turn.
    All,
    /// `tools/list` only.
    List,
}

/// What every client shares.
pub struct Shared {
    pub addr: String,
    pub stop: AtomicBool,
    pub latency: Histogram,
    pub errors: Errors,
    /// Fast clients with an open connection right now.
    pub connected: AtomicU64,
    /// Times a slow client was cut off by the sidecar.
    pub slow_cut_off: AtomicU64,
}

const BODIES: [&str; 3] = [
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"host_get","arguments":{"limit":1}}}"#,
    r#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"zabbix://host/10101"}}"#,
];

/// One fast client: connects, then sends requests until `stop`; reconnects after a
/// connection failure (counted).
pub async fn fast(shared: Arc<Shared>, token: String, mix: Mix) {
    let auth =
        HeaderValue::try_from(format!("Bearer {token}")).unwrap_or(HeaderValue::from_static(""));
    let host = HeaderValue::try_from(shared.addr.as_str()).unwrap_or(HeaderValue::from_static(""));
    let bodies: Vec<Bytes> = match mix {
        Mix::All => BODIES
            .iter()
            .map(|b| Bytes::from_static(b.as_bytes()))
            .collect(),
        Mix::List => vec![Bytes::from_static(BODIES[0].as_bytes())],
    };
    let mut round = 0usize;
    while !shared.stop.load(Ordering::Relaxed) {
        let Some(mut sender) = connect(&shared).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        shared.connected.fetch_add(1, Ordering::Relaxed);
        while !shared.stop.load(Ordering::Relaxed) {
            let body = bodies[round % bodies.len()].clone();
            round += 1;
            let mut request = Request::post("/mcp");
            if let Some(headers) = request.headers_mut() {
                headers.insert(HOST, host.clone());
                headers.insert(AUTHORIZATION, auth.clone());
                headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                headers.insert(
                    ACCEPT,
                    HeaderValue::from_static("application/json, text/event-stream"),
                );
                headers.insert(
                    "mcp-protocol-version",
                    HeaderValue::from_static("2025-11-25"),
                );
            }
            let Ok(request) = request.body(Full::new(body)) else {
                return;
            };
            let began = Instant::now();
            match tokio::time::timeout(REQUEST_TIMEOUT, exchange(&mut sender, request)).await {
                Ok(Ok(None)) => shared.latency.record(began.elapsed().as_micros() as u64),
                Ok(Ok(Some(code))) => {
                    shared.latency.record(began.elapsed().as_micros() as u64);
                    shared.errors.add(&code);
                }
                Ok(Err(code)) => {
                    shared.errors.add(&code);
                    break;
                }
                Err(_) => {
                    shared.errors.add("client_timeout");
                    break;
                }
            }
        }
        shared.connected.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn connect(shared: &Shared) -> Option<SendRequest<Full<Bytes>>> {
    let stream = match TcpStream::connect(&shared.addr).await {
        Ok(stream) => stream,
        Err(_) => {
            shared.errors.add("connect_failed");
            return None;
        }
    };
    let _ = stream.set_nodelay(true);
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(connection);
    Some(sender)
}

/// One request and its answer: `Ok(None)` for a success, `Ok(Some(code))` for an answer
/// that reports an error, `Err(code)` when the connection failed.
async fn exchange(
    sender: &mut SendRequest<Full<Bytes>>,
    request: Request<Full<Bytes>>,
) -> Result<Option<String>, String> {
    sender
        .ready()
        .await
        .map_err(|_| "connection_closed".to_owned())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|_| "connection_closed".to_owned())?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|_| "body_read_failed".to_owned())?
        .to_bytes();
    if status != StatusCode::OK {
        let code = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| {
                // Refusals before MCP carry `error`; rmcp's own carry a JSON-RPC `error`.
                v["error"]
                    .as_str()
                    .or_else(|| v["error"]["data"]["code"].as_str())
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        return Ok(Some(format!(
            "http_{}{}{code}",
            status.as_u16(),
            if code.is_empty() { "" } else { "_" }
        )));
    }
    // Parse only answers that look like errors: a tools/list answer is tens of kB.
    if !contains(&body, b"\"isError\":true") && !contains(&body, b"\"error\":") {
        return Ok(None);
    }
    Ok(Some(error_code(&body)))
}

/// The `code` of a JSON-RPC error or of an `isError` tool result.
fn error_code(body: &[u8]) -> String {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return "unparsable_answer".into();
    };
    if let Some(error) = value.get("error") {
        return error["data"]["code"]
            .as_str()
            .map_or_else(|| format!("rpc_{}", error["code"]), str::to_owned);
    }
    let text = value["result"]["content"][0]["text"].as_str().unwrap_or("");
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v["code"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "tool_error".into())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// One slow client: a request head at one byte per 500 ms, reconnecting whenever the
/// sidecar cuts it off (`HeaderTimeout`).
pub async fn slow(shared: Arc<Shared>) {
    let head = format!(
        "GET /healthz HTTP/1.1\r\nHost: {}\r\nX-Slow: {}",
        shared.addr,
        "a".repeat(4096)
    );
    while !shared.stop.load(Ordering::Relaxed) {
        let Ok(mut stream) = TcpStream::connect(&shared.addr).await else {
            tokio::time::sleep(TRICKLE).await;
            continue;
        };
        for byte in head.as_bytes() {
            if shared.stop.load(Ordering::Relaxed) {
                return;
            }
            if stream.write_all(&[*byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(TRICKLE).await;
        }
        shared.slow_cut_off.fetch_add(1, Ordering::Relaxed);
    }
}
