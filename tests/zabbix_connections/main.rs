//! The client's own connections toward Zabbix (src/zabbix/connections.rs), against small
//! local frontends whose connection handling the lab's `php -S` (which closes every
//! connection) cannot show: kept-open connections are reused, a frontend that closes each
//! one gets a new one per call, a connection the frontend closed after its answer is not
//! used again (for a read or a write), and TLS picks HTTP/2 when the frontend's ALPN
//! offers it, one connection shared by concurrent calls.

#[path = "../common/mod.rs"]
mod common;
mod goaway;
mod silence;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::Version;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zabbix_mcp_guard::zabbix::{ApiToken, ClientSettings, Method, ZabbixClient, ZabbixVersion};

/// How a test frontend treats its connections.
#[derive(Clone, Copy)]
enum Keep {
    /// HTTP/1.1 keep-alive (hyper's server).
    Open,
    /// Answers with `Connection: close` and closes.
    CloseSaid,
    /// Answers as if keeping the connection, then closes it without a word.
    CloseUnsaid,
    /// Answers as if keeping the connection, then closes it as the next request arrives,
    /// unread: Apache when its `KeepAliveTimeout` ends just as a request comes.
    CloseAsNextArrives,
}

/// What a frontend saw.
#[derive(Clone, Default)]
struct Seen {
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<(Version, String)>>>,
}

impl Seen {
    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn requests(&self) -> Vec<(Version, String)> {
        self.requests.lock().unwrap().clone()
    }
}

/// The answer to every request: a JSON-RPC result naming the method asked.
fn answer(request: &[u8]) -> (String, Vec<u8>) {
    let request = serde_json::from_slice::<Value>(request).unwrap_or(Value::Null);
    let method = request["method"].as_str().unwrap_or_default().to_owned();
    let body = json!({"jsonrpc": "2.0", "result": {"method": method}, "id": request["id"]});
    (method, serde_json::to_vec(&body).unwrap())
}

/// A plain-HTTP frontend; returns its API URL.
async fn plain_front(keep: Keep) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/api_jsonrpc.php", listener.local_addr().unwrap());
    let seen = Seen::default();
    let state = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            state.connections.fetch_add(1, Ordering::SeqCst);
            let state = state.clone();
            tokio::spawn(async move {
                match keep {
                    Keep::CloseUnsaid => answer_once_and_close(stream, &state).await,
                    Keep::CloseAsNextArrives => close_as_next_arrives(stream, &state).await,
                    Keep::Open | Keep::CloseSaid => {
                        let mut http1 = hyper::server::conn::http1::Builder::new();
                        http1.keep_alive(matches!(keep, Keep::Open));
                        let service = service_fn(move |request| serve(request, state.clone()));
                        let _ = http1.serve_connection(TokioIo::new(stream), service).await;
                    }
                }
            });
        }
    });
    (url, seen)
}

async fn serve(
    request: hyper::Request<hyper::body::Incoming>,
    seen: Seen,
) -> Result<hyper::Response<Full<Bytes>>, hyper::Error> {
    let version = request.version();
    let body = request.into_body().collect().await?.to_bytes();
    let (method, answer) = answer(&body);
    seen.requests.lock().unwrap().push((version, method));
    let mut response = hyper::Response::new(Full::new(Bytes::from(answer)));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// Reads one HTTP/1.1 request (one at a time: nothing is read past it) and returns its body.
async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut read = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        read.extend_from_slice(&buf[..n]);
        let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&read[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if read.len() >= end + 4 + length {
            return Some(read[end + 4..end + 4 + length].to_vec());
        }
    }
}

/// Writes a 200 answer with a length and no `Connection` header (so it looks reusable).
async fn respond(stream: &mut TcpStream, answer: &[u8]) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        answer.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(answer).await;
}

/// Answers one request as if keeping the connection, then waits for the next one and
/// closes with it unread (the client gets a reset after its bytes went out).
async fn close_as_next_arrives(mut stream: TcpStream, seen: &Seen) {
    if answer_one(&mut stream, seen).await {
        let _ = stream.readable().await;
    }
}

/// Reads one request, answers it as if keeping the connection, and closes.
async fn answer_once_and_close(mut stream: TcpStream, seen: &Seen) {
    answer_one(&mut stream, seen).await;
}

/// Reads one request and answers it as if keeping the connection; false when none came.
async fn answer_one(stream: &mut TcpStream, seen: &Seen) -> bool {
    let Some(body) = read_request(stream).await else {
        return false;
    };
    let (method, answer) = answer(&body);
    seen.requests
        .lock()
        .unwrap()
        .push((Version::HTTP_11, method));
    respond(stream, &answer).await;
    true
}

