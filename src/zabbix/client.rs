//! The JSON-RPC client toward Zabbix: requests over the frontend's kept-open connections
//! (`connections`), the token sent the way each version accepts, every call bounded by
//! `Timeout` (after its wait for a `MaxZabbixConcurrency` slot, bounded separately), and
//! the API version cached.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::zabbix::bounded::{self, BoundedError};
use crate::zabbix::caller::ApiToken;
use crate::zabbix::connections::{ConnectionError, Connections, Resend};
use crate::zabbix::error::ZabbixError;
use crate::zabbix::method::Method;
use crate::zabbix::params_text::{ObjectWriter, ParamsText};
use crate::zabbix::raw::{self, Answer, RawReply};
use crate::zabbix::trust::{TrustStatus, ZabbixTrust};
use crate::zabbix::version::{TokenTransport, ZabbixVersion};

/// What the client needs to know to reach Zabbix.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    pub api_url: String,
    pub timeout: Duration,
    pub ca_file: Option<std::path::PathBuf>,
    pub ignore_cert_errors: bool,
    /// `MaxZabbixResponseSize`: the read of an answer stops here (an error, not an OOM).
    pub max_response_bytes: usize,
    /// `MaxZabbixConcurrency`: calls in flight at once, all callers together.
    pub max_concurrency: usize,
    /// `MaxZabbixConnectionAge`: no connection older than this is handed a call.
    pub max_connection_age: Duration,
}

/// A JSON-RPC request body, serialized once and sent as is.
#[derive(Debug, Clone)]
pub struct Payload {
    pub method: Method,
    /// The body exactly as sent, without any token.
    pub body: Bytes,
    /// The body's JSON-RPC `id`: the answer must carry it.
    pub id: u64,
}

pub struct ZabbixClient {
    /// Reads may be sent again when a reused connection closed before taking them;
    /// writes never are: a write reaches Zabbix at most once.
    connections: Connections,
    /// What `https` connections trust, loaded again without a restart (`None`: `http`, or
    /// `IgnoreURLCertErrors=true`: nothing to load).
    reloadable_trust: Option<Arc<ZabbixTrust>>,
    api_url_text: String,
    timeout: Duration,
    max_response_bytes: usize,
    /// One permit per call in flight; the wait for one is bounded apart from `Timeout`.
    slots: Semaphore,
    max_concurrency: usize,
    version: RwLock<Option<ZabbixVersion>>,
    next_id: AtomicU64,
    /// Counts every request and its duration, when the app set it.
    metrics: Option<Arc<Metrics>>,
}

/// An answer read as a tree: its members kept as text first, so that `result` and `error`
/// are built within [`bounded::MAX_VALUES`] and `id` is only compared.
#[derive(Deserialize)]
struct RpcResponse<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RpcError {
    code: i64,
    message: String,
    #[serde(default)]
    data: Value,
}

impl ZabbixClient {
    pub fn new(settings: &ClientSettings) -> Result<Self, ZabbixError> {
        let api_url: http::Uri = settings.api_url.parse().map_err(|e| ZabbixError::BadUrl {
            url: settings.api_url.clone(),
            reason: format!("{e}"),
        })?;
        match api_url.scheme_str() {
            Some("http") | Some("https") => {}
            _ => {
                return Err(ZabbixError::BadUrl {
                    url: settings.api_url.clone(),
                    reason: "the scheme must be http or https".into(),
                });
            }
        }
        let verified = api_url.scheme_str() == Some("https") && !settings.ignore_cert_errors;
        let trust = Arc::new(ZabbixTrust::load(
            settings.ca_file.as_deref(),
            settings.ignore_cert_errors,
        )?);
        let connections = Connections::new(
            &api_url,
            trust.clone(),
            settings.timeout,
            settings.max_connection_age,
        )
        .map_err(|error| ZabbixError::BadUrl {
            url: settings.api_url.clone(),
            reason: error.to_string(),
        })?;
        Ok(Self {
            connections,
            reloadable_trust: verified.then_some(trust),
            api_url_text: settings.api_url.clone(),
            timeout: settings.timeout,
            max_response_bytes: settings.max_response_bytes,
            slots: Semaphore::new(settings.max_concurrency),
            max_concurrency: settings.max_concurrency,
            version: RwLock::new(None),
            next_id: AtomicU64::new(1),
            metrics: None,
        })
    }

