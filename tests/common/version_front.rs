//! A front for the 7.0 lab that answers `apiinfo.version` as another version and behaves
//! as that version does on the wire where it matters here: 7.2+ refuses the `auth` field
//! and `selectGroups` with Zabbix's own errors. Everything else is forwarded unchanged.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;

#[derive(Clone, Default)]
pub struct Front {
    /// Requests the front refused as the pretended version would.
    pub refused: Arc<Mutex<Vec<String>>>,
}

/// Starts a front pretending `version` (e.g. "7.4.0") for `upstream` (the 7.0 lab URL).
pub async fn start(upstream: &str, version: &'static str) -> (String, Front) {
    super::init();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let front = Front::default();
    let upstream = upstream.to_owned();
    let http = reqwest::Client::new();
    let refused = front.refused.clone();
    let strict = !version.starts_with("6.") && version != "7.0.0";
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (http, upstream, refused) = (http.clone(), upstream.clone(), refused.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (http, upstream, refused) =
                        (http.clone(), upstream.clone(), refused.clone());
                    async move {
                        let headers = req.headers().clone();
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let id = request["id"].clone();
                        let error = |data: &str| {
                            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602,
                                   "message": "Invalid params.", "data": data}})
                        };
                        let own = if request["method"] == "apiinfo.version" {
                            Some(json!({"jsonrpc": "2.0", "id": id, "result": version}))
                        } else if strict && request.get("auth").is_some() {
                            Some(error(
                                "Invalid parameter \"/\": unexpected parameter \"auth\".",
                            ))
                        } else if strict && request["params"].get("selectGroups").is_some() {
                            Some(error(
                                "Invalid parameter \"/\": unexpected parameter \"selectGroups\".",
                            ))
                        } else {
                            None
                        };
                        let answer = match own {
                            Some(answer) => {
                                if answer.get("error").is_some() {
                                    refused
                                        .lock()
                                        .unwrap()
                                        .push(String::from_utf8_lossy(&body).into_owned());
                                }
                                Bytes::from(answer.to_string())
                            }
                            None => {
                                let mut forward = http.post(&upstream).body(body.to_vec());
                                for (k, v) in headers.iter() {
                                    if k == "content-type" || k == "authorization" {
                                        forward = forward.header(k.as_str(), v.as_bytes());
                                    }
                                }
                                forward.send().await.unwrap().bytes().await.unwrap()
                            }
                        };
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
