//! Helpers of the approval page tests: sidecars with the four_eyes policy and the page on,
//! an HTTP client for the page that keeps its cookies, a headless Chromium through
//! chromedriver, the decision log, and waiting on conditions.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use zabbix_mcp_guard::config::{ApprovalPageConfig, Config, DecisionLogSink, SessionMode};

use crate::common::{self, Guard, config_for, start_with, temp_path};

pub const TOOL: &str = "problem_acknowledge";
/// mcp-operator may write to mcp-web-01 (Linux servers) only.
pub const HOST: &str = "mcp-web-01";
pub const TRIGGER: &str = "MCP uint too high";

pub struct Sidecar {
    pub guard: Guard,
    pub page: String,
    pub log: PathBuf,
}

/// How a test sidecar is set up.
pub struct Setup<'a> {
    pub zabbix_url: &'a str,
    pub page: bool,
    pub timeout_secs: u64,
    pub shared_store: Option<String>,
    pub stateful: bool,
}

impl<'a> Setup<'a> {
    /// The page on, stateless, approvals in memory, expiring after 900 s.
    pub fn page(zabbix_url: &'a str) -> Setup<'a> {
        Setup {
            zabbix_url,
            page: true,
            timeout_secs: 900,
            shared_store: None,
            stateful: false,
        }
    }
}

/// The `event.acknowledge` requests for `event` that reached Zabbix (through `recorder`).
pub fn acks(recorder: &common::recorder::Recorder, event: &str) -> usize {
    recorder
        .bodies
        .lock()
        .unwrap()
        .iter()
        .filter_map(|b| serde_json::from_str::<Value>(b).ok())
        .filter(|v| v["method"] == "event.acknowledge" && v["params"]["eventids"] == json!([event]))
        .count()
}

/// The shipped four_eyes example (approvers: Zabbix administrators) in a directory of its own.
pub fn four_eyes() -> PathBuf {
    let dir = temp_path("four_eyes");
    std::fs::create_dir_all(&dir).unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/examples/four_eyes");
    for file in ["policy.rego", "data.json"] {
        std::fs::copy(example.join(file), dir.join(file)).unwrap();
    }
    dir
}

pub async fn sidecar(setup: Setup<'_>) -> Sidecar {
    sidecar_with(setup, |_| {}).await
}

/// [`sidecar`], with the configuration changed by `adjust` before the start.
pub async fn sidecar_with(setup: Setup<'_>, adjust: impl FnOnce(&mut Config)) -> Sidecar {
    let mut config = config_for(setup.zabbix_url);
    config.policy_dir = Some(four_eyes());
    let log = temp_path("decisions.log");
    config.decision_log = DecisionLogSink::File(log.clone());
    config.approval_timeout = Duration::from_secs(setup.timeout_secs);
    if setup.stateful {
        config.session_mode = SessionMode::Stateful;
    }
    if let Some(url) = setup.shared_store {
        config = common::on_redis(config, &url);
    }
    let port = common::free_port();
    let page = format!("http://127.0.0.1:{port}");
    if setup.page {
        config.approval_page = Some(ApprovalPageConfig {
            listen_ip: vec!["127.0.0.1".parse().unwrap()],
            listen_port: port,
            allowed_ip: vec!["127.0.0.1/32".parse().unwrap()],
            allowed_ip_raw: "127.0.0.1".into(),
            url: page.clone(),
        });
    }
    adjust(&mut config);
    Sidecar {
        guard: start_with(config).await,
        page,
        log,
    }
}

pub fn ack_args(event: &str, message: &str) -> Value {
    json!({"eventids": [event], "message": message})
}

/// The approval id and URL of an `approval_pending` error body.
pub fn pending(body: &Value) -> (String, String) {
    assert_eq!(body["code"], "approval_pending", "{body}");
    let data = &body["data"];
    let url = data["url"].as_str().expect("url").to_owned();
    assert!(body["message"].as_str().unwrap().contains(&url), "{body}");
    (data["approval_id"].as_str().expect("id").to_owned(), url)
}

/// Lines of the decision log with this decision id.
pub fn events(log: &Path, decision_id: &str) -> Vec<Value> {
    common::decision_log_text(log)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["decision_id"] == decision_id)
        .collect()
}

