use bytes::Bytes;
use http::header::{ALLOW, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use rmcp::model::RequestId;
use serde_json::Value;

use super::{RefusalContext, Refused, from_rmcp, request_id};
use crate::server::routes::Body;

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}

async fn read(response: Response<Body>) -> (StatusCode, Value) {
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).expect("a JSON body"))
}

fn head(method: Method, headers: &[(&str, &str)]) -> RefusalContext {
    let mut request = Request::builder().method(method).uri("/mcp");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    RefusalContext::of(&request.body(()).unwrap().into_parts().0)
}

/// The request, rmcp's answer, the body, and the JSON-RPC code and message expected.
type Case = (
    RefusalContext,
    Response<Body>,
    &'static [u8],
    i64,
    &'static str,
);

const LIST: &[u8] = br#"{"jsonrpc":"2.0","id":"a-1","method":"tools/list"}"#;

/// rmcp's plain-text refusals, each answered as a JSON-RPC error with the status kept,
/// the request's id, and the fault named in our words.
#[tokio::test]
async fn rmcp_plain_text_refusals_become_json_rpc_errors() {
    let json = ("content-type", "application/json");
    let cases: Vec<Case> = vec![
        (
            head(
                Method::POST,
                &[json, ("mcp-protocol-version", "1999-01-01")],
            ),
            plain(
                StatusCode::BAD_REQUEST,
                "Bad Request: Unsupported MCP-Protocol-Version: 1999-01-01",
            ),
            LIST,
            -32022,
            "MCP-Protocol-Version \"1999-01-01\" is not supported; supported: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28",
        ),
        (
            head(Method::POST, &[json]),
            plain(
                StatusCode::BAD_REQUEST,
                "Bad Request: Session ID is required",
            ),
            LIST,
            -32600,
            "this request needs the Mcp-Session-Id header",
        ),
        (
            head(Method::POST, &[json]),
            plain(StatusCode::BAD_REQUEST, "Bad Request: something new"),
            LIST,
            -32600,
            "Bad Request: something new",
        ),
        (
            head(Method::POST, &[json, ("mcp-session-id", "x")]),
            plain(StatusCode::NOT_FOUND, "Not Found: Session not found"),
            LIST,
            -32001,
            "no such session",
        ),
        (
            head(Method::POST, &[("content-type", "text/plain")]),
            plain(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Unsupported Media Type: Content-Type must be application/json",
            ),
            LIST,
            -32600,
            "Content-Type must be application/json, not \"text/plain\"",
        ),
        (
            head(Method::POST, &[json]),
            plain(
                StatusCode::NOT_ACCEPTABLE,
                "Not Acceptable: Client must accept both application/json and text/event-stream",
            ),
            LIST,
            -32600,
            "the Accept header must list both application/json and text/event-stream",
        ),
        (
            head(Method::GET, &[]),
            plain(
                StatusCode::NOT_ACCEPTABLE,
                "Not Acceptable: Client must accept text/event-stream",
            ),
            b"",
            -32600,
            "the Accept header must list text/event-stream",
        ),
        (
            head(Method::POST, &[json]),
            plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Encounter an error when get session: Session service terminated",
            ),
            LIST,
            -32603,
            "the MCP session could not take the request: Encounter an error when get session",
        ),
        (
            head(Method::POST, &[json]),
            plain(StatusCode::IM_A_TEAPOT, "Something new"),
            LIST,
            -32600,
            "Something new",
        ),
    ];
    for (request, response, body, code, message) in cases {
        let status = response.status();
        let (answered, value) =
            read(from_rmcp(response, &request, &Bytes::from_static(body)).await).await;
        assert_eq!(answered, status, "{value}");
        assert_eq!(value["jsonrpc"], "2.0");
        assert_eq!(value["error"]["code"], code, "{value}");
        let text = value["error"]["message"].as_str().unwrap();
        assert!(text.starts_with(message), "{text}");
        let expected_id = if body.is_empty() {
            Value::Null
        } else {
            Value::from("a-1")
        };
        assert_eq!(value["id"], expected_id, "{value}");
    }
}

