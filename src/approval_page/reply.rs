//! The answers of the approval page: HTML, plain messages and redirects, each with the
//! headers every answer carries, and the page's cookies.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::Full;

use super::Page;
use super::html;

const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

pub(super) type Reply = Response<Full<Bytes>>;

pub(super) fn ok_html(body: String) -> Reply {
    let mut reply = secure(Response::new(Full::new(Bytes::from(body))));
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    reply
}

pub(super) fn plain(status: StatusCode, text: &str) -> Reply {
    let mut reply = ok_html(html::message("Approvals", text));
    *reply.status_mut() = status;
    reply
}

pub(super) fn redirect(to: &str) -> Reply {
    let mut reply = secure(Response::new(Full::new(Bytes::new())));
    *reply.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(location) = HeaderValue::from_str(to) {
        reply.headers_mut().insert(header::LOCATION, location);
    }
    reply
}

/// Headers every answer carries.
pub(super) fn secure(mut reply: Reply) -> Reply {
    let headers = reply.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    reply
}

pub(super) fn set_cookie(reply: &mut Reply, page: &Page, name: &str, value: &str, max_age: u64) {
    let secure = if page.secure_cookies { "; Secure" } else { "" };
    let cookie = format!(
        "{name}={value}; Path=/approvals; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        reply.headers_mut().append(header::SET_COOKIE, value);
    }
}

/// HTTP/1 closes the connection after this reply (the rest of the body is unread).
pub(super) fn closing(mut reply: Reply) -> Reply {
    reply
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    reply
}
