//! Zabbix's answer as the adversary: arbitrary bytes as the body of Zabbix's answer to the
//! `host.get` of a `tools/call host_get {"limit":5}`, through `server::Router` (the direct
//! stateless path, the one-pass scan of the answer, the records writer, the splice of the
//! document into the response). A stub Zabbix answers the identity calls as a super admin
//! and `host.get` with the input, verbatim.
//!
//! Every input must get an HTTP answer, and a read result only when the answer is one:
//! - a successful read means serde_json reads the body as an object whose `result` is an
//!   array (the scan never takes what serde_json refuses);
//! - its text block is the JSON text of its structured content;
//! - it holds the answer's first five elements (`truncated` when there were more), each
//!   requested field as serde_json reads it from the answer (values keep Zabbix's text).
#![no_main]

use std::net::IpAddr;
use std::sync::{Mutex, OnceLock};

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

const LIMIT: usize = 5;
const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"host_get","arguments":{"limit":5}}}"#;
/// Fields host_get asks for that keep their name in a record on 7.0.
const FIELDS: [&str; 7] = [
    "hostid",
    "host",
    "name",
    "status",
    "description",
    "maintenance_status",
    "flags",
];

/// The body the stub sends for the next `host.get`.
static ANSWER: Mutex<Bytes> = Mutex::new(Bytes::new());

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

/// Answers identity calls as a super admin, `host.get` with [`ANSWER`], the rest `[]`.
async fn stub_zabbix() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // An answer's head and body may go out in two writes: without this the second
            // waits for the sidecar's delayed ACK, tens of milliseconds per call.
            let _ = stream.set_nodelay(true);
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
                        "host.get" => {
                            let answer = ANSWER.lock().expect("answer").clone();
                            return Ok::<_, std::convert::Infallible>(hyper::Response::new(
                                Full::new(answer),
                            ));
                        }
                        "apiinfo.version" => json!("7.0.22"),
                        "user.checkAuthentication" => {
                            json!({"userid": "1", "username": "Admin", "type": 3, "roleid": "3"})
                        }
                        "usergroup.get" => json!([{"name": "Zabbix administrators"}]),
                        _ => json!([]),
                    };
                    let answer = json!({"jsonrpc": "2.0", "result": result, "id": request["id"]});
                    Ok(hyper::Response::new(Full::new(Bytes::from(answer.to_string()))))
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{addr}/api_jsonrpc.php")
}

/// What the sidecar answered: a read's structured content, or anything else.
fn read_result(body: &[u8]) -> Option<Value> {
    let message: Value = serde_json::from_slice(body).expect("the sidecar's answer is JSON");
    let result = message.get("result")?;
    if result["isError"] == json!(true) {
        return None;
    }
    let text = result["content"][0]["text"]
        .as_str()
        .expect("a read result has a text block");
    let structured = result
        .get("structuredContent")
        .expect("a read result has structured content");
    let from_text: Value = serde_json::from_str(text).expect("the text block is JSON");
    assert_eq!(&from_text, structured, "text block and structured content differ");
    Some(structured.clone())
}

fuzz_target!(|data: &[u8]| {
    let world = world();
    *ANSWER.lock().expect("answer") = Bytes::copy_from_slice(data);
    let request = http::Request::post("http://127.0.0.1/mcp")
        .header("host", "127.0.0.1")
        .header("authorization", "Bearer fuzz-token")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(Full::new(Bytes::from_static(CALL.as_bytes())))
        .expect("request");
    let peer: IpAddr = [127, 0, 0, 1].into();
    let body = world.runtime.block_on(async {
        let response = world.router.handle(request, peer).await;
        assert!(response.status().as_u16() < 600);
        response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default()
    });
    let Some(document) = read_result(&body) else {
        return;
    };
    let answer: Value = serde_json::from_slice(data).expect("a read from a body serde_json refuses");
    let elements = answer["result"]
        .as_array()
        .expect("a read from an answer whose result is no array");
    let results = document["results"].as_array().expect("results");
    assert_eq!(results.len(), elements.len().min(LIMIT), "records kept");
    assert_eq!(document["count"], json!(results.len()), "count");
    assert_eq!(document["truncated"], json!(elements.len() > LIMIT), "truncated");
    for (record, element) in results.iter().zip(elements) {
        let Some(element) = element.as_object() else {
            continue;
        };
        for field in FIELDS {
            if let (Some(kept), Some(sent)) = (record.get(field), element.get(field)) {
                assert_eq!(kept, sent, "field {field} changed");
            }
        }
    }
});
