//! A recording HTTP proxy in front of the real lab Zabbix: every JSON-RPC body the sidecar
//! sends is kept, so tests can assert on exactly what reached Zabbix.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

#[derive(Clone, Default)]
pub struct Recorder {
    pub bodies: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    pub fn taken(&self) -> Vec<String> {
        std::mem::take(&mut *self.bodies.lock().unwrap())
    }

    /// How many requests calling the Zabbix API method `method` went through so far.
    pub fn sent(&self, method: &str) -> usize {
        let needle = format!("\"method\":\"{method}\"");
        let bodies = self.bodies.lock().unwrap();
        bodies.iter().filter(|b| b.contains(&needle)).count()
    }
}

/// Starts the proxy; returns its URL (same path as `upstream`) and the recorder.
pub async fn start(upstream: &str) -> (String, Recorder) {
    super::init();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let recorder = Recorder::default();
    let upstream = upstream.to_owned();
    let path = upstream
        .splitn(4, '/')
        .nth(3)
        .map(|p| format!("/{p}"))
        .unwrap_or_default();
    let http = reqwest::Client::new();
    let rec = recorder.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let rec = rec.clone();
            let http = http.clone();
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let rec = rec.clone();
                    let http = http.clone();
                    let upstream = upstream.clone();
                    async move {
                        let headers = req.headers().clone();
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        rec.bodies
                            .lock()
                            .unwrap()
                            .push(String::from_utf8_lossy(&body).into_owned());
                        let mut forward = http.post(&upstream).body(body.to_vec());
                        for (k, v) in headers.iter() {
                            if k == "content-type" || k == "authorization" {
                                forward = forward.header(k.as_str(), v.as_bytes());
                            }
                        }
                        let answer = forward.send().await.unwrap();
                        let status = answer.status().as_u16();
                        let bytes = answer.bytes().await.unwrap();
                        let mut response =
                            hyper::Response::new(Full::new(Bytes::from(bytes.to_vec())));
                        *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                        Ok::<_, std::convert::Infallible>(response)
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}{path}"), recorder)
}
