//! A standalone instant stub Zabbix for the load run (its own process, so neither the
//! sidecar nor the load client pays for it): it answers `apiinfo.version`, the identity
//! calls and every data method at once, with one host; keep-alive like a real frontend.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;

#[derive(serde::Deserialize)]
struct RpcHead {
    method: String,
    #[serde(default)]
    id: Value,
}

/// Serves on `listen` until the process is stopped; prints the API URL once bound.
pub fn run(listen: SocketAddr) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(listen).await?;
        println!(
            "stub listening on http://{}/api_jsonrpc.php",
            listener.local_addr()?
        );
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service_fn(answer))
                    .await;
            });
        }
    })
}

async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let head: RpcHead = match serde_json::from_slice(&body) {
        Ok(head) => head,
        Err(_) => {
            return Ok(reply(
                json!({"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error", "data": ""}, "id": null}),
            ));
        }
    };
    let result = match head.method.as_str() {
        "apiinfo.version" => json!("7.0.22"),
        "user.checkAuthentication" => {
            json!({"userid": "1", "username": "Admin", "type": 3, "roleid": "3"})
        }
        "usergroup.get" => json!([{"name": "Zabbix administrators"}]),
        "host.get" => json!([{
            "hostid": "10101", "host": "load-01", "name": "load-01", "status": "0",
            "description": "", "maintenance_status": "0", "flags": "0"
        }]),
        _ => json!([]),
    };
    Ok(reply(
        json!({"jsonrpc": "2.0", "result": result, "id": head.id}),
    ))
}

fn reply(value: Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