#[tokio::test]
async fn a_wrong_http_method_keeps_rmcps_allow_header() {
    let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    response
        .headers_mut()
        .insert(ALLOW, "GET, POST, DELETE".parse().unwrap());
    let answer = from_rmcp(response, &head(Method::PUT, &[]), &Bytes::new()).await;
    assert_eq!(answer.headers()[ALLOW], "GET, POST, DELETE");
    assert_eq!(answer.headers()[CONTENT_TYPE], "application/json");
    let (status, value) = read(answer).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        value["error"]["message"],
        "HTTP method PUT is not served on /mcp; use GET, POST, DELETE"
    );
    assert_eq!(value["error"]["data"]["code"], "invalid_request");
}

/// A version that is not text is named as sent, and the supported ones are listed in
/// `data` as 2026-07-28 clients read them.
#[tokio::test]
async fn an_unsupported_version_lists_the_supported_ones_in_data() {
    let request = head(Method::POST, &[("mcp-protocol-version", "2099-01-01")]);
    let response = plain(
        StatusCode::BAD_REQUEST,
        "Bad Request: Unsupported MCP-Protocol-Version: 2099-01-01",
    );
    let (_, value) = read(from_rmcp(response, &request, &Bytes::from_static(LIST)).await).await;
    assert_eq!(value["error"]["data"]["requested"], "2099-01-01");
    let supported = value["error"]["data"]["supported"].as_array().unwrap();
    assert!(supported.contains(&Value::from("2025-11-25")), "{value}");
    assert!(supported.contains(&Value::from("2026-07-28")), "{value}");
}

#[tokio::test]
async fn answers_that_are_not_plain_refusals_pass_unchanged() {
    let request = head(Method::POST, &[("content-type", "application/json")]);
    let mut json = plain(
        StatusCode::BAD_REQUEST,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"x"}}"#,
    );
    json.headers_mut()
        .insert(CONTENT_TYPE, "application/json".parse().unwrap());
    let (status, value) = read(from_rmcp(json, &request, &Bytes::from_static(LIST)).await).await;
    assert_eq!(
        (status, value["error"]["message"].as_str()),
        (StatusCode::BAD_REQUEST, Some("x"))
    );
    let accepted = from_rmcp(plain(StatusCode::ACCEPTED, ""), &request, &Bytes::new()).await;
    assert_eq!(accepted.status(), StatusCode::ACCEPTED);
}

#[test]
fn only_a_request_has_an_id_to_answer() {
    assert_eq!(request_id(LIST), Some(RequestId::String("a-1".into())));
    assert_eq!(
        request_id(br#"{"jsonrpc":"2.0","id":7.0,"method":"ping"}"#),
        Some(RequestId::Number(7))
    );
    for body in [
        &br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#[..],
        br#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
        br#"[{"jsonrpc":"2.0","id":7,"method":"ping"}]"#,
        b"{",
    ] {
        assert_eq!(request_id(body), None);
    }
    // A body rmcp refuses as malformed keeps a null id.
    let refused = Refused::SessionRequired;
    assert!(refused.to_string().contains("Mcp-Session-Id"));
}

#[test]
fn a_request_after_initialize_has_its_id_read() {
    use super::request_id_after_initialize as id_of;
    assert_eq!(
        id_of(br#"{"method":"tools/call","params":{},"jsonrpc":"2.0","id":4}"#),
        Some(RequestId::Number(4))
    );
    assert_eq!(
        id_of(br#"{"jsonrpc":"2.0","id":"x","method":"tools\/list"}"#),
        Some(RequestId::String("x".into()))
    );
    // A client still connecting, a notification, no request at all.
    for body in [
        &br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#[..],
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        b"not json",
    ] {
        assert_eq!(id_of(body), None, "{}", String::from_utf8_lossy(body));
    }
}