    /// Counts requests in `metrics` (`zabbix_requests_total`, the duration histogram).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Reloads the CAs trusted toward Zabbix when `TLSCAFile` changes or on SIGHUP, for an
    /// `https` URL that is verified; `None` otherwise. Must be called inside a Tokio runtime.
    pub fn spawn_trust_watcher(&self, every: Duration) -> Option<JoinHandle<()>> {
        Some(self.reloadable_trust.as_ref()?.spawn_watcher(every))
    }

    /// The reloads of what is trusted toward Zabbix (`None`: `http`, or not verified).
    pub fn trust_status(&self) -> Option<TrustStatus> {
        Some(self.reloadable_trust.as_ref()?.status())
    }

    pub fn api_url(&self) -> &str {
        &self.api_url_text
    }

    /// The cached API version, if one is known.
    pub fn cached_version(&self) -> Option<ZabbixVersion> {
        self.version.read().ok().and_then(|v| *v)
    }

    /// The API version, asked of Zabbix once and cached.
    pub async fn version(&self) -> Result<ZabbixVersion, ZabbixError> {
        match self.cached_version() {
            Some(v) => Ok(v),
            None => self.refresh_version().await,
        }
    }

    /// Asks Zabbix for its version now (readiness, upgrades) and caches the answer.
    pub async fn refresh_version(&self) -> Result<ZabbixVersion, ZabbixError> {
        let payload = self.payload(Method::ApiInfoVersion, &Value::Object(Default::default()))?;
        let value = self.send(&payload, None).await?;
        let text = value
            .as_str()
            .ok_or_else(|| ZabbixError::BadResponse("apiinfo.version is not a string".into()))?;
        let version: ZabbixVersion =
            text.parse()
                .map_err(|e: crate::zabbix::version::VersionParseError| {
                    ZabbixError::BadResponse(e.to_string())
                })?;
        if let Ok(mut slot) = self.version.write() {
            *slot = Some(version);
        }
        Ok(version)
    }

    /// Serializes a request once; the same bytes are shown for approval and sent.
    pub fn payload(&self, method: Method, params: &Value) -> Result<Payload, ZabbixError> {
        self.payload_with_id(method, params, self.next_id())
    }

    /// The same serialization with a given request `id`: rebuilds an approved body
    /// byte for byte from its arguments.
    pub fn payload_with_id(
        &self,
        method: Method,
        params: &Value,
        id: u64,
    ) -> Result<Payload, ZabbixError> {
        envelope(method, id, |body| body.member("params", params))
    }

    /// A request whose params were written as text ([`ParamsText`]).
    pub fn payload_text(&self, method: Method, params: ParamsText) -> Result<Payload, ZabbixError> {
        envelope(method, self.next_id(), |body| body.object("params", params))
    }

    /// A new request `id`.
    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Builds and sends one call.
    pub async fn call(
        &self,
        method: Method,
        params: &Value,
        token: Option<(&ApiToken, ZabbixVersion)>,
    ) -> Result<Value, ZabbixError> {
        let payload = self.payload(method, params)?;
        self.send(&payload, token).await
    }

    /// Builds and sends one call and keeps its result as Zabbix's text (reads: no value
    /// tree is built for the records). A result array longer than `max_elements` (the
    /// `limit` the params ask for) is an invalid response.
    pub async fn call_raw(
        &self,
        method: Method,
        params: ParamsText,
        max_elements: usize,
        token: Option<(&ApiToken, ZabbixVersion)>,
    ) -> Result<RawReply, ZabbixError> {
        let payload = self.payload_text(method, params)?;
        let body = self.send_body(&payload, token).await?;
        let answer = raw::answer(body, payload.id, max_elements).map_err(|error| {
            if matches!(error, raw::RawError::WrongId { .. }) {
                self.out_of_step();
            }
            ZabbixError::BadResponse(error.to_string())
        })?;
        match answer {
            Answer::Error(error) => {
                Err(api_error(serde_json::from_str(&error).map_err(|e| {
                    ZabbixError::BadResponse(format!("not JSON-RPC: {e}"))
                })?))
            }
            Answer::Result(reply) => Ok(reply),
            Answer::Neither => Err(ZabbixError::BadResponse(
                "neither result nor error in the response".into(),
            )),
        }
    }

