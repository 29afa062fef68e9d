//! A stub Zabbix that hangs up on writes: it answers the identity calls normally and, for
//! `event.acknowledge`, reads the whole request and closes the connection without an
//! answer (a write that may or may not have been applied). It counts every such request,
//! so a test can tell whether the sidecar sent the write again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone, Default)]
pub struct Hangup {
    /// `event.acknowledge` requests received (each one read in full, then hung up on).
    pub acknowledges: Arc<AtomicUsize>,
}

impl Hangup {
    pub fn acknowledges(&self) -> usize {
        self.acknowledges.load(Ordering::SeqCst)
    }
}

/// Starts the stub; returns its API URL.
pub async fn start() -> (String, Hangup) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stub = Hangup::default();
    let count = stub.acknowledges.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(serve(stream, count.clone()));
        }
    });
    (format!("http://{addr}/api_jsonrpc.php"), stub)
}

/// HTTP/1.1 with keep-alive, Content-Length bodies only (what the sidecar sends).
async fn serve(mut stream: TcpStream, count: Arc<AtomicUsize>) {
    let mut buffer = Vec::new();
    loop {
        let Some(body) = read_request(&mut stream, &mut buffer).await else {
            return;
        };
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let result = match request["method"].as_str().unwrap_or("") {
            "event.acknowledge" => {
                count.fetch_add(1, Ordering::SeqCst);
                // The whole request was read; hang up without a word.
                return;
            }
            "apiinfo.version" => json!("7.0.22"),
            "user.checkAuthentication" => {
                json!({"userid": "1", "username": "Admin", "type": 3, "roleid": "3"})
            }
            "usergroup.get" => json!([{"name": "Zabbix administrators"}]),
            // The targets of a write: every event is on one host in one group.
            "event.get" => {
                let events = request["params"]["eventids"].as_array().cloned();
                let hosts = json!([{"hostid": "10084"}]);
                Value::Array(
                    events
                        .unwrap_or_default()
                        .into_iter()
                        .map(|id| json!({"eventid": id, "hosts": hosts}))
                        .collect(),
                )
            }
            "host.get" => json!([{"hostid": "10084", "host": "stub-host",
                "hostgroups": [{"groupid": "2", "name": "Stub servers"}]}]),
            _ => json!([]),
        };
        let answer = json!({"jsonrpc": "2.0", "result": result, "id": request["id"]}).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            answer.len()
        );
        if stream.write_all(head.as_bytes()).await.is_err()
            || stream.write_all(answer.as_bytes()).await.is_err()
        {
            return;
        }
    }
}

/// Reads one request (head and body) from the connection; `None` when it closes.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body = buffer[head_end..head_end + length].to_vec();
    buffer.drain(..head_end + length);
    Some(body)
}
