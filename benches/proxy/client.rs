//! The raw HTTP client side: a keep-alive hyper client, the two kinds of request target (a
//! JSON-RPC POST straight to Zabbix, an MCP `tools/call` POST to the sidecar), one timed
//! call with its answer check, and helpers that read host ids out of either answer.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::CONCURRENCY;

/// The `host_get` arguments every sidecar call sends.
pub const TOOL_ARGS: &str = r#"{"search":"mcp-","limit":10}"#;
pub const PROTOCOL_VERSION: &str = "2025-11-25";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Direct,
    Sidecar,
}

#[derive(Clone)]
pub struct Target {
    kind: Kind,
    pub uri: Uri,
    headers: HeaderMap,
    pub body: Bytes,
}

impl Target {
    pub fn direct(uri: Uri, token: &str, body: Bytes) -> Target {
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json-rpc"),
        );
        headers.insert(AUTHORIZATION, bearer(token));
        Target {
            kind: Kind::Direct,
            uri,
            headers,
            body,
        }
    }

    pub fn sidecar(uri: Uri, token: &str) -> Target {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_static(PROTOCOL_VERSION),
        );
        headers.insert(AUTHORIZATION, bearer(token));
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"host_get","arguments":{TOOL_ARGS}}}}}"#
        );
        Target {
            kind: Kind::Sidecar,
            uri,
            headers,
            body: Bytes::from(body),
        }
    }

    fn request(&self) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(self.body.clone()));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }

    /// One timed call: from sending the request to the last byte of the response body.
    /// The answer is checked after the clock stops.
    pub async fn call(&self, client: &HttpClient) -> Result<(Duration, StatusCode, Bytes), String> {
        let request = self.request();
        let started = Instant::now();
        let exchange = async {
            let response = client.request(request).await.map_err(|e| e.to_string())?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok::<_, String>((status, body))
        };
        let (status, body) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()))??;
        let elapsed = started.elapsed();
        let ok = status == StatusCode::OK
            && match self.kind {
                Kind::Direct => contains(&body, b"\"result\"") && !contains(&body, b"\"error\""),
                Kind::Sidecar => {
                    contains(&body, b"\"structuredContent\"")
                        && !contains(&body, b"\"isError\":true")
                }
            };
        if !ok {
            return Err(format!(
                "{} answered {status}: {}",
                self.uri,
                String::from_utf8_lossy(&body[..body.len().min(500)])
            ));
        }
        Ok((elapsed, status, body))
    }
}

pub fn http_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(300))
        .pool_max_idle_per_host(CONCURRENCY)
        .build(connector)
}

fn bearer(token: &str) -> HeaderValue {
    let mut value = HeaderValue::try_from(format!("Bearer {token}")).expect("token header");
    value.set_sensitive(true);
    value
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

pub fn without_id(body: &[u8]) -> Value {
    let mut value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.remove("id");
    }
    value
}

pub fn direct_hostids(body: &[u8]) -> Vec<String> {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    ids_of(&value["result"])
}

pub fn sidecar_hostids(body: &[u8]) -> Vec<String> {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    ids_of(&value["result"]["structuredContent"]["results"])
}

fn ids_of(list: &Value) -> Vec<String> {
    list.as_array()
        .map(|hosts| {
            hosts
                .iter()
                .filter_map(|h| h["hostid"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
