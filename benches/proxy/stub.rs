//! The instant stub Zabbix: a hyper server in this process that answers `apiinfo.version`,
//! `user.checkAuthentication`, `usergroup.get` and `host.get` (10 hosts) at once, counts
//! the requests by method and keeps the first `host.get` body it receives.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The version the stub reports; keep in step with the `apiinfo.version` answer below.
pub const STUB_VERSION: &str = "7.0.22";

pub struct Stub {
    pub addr: SocketAddr,
    pub state: Arc<StubState>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
pub struct StubState {
    /// The first host.get body received (the sidecar's: it calls first).
    pub sidecar_host_get: OnceLock<Bytes>,
    counts: std::sync::Mutex<HashMap<String, usize>>,
}

#[derive(serde::Deserialize)]
struct RpcHead {
    method: String,
    #[serde(default)]
    id: Value,
}

impl StubState {
    fn count(&self, method: &str) {
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry(method.to_owned()).or_default() += 1;
        }
    }

    pub fn total(&self) -> usize {
        self.counts.lock().map(|c| c.values().sum()).unwrap_or(0)
    }

    pub fn summary(&self) -> String {
        let Ok(counts) = self.counts.lock() else {
            return String::new();
        };
        let mut pairs: Vec<_> = counts.iter().collect();
        pairs.sort();
        pairs
            .iter()
            .map(|(m, c)| format!("{m} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn stub_hosts() -> String {
    let hosts: Vec<Value> = (1..=10)
        .map(|i| {
            json!({
                "hostid": format!("{}", 10100 + i),
                "host": format!("mcp-stub-{i:02}"),
                "name": format!("MCP Stub {i:02}"),
                "status": "0",
                "description": "",
                "maintenance_status": "0",
                "flags": "0",
                "hostgroups": [{"groupid": "2", "name": "Linux servers"}],
                "tags": [{"tag": "env", "value": "bench"}],
                "parentTemplates": [{"templateid": "10001", "name": "Linux by Zabbix agent"}],
                "triggers": [],
            })
        })
        .collect();
    Value::Array(hosts).to_string()
}

impl Stub {
    pub async fn start() -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("stub binds");
        let addr = listener.local_addr().expect("stub address");
        let state = Arc::new(StubState::default());
        let hosts: Arc<str> = stub_hosts().into();
        let task_state = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let state = task_state.clone();
                let hosts = hosts.clone();
                let service =
                    service_fn(move |request| stub_answer(request, state.clone(), hosts.clone()));
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Stub { addr, state, task }
    }

    /// Stops accepting; returns the request counts.
    pub fn stop(self) -> Arc<StubState> {
        self.task.abort();
        self.state
    }
}

async fn stub_answer(
    request: Request<Incoming>,
    state: Arc<StubState>,
    hosts: Arc<str>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let (method, id) = match serde_json::from_slice::<RpcHead>(&body) {
        Ok(head) => (head.method, head.id),
        Err(_) => (String::from("?"), Value::Null),
    };
    let result: &str = match method.as_str() {
        "apiinfo.version" => "\"7.0.22\"",
        "user.checkAuthentication" => r#"{"userid":"1","username":"Admin","type":3,"roleid":"3"}"#,
        "usergroup.get" => r#"[{"name":"Zabbix administrators"}]"#,
        "host.get" => {
            let _ = state.sidecar_host_get.set(body.clone());
            &hosts
        }
        _ => "[]",
    };
    state.count(&method);
    let text = format!(r#"{{"jsonrpc":"2.0","result":{result},"id":{id}}}"#);
    let mut response = Response::new(Full::new(Bytes::from(text)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}
