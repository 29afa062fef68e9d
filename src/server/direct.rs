//! Stateless `tools/list` and `tools/call` answered without rmcp's per-request service.
//!
//! For every stateless request rmcp builds a whole service: a peer with its channels, a
//! serve loop task and a handler task, with futures of several kB moved between them.
//! That was the largest part of the sidecar's own cost per call. For the two methods
//! agents send all the time, from clients on the protocol versions that predate
//! per-request metadata (up to 2025-11-25), this module does inline what that path does:
//! the same body parse (reached sooner for these two methods: `direct_parse`), the same
//! header checks, the same handler entry point (`Service::handle_request`, rmcp's own
//! dispatch and result rules) and the same serialization. Anything else (other methods,
//! 2026-07-28 requests, malformed headers or bodies) goes to rmcp unchanged, so its
//! answers and errors stay rmcp's.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use rmcp::model::{
    ClientCapabilities, ClientRequest, ErrorData, GetExtensions, GetMeta, Implementation,
    InitializeRequestParams, JsonRpcMessage, ProtocolVersion, RequestId, ServerJsonRpcMessage,
    ServerResult,
};
use rmcp::service::{
    Peer, RequestContext, RoleServer, RunningService, RxJsonRpcMessage, Service, TxJsonRpcMessage,
    serve_directly_with_ct,
};
use rmcp::transport::Transport;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::mcp::GuardHandler;
use crate::mcp::errors::ToolError;
use crate::metrics::McpPath;
use crate::server::direct_parse;
use crate::server::routes::Body;

/// The MCP protocol version header (rmcp's `HEADER_MCP_PROTOCOL_VERSION`).
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";

/// The handler, and one idle peer per protocol version this path serves: a handler's
/// context needs a peer, and rmcp's stateless path gives it one whose only state is the
/// version (from the header), so one per version serves every request.
pub(crate) struct Direct {
    app: Arc<App>,
    handler: GuardHandler,
    peers: Vec<(ProtocolVersion, Peer<RoleServer>)>,
    /// Keep the peers' (idle) services alive until shutdown cancels them.
    _services: Vec<RunningService<RoleServer, GuardHandler>>,
}

/// What became of a request.
pub(crate) enum Served {
    Answered(Response<Body>),
    /// Not one this path answers: for rmcp, as it came.
    NotOurs(Request<Full<Bytes>>),
}

/// A transport that never delivers a message and drops what it is given: the idle
/// peers' services never receive anything.
struct Idle;

impl Direct {
    pub(crate) fn new(app: Arc<App>, cancel: &CancellationToken) -> Direct {
        let handler = GuardHandler::new(app.clone());
        let mut peers = Vec::new();
        let mut services = Vec::new();
        for version in ProtocolVersion::KNOWN_VERSIONS {
            if version.as_str() >= ProtocolVersion::STANDARD_HEADERS.as_str() {
                continue;
            }
            let service = serve_directly_with_ct(
                handler.clone(),
                Idle,
                Some(peer_info(version.clone())),
                cancel.child_token(),
            );
            peers.push((version.clone(), service.peer().clone()));
            services.push(service);
        }
        Direct {
            app,
            handler,
            peers,
            _services: services,
        }
    }

    /// Answers `request` if it is a `tools/list` or `tools/call` this path serves.
    pub(crate) async fn serve(&self, request: Request<Full<Bytes>>) -> Served {
        let served = self.answer(request).await;
        let path = match served {
            Served::Answered(_) => McpPath::Direct,
            Served::NotOurs(_) => McpPath::Rmcp,
        };
        self.app.metrics.mcp_request(path);
        served
    }

    async fn answer(&self, request: Request<Full<Bytes>>) -> Served {
        let Some(peer) = self.peer_for(&request) else {
            return Served::NotOurs(request);
        };
        let (parts, bytes) = into_bytes(request).await;
        let (id, mut request) = match direct_parse::request(&bytes) {
            Some((id, request)) if served(&request) => (id, request),
            _ => return Served::NotOurs(Request::from_parts(parts, Full::new(bytes))),
        };
        // As rmcp's serve loop builds it: the request's own metadata and extensions, and
        // the HTTP request (with the caller the server layer resolved).
        let mut context = RequestContext::new(id.clone(), peer.clone());
        std::mem::swap(&mut context.meta, request.get_meta_mut());
        std::mem::swap(&mut context.extensions, request.extensions_mut());
        context.extensions.insert(parts);
        let message = match request {
            ClientRequest::ListToolsRequest(_) => {
                // The answer is written straight after its head: the list is copied once.
                let mut body = response_head(&id);
                match self.handler.list_tools_json(&context, &mut body).await {
                    Ok(true) => {
                        body.push('}');
                        return Served::Answered(json_body(Ok(Bytes::from(body))));
                    }
                    Ok(false) => self.handle(request, context).await,
                    Err(error) => Err(error),
                }
            }
            _ => self.handle(request, context).await,
        };
        Served::Answered(message_body(&message_of(message, id)))
    }

    /// Runs rmcp's handler entry point for the request in a task of its own, as rmcp
    /// does: a client that hangs up does not cancel a call half way (its outcome still
    /// reaches the decision log). Boxed: the task moves a pointer, not the handler's
    /// future (kBs), each time it is stored, polled to the end and read; and the
    /// request's own future stays small.
    async fn handle(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let handler = self.handler.clone();
        let task = tokio::spawn(Box::pin(async move {
            handler.handle_request(request, context).await
        }));
        task.await.unwrap_or_else(|error| {
            tracing::error!(%error, "MCP request task ended without an answer");
            Err(ToolError::TaskFailed.into_rpc())
        })
    }

