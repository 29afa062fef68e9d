//! A front for the 7.0 lab that answers `apiinfo.version` as another version and behaves
//! as that version does on the wire where it matters here:
//! - 7.2+ refuses the `auth` field and `selectGroups` with Zabbix's own errors;
//! - 8.0+ accepts `history.get` with `history: 6` (JSON, new in 8.0). The 7.0 lab has no
//!   JSON items, so the front asks the lab for the same items' text history (4), with the
//!   caller's token, and returns each value as a JSON document `{"text": <value>}`, as
//!   8.0 returns JSON history (`itemid`, `clock`, `ns`, `value` as a string). Below 8.0 the
//!   request goes to the lab unchanged, which refuses 6 as 7.x does.
//!
//! Everything else is forwarded unchanged; every request is recorded.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::HeaderMap;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// `history.get`'s type for JSON values (Zabbix 8.0).
pub const HISTORY_JSON: i64 = 6;
const HISTORY_TEXT: i64 = 4;

#[derive(Clone, Default)]
pub struct Front {
    /// Requests the front refused as the pretended version would.
    pub refused: Arc<Mutex<Vec<String>>>,
    /// Every JSON-RPC request that reached the front, in order.
    pub requests: Arc<Mutex<Vec<Value>>>,
}

impl Front {
    /// The `history.get` requests that asked for this history type.
    pub fn history_requests(&self, history: i64) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r["method"] == "history.get" && r["params"]["history"] == history)
            .count()
    }

    /// Requests of this method, as sent.
    pub fn of_method(&self, method: &str) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r["method"] == method)
            .cloned()
            .collect()
    }
}

/// The pretended version's rules.
#[derive(Clone, Copy)]
struct Pretend {
    version: &'static str,
    /// 7.2+: `auth` and `selectGroups` refused.
    strict: bool,
    /// 8.0+: history type 6 (JSON).
    json_history: bool,
}

/// Starts a front pretending `version` (e.g. "7.4.0") for `upstream` (the 7.0 lab URL).
pub async fn start(upstream: &str, version: &'static str) -> (String, Front) {
    super::init();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let front = Front::default();
    let upstream = upstream.to_owned();
    let http = reqwest::Client::new();
    let (major, minor) = {
        let mut parts = version.split('.').map(|p| p.parse::<u16>().unwrap());
        (parts.next().unwrap(), parts.next().unwrap())
    };
    let pretend = Pretend {
        version,
        strict: (major, minor) >= (7, 2),
        json_history: major >= 8,
    };
    let shared = front.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (http, upstream, front) = (http.clone(), upstream.clone(), shared.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (http, upstream, front) = (http.clone(), upstream.clone(), front.clone());
                    async move {
                        let headers = req.headers().clone();
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let answer =
                            answer(&http, &upstream, &headers, body, pretend, &front).await;
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(answer)))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}/api_jsonrpc.php"), front)
}

async fn answer(
    http: &reqwest::Client,
    upstream: &str,
    headers: &HeaderMap,
    body: Bytes,
    pretend: Pretend,
    front: &Front,
) -> Bytes {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    front.requests.lock().unwrap().push(request.clone());
    let id = request["id"].clone();
    let error = |data: &str| {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602,
               "message": "Invalid params.", "data": data}})
    };
    let own = if request["method"] == "apiinfo.version" {
        Some(json!({"jsonrpc": "2.0", "id": id, "result": pretend.version}))
    } else if pretend.strict && request.get("auth").is_some() {
        Some(error(
            "Invalid parameter \"/\": unexpected parameter \"auth\".",
        ))
    } else if pretend.strict && request["params"].get("selectGroups").is_some() {
        Some(error(
            "Invalid parameter \"/\": unexpected parameter \"selectGroups\".",
        ))
    } else {
        None
    };
    if let Some(answer) = own {
        if answer.get("error").is_some() {
            front
                .refused
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(&body).into_owned());
        }
        return Bytes::from(answer.to_string());
    }
    if pretend.json_history
        && request["method"] == "history.get"
        && request["params"]["history"] == HISTORY_JSON
    {
        let mut text = request.clone();
        text["params"]["history"] = json!(HISTORY_TEXT);
        let mut lab: Value =
            serde_json::from_slice(&forward(http, upstream, headers, text.to_string()).await)
                .unwrap();
        if let Some(rows) = lab["result"].as_array_mut() {
            for row in rows {
                let value = row["value"].as_str().unwrap_or_default().to_owned();
                row["value"] = json!(json!({"text": value}).to_string());
            }
        }
        return Bytes::from(lab.to_string());
    }
    forward(http, upstream, headers, body).await
}

async fn forward(
    http: &reqwest::Client,
    upstream: &str,
    headers: &HeaderMap,
    body: impl Into<reqwest::Body>,
) -> Bytes {
    let mut forward = http.post(upstream).body(body);
    for (k, v) in headers.iter() {
        if k == "content-type" || k == "authorization" {
            forward = forward.header(k.as_str(), v.as_bytes());
        }
    }
    forward.send().await.unwrap().bytes().await.unwrap()
}