/// A keep-alive frontend out of step with its connection, once: to the second request on
/// the first connection it first sends an answer of another request (id 999, as a proxy
/// that mixed up two clients' answers would), then the request's own.
async fn stray_front() -> (String, Seen, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/api_jsonrpc.php", listener.local_addr().unwrap());
    let seen = Seen::default();
    let strays = Arc::new(AtomicUsize::new(0));
    let (state, sent) = (seen.clone(), strays.clone());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            state.connections.fetch_add(1, Ordering::SeqCst);
            let (state, sent) = (state.clone(), sent.clone());
            tokio::spawn(async move {
                let mut served = 0;
                while let Some(body) = read_request(&mut stream).await {
                    let (method, answer) = answer(&body);
                    state
                        .requests
                        .lock()
                        .unwrap()
                        .push((Version::HTTP_11, method));
                    served += 1;
                    if served == 2 && sent.load(Ordering::SeqCst) == 0 {
                        let stray = json!({"jsonrpc": "2.0", "result": {"method": "someone else's"}, "id": 999});
                        respond(&mut stream, stray.to_string().as_bytes()).await;
                        sent.fetch_add(1, Ordering::SeqCst);
                    }
                    respond(&mut stream, &answer).await;
                }
            });
        }
    });
    (url, seen, strays)
}

/// A TLS frontend (certificate for localhost from `pki`) offering `alpn`, serving HTTP/1.1
/// and HTTP/2; returns its API URL.
async fn tls_front(pki: &common::tls::Pki, alpn: &[&[u8]]) -> (String, Seen) {
    let mut config = common::tls::server_config(pki);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://localhost:{}/api_jsonrpc.php",
        listener.local_addr().unwrap().port()
    );
    let seen = Seen::default();
    let state = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            state.connections.fetch_add(1, Ordering::SeqCst);
            let (acceptor, state) = (acceptor.clone(), state.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = service_fn(move |request| serve(request, state.clone()));
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (url, seen)
}

fn client(url: &str, ca_file: Option<std::path::PathBuf>) -> ZabbixClient {
    client_aged(url, ca_file, Duration::from_secs(300))
}

/// A client whose connections carry calls for `max_age` (`MaxZabbixConnectionAge`).
fn client_aged(url: &str, ca_file: Option<std::path::PathBuf>, max_age: Duration) -> ZabbixClient {
    common::init();
    ZabbixClient::new(&ClientSettings {
        api_url: url.to_owned(),
        timeout: Duration::from_secs(10),
        ca_file,
        ignore_cert_errors: false,
        max_response_bytes: 1 << 20,
        max_concurrency: 16,
        max_connection_age: max_age,
    })
    .unwrap()
}

/// A read (no token needed).
async fn read(client: &ZabbixClient) -> Value {
    client
        .call(Method::ApiInfoVersion, &json!({}), None)
        .await
        .unwrap()
}

/// A write, with a token as 7.0 takes it.
async fn write(client: &ZabbixClient) -> Result<Value, zabbix_mcp_guard::zabbix::ZabbixError> {
    let token = ApiToken::new("connections-test-token".into());
    let version: ZabbixVersion = "7.0.0".parse().unwrap();
    client
        .call(
            Method::EventAcknowledge,
            &json!({"eventids": ["1"], "action": 4, "message": "x"}),
            Some((&token, version)),
        )
        .await
}

#[tokio::test]
async fn kept_open_connections_are_reused() {
    let (url, seen) = plain_front(Keep::Open).await;
    let client = client(&url, None);
    for _ in 0..5 {
        assert_eq!(read(&client).await["method"], "apiinfo.version");
    }
    write(&client).await.unwrap();
    assert_eq!(
        seen.connections(),
        2,
        "five reads on one connection, the write on a new one"
    );
    assert_eq!(seen.requests().len(), 6);
}

#[tokio::test]
async fn a_frontend_closing_each_connection_gets_a_new_one_per_call() {
    let (url, seen) = plain_front(Keep::CloseSaid).await;
    let client = client(&url, None);
    for _ in 0..4 {
        read(&client).await;
    }
    write(&client).await.unwrap();
    assert_eq!(seen.connections(), 5);
}

#[tokio::test]
async fn a_connection_closed_after_its_answer_is_not_used_again() {
    let (url, seen) = plain_front(Keep::CloseUnsaid).await;
    let client = client(&url, None);
    read(&client).await;
    // The frontend closed the connection it answered on without saying so: the read
    // after it and a write (never sent twice) both go out on new connections.
    read(&client).await;
    let written = write(&client).await;
    assert!(written.is_ok(), "{written:?}");
    read(&client).await;
    assert_eq!(seen.connections(), 4);
    let methods: Vec<String> = seen.requests().into_iter().map(|(_, m)| m).collect();
    assert_eq!(
        methods,
        [
            "apiinfo.version",
            "apiinfo.version",
            "event.acknowledge",
            "apiinfo.version"
        ],
        "each request reached the frontend once"
    );
}