    /// The idle peer for the request's protocol version, if this path serves the request's
    /// HTTP form: a POST that accepts JSON and SSE, with a JSON body, and either no
    /// `MCP-Protocol-Version` (2025-03-26, as rmcp assumes) or one this path serves.
    fn peer_for(&self, request: &Request<Full<Bytes>>) -> Option<&Peer<RoleServer>> {
        let headers = request.headers();
        if request.method() != Method::POST || !accepts_both(headers) || !is_json(headers) {
            return None;
        }
        let version = match headers.get(PROTOCOL_VERSION_HEADER) {
            None => ProtocolVersion::V_2025_03_26.as_str(),
            Some(value) => value.to_str().ok()?,
        };
        self.peers
            .iter()
            .find(|(v, _)| v.as_str() == version)
            .map(|(_, peer)| peer)
    }
}

/// A request of this path: a tool call or list without per-request protocol metadata
/// (a request with it negotiates per request, which rmcp does).
fn served(request: &ClientRequest) -> bool {
    matches!(
        request,
        ClientRequest::CallToolRequest(_) | ClientRequest::ListToolsRequest(_)
    ) && request.get_meta().protocol_version().is_none()
}

/// What rmcp's stateless path gives a handler: the version, defaults for the rest.
fn peer_info(version: ProtocolVersion) -> InitializeRequestParams {
    InitializeRequestParams::new(ClientCapabilities::default(), Implementation::default())
        .with_protocol_version(version)
}

fn message_of(result: Result<ServerResult, ErrorData>, id: RequestId) -> ServerJsonRpcMessage {
    match result {
        Ok(result) => JsonRpcMessage::response(result, id),
        Err(error) => JsonRpcMessage::error(error, Some(id)),
    }
}

/// A JSON-RPC response up to its `result` value, as rmcp writes the message (`jsonrpc`,
/// `id`, `result`); the caller appends the result and the closing brace.
fn response_head(id: &RequestId) -> String {
    let id = match id {
        RequestId::Number(n) => n.to_string(),
        RequestId::String(s) => serde_json::Value::String(s.to_string()).to_string(),
    };
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#)
}

/// The message as rmcp's JSON response mode sends it.
fn message_body(message: &ServerJsonRpcMessage) -> Response<Body> {
    json_body(serde_json::to_vec(message).map(Bytes::from))
}

fn json_body(body: Result<Bytes, serde_json::Error>) -> Response<Body> {
    let (status, body) = match body {
        Ok(body) => (StatusCode::OK, body),
        Err(error) => {
            tracing::error!(%error, "response not serialized");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Bytes::from_static(b"Internal Server Error: the response could not be written"),
            )
        }
    };
    let mut response = Response::new(Full::new(body).boxed());
    *response.status_mut() = status;
    if status == StatusCode::OK {
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    response
}

/// Whether the client plainly takes both forms of a streamable HTTP answer (rmcp's first
/// check). Only bare media types count here: an `Accept` with parameters or quotes (a
/// `q` weight, say) is left to rmcp's full parser, so this path never serves a request
/// rmcp would refuse.
fn accepts_both(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        if value.contains([';', '"']) {
            return false;
        }
        for essence in value.split(',').map(str::trim) {
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// The request's head and its whole body (already read: no wait, no copy).
pub(crate) async fn into_bytes(request: Request<Full<Bytes>>) -> (http::request::Parts, Bytes) {
    let (parts, body) = request.into_parts();
    match body.collect().await {
        Ok(collected) => (parts, collected.to_bytes()),
        Err(never) => match never {},
    }
}

/// A JSON Content-Type, as rmcp checks it before reading the body.
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).is_some_and(is_json_type)
}

/// A Content-Type value naming JSON, parameters aside.
pub(crate) fn is_json_type(value: &HeaderValue) -> bool {
    value.to_str().is_ok_and(|value| {
        let essence = value.split(';').next().unwrap_or("");
        essence.trim().eq_ignore_ascii_case("application/json")
    })
}

impl Transport<RoleServer> for Idle {
    type Error = Infallible;

    fn send(
        &mut self,
        _item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Infallible>> + Send + 'static {
        std::future::ready(Ok(()))
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        std::future::pending()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Infallible>> + Send {
        std::future::ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderMap;
    use http::header::{ACCEPT, CONTENT_TYPE};

    use super::{accepts_both, is_json};

    #[test]
    fn header_checks_follow_rmcp() {
        let mut headers = HeaderMap::new();
        headers.insert(
            ACCEPT,
            "application/json, text/event-stream".parse().unwrap(),
        );
        headers.insert(
            CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert!(accepts_both(&headers) && is_json(&headers));
        headers.insert(ACCEPT, "application/json".parse().unwrap());
        assert!(!accepts_both(&headers));
        headers.append(ACCEPT, "text/event-stream".parse().unwrap());
        assert!(accepts_both(&headers));
        // Weights are rmcp's to read (q=0 refuses a type).
        headers.insert(
            ACCEPT,
            "application/json, text/event-stream;q=0".parse().unwrap(),
        );
        assert!(!accepts_both(&headers));
        headers.insert(CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(!is_json(&headers));
    }
}