    /// Sends a prepared payload with the caller's token (never retried here).
    pub async fn send(
        &self,
        payload: &Payload,
        token: Option<(&ApiToken, ZabbixVersion)>,
    ) -> Result<Value, ZabbixError> {
        let body = self.send_body(payload, token).await?;
        let not_json =
            |e: &dyn std::fmt::Display| ZabbixError::BadResponse(format!("not JSON-RPC: {e}"));
        let parsed: RpcResponse = serde_json::from_slice(&body).map_err(|e| not_json(&e))?;
        let found = parsed.id.map_or("none", RawValue::get);
        if !raw::same_id(found, payload.id) {
            self.out_of_step();
            let wrong = raw::RawError::WrongId {
                sent: payload.id,
                found: crate::display::escape_text(found),
            };
            return Err(ZabbixError::BadResponse(wrong.to_string()));
        }
        let tree = |raw: &RawValue| {
            bounded::value(raw.get(), bounded::MAX_VALUES).map_err(|e| match e {
                BoundedError::NotJson(e) => not_json(&e),
                too_many @ BoundedError::TooMany(_) => {
                    ZabbixError::BadResponse(too_many.to_string())
                }
            })
        };
        // A member that is `null` reads as absent (`Option`), as it did.
        match (parsed.result, parsed.error) {
            (_, Some(error)) => {
                let error = serde_json::from_value(tree(error)?).map_err(|e| not_json(&e))?;
                Err(api_error(error))
            }
            (Some(result), None) => tree(result),
            (None, None) => Err(ZabbixError::BadResponse(
                "neither result nor error in the response".into(),
            )),
        }
    }

    /// Sends a prepared payload; the body of a successful HTTP answer.
    async fn send_body(
        &self,
        payload: &Payload,
        token: Option<(&ApiToken, ZabbixVersion)>,
    ) -> Result<Bytes, ZabbixError> {
        let token = if payload.method.is_anonymous() {
            None
        } else {
            token
        };
        let (body, authorization) = match token {
            Some((token, version)) if version.token_transport() == TokenTransport::BodyField => {
                (with_auth_field(&payload.body, token)?, None)
            }
            Some((token, _)) => (payload.body.clone(), Some(token.bearer_header()?)),
            None => (payload.body.clone(), None),
        };
        let resend = if payload.method.is_write() {
            Resend::Never
        } else {
            Resend::IfUnsent
        };
        let started = std::time::Instant::now();
        let result = async {
            let _slot = self.slot().await?;
            let sending = AtomicBool::new(false);
            let call = self.round_trip(body, authorization, resend, &sending);
            match tokio::time::timeout(self.timeout, call).await {
                Ok(result) => result,
                // Still connecting (TCP, TLS, HTTP/2's preface): nothing was sent, and a
                // write is known not to have been applied.
                Err(_) if !sending.load(Ordering::Acquire) => {
                    Err(ZabbixError::Unavailable(format!(
                        "connecting to {}: no connection within {}s (Timeout)",
                        self.connections.address(),
                        self.timeout.as_secs()
                    )))
                }
                Err(_) => {
                    self.unanswered();
                    Err(ZabbixError::Timeout(self.timeout))
                }
            }
        }
        .await;
        if let Some(metrics) = &self.metrics {
            metrics.zabbix_request(payload.method, &result, started.elapsed());
        }
        result
    }

    /// An answer to another request came back: the connection it came on (back among the
    /// idle ones by now) is out of step with its requests, and so may the others be. None
    /// is reused; the next calls connect anew.
    fn out_of_step(&self) {
        tracing::warn!("Zabbix answered with another request's id; idle connections closed");
        self.connections.close_idle();
    }

    /// A call got no answer within `Timeout`. Its connection may be silent for good (a path
    /// lost without a reset, a frontend that hangs), and so may those kept open with it;
    /// reused, each would take a call of its own (a shared HTTP/2 one, every call) to time
    /// out in turn. None is reused; the next calls connect anew.
    fn unanswered(&self) {
        tracing::debug!("Zabbix call timed out; idle connections closed");
        self.connections.close_idle();
    }

    /// One of the `MaxZabbixConcurrency` slots, waited for at most `Timeout`. The wait is
    /// ours, not Zabbix's: it does not count against the call's `Timeout`, and running out
    /// of it is `Overloaded` (nothing sent), never a Zabbix timeout.
    async fn slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>, ZabbixError> {
        match tokio::time::timeout(self.timeout, self.slots.acquire()).await {
            Ok(Ok(slot)) => Ok(slot),
            // The semaphore is never closed, so acquiring only fails if it were.
            Ok(Err(_)) => Err(ZabbixError::Request("the call slots are closed".into())),
            Err(_) => Err(ZabbixError::Overloaded {
                limit: self.max_concurrency,
                waited: self.timeout,
            }),
        }
    }

