//! Server-rendered HTML of the approval page. Every value from Zabbix or the agent goes
//! through [`text`]: HTML-escaped, and every non-ASCII, bidirectional or invisible
//! character shown as `\u{XXXX}`, so what the person reads is what is sent.

use std::fmt::Write;

use crate::display::escape_text;
use crate::mcp::page_approval::rfc3339;
use crate::store::ApprovalRecord;

/// The stylesheet, served from the page itself (the CSP allows no inline style or script).
pub(crate) const STYLE: &str = "body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}\
pre{background:#f4f4f4;padding:1rem;overflow-x:auto}\
table{border-collapse:collapse}td,th{text-align:left;padding:.2rem .8rem .2rem 0;vertical-align:top}\
.notice{padding:.5rem 1rem;background:#fff3cd}.error{padding:.5rem 1rem;background:#f8d7da}\
form.inline{display:inline}button{margin-right:1rem;padding:.4rem 1rem}";

/// Agent- or Zabbix-controlled text for HTML: escaped twice over.
pub(crate) fn text(value: &str) -> String {
    html(&escape_text(value))
}

/// HTML escaping of already safe text.
pub(crate) fn html(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

pub(crate) fn page(title: &str, user: Option<&str>, csrf: Option<&str>, body: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{} - Zabbix MCP approvals</title>\
         <link rel=\"stylesheet\" href=\"/approvals/style.css\"></head><body>",
        html(title)
    );
    if let (Some(user), Some(csrf)) = (user, csrf) {
        let _ = write!(
            out,
            "<p>Signed in as <strong id=\"user\">{}</strong> · <a href=\"/approvals\">pending approvals</a> \
             <form class=\"inline\" method=\"post\" action=\"/approvals/logout\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\">Sign out</button></form></p>",
            text(user),
            html(csrf)
        );
    }
    let _ = write!(out, "<h1>{}</h1>{body}</body></html>", html(title));
    out
}

/// The sign-in form, under `notice` (why the last sign-in failed) if any.
pub(crate) fn login(csrf: &str, next: &str, notice: Option<&str>) -> String {
    let notice = notice.map_or_else(String::new, |n| {
        format!("<p class=\"error\" id=\"failed\">{}</p>", html(n))
    });
    let body = format!(
        "{notice}<p>Sign in with your own Zabbix account to decide on changes that AI agents asked for.</p>\
         <form method=\"post\" action=\"/approvals/login\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"next\" value=\"{next}\">\
         <p><label>Username <input name=\"username\" id=\"username\" autocomplete=\"username\"></label></p>\
         <p><label>Password <input type=\"password\" name=\"password\" id=\"password\" autocomplete=\"current-password\"></label></p>\
         <p>or <label>your own API token <input type=\"password\" name=\"token\" id=\"token\" autocomplete=\"off\"></label></p>\
         <p><button type=\"submit\" id=\"signin\">Sign in</button></p></form>",
        csrf = html(csrf),
        next = html(next),
    );
    page("Sign in", None, None, &body)
}

pub(crate) fn list(records: &[ApprovalRecord], user: &str, csrf: &str) -> String {
    let mut body = String::new();
    if records.is_empty() {
        body.push_str("<p id=\"empty\">Nothing is waiting for your decision.</p>");
    } else {
        body.push_str(
            "<table><tr><th>Tool</th><th>Caller</th><th>Client</th><th>Expires</th></tr>",
        );
        for r in records {
            let _ = write!(
                body,
                "<tr><td><a href=\"/approvals/{id}\">{tool}</a></td><td>{caller}</td><td>{client}</td><td>{expires}</td></tr>",
                id = html(&r.id),
                tool = text(&r.input.tool.name),
                caller = text(&r.input.caller.username),
                client = text(r.input.client.name.as_deref().unwrap_or("unknown")),
                expires = rfc3339(r.expires_at),
            );
        }
        body.push_str("</table>");
    }
    page("Pending approvals", Some(user), Some(csrf), &body)
}

/// What the person may do on the detail page.
pub(crate) enum Actions<'a> {
    /// Approve or decline a pending change.
    Decide,
    /// Take back a yes no retry has redeemed yet.
    Withdraw,
    /// Nothing, and why (shown instead of the buttons).
    Refused(&'a str),
}

