//! Requests of the approval page: sign-in and sign-out, the list, one approval, deciding.

use std::net::IpAddr;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;

use super::Page;
use super::decide::{self, Choice, Decided};
use super::html;
use super::reply::{Reply, closing, ok_html, plain, redirect, secure, set_cookie};
use super::session::{Credentials, SESSION_TTL, Session, SignInError, random_token, same_secret};
use super::summary::summary;
use crate::server::body::{self, BodyBudget, BodyError};
use crate::store::{Status, unix_now};
use crate::zabbix::Identity;

const SESSION_COOKIE: &str = "zmg_session";
const LOGIN_COOKIE: &str = "zmg_login";
/// Forms are tiny; anything bigger is refused.
const MAX_FORM_BYTES: usize = 16 * 1024;

pub(crate) async fn handle(page: &Page, request: Request<Incoming>, peer: IpAddr) -> Reply {
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let method = request.method().clone();
    let cookies = cookies(&request);
    let session = match cookies.iter().find(|(k, _)| k == SESSION_COOKIE) {
        Some((_, id)) => page.sessions.get(id).await.map(|s| (id.clone(), s)),
        None => None,
    };
    let login_csrf = cookies
        .iter()
        .find(|(k, _)| k == LOGIN_COOKIE)
        .map(|(_, v)| v.clone());
    if method == Method::POST && cross_origin(&request) {
        tracing::info!(client.address = %peer, "approval page: POST from another origin refused");
        return plain(
            StatusCode::FORBIDDEN,
            "This form was sent from another site or origin; nothing was changed.",
        );
    }
    let form = if method == Method::POST {
        match read_form(request, page.app.config.limits.body, &page.bodies).await {
            Ok(form) => form,
            Err(reply) => return reply,
        }
    } else {
        Vec::new()
    };
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    };
    match (method, path.as_str()) {
        (Method::GET, "/approvals/style.css") => {
            let mut reply = secure(Response::new(Full::new(Bytes::from_static(
                html::STYLE.as_bytes(),
            ))));
            reply
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/css"));
            reply
        }
        (Method::GET, "/approvals/login") => {
            login_form(page, login_csrf.as_deref(), next_of(&query), None)
        }
        (_, path) if !(path == "/approvals" || path.starts_with("/approvals/")) => {
            plain(StatusCode::NOT_FOUND, "Not found.")
        }
        (Method::POST, "/approvals/login") => {
            let csrf_ok = login_csrf
                .as_deref()
                .is_some_and(|c| same_secret(c, field("csrf")));
            if !csrf_ok {
                return plain(
                    StatusCode::FORBIDDEN,
                    "The form expired or was not sent from this page; reload it.",
                );
            }
            let credentials = if field("token").is_empty() {
                Credentials::Password {
                    username: field("username").to_owned(),
                    password: field("password").to_owned(),
                }
            } else {
                Credentials::Token(field("token").to_owned())
            };
            let next = safe_next(field("next"));
            match page.sessions.sign_in(&page.app, peer, credentials).await {
                Ok(id) => {
                    let mut reply = redirect(&next);
                    set_cookie(&mut reply, page, SESSION_COOKIE, &id, SESSION_TTL.as_secs());
                    set_cookie(&mut reply, page, LOGIN_COOKIE, "", 0);
                    reply
                }
                Err(error) => not_signed_in(page, login_csrf.as_deref(), next, &error),
            }
        }
        (method, path) => {
            let Some((session_id, session)) = session else {
                return match method {
                    Method::GET => redirect(&format!("/approvals/login?next={}", encode(path))),
                    _ => plain(StatusCode::FORBIDDEN, "Not signed in."),
                };
            };
            if method == Method::POST && !same_secret(&session.csrf, field("csrf")) {
                tracing::info!(client.address = %peer, "approval page: POST without a valid CSRF token");
                return plain(
                    StatusCode::FORBIDDEN,
                    "Missing or wrong CSRF token; nothing was changed.",
                );
            }
            match (method, path) {
                (Method::POST, "/approvals/logout") => {
                    page.sessions.sign_out(&session_id).await;
                    let mut reply = redirect("/approvals/login");
                    set_cookie(&mut reply, page, SESSION_COOKIE, "", 0);
                    reply
                }
                (Method::GET, "/approvals" | "/approvals/") => {
                    list(page, (&session_id, &session)).await
                }
                (method, path) => match path.strip_prefix("/approvals/") {
                    Some(id) if is_id(id) => {
                        let choice = match (method, field("decision")) {
                            (Method::GET, _) => None,
                            (Method::POST, "approve") => Some(Choice::Approve),
                            (Method::POST, "decline") => Some(Choice::Decline),
                            (Method::POST, "withdraw") => Some(Choice::Withdraw),
                            _ => return plain(StatusCode::BAD_REQUEST, "Unknown decision."),
                        };
                        detail(page, (&session_id, &session), id, choice, field("sha256")).await
                    }
                    _ => plain(StatusCode::NOT_FOUND, "Not found."),
                },
            }
        }
    }
}