    /// One POST and its whole answer; transport failures are Zabbix being unavailable.
    async fn round_trip(
        &self,
        body: Bytes,
        authorization: Option<http::HeaderValue>,
        resend: Resend,
        sending: &AtomicBool,
    ) -> Result<Bytes, ZabbixError> {
        let max_bytes = self.max_response_bytes;
        let (status, body) = self
            .connections
            .post(body, authorization, resend, max_bytes, sending)
            .await
            .map_err(|error| match error {
                ConnectionError::TooLarge(limit) => ZabbixError::ResponseTooLarge(limit),
                ConnectionError::Send(_) | ConnectionError::Read(_) => {
                    ZabbixError::AnswerLost(error_chain(&error))
                }
                ConnectionError::Connect { .. }
                | ConnectionError::Tls { .. }
                | ConnectionError::Handshake { .. }
                | ConnectionError::NotSent(_) => ZabbixError::Unavailable(error_chain(&error)),
            })?;
        if !status.is_success() {
            return Err(ZabbixError::HttpStatus(status.as_u16()));
        }
        Ok(body)
    }
}

fn api_error(error: RpcError) -> ZabbixError {
    ZabbixError::Api {
        code: error.code,
        message: error.message,
        data: error.data,
    }
}

/// `{"jsonrpc":"2.0","method":…,"params":…,"id":…}`, the params written by `params`.
fn envelope(
    method: Method,
    id: u64,
    params: impl FnOnce(&mut ObjectWriter) -> Result<(), serde_json::Error>,
) -> Result<Payload, ZabbixError> {
    let mut body = ObjectWriter::new();
    let written = body
        .member("jsonrpc", "2.0")
        .and_then(|()| body.member("method", method.as_str()))
        .and_then(|()| params(&mut body))
        .and_then(|()| body.member("id", &id));
    written.map_err(|e| ZabbixError::Request(format!("serializing the body: {e}")))?;
    Ok(Payload {
        method,
        body: Bytes::from(body.finish().into_bytes()),
        id,
    })
}

/// Zabbix 6.0–6.2 read the token only from the body: splice `"auth"` into the serialized
/// object instead of serializing the whole request again.
fn with_auth_field(body: &Bytes, token: &ApiToken) -> Result<Bytes, ZabbixError> {
    let token_json = serde_json::to_string(token.expose())
        .map_err(|e| ZabbixError::Request(format!("serializing the token: {e}")))?;
    let Some(without_brace) = body.strip_suffix(b"}") else {
        return Err(ZabbixError::Request("the body is not a JSON object".into()));
    };
    let mut out = Vec::with_capacity(body.len() + token_json.len() + 10);
    out.extend_from_slice(without_brace);
    out.extend_from_slice(b",\"auth\":");
    out.extend_from_slice(token_json.as_bytes());
    out.push(b'}');
    Ok(Bytes::from(out))
}

/// hyper's errors hide the cause (refused, reset, TLS) in their source chain.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{envelope, with_auth_field};
    use crate::zabbix::caller::ApiToken;
    use crate::zabbix::method::Method;
    use crate::zabbix::params_text::ObjectWriter;
    use bytes::Bytes;
    use serde_json::json;

    /// Both forms of params give the body serde_json wrote for the request before.
    #[test]
    fn envelope_is_the_json_rpc_request() {
        let expected = br#"{"jsonrpc":"2.0","method":"host.get","params":{"output":["hostid"],"limit":2},"id":7}"#;
        let value = json!({"output": ["hostid"], "limit": 2});
        let from_value = envelope(Method::HostGet, 7, |body| body.member("params", &value));
        assert_eq!(&from_value.unwrap().body[..], &expected[..]);
        let mut params = ObjectWriter::new();
        params.member("output", &["hostid"]).unwrap();
        params.member("limit", &2).unwrap();
        let text = params.finish();
        let from_text = envelope(Method::HostGet, 7, |body| body.object("params", text));
        assert_eq!(&from_text.unwrap().body[..], &expected[..]);
    }

    #[test]
    fn auth_field_is_spliced_into_the_object() {
        let body =
            Bytes::from_static(br#"{"jsonrpc":"2.0","method":"host.get","params":{},"id":1}"#);
        let token = ApiToken::new("abc\"def".into());
        let out = with_auth_field(&body, &token).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["auth"], "abc\"def");
        assert_eq!(v["method"], "host.get");
    }
}