/// What the detail page shows besides the record itself.
pub(crate) struct Detail<'a> {
    pub(crate) record: &'a ApprovalRecord,
    pub(crate) summary: &'a [(String, String)],
    pub(crate) pretty: &'a str,
    pub(crate) zabbix_url: &'a str,
    pub(crate) actions: Actions<'a>,
    pub(crate) notice: Option<&'a str>,
}

pub(crate) fn detail(d: &Detail<'_>, user: &str, csrf: &str) -> String {
    let r = d.record;
    let caller = &r.input.caller;
    let client = &r.input.client;
    // The client names itself; the name has a row of its own so that it cannot pass for
    // the address the sidecar saw (a name "x from 10.0.0.5" read "x from 10.0.0.5 from …").
    let mut body = String::new();
    if let Some(notice) = d.notice {
        let _ = write!(
            body,
            "<p class=\"notice\" id=\"notice\">{}</p>",
            html(notice)
        );
    }
    let _ = write!(
        body,
        "<table id=\"facts\">\
         <tr><th>Tool</th><td id=\"tool\">{tool} ({method})</td></tr>\
         <tr><th>Caller</th><td id=\"caller\">{username} (userid {userid}; groups: {groups})</td></tr>\
         <tr><th>Client (as it names itself)</th><td id=\"client\">{client_name}</td></tr>\
         <tr><th>Client address</th><td id=\"address\">{address}</td></tr>\
         <tr><th>Zabbix</th><td>{zabbix}</td></tr>\
         <tr><th>State</th><td id=\"state\">{state}</td></tr>\
         <tr><th>Expires</th><td>{expires}</td></tr></table>",
        tool = text(&r.input.tool.name),
        method = text(&r.input.tool.method),
        username = text(&caller.username),
        userid = text(&caller.userid),
        groups = text(&caller.usrgrps.join(", ")),
        client_name = text(client.name.as_deref().unwrap_or("unknown client")),
        address = text(&client.address),
        zabbix = text(d.zabbix_url),
        state = html(r.status.as_str()),
        expires = rfc3339(r.expires_at),
    );
    body.push_str("<h2>What it does (resolved with your permissions)</h2><table id=\"summary\">");
    for (label, value) in d.summary {
        let _ = write!(
            body,
            "<tr><th>{}</th><td>{}</td></tr>",
            html(label),
            text(value)
        );
    }
    let _ = write!(
        body,
        "</table><h2>Exact request sent to Zabbix</h2>\
         <p>Non-ASCII, bidirectional and invisible characters are shown as \\u escapes. \
         The token is added in transport and not shown.</p>\
         <pre id=\"body\">{}</pre><p>SHA-256: <code id=\"sha256\">{}</code></p>",
        html(d.pretty),
        html(&r.sha256),
    );
    let buttons = match d.actions {
        Actions::Refused(reason) => {
            let _ = write!(
                body,
                "<p class=\"error\" id=\"refusal\">{}</p>",
                html(reason)
            );
            return page("Approve this change?", Some(user), Some(csrf), &body);
        }
        Actions::Decide => {
            "<button type=\"submit\" name=\"decision\" value=\"approve\" id=\"approve\">Approve</button>\
             <button type=\"submit\" name=\"decision\" value=\"decline\" id=\"decline\">Decline</button>"
        }
        Actions::Withdraw => {
            "<button type=\"submit\" name=\"decision\" value=\"withdraw\" id=\"withdraw\">Withdraw the approval</button>"
        }
    };
    let _ = write!(
        body,
        "<form method=\"post\" action=\"/approvals/{id}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <input type=\"hidden\" name=\"sha256\" value=\"{sha}\">{buttons}</form>",
        id = html(&r.id),
        csrf = html(csrf),
        sha = html(&r.sha256),
    );
    page("Approve this change?", Some(user), Some(csrf), &body)
}

pub(crate) fn message(title: &str, text_: &str) -> String {
    page(
        title,
        None,
        None,
        &format!("<p id=\"message\">{}</p>", html(text_)),
    )
}