#[tokio::test]
async fn tls_speaks_http2_when_the_frontend_offers_it_on_one_shared_connection() {
    let pki = common::tls::pki("connections-h2");
    let (url, seen) = tls_front(&pki, &[b"h2", b"http/1.1"]).await;
    let client = Arc::new(client(&url, Some(pki.ca_file.clone())));
    read(&client).await;
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let client = Arc::clone(&client);
            tokio::spawn(async move { read(&client).await })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap()["method"], "apiinfo.version");
    }
    write(&client).await.unwrap();
    assert_eq!(
        seen.connections(),
        1,
        "one HTTP/2 connection for every call"
    );
    let requests = seen.requests();
    assert_eq!(requests.len(), 10);
    assert!(
        requests.iter().all(|(v, _)| *v == Version::HTTP_2),
        "{requests:?}"
    );
}

/// `MaxZabbixConnectionAge`: a kept connection (HTTP/1.1, or the shared HTTP/2 one) older
/// than it is handed no more calls, and the next call connects anew, looking the frontend's
/// name up again. Before, a kept connection carried calls for as long as it stayed open
/// (the readiness check every 10 s kept it so for good): with /etc/hosts moving the
/// frontend's name to another local frontend, the sidecar's calls all went on to the old
/// one (6 calls over 30 s, none to the new address).
#[tokio::test]
async fn a_connection_older_than_max_zabbix_connection_age_carries_no_more_calls() {
    let pki = common::tls::pki("connections-age");
    let (plain, plain_seen) = plain_front(Keep::Open).await;
    let (tls, tls_seen) = tls_front(&pki, &[b"h2"]).await;
    for (url, seen, ca) in [
        (plain, plain_seen, None),
        (tls, tls_seen, Some(pki.ca_file.clone())),
    ] {
        let client = client_aged(&url, ca, Duration::from_secs(1));
        read(&client).await;
        read(&client).await;
        assert_eq!(seen.connections(), 1, "{url}: reused while younger");
        common::wait_until(
            "a call on a new connection",
            Duration::from_secs(10),
            async || {
                write(&client).await.unwrap();
                seen.connections() == 2
            },
        )
        .await;
    }
}

#[tokio::test]
async fn tls_speaks_http1_when_the_frontend_offers_only_that() {
    let pki = common::tls::pki("connections-h1");
    let (url, seen) = tls_front(&pki, &[b"http/1.1"]).await;
    let client = client(&url, Some(pki.ca_file.clone()));
    for _ in 0..3 {
        read(&client).await;
    }
    assert_eq!(seen.connections(), 1, "one kept-open TLS connection");
    assert!(
        seen.requests().iter().all(|(v, _)| *v == Version::HTTP_11),
        "{:?}",
        seen.requests()
    );
}

#[tokio::test]
async fn a_refused_connection_says_where_and_why() {
    let port = common::free_port();
    let client = client(&format!("http://127.0.0.1:{port}/api_jsonrpc.php"), None);
    let error = client
        .call(Method::ApiInfoVersion, &json!({}), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&format!("connecting to 127.0.0.1:{port}")) && error.contains("refused"),
        "{error}"
    );
}

/// An answer of another request on a kept-open connection must not be taken for the
/// call's own (it would hand one caller another's data): the call fails as an invalid
/// response, the idle connections are closed, and the calls after it go out on a new
/// connection.
#[tokio::test]
async fn another_requests_answer_is_never_taken() {
    let (url, seen, strays) = stray_front().await;
    let client = client(&url, None);
    assert_eq!(read(&client).await["method"], "apiinfo.version");
    let taken = client.call(Method::ApiInfoVersion, &json!({}), None).await;
    let error = taken
        .expect_err("the stray answer is not this call's")
        .to_string();
    assert!(error.contains("the answer's id is 999"), "{error}");
    assert_eq!(strays.load(Ordering::SeqCst), 1);
    assert_eq!(read(&client).await["method"], "apiinfo.version");
    // A write takes the other path through the client (serde's reading): the same check.
    write(&client).await.unwrap();
    assert_eq!(
        seen.connections(),
        3,
        "the out-of-step connection was not used again (the write has one of its own)"
    );
}

/// A write never goes on an idle HTTP/1.1 connection. A frontend closing one as the write
/// arrives (Apache when `KeepAliveTimeout` ends just then) takes its bytes unread, and the
/// client cannot tell that from a write applied before its answer was lost. Before, such a
/// write was reported as possibly applied (`the request reached the Zabbix API, but its
/// answer was lost`), having reached nothing; now it goes on a new connection.
#[tokio::test]
async fn a_write_is_not_raced_by_a_keep_alive_close() {
    let (url, seen) = plain_front(Keep::CloseAsNextArrives).await;
    let client = client(&url, None);
    read(&client).await;
    let written = write(&client).await;
    assert!(written.is_ok(), "{written:?}");
    let methods: Vec<String> = seen.requests().into_iter().map(|(_, m)| m).collect();
    assert_eq!(methods, ["apiinfo.version", "event.acknowledge"]);
    assert_eq!(seen.connections(), 2);
}