async fn list(page: &Page, (session_id, session): (&str, &Session)) -> Reply {
    let viewer = match signed_in_now(page, session_id, session).await {
        Ok(viewer) => viewer,
        Err(reason) => return reason.reply(false),
    };
    let records = match page.app.store.list_pending(unix_now()).await {
        Ok(records) => records,
        Err(error) => return plain(StatusCode::SERVICE_UNAVAILABLE, &error.to_string()),
    };
    let mine: Vec<_> = records
        .into_iter()
        .filter(|r| {
            decide::may_decide(r, &viewer, &session.token).is_ok()
                && decide::policy_allows(&page.app, r, &viewer, session)
        })
        .collect();
    ok_html(html::list(&mine, &viewer.username, &session.csrf))
}

/// Why [`signed_in_now`] found no one.
enum NotSignedIn {
    /// Zabbix refused the sign-in's session or token, or it is another user's now.
    Refused,
    /// Zabbix could not be asked.
    Upstream(String),
}

/// The signed-in person as Zabbix sees them now ([`super::session::recheck`]), for every
/// page that shows or decides pending calls: someone disabled or taken out of the approver
/// groups meanwhile neither decides nor reads them for the rest of the page session. A
/// refused sign-in ends the page session.
async fn signed_in_now(
    page: &Page,
    session_id: &str,
    session: &Session,
) -> Result<Identity, NotSignedIn> {
    match super::session::recheck(&page.app, session).await {
        Ok(current) => Ok(current),
        Err(SignInError::Refused) => {
            tracing::info!(user.id = %session.identity.userid, "approval page: sign-in no longer valid");
            page.sessions.sign_out(session_id).await;
            Err(NotSignedIn::Refused)
        }
        Err(error) => Err(NotSignedIn::Upstream(error.to_string())),
    }
}

impl NotSignedIn {
    const REFUSED: &str =
        "Zabbix no longer accepts your sign-in, or no longer as the same user: sign in again.";

    fn reply(&self, deciding: bool) -> Reply {
        let nothing = if deciding {
            " Nothing was decided."
        } else {
            ""
        };
        match self {
            NotSignedIn::Refused => plain(
                StatusCode::FORBIDDEN,
                &format!("{}{nothing}", Self::REFUSED),
            ),
            NotSignedIn::Upstream(error) => plain(
                StatusCode::BAD_GATEWAY,
                &format!(
                    "Your sign-in could not be checked with Zabbix{}: {error}",
                    if deciding {
                        ", so nothing was decided"
                    } else {
                        ""
                    }
                ),
            ),
        }
    }
}

