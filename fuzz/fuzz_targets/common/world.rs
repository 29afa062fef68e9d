//! What the router targets share: a current-thread runtime, a stub Zabbix on loopback and
//! the sidecar's `server::Router` in front of it (decision log to /dev/null).

use std::sync::OnceLock;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use zabbix_mcp_guard::app::App;
use zabbix_mcp_guard::config::{Config, DecisionLogSink};
use zabbix_mcp_guard::server::Router;

/// A body the stub sends verbatim for a method, instead of its own answer.
pub type Verbatim = fn(&str) -> Option<Bytes>;

pub struct World {
    pub runtime: Runtime,
    pub router: Router,
}

/// The one world of this process, its stub answering with `verbatim` first.
pub fn world(verbatim: Verbatim) -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let router = runtime.block_on(async {
            let url = stub_zabbix(verbatim).await;
            let mut config = Config::new(&url, "127.0.0.1").expect("config");
            config.decision_log = DecisionLogSink::File("/dev/null".into());
            Router::new(App::new(config).expect("app"))
        });
        World { runtime, router }
    })
}

/// A stateless `POST /mcp` with `body`, as a client on protocol 2025-11-25 sends it.
pub fn mcp_post(body: Bytes) -> http::Request<Full<Bytes>> {
    http::Request::post("http://127.0.0.1/mcp")
        .header("host", "127.0.0.1")
        .header("authorization", "Bearer fuzz-token")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(Full::new(body))
        .expect("request")
}

/// Answers what `verbatim` gives a body for with it, identity calls as a super admin and
/// every other call with `[]`.
async fn stub_zabbix(verbatim: Verbatim) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // An answer's head and body may go out in two writes: without this the second
            // waits for the sidecar's delayed ACK, tens of milliseconds per call.
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| async move {
                        let body = req
                            .into_body()
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let method = request["method"].as_str().unwrap_or("");
                        if let Some(body) = verbatim(method) {
                            return Ok::<_, std::convert::Infallible>(hyper::Response::new(
                                Full::new(body),
                            ));
                        }
                        let result = match method {
                            "apiinfo.version" => json!("7.0.22"),
                            "user.checkAuthentication" => {
                                json!({"userid": "1", "username": "Admin", "type": 3, "roleid": "3"})
                            }
                            "usergroup.get" => json!([{"name": "Zabbix administrators"}]),
                            _ => json!([]),
                        };
                        let answer =
                            json!({"jsonrpc": "2.0", "result": result, "id": request["id"]});
                        Ok(hyper::Response::new(Full::new(Bytes::from(
                            answer.to_string(),
                        ))))
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{addr}/api_jsonrpc.php")
}
