//! Approver sign-in and page sessions. An approver proves who they are with their own
//! Zabbix credentials: username and password (`user.login` against `FrontendURL`; the
//! Zabbix session ends with `user.logout` at sign-out) or their own API token. The
//! password is only passed through to Zabbix, never kept or logged. Sessions are short
//! and live in this replica's memory; when one ends (sign-out, or expiry noticed on a later
//! page request), the Zabbix session it opened is ended with `user.logout`.

use std::net::IpAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use moka::future::Cache;
use serde_json::{Value, json};

use crate::app::App;
use crate::policy::SignIn;
use crate::server::guard::MAX_TOKEN_LENGTH;
use crate::zabbix::{ApiToken, Identity, Method};

/// How long a page session lasts from sign-in.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(900);
/// Failed sign-ins allowed per username, and per client address (higher: behind a reverse
/// proxy many people share one), within `FAILURE_WINDOW`.
const MAX_FAILURES_PER_USER: u32 = 5;
const MAX_FAILURES_PER_ADDRESS: u32 = 20;
const FAILURE_WINDOW: Duration = Duration::from_secs(300);
/// Sessions one Zabbix user may hold at once; a sign-in past it ends that user's oldest.
/// Sign-ins that succeed are not limited otherwise, so without it one token signing in
/// again and again would fill the sessions every approver shares.
pub(crate) const MAX_SESSIONS_PER_USER: usize = 10;

/// One signed-in approver.
pub(crate) struct Session {
    pub(crate) identity: Identity,
    /// The approver's own token (their API token, or the Zabbix session of the sign-in):
    /// the summary of a pending call is resolved with it.
    pub(crate) token: ApiToken,
    /// How the person signed in. With a password, `token` is a Zabbix session opened by
    /// this sign-in and ended at sign-out.
    pub(crate) sign_in: SignIn,
    /// Put into every form of this session and checked on every POST.
    pub(crate) csrf: String,
    /// When it was opened: the oldest of a user's goes first.
    pub(crate) opened: std::time::Instant,
}

/// Sessions and the failed sign-in counters of this replica.
pub(crate) struct Sessions {
    sessions: Cache<String, Arc<Session>>,
    failures: Cache<String, u32>,
}

/// What the person typed into the sign-in form.
pub(crate) enum Credentials {
    Password { username: String, password: String },
    Token(String),
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SignInError {
    /// Wrong credentials, unknown user, or too many failures: deliberately one answer.
    #[error("sign-in failed")]
    Refused,
    #[error("Zabbix could not be asked: {0}")]
    Upstream(String),
}

impl Sessions {
    pub(crate) fn new(app: &Arc<App>) -> Self {
        // Weak: the app does not own the page, and must not be kept alive by it.
        let app: Weak<App> = Arc::downgrade(app);
        let on_end = move |_id: Arc<String>, session: Arc<Session>, _cause| {
            let app = app.clone();
            let ended: moka::notification::ListenerFuture = Box::pin(async move {
                if let Some(app) = app.upgrade()
                    && session.sign_in == SignIn::Password
                {
                    logout(&app, &session.token).await;
                }
            });
            ended
        };
        Sessions {
            sessions: Cache::builder()
                .max_capacity(10_000)
                .time_to_live(SESSION_TTL)
                .async_eviction_listener(on_end)
                .build(),
            failures: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(FAILURE_WINDOW)
                .build(),
        }
    }

    pub(crate) async fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.get(id).await
    }