async fn detail(
    page: &Page,
    (session_id, session): (&str, &Session),
    id: &str,
    choice: Option<Choice>,
    shown_sha256: &str,
) -> Reply {
    let app = &page.app;
    let mut record = match app.store.get(id).await {
        Ok(Some(record)) => record,
        Ok(None) => {
            return plain(
                StatusCode::NOT_FOUND,
                "No such approval (it may have expired).",
            );
        }
        Err(error) => return plain(StatusCode::SERVICE_UNAVAILABLE, &error.to_string()),
    };
    let now = unix_now();
    if record.status == Status::Pending && record.expires_at <= now {
        if let Err(error) = decide::expire(app, &record, now).await {
            return plain(StatusCode::SERVICE_UNAVAILABLE, &error.to_string());
        }
        record.status = Status::Expired;
    }
    // Shown and decided as the person is now in Zabbix, not as they were at sign-in.
    let viewer = match signed_in_now(page, session_id, session).await {
        Ok(viewer) => viewer,
        Err(why) => {
            if choice.is_some()
                && let NotSignedIn::Refused = why
            {
                let reason = format!("{} Nothing was decided.", NotSignedIn::REFUSED);
                decide::log_refusal(app, &record, &session.identity, &reason, None);
            }
            return why.reply(choice.is_some());
        }
    };
    let mut notice = None;
    let mut status = StatusCode::OK;
    let mut refusal = decide::may_decide(&record, &viewer, &session.token).err();
    if let Some(choice) = choice {
        // The person decides on what they saw: a changed record is not decided blindly.
        if shown_sha256 != record.sha256 {
            return plain(
                StatusCode::CONFLICT,
                "The request changed since the page was shown; reload it.",
            );
        }
        match decide::decide(app, &record, &viewer, session, choice).await {
            Ok(Decided::Done(decided)) => {
                notice = Some(match choice {
                    Choice::Approve => {
                        "You approved this change. Until the agent's retry sends it, you or another approver may withdraw the approval."
                    }
                    Choice::Decline => "You declined this change.",
                    Choice::Withdraw => {
                        "You withdrew the approval: the agent's retry is told it was declined, and nothing is sent."
                    }
                });
                record = *decided;
            }
            Ok(Decided::Refused(reason)) => {
                status = StatusCode::FORBIDDEN;
                refusal = Some(reason);
            }
            Err(error) => return plain(StatusCode::SERVICE_UNAVAILABLE, &error.to_string()),
        }
    }
    // Only the approvers and the caller see the call; anyone else learns only that they
    // may not decide it.
    let visible = viewer.userid == record.input.caller.userid
        || viewer
            .usrgrps
            .iter()
            .any(|g| record.approvers.usrgrps.contains(g));
    if !visible {
        let reason = refusal.unwrap_or_else(|| "You may not decide this change.".into());
        return plain(StatusCode::FORBIDDEN, &reason);
    }
    let closed = match &record.status {
        Status::Pending | Status::Approved(_) if record.expires_at <= now => {
            Some("This approval expired.".to_owned())
        }
        Status::Pending | Status::Approved(_) => None,
        other => Some(format!("This change is {}.", other.as_str())),
    };
    let actions = match (refusal.as_deref().or(closed.as_deref()), &record.status) {
        (Some(reason), _) => html::Actions::Refused(reason),
        (None, Status::Approved(_)) => html::Actions::Withdraw,
        (None, _) => html::Actions::Decide,
    };
    let rows = summary(&app.zabbix, &session.token, &record).await;
    let pretty = crate::display::pretty_payload(record.body.as_bytes())
        .unwrap_or_else(|_| crate::display::escape_text(&record.body));
    let detail = html::Detail {
        record: &record,
        summary: &rows,
        pretty: &pretty,
        zabbix_url: &app.config.frontend_url,
        actions,
        notice,
    };
    let mut reply = ok_html(html::detail(&detail, &viewer.username, &session.csrf));
    *reply.status_mut() = status;
    reply
}

/// The answer to a sign-in that opened no session, for each way one ends.
fn not_signed_in(page: &Page, csrf: Option<&str>, next: String, error: &SignInError) -> Reply {
    let (status, notice) = match error {
        SignInError::Refused => (
            StatusCode::UNAUTHORIZED,
            "Sign-in failed: wrong username or password, or Zabbix blocks the account for a \
             while after too many wrong passwords.",
        ),
        SignInError::UsernameHeld => (
            StatusCode::TOO_MANY_REQUESTS,
            "Too many wrong passwords for this username. So that Zabbix does not block the \
             account (it does after its login_attempts wrong ones, here and in its frontend \
             alike), this page sends no more passwords for it until an hour has passed without \
             one. Sign in with your own API token instead.",
        ),
        SignInError::AddressHeld => (
            StatusCode::TOO_MANY_REQUESTS,
            "Too many failed sign-ins from your address; try again in five minutes.",
        ),
        SignInError::SecondFactor => (
            StatusCode::FORBIDDEN,
            "Your Zabbix account asks for a second factor (MFA), which this page cannot \
             take: sign in with your own API token instead.",
        ),
        SignInError::AttemptsUnknown => (
            StatusCode::SERVICE_UNAVAILABLE,
            "This page does not know yet how many wrong passwords Zabbix takes before it \
             blocks an account (login_attempts), so it sends no password for now. Sign in \
             with your own API token instead: that also tells the page.",
        ),
        SignInError::Upstream(_) => return plain(StatusCode::BAD_GATEWAY, &error.to_string()),
        SignInError::Store(store) => {
            tracing::warn!(error = %store, "approval page: sign-in not counted in the shared store");
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "The shared store failed (its error is in the sidecar's log), so no password \
                 was sent; try again in a moment.",
            );
        }
    };
    let mut reply = login_form(page, csrf, next, Some(notice));
    *reply.status_mut() = status;
    reply
}

/// The sign-in form. Its CSRF token is the `zmg_login` cookie's, kept while it lives, so
/// that several open sign-in forms (or a second load) do not invalidate each other.
fn login_form(page: &Page, existing: Option<&str>, next: String, notice: Option<&str>) -> Reply {
    let csrf = existing
        .filter(|c| c.len() == 64 && c.chars().all(|ch| ch.is_ascii_hexdigit()))
        .map_or_else(random_token, str::to_owned);
    let mut reply = ok_html(html::login(&csrf, &next, notice));
    set_cookie(&mut reply, page, LOGIN_COOKIE, &csrf, 600);
    reply
}

