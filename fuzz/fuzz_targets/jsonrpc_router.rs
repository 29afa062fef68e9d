//! The JSON-RPC request path through the router: arbitrary bytes as the body of
//! `POST /mcp` (stateless mode), through authentication, rmcp's parsing, tool lookup,
//! validation, policy and a stub Zabbix that answers everything with an empty list. Every
//! input must get an HTTP answer; nothing may panic.
#![no_main]

use std::net::IpAddr;
use std::sync::OnceLock;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use zabbix_mcp_guard::app::App;
use zabbix_mcp_guard::config::{Config, DecisionLogSink};
use zabbix_mcp_guard::server::Router;

struct World {
    runtime: Runtime,
    router: Router,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let router = runtime.block_on(async {
            let url = stub_zabbix().await;
            let mut config = Config::new(&url, "127.0.0.1").expect("config");
            config.decision_log = DecisionLogSink::File("/dev/null".into());
            Router::new(App::new(config).expect("app"))
        });
        World { runtime, router }
    })
}

/// Answers identity calls as a super admin and every other call with `[]`.
async fn stub_zabbix() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                    let body = req
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let result = match request["method"].as_str().unwrap_or("") {
                        "apiinfo.version" => json!("7.0.22"),
                        "user.checkAuthentication" => {
                            json!({"userid": "1", "username": "Admin", "type": 3, "roleid": "3"})
                        }
                        "usergroup.get" => json!([{"name": "Zabbix administrators"}]),
                        _ => json!([]),
                    };
                    let answer = json!({"jsonrpc": "2.0", "result": result, "id": request["id"]});
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from(
                        answer.to_string(),
                    ))))
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{addr}/api_jsonrpc.php")
}

fuzz_target!(|data: &[u8]| {
    let world = world();
    let request = http::Request::post("http://127.0.0.1/mcp")
        .header("host", "127.0.0.1")
        .header("authorization", "Bearer fuzz-token")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(Full::new(Bytes::copy_from_slice(data)))
        .expect("request");
    let peer: IpAddr = [127, 0, 0, 1].into();
    world.runtime.block_on(async {
        let response = world.router.handle(request, peer).await;
        let status = response.status();
        let _ = response.into_body().collect().await;
        assert!(status.as_u16() < 600);
    });
});