    /// Checks the credentials with Zabbix and opens a session; returns its id.
    pub(crate) async fn sign_in(
        &self,
        app: &App,
        peer: IpAddr,
        credentials: Credentials,
    ) -> Result<String, SignInError> {
        let user_key = match &credentials {
            Credentials::Password { username, .. } => format!("user:{username}"),
            Credentials::Token(_) => String::new(),
        };
        let peer_key = format!("ip:{peer}");
        let keys = [
            (peer_key, MAX_FAILURES_PER_ADDRESS),
            (user_key, MAX_FAILURES_PER_USER),
        ];
        let counted = || keys.iter().filter(|(key, _)| !key.is_empty());
        let mut over = false;
        for (key, max) in counted() {
            over |= self.failures.get(key).await.unwrap_or(0) >= *max;
        }
        // Each attempt takes its place among the failures before Zabbix is asked, in one
        // atomic step per key: attempts sent at once cannot all pass a count read before
        // any of them failed. One that did not fail gives its place back.
        if !over {
            for (key, max) in counted() {
                let taken = self
                    .failures
                    .entry(key.clone())
                    .and_upsert_with(|count| async move {
                        count.map_or(1, |c| c.into_value().saturating_add(1))
                    })
                    .await;
                over |= *taken.value() > *max;
            }
            if over {
                self.give_back(&keys).await;
            }
        }
        if over {
            tracing::info!(client.address = %peer, "approval page sign-in rate-limited");
            return Err(SignInError::Refused);
        }
        let result = match credentials {
            Credentials::Password { username, password } => {
                password_session(app, &username, &password).await
            }
            Credentials::Token(token) => token_session(app, ApiToken::new(token)).await,
        };
        let session = match result {
            Ok(session) => session,
            Err(SignInError::Refused) => {
                tracing::info!(client.address = %peer, "approval page sign-in refused");
                return Err(SignInError::Refused);
            }
            Err(other) => {
                self.give_back(&keys).await;
                return Err(other);
            }
        };
        self.give_back(&keys).await;
        tracing::info!(
            client.address = %peer,
            user.id = %session.identity.userid,
            "approval page sign-in"
        );
        self.make_room(&session.identity.userid).await;
        let id = random_token();
        self.sessions.insert(id.clone(), Arc::new(session)).await;
        Ok(id)
    }

    /// Ends `userid`'s oldest sessions until one more fits within [`MAX_SESSIONS_PER_USER`].
    /// A walk over every session, only at a successful sign-in.
    async fn make_room(&self, userid: &str) {
        let mut own: Vec<(std::time::Instant, Arc<String>)> = self
            .sessions
            .iter()
            .filter(|(_, session)| session.identity.userid == userid)
            .map(|(id, session)| (session.opened, id))
            .collect();
        if own.len() < MAX_SESSIONS_PER_USER {
            return;
        }
        own.sort();
        let excess = own.len() + 1 - MAX_SESSIONS_PER_USER;
        for (_, id) in own.into_iter().take(excess) {
            self.sessions.invalidate(id.as_str()).await;
        }
    }

    /// Gives back the places an attempt took among the failures (it did not fail).
    async fn give_back(&self, keys: &[(String, u32)]) {
        for (key, _) in keys.iter().filter(|(key, _)| !key.is_empty()) {
            self.failures
                .entry(key.clone())
                .and_compute_with(|count| async move {
                    match count.map(|c| c.into_value()) {
                        Some(count) if count > 1 => moka::ops::compute::Op::Put(count - 1),
                        _ => moka::ops::compute::Op::Remove,
                    }
                })
                .await;
        }
    }

    /// Ends the page session; the eviction listener ends the Zabbix session it opened.
    pub(crate) async fn sign_out(&self, id: &str) {
        self.sessions.invalidate(id).await;
    }
}

/// The approver as Zabbix sees them now, for a decision: the session's own credentials
/// checked again (`user.checkAuthentication`) and their user groups read anew. A sign-in
/// lasts `SESSION_TTL`; without this, someone disabled in Zabbix or taken out of the
/// approver groups meanwhile could still decide until it ended. Zabbix refusing the
/// session or token is [`SignInError::Refused`]; so is another user behind it.
pub(crate) async fn recheck(app: &App, session: &Session) -> Result<Identity, SignInError> {
    let credential = if session.sign_in == SignIn::Password {
        json!({"sessionid": session.token.expose()})
    } else {
        json!({"token": session.token.expose()})
    };
    let user = app
        .zabbix
        .call(Method::UserCheckAuthentication, &credential, None)
        .await
        .map_err(|e| match e {
            // Fails closed: any refusal of Zabbix's ends the person's right to decide.
            crate::zabbix::ZabbixError::Api { .. } => SignInError::Refused,
            other => SignInError::Upstream(other.to_string()),
        })?;
    let current = identity(app, &user, &session.token).await?;
    if current.userid != session.identity.userid {
        return Err(SignInError::Refused);
    }
    Ok(current)
}