/// Whether the browser says a POST comes from another origin: `Sec-Fetch-Site` where the
/// browser sends it (all current ones do), else an `Origin` naming another host than the
/// request's. Neither header (a non-browser client) is left to the CSRF token, which
/// every POST needs anyway; this keeps a page of another port or subdomain (same site,
/// so `SameSite=Strict` cookies go along) from posting even with a leaked token.
fn cross_origin<B>(request: &Request<B>) -> bool {
    let headers = request.headers();
    if let Some(site) = headers.get("sec-fetch-site") {
        return !matches!(site.as_bytes(), b"same-origin" | b"none");
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return false;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest);
    match (origin_host, host) {
        (Some(origin_host), Some(host)) => !origin_host.eq_ignore_ascii_case(host),
        _ => true,
    }
}

fn cookies(request: &Request<Incoming>) -> Vec<(String, String)> {
    request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Reads the form within `BodyTimeout` (a client that trickles its body is answered 408
/// and the connection closed, as on the MCP listener), `MAX_FORM_BYTES` and the page's
/// share of memory for forms (past it, 503: try again in a moment).
async fn read_form(
    request: Request<Incoming>,
    timeout: Duration,
    budget: &BodyBudget,
) -> Result<Vec<(String, String)>, Reply> {
    match body::read(request.into_body(), MAX_FORM_BYTES, timeout, budget).await {
        // The form is parsed into owned pairs at once: its share ends here.
        Ok((bytes, _share)) => Ok(form_urlencoded::parse(&bytes).into_owned().collect()),
        Err(BodyError::TooLarge(_) | BodyError::Unreadable | BodyError::Encoded(_)) => {
            Err(closing(plain(StatusCode::PAYLOAD_TOO_LARGE, "Bad form")))
        }
        Err(BodyError::OverBudget(_)) => Err(closing(plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "The page is busy; try again in a moment.",
        ))),
        Err(BodyError::Timeout(timeout)) => Err(closing(plain(
            StatusCode::REQUEST_TIMEOUT,
            &format!(
                "The form did not arrive within {}s (BodyTimeout).",
                timeout.as_secs()
            ),
        ))),
    }
}

fn next_of(query: &str) -> String {
    let next = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "next")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    safe_next(&next)
}

/// Only paths of this page: never an open redirect.
fn safe_next(next: &str) -> String {
    let ok = next.starts_with("/approvals")
        && !next.contains("//")
        && next
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_'));
    if ok {
        next.to_owned()
    } else {
        "/approvals".to_owned()
    }
}

fn encode(path: &str) -> String {
    form_urlencoded::byte_serialize(path.as_bytes()).collect()
}

fn is_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::{cross_origin, is_id, safe_next};
    use crate::approval_page::html;

    #[test]
    fn redirects_stay_on_the_page() {
        assert_eq!(safe_next("/approvals/abc123"), "/approvals/abc123");
        for evil in [
            "https://evil.example/",
            "//evil.example/approvals",
            "/approvals//evil",
            "/approvals/x?y=1",
            "/other",
            "",
        ] {
            assert_eq!(safe_next(evil), "/approvals", "{evil}");
        }
        assert!(is_id("0123abcdef"));
        assert!(!is_id("../etc") && !is_id("") && !is_id(&"a".repeat(65)));
    }

    #[test]
    fn posts_from_another_origin_are_told_apart() {
        let post = |headers: &[(&str, &str)]| {
            let mut request = http::Request::post("/approvals/abc");
            for (k, v) in headers {
                request = request.header(*k, *v);
            }
            cross_origin(&request.body(()).unwrap())
        };
        let host = ("host", "guard.example:8464");
        assert!(!post(&[host]), "no browser headers: left to the CSRF token");
        assert!(!post(&[host, ("sec-fetch-site", "same-origin")]));
        assert!(!post(&[host, ("sec-fetch-site", "none")]));
        assert!(post(&[host, ("sec-fetch-site", "same-site")]));
        assert!(post(&[host, ("sec-fetch-site", "cross-site")]));
        assert!(!post(&[host, ("origin", "https://guard.example:8464")]));
        assert!(!post(&[host, ("origin", "https://GUARD.example:8464")]));
        assert!(post(&[host, ("origin", "https://guard.example:9000")]));
        assert!(post(&[host, ("origin", "https://evil.example")]));
        assert!(post(&[host, ("origin", "null")]));
        // Sec-Fetch-Site decides where both are sent.
        assert!(post(&[
            host,
            ("sec-fetch-site", "cross-site"),
            ("origin", "https://guard.example:8464")
        ]));
    }

    #[test]
    fn agent_text_is_escaped_for_html_and_for_hidden_characters() {
        assert_eq!(
            html::text("<script>\"x\" & 'y'</script>"),
            "&lt;script&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/script&gt;"
        );
        assert_eq!(html::text("a\u{202E}b"), "a\\u{202E}b");
    }
}
