//! Approver sign-in and page sessions. An approver proves who they are with their own
//! Zabbix credentials: username and password (`user.login` against `FrontendURL`; the
//! Zabbix session ends with `user.logout` at sign-out) or their own API token. The
//! password is only passed through to Zabbix, never kept or logged. Sessions are short
//! and live in this replica's memory; when one ends (sign-out, or expiry noticed on a later
//! page request), the Zabbix session it opened is ended with `user.logout`. Wrong passwords
//! are counted per username so that the page never makes Zabbix block an account
//! (`USERNAME_WINDOW`), and failed sign-ins per client address.

use std::net::IpAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use moka::future::Cache;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::app::App;
use crate::policy::SignIn;
use crate::server::guard::MAX_TOKEN_LENGTH;
use crate::store::SignInCount;
use crate::zabbix::{ApiToken, Identity, Method};

/// How long a page session lasts from sign-in.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(900);
/// Failed sign-ins allowed per client address within `ADDRESS_WINDOW` (behind a reverse
/// proxy many people share one).
const MAX_FAILURES_PER_ADDRESS: u32 = 20;
const ADDRESS_WINDOW: Duration = Duration::from_secs(300);
/// Zabbix counts a user's wrong passwords until a right one, whenever they came, blocks the
/// account for `login_block` at its `login_attempts` and again at every wrong one after
/// (frontend and API alike). So the page sends one username at most `login_attempts - 1`
/// wrong passwords, and forgets them only at a right one (as Zabbix does) or once this long
/// has passed without an attempt for the username (one held renews it: an attacker who
/// keeps trying keeps the page's hold, never adding to Zabbix's count). Whoever reaches
/// the page thus cannot get the account blocked in Zabbix through it alone.
const USERNAME_WINDOW: Duration = Duration::from_secs(3600);
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
    /// Failed sign-ins by client address (an IPv6 client's /64: [`address_key`]).
    by_address: Cache<String, u32>,
    /// Wrong passwords sent to Zabbix by username, as typed.
    by_username: Cache<String, u32>,
}

/// What the person typed into the sign-in form.
pub(crate) enum Credentials {
    Password { username: String, password: String },
    Token(String),
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SignInError {
    /// Wrong credentials or unknown user (or an account Zabbix blocks): deliberately one
    /// answer, as Zabbix gives.
    #[error("sign-in failed")]
    Refused,
    /// This username's wrong passwords are one short of Zabbix's `login_attempts`: no more
    /// are sent for it for now. Counted per username typed, existing or not.
    #[error("too many wrong passwords for this username")]
    UsernameHeld,
    /// Too many failed sign-ins from this client address.
    #[error("too many failed sign-ins from this address")]
    AddressHeld,
    /// The password was right, but Zabbix asks this user for a second factor (MFA), which
    /// the page cannot take.
    #[error("the account asks for a second factor")]
    SecondFactor,
    /// Zabbix's `login_attempts` is not known yet ([`super::LoginAttempts`]): no password
    /// is sent, as any guess above the installation's gets accounts blocked.
    #[error("Zabbix's login_attempts is not known yet")]
    AttemptsUnknown,
    #[error("Zabbix could not be asked: {0}")]
    Upstream(String),
    /// The shared store (Redis) did not answer: no password is sent uncounted.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
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
            by_address: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(ADDRESS_WINDOW)
                .build(),
            by_username: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(USERNAME_WINDOW)
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
        // Only a password is counted against Zabbix's login_attempts.
        let mut known = None;
        if matches!(credentials, Credentials::Password { .. }) {
            known = app.login_attempts.current(app).await;
            if known.is_none() {
                tracing::info!(client.address = %peer, "approval page sign-in held: login_attempts unknown");
                return Err(SignInError::AttemptsUnknown);
            }
        }
        let most = known.unwrap_or(1).saturating_sub(1);
        let mut counts = vec![Count {
            failures: &self.by_address,
            key: address_key(peer),
            max: MAX_FAILURES_PER_ADDRESS,
            username: false,
        }];
        let mut username = None;
        if let Credentials::Password { username: name, .. } = &credentials {
            counts.push(Count {
                failures: &self.by_username,
                key: name.clone(),
                max: most,
                username: true,
            });
            username = Some(name.as_str());
        }
        if let Err(held) = take_places(&counts).await {
            tracing::info!(client.address = %peer, reason = %held, "approval page sign-in held");
            return Err(held);
        }
        // Then the counts every replica shares (SharedStore), which only Redis keeps.
        let shared = Shared::new(app, address_key(peer), username);
        if let Err(held) = shared.take(most).await {
            give_back(&counts).await;
            tracing::info!(client.address = %peer, reason = %held, "approval page sign-in held");
            return Err(held);
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
                // Zabbix counted no wrong password (a second factor asked means a right one).
                give_back(&counts).await;
                shared.give_back().await;
                return Err(other);
            }
        };
        give_back(&counts).await;
        // A right password resets Zabbix's count of wrong ones: so does the page.
        for count in counts.iter().skip(1) {
            count.failures.invalidate(&count.key).await;
        }
        shared.signed_in().await;
        app.login_attempts.read(app, &session.token).await;
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

    /// Ends the page session; the eviction listener ends the Zabbix session it opened.
    pub(crate) async fn sign_out(&self, id: &str) {
        self.sessions.invalidate(id).await;
    }
}