async fn password_session(
    app: &App,
    username: &str,
    password: &str,
) -> Result<Session, SignInError> {
    let upstream = |e: crate::zabbix::ZabbixError| SignInError::Upstream(e.to_string());
    let user = app
        .zabbix
        .call(
            Method::UserLogin,
            &json!({"username": username, "password": password, "userData": true}),
            None,
        )
        .await
        .map_err(|e| match e {
            // Zabbix answers wrong password and unknown user alike; so do we.
            crate::zabbix::ZabbixError::Api { .. } => SignInError::Refused,
            other => upstream(other),
        })?;
    let sid = text(&user, "sessionid");
    if sid.is_empty() {
        return Err(SignInError::Refused);
    }
    let token = ApiToken::new(sid);
    match identity(app, &user, &token).await {
        Ok(identity) => Ok(Session {
            identity,
            token,
            sign_in: SignIn::Password,
            csrf: random_token(),
            opened: std::time::Instant::now(),
        }),
        Err(error) => {
            logout(app, &token).await;
            Err(error)
        }
    }
}

async fn token_session(app: &App, token: ApiToken) -> Result<Session, SignInError> {
    // Not sent on to Zabbix, as on the MCP endpoint: no token it issues is this long.
    if token.expose().len() > MAX_TOKEN_LENGTH {
        return Err(SignInError::Refused);
    }
    let identity = app
        .callers
        .resolve(&app.zabbix, &token)
        .await
        .map_err(|e| match e {
            crate::zabbix::CallerError::InvalidToken(_) => SignInError::Refused,
            // An identity without its groups cannot be checked against approvers.
            other @ (crate::zabbix::CallerError::Upstream(_)
            | crate::zabbix::CallerError::GroupsUnavailable(_)
            | crate::zabbix::CallerError::Incomplete { .. }) => {
                SignInError::Upstream(other.to_string())
            }
        })?;
    Ok(Session {
        identity: (*identity).clone(),
        token,
        sign_in: SignIn::Token,
        csrf: random_token(),
        opened: std::time::Instant::now(),
    })
}

/// The approver's identity from `user.login`'s user data plus their user groups, read
/// with their own session. No groups known = no group membership (fails closed).
async fn identity(app: &App, user: &Value, token: &ApiToken) -> Result<Identity, SignInError> {
    let version = app
        .zabbix
        .version()
        .await
        .map_err(|e| SignInError::Upstream(e.to_string()))?;
    let userid = text(user, "userid");
    if userid.is_empty() {
        return Err(SignInError::Refused);
    }
    let groups = app
        .zabbix
        .call(
            Method::UserGroupGet,
            &json!({"userids": [userid], "output": ["name"], "sortfield": "name"}),
            Some((token, version)),
        )
        .await
        .map_err(|e| SignInError::Upstream(e.to_string()))?;
    let usrgrps = groups
        .as_array()
        .map(|groups| {
            groups
                .iter()
                .filter_map(|g| g["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(Identity {
        userid,
        username: text(user, "username"),
        user_type: text(user, "type").parse().unwrap_or(0),
        roleid: text(user, "roleid"),
        usrgrps,
    })
}

async fn logout(app: &App, token: &ApiToken) {
    let Ok(version) = app.zabbix.version().await else {
        return;
    };
    if let Err(error) = app
        .zabbix
        .call(Method::UserLogout, &json!([]), Some((token, version)))
        .await
    {
        tracing::info!(%error, "approval page: user.logout failed");
    }
}

fn text(value: &Value, key: &str) -> String {
    match &value[key] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// 256 random bits as hex (session ids, CSRF tokens).
pub(crate) fn random_token() -> String {
    let mut bytes = uuid::Uuid::new_v4().as_bytes().to_vec();
    bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    hex::encode(bytes)
}

/// Equal-length comparison that does not stop at the first difference.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}