pub fn event_names(log: &Path, decision_id: &str) -> Vec<String> {
    events(log, decision_id)
        .iter()
        .filter_map(|e| e["event"].as_str().map(str::to_owned))
        .collect()
}

/// The page outcomes of `approvals_total`.
const PAGE_OUTCOMES: [&str; 6] = [
    "page_requested",
    "page_approved",
    "page_declined",
    "page_expired",
    "page_redeemed",
    "page_withdrawn",
];

/// `approvals_total` by page outcome, as the sidecar's `/metrics` shows it now.
pub async fn page_approvals(guard: &Guard) -> Vec<(&'static str, f64)> {
    let scraped = common::metrics::scrape(&guard.base).await;
    PAGE_OUTCOMES
        .iter()
        .map(|o| {
            (
                *o,
                scraped.get(&format!("approvals_total{{outcome=\"{o}\"}}")),
            )
        })
        .collect()
}

/// The page outcomes counted between two [`page_approvals`], the ones that moved only.
pub fn counted(
    before: &[(&'static str, f64)],
    after: &[(&'static str, f64)],
) -> Vec<(&'static str, f64)> {
    before
        .iter()
        .zip(after)
        .map(|((outcome, was), (_, is))| (*outcome, is - was))
        .filter(|(_, n)| *n != 0.0)
        .collect()
}

pub use crate::common::eventually;

// ---------------------------------------------------------------------------------------
// The page over plain HTTP, with its cookies.

pub struct PageClient {
    http: reqwest::Client,
    base: String,
    cookies: Mutex<HashMap<String, String>>,
}

pub struct Answer {
    pub status: u16,
    pub body: String,
    pub location: Option<String>,
    pub headers: reqwest::header::HeaderMap,
}

impl PageClient {
    pub fn new(base: &str) -> Self {
        common::init();
        PageClient {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: base.to_owned(),
            cookies: Mutex::new(HashMap::new()),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Answer {
        let response = request
            .header("cookie", self.cookie_header())
            .send()
            .await
            .expect("page answers");
        for value in response.headers().get_all("set-cookie") {
            let text = value.to_str().unwrap();
            let pair = text.split(';').next().unwrap();
            let (k, v) = pair.split_once('=').unwrap();
            self.cookies.lock().unwrap().insert(k.into(), v.into());
        }
        Answer {
            status: response.status().as_u16(),
            location: response
                .headers()
                .get("location")
                .map(|l| l.to_str().unwrap().to_owned()),
            headers: response.headers().clone(),
            body: response.text().await.unwrap(),
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Answer {
        let body: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        self.send(
            self.http
                .post(format!("{}{path}", self.base))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body),
        )
        .await
    }

    /// Signs in with a password; returns the answer to the sign-in POST.
    pub async fn sign_in(&self, username: &str, password: &str) -> Answer {
        let form = self.get("/approvals/login").await;
        let csrf = csrf(&form.body);
        self.post(
            "/approvals/login",
            &[
                ("csrf", &csrf),
                ("next", "/approvals"),
                ("username", username),
                ("password", password),
            ],
        )
        .await
    }

    /// Signs in with an API token; returns the answer to the sign-in POST.
    pub async fn sign_in_with_token(&self, token: &str) -> Answer {
        let form = self.get("/approvals/login").await;
        let csrf = csrf(&form.body);
        self.post(
            "/approvals/login",
            &[("csrf", &csrf), ("next", "/approvals"), ("token", token)],
        )
        .await
    }

    /// Posts `decision` on `/approvals/<id>` with a CSRF token and a SHA-256, as a
    /// hand-made form would (or the page's own buttons do).
    pub async fn force(&self, id: &str, csrf: &str, sha256: &str, decision: &str) -> Answer {
        self.post(
            &format!("/approvals/{id}"),
            &[("csrf", csrf), ("sha256", sha256), ("decision", decision)],
        )
        .await
    }

    /// Opens an approval and presses a button (`approve` / `decline`) with the page's CSRF
    /// token and the SHA-256 it shows.
    pub async fn decide(&self, id: &str, decision: &str) -> Answer {
        let page = self.get(&format!("/approvals/{id}")).await;
        assert_eq!(page.status, 200, "{}", page.body);
        self.force(id, &csrf(&page.body), &shown_sha256(&page.body), decision)
            .await
    }
}

/// Held by the tests that count on the labs' `login_attempts` (5) for as long as they do;
/// the test that sets it to 3 for a while holds it alone.
pub static LOGIN_ATTEMPTS_SETTING: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Makes the page learn Zabbix's `login_attempts` before a password is typed on it, as a
/// call asking for approval does: it sends no password until then. A sign-in with `token`
/// (any user's) reads it.
pub async fn knows_login_attempts(page: &str, token: &str) {
    let answer = PageClient::new(page).sign_in_with_token(token).await;
    assert_eq!(answer.status, 303, "{}", answer.body);
}

/// The SHA-256 an approval's page shows.
pub fn shown_sha256(html: &str) -> String {
    between(html, "<code id=\"sha256\">", "</code>")
}

pub fn csrf(html: &str) -> String {
    between(html, "name=\"csrf\" value=\"", "\"")
}

pub fn between(text: &str, start: &str, end: &str) -> String {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in {text}"))
        + start.len();
    let to = text[from..].find(end).unwrap() + from;
    text[from..to].to_owned()
}

// ---------------------------------------------------------------------------------------
// A headless Chromium behind chromedriver.

pub struct Browser {
    pub client: fantoccini::Client,
    driver: Child,
}

impl Browser {
    pub async fn start() -> Browser {
        let port = common::free_port();
        // Chromium's profile and its scoped dirs go where TMPDIR says: into this test
        // process's scratch, swept with it, not left in /tmp when a run is cut short.
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .env("TMPDIR", common::scratch_dir("chromium"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian chromium-driver; deploy/lab/start-zabbix.sh approval)");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({"binary": "/usr/bin/chromium",
                   "args": ["--headless", "--no-sandbox", "--disable-gpu",
                            "--disable-background-networking", "--disable-component-update",
                            "--window-size=1200,1400"]}),
        );
        let url = format!("http://127.0.0.1:{port}");
        let client = eventually("chromedriver", Duration::from_secs(30), || {
            let caps = caps.clone();
            let url = url.clone();
            async move {
                fantoccini::ClientBuilder::native()
                    .capabilities(caps)
                    .connect(&url)
                    .await
                    .ok()
            }
        })
        .await;
        Browser { client, driver }
    }

    /// Opens `url` (a page that asks to sign in first) and signs in with a password.
    pub async fn sign_in(&self, url: &str, username: &str, password: &str) {
        let b = &self.client;
        b.goto(url).await.unwrap();
        for (field, value) in [("username", username), ("password", password)] {
            b.find(fantoccini::Locator::Id(field))
                .await
                .unwrap()
                .send_keys(value)
                .await
                .unwrap();
        }
        b.find(fantoccini::Locator::Id("signin"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
    }

    pub async fn stop(mut self) {
        let _ = self.client.close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// An open problem on `HOST` that mcp-operator can see. Tests that never approve use it:
/// the call's targets must resolve, and nothing is sent before a yes, so any will do.
pub async fn open_event(lab: &common::Lab, guard: &Guard) -> String {
    let reader = common::client(guard, &lab.token_operator).await;
    let event = common::trapper::open_problem(&reader, lab, &[HOST]).await;
    let _ = reader.cancel().await;
    event
}