/// One count of failed sign-ins an attempt is checked against.
struct Count<'a> {
    failures: &'a Cache<String, u32>,
    key: String,
    /// Failures allowed; at it, no more attempts are sent to Zabbix.
    max: u32,
    /// Counts wrong passwords for a username (else failed sign-ins from an address).
    username: bool,
}

/// The counts of attempts every replica sharing the store keeps (Redis only): the client
/// address's failed sign-ins, and a username's wrong passwords by the name's SHA-256 (the
/// name typed is not stored).
struct Shared<'a> {
    app: &'a App,
    address: String,
    username: Option<[u8; 32]>,
}

impl<'a> Shared<'a> {
    fn new(app: &'a App, address: String, username: Option<&str>) -> Self {
        Shared {
            app,
            address,
            username: username.map(|name| Sha256::digest(name.as_bytes()).into()),
        }
    }

    /// Takes a place in each count; none where one is full or Redis fails (no attempt is
    /// sent uncounted).
    async fn take(&self, most: u32) -> Result<(), SignInError> {
        let store = &self.app.store;
        let address = SignInCount::Address(&self.address);
        if !store
            .take_sign_in(address, MAX_FAILURES_PER_ADDRESS, ADDRESS_WINDOW)
            .await?
        {
            return Err(SignInError::AddressHeld);
        }
        let Some(digest) = &self.username else {
            return Ok(());
        };
        let taken = store
            .take_sign_in(SignInCount::Username(digest), most, USERNAME_WINDOW)
            .await;
        if !matches!(taken, Ok(true)) {
            self.put_back(address).await;
            return Err(taken.map_or_else(SignInError::from, |_| SignInError::UsernameHeld));
        }
        Ok(())
    }

    /// The attempt did not fail: both places go back. Where Redis fails here, a count
    /// stays higher than it should for a while: the side that keeps Zabbix from blocking
    /// the account.
    async fn give_back(&self) {
        self.put_back(SignInCount::Address(&self.address)).await;
        if let Some(digest) = &self.username {
            self.put_back(SignInCount::Username(digest)).await;
        }
    }

    /// A right password: the address's place goes back, the username's count is reset.
    async fn signed_in(&self) {
        self.put_back(SignInCount::Address(&self.address)).await;
        if let Some(digest) = &self.username
            && let Err(error) = self
                .app
                .store
                .forget_sign_in(SignInCount::Username(digest))
                .await
        {
            tracing::warn!(%error, "approval page: shared sign-in count not reset");
        }
    }

    async fn put_back(&self, count: SignInCount<'_>) {
        if let Err(error) = self.app.store.give_back_sign_in(count).await {
            tracing::warn!(%error, "approval page: shared sign-in count not given back");
        }
    }
}

/// Each attempt takes its place among the failures before Zabbix is asked, in one atomic
/// step per count: attempts sent at once cannot all pass a count read before any of them
/// failed. One that does not fail gives its place back ([`give_back`]). Past a count's
/// `max`, nothing is taken, and the count that held the attempt is named.
async fn take_places(counts: &[Count<'_>]) -> Result<(), SignInError> {
    for (taken, count) in counts.iter().enumerate() {
        let after = count
            .failures
            .entry(count.key.clone())
            .and_upsert_with(|c| async move { c.map_or(1, |c| c.into_value().saturating_add(1)) })
            .await;
        if *after.value() > count.max {
            give_back(&counts[..=taken]).await;
            return Err(if count.username {
                SignInError::UsernameHeld
            } else {
                SignInError::AddressHeld
            });
        }
    }
    Ok(())
}

/// Who an address's failed sign-ins count as: an IPv4 address, or the /64 of an IPv6 one,
/// as on the MCP endpoint (`crate::server::rejected`): one host can hold a whole /64 and
/// pick a new address per attempt, which per address made the limit none.
fn address_key(peer: IpAddr) -> String {
    crate::server::rejected::source_key(peer)
}

/// Gives back the places an attempt took among the failures (it did not fail).
async fn give_back(counts: &[Count<'_>]) {
    for count in counts {
        count
            .failures
            .entry(count.key.clone())
            .and_compute_with(|c| async move {
                match c.map(|c| c.into_value()) {
                    Some(c) if c > 1 => moka::ops::compute::Op::Put(c - 1),
                    _ => moka::ops::compute::Op::Remove,
                }
            })
            .await;
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
            other => zabbix_failed(&other),
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
            other => zabbix_failed(&other),
        })?;
    let sid = text(&user, "sessionid");
    if sid.is_empty() {
        return Err(SignInError::Refused);
    }
    // 7.0 opens a session awaiting the second factor for a user under MFA ("mfaid" set),
    // which Zabbix refuses for anything (user.logout too) until its frontend takes the code.
    if !matches!(text(&user, "mfaid").as_str(), "" | "0") {
        return Err(SignInError::SecondFactor);
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
                tracing::warn!(error = %other, "approval page: the token's owner could not be looked up");
                SignInError::Upstream(other.public_text())
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
    let version = app.zabbix.version().await.map_err(|e| zabbix_failed(&e))?;
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
        .map_err(|e| zabbix_failed(&e))?;
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

/// Zabbix could not be asked: the page, open to people not signed in, says what kind of
/// failure as an unauthenticated MCP caller is told ([`ZabbixError::public_text`]); the
/// whole text (Zabbix's address, the library's findings) goes to the process log.
fn zabbix_failed(error: &crate::zabbix::ZabbixError) -> SignInError {
    tracing::warn!(error = %error, "approval page: Zabbix could not be asked");
    SignInError::Upstream(error.public_text())
}

#[cfg(test)]
mod tests;
