//! A stub Zabbix for faults a real one cannot produce on demand: it answers the identity
//! calls at once and delays (or drops) the others.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;

#[derive(Clone, Default)]
pub struct Stub {
    pub calls: Arc<AtomicUsize>,
    /// How many of the next `usergroup.get` calls answer only after the group delay.
    pub slow_group_calls: Arc<AtomicUsize>,
    /// `usergroup.get` calls answered so far (slow or not).
    pub group_calls: Arc<AtomicUsize>,
    /// While set, `user.checkAuthentication` answers this JSON-RPC error object.
    pub auth_error: Arc<Mutex<Option<Value>>>,
    /// `user.checkAuthentication` calls received so far (counted as they come).
    pub auth_calls: Arc<AtomicUsize>,
    /// While true, `user.checkAuthentication` calls wait to be answered until it is false:
    /// lookups that overlap, whatever the machine's speed.
    pub auth_held: Arc<tokio::sync::watch::Sender<bool>>,
}

/// Starts a stub that answers data methods after `delay`; returns its API URL.
pub async fn start(delay: Duration) -> (String, Stub) {
    start_full(delay, default_result(), Duration::ZERO, 0).await
}

/// Starts a stub that answers data methods with `result` after `delay`.
pub async fn start_answering(delay: Duration, result: Value) -> (String, Stub) {
    start_full(delay, result, Duration::ZERO, 0).await
}

/// As `start`, and the next `slow_group_calls` `usergroup.get` calls wait `group_delay`.
pub async fn start_with(
    delay: Duration,
    group_delay: Duration,
    slow_group_calls: usize,
) -> (String, Stub) {
    start_full(delay, default_result(), group_delay, slow_group_calls).await
}

fn default_result() -> Value {
    json!([{"hostid": "1", "host": "slow", "name": "slow"}])
}

async fn start_full(
    delay: Duration,
    result: Value,
    group_delay: Duration,
    slow_group_calls: usize,
) -> (String, Stub) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stub = Stub::default();
    stub.slow_group_calls
        .store(slow_group_calls, Ordering::SeqCst);
    let calls = stub.calls.clone();
    let slow = stub.slow_group_calls.clone();
    let group_calls = stub.group_calls.clone();
    let auth_error = stub.auth_error.clone();
    let auth_calls = stub.auth_calls.clone();
    let auth_held = stub.auth_held.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let calls = calls.clone();
            let slow = slow.clone();
            let group_calls = group_calls.clone();
            let auth_error = auth_error.clone();
            let auth_calls = auth_calls.clone();
            let auth_held = auth_held.clone();
            let answer = result.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let calls = calls.clone();
                    let slow = slow.clone();
                    let group_calls = group_calls.clone();
                    let auth_error = auth_error.clone();
                    let auth_calls = auth_calls.clone();
                    let auth_held = auth_held.clone();
                    let answer = answer.clone();
                    async move {
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let request: Value = serde_json::from_slice(&body).unwrap();
                        let result = match request["method"].as_str().unwrap_or("") {
                            "apiinfo.version" => json!("7.0.22"),
                            "user.checkAuthentication" => {
                                auth_calls.fetch_add(1, Ordering::SeqCst);
                                let _ = auth_held.subscribe().wait_for(|held| !held).await;
                                let failing = auth_error.lock().unwrap().clone();
                                if let Some(error) = failing {
                                    let answer = json!({"jsonrpc": "2.0", "error": error, "id": request["id"]});
                                    return Ok(hyper::Response::new(Full::new(Bytes::from(
                                        answer.to_string(),
                                    ))));
                                }
                                json!({"userid": "1", "username": "Admin", "type": 3, "roleid": "3"})
                            }
                            "usergroup.get" => {
                                group_calls.fetch_add(1, Ordering::SeqCst);
                                let is_slow = slow
                                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                                        n.checked_sub(1)
                                    })
                                    .is_ok();
                                if is_slow {
                                    tokio::time::sleep(group_delay).await;
                                }
                                json!([{"name": "Zabbix administrators"}])
                            }
                            _ => {
                                calls.fetch_add(1, Ordering::SeqCst);
                                tokio::time::sleep(delay).await;
                                answer
                            }
                        };
                        let answer =
                            json!({"jsonrpc": "2.0", "result": result, "id": request["id"]});
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                            Bytes::from(answer.to_string()),
                        )))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}/api_jsonrpc.php"), stub)
}
