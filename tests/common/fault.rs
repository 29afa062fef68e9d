//! A scriptable stub Zabbix for the faults a real one cannot produce on demand. It answers
//! the identity, version and target-resolution calls normally, and every other call with
//! the scripted [`Fault`]; it counts the requests per method, each read in full before the
//! fault.
//! Every answer closes its connection, so no pooled connection outlives a fault.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the stub does with a data call.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Answers `result` normally.
    Answer(Value),
    /// Answers after this delay (longer than the sidecar's `Timeout`).
    Slow(Duration),
    /// HTTP status with a plain text body.
    Status(u16),
    /// 200 with an HTML error page, as a misconfigured frontend sends.
    Html,
    /// 200 with a body that is not JSON.
    InvalidJson,
    /// 200 with this body: JSON-RPC a skip-only reader would take, a client would not.
    Malformed(&'static str),
    /// Announces a body, sends part of it and closes.
    Truncated,
    /// A valid JSON-RPC answer of this many bytes.
    Oversized(usize),
    /// Reads the request, then resets the connection without a word.
    Reset,
    /// A valid answer carrying another request's id (a frontend or proxy out of step).
    OtherId,
}

#[derive(Clone)]
pub struct FaultStub {
    pub url: String,
    fault: Arc<Mutex<Fault>>,
    seen: Arc<Mutex<HashMap<String, usize>>>,
    /// Data calls being answered now, and the most at once.
    in_flight: Arc<Mutex<(usize, usize)>>,
    listener: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl FaultStub {
    pub fn set(&self, fault: Fault) {
        *self.fault.lock().unwrap() = fault;
    }

    /// Requests of `method` read so far.
    pub fn seen(&self, method: &str) -> usize {
        self.seen.lock().unwrap().get(method).copied().unwrap_or(0)
    }

    /// The most data calls the stub was answering at once.
    pub fn max_in_flight(&self) -> usize {
        self.in_flight.lock().unwrap().1
    }

    /// Stops listening: new connections are refused.
    pub fn refuse(&self) {
        if let Some(task) = self.listener.lock().unwrap().take() {
            task.abort();
        }
    }
}

pub async fn start(fault: Fault) -> FaultStub {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stub = FaultStub {
        url: format!("http://{addr}/api_jsonrpc.php"),
        fault: Arc::new(Mutex::new(fault)),
        seen: Arc::default(),
        in_flight: Arc::default(),
        listener: Arc::default(),
    };
    let serving = stub.clone();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, serving.clone()));
        }
    });
    *stub.listener.lock().unwrap() = Some(task);
    stub
}

async fn serve(mut stream: TcpStream, stub: FaultStub) {
    let Some(body) = read_request(&mut stream).await else {
        return;
    };
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = request["method"].as_str().unwrap_or("").to_owned();
    *stub.seen.lock().unwrap().entry(method.clone()).or_default() += 1;
    let identity = match method.as_str() {
        "apiinfo.version" => Some(json!("7.0.22")),
        "user.checkAuthentication" => {
            Some(json!({"userid": "1", "username": "Admin", "type": 3, "roleid": "3"}))
        }
        "usergroup.get" => Some(json!([{"name": "Zabbix administrators"}])),
        // What a write touches is resolved before it is decided: these answer, so that
        // the fault meets the write itself.
        "event.get" => Some(Value::Array(
            request["params"]["eventids"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|id| json!({"eventid": id, "hosts": [{"hostid": "1"}]}))
                .collect(),
        )),
        "host.get" if request["params"]["hostids"].is_array() => Some(json!([
            {"hostid": "1", "host": "stub-host",
             "hostgroups": [{"groupid": "2", "name": "Linux servers"}]}
        ])),
        _ => None,
    };
    let data_call = identity.is_none();
    let fault = match identity {
        Some(result) => Fault::Answer(result),
        None => stub.fault.lock().unwrap().clone(),
    };
    if data_call {
        let mut counts = stub.in_flight.lock().unwrap();
        counts.0 += 1;
        counts.1 = counts.1.max(counts.0);
    }
    let rpc = |result: Value| json!({"jsonrpc": "2.0", "result": result, "id": request["id"]});
    match fault {
        Fault::Answer(result) => {
            reply(
                &mut stream,
                200,
                "application/json",
                &rpc(result).to_string(),
            )
            .await
        }
        Fault::Slow(delay) => {
            tokio::time::sleep(delay).await;
            reply(
                &mut stream,
                200,
                "application/json",
                &rpc(json!([])).to_string(),
            )
            .await;
        }
        Fault::Status(code) => reply(&mut stream, code, "text/plain", "upstream broke").await,
        Fault::OtherId => {
            let other = request["id"].as_u64().unwrap_or(0) + 1000;
            let body = json!({"jsonrpc": "2.0", "result": {"eventids": ["42"]}, "id": other});
            reply(&mut stream, 200, "application/json", &body.to_string()).await
        }
        Fault::Html => {
            let page = "<html><head><title>Error</title></head><body><h1>Database error</h1></body></html>";
            reply(&mut stream, 200, "text/html", page).await;
        }
        Fault::Malformed(body) => reply(&mut stream, 200, "application/json", body).await,
        Fault::InvalidJson => {
            reply(
                &mut stream,
                200,
                "application/json",
                "{\"jsonrpc\":\"2.0\",\"result\":[{",
            )
            .await
        }
        Fault::Truncated => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\nconnection: close\r\n\r\n";
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(b"{\"jsonrpc\":\"2.0\",\"result\":[").await;
            let _ = stream.shutdown().await;
        }
        Fault::Oversized(bytes) => {
            let filler = "x".repeat(bytes);
            let body = rpc(json!([{"hostid": "1", "host": "big", "name": filler}])).to_string();
            reply(&mut stream, 200, "application/json", &body).await;
        }
        Fault::Reset => {
            if data_call {
                stub.in_flight.lock().unwrap().0 -= 1;
            }
            // Linger 0: close sends RST, as a crashed or killed frontend does (a zero
            // linger never blocks, which is what the deprecation warns about).
            #[allow(deprecated)]
            let _ = stream.set_linger(Some(Duration::ZERO));
            drop(stream);
            return;
        }
    }
    if data_call {
        stub.in_flight.lock().unwrap().0 -= 1;
    }
}

async fn reply(stream: &mut TcpStream, status: u16, content_type: &str, body: &str) {
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Reads one request with a Content-Length body (what the sidecar sends).
async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buffer = Vec::new();
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
    Some(buffer[head_end..head_end + length].to_vec())
}
