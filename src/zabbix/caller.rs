//! The caller: the Zabbix API token an agent presents and the Zabbix user it belongs to.
//!
//! The token's owner is resolved with `user.checkAuthentication {token}` and its group names
//! with `usergroup.get`, and cached by a hash of the token, so Zabbix is asked once per token
//! per TTL. Only a complete identity is cached: if either answer is missing or malformed, the
//! request is refused and nothing is remembered. The token itself is never printed:
//! `ApiToken`'s Debug masks it, and logs carry only `token_id` (a hash prefix).

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::header::HeaderValue;
use moka::future::Cache;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::hashing::FastState;
use crate::zabbix::client::ZabbixClient;
use crate::zabbix::error::ZabbixError;
use crate::zabbix::method::Method;

/// A Zabbix API token as presented by the agent, with its SHA-256 (the identity cache's
/// key and, in part, the log's token id), computed once when the token is read rather
/// than at each use.
#[derive(Clone)]
pub struct ApiToken {
    text: Arc<str>,
    digest: [u8; 32],
}

/// The Zabbix user a token belongs to, as the policy sees it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Identity {
    pub userid: String,
    pub username: String,
    /// Zabbix user type: 1 user, 2 admin, 3 super admin.
    #[serde(rename = "type")]
    pub user_type: i64,
    pub roleid: String,
    /// Names of the user's groups (never empty: a user in none is refused).
    pub usrgrps: Vec<String>,
}

/// Everything known about the caller of one HTTP request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub token: ApiToken,
    /// A short SHA-256 prefix of the token, safe to log.
    pub token_id: String,
    pub identity: Arc<Identity>,
    pub address: IpAddr,
}

#[derive(Debug, thiserror::Error)]
pub enum CallerError {
    #[error("the Zabbix API token was not accepted by Zabbix: {0}")]
    InvalidToken(String),
    #[error(transparent)]
    Upstream(ZabbixError),
    /// The owner is known but their user groups are not: policies that restrict by group
    /// would see a member of no group, so the identity is refused as a whole.
    #[error("{}", groups_unavailable(&.0.to_string()))]
    GroupsUnavailable(ZabbixError),
    /// An answer that lacks a field the identity needs.
    #[error("the caller's identity is incomplete: {method} answered without a valid {field}")]
    Incomplete { method: Method, field: &'static str },
}

impl CallerError {
    /// What the caller of a request refused with this error is told: its text, with a
    /// Zabbix failure as [`ZabbixError::public_text`] words it (the request's identity is
    /// not established; the log has the whole text).
    pub fn public_text(&self) -> String {
        match self {
            CallerError::Upstream(error) => error.public_text(),
            CallerError::GroupsUnavailable(error) => groups_unavailable(&error.public_text()),
            CallerError::InvalidToken(_) | CallerError::Incomplete { .. } => self.to_string(),
        }
    }
}

fn groups_unavailable(reason: &str) -> String {
    format!(
        "the caller's identity is incomplete: the user groups of the token's owner could not be read with usergroup.get ({reason}); allow usergroup.get in the user's role"
    )
}

/// Resolves tokens to identities, with a bounded, short-lived cache.
pub struct CallerResolver {
    cache: Cache<[u8; 32], Arc<Identity>, FastState>,
    /// How long an identity is taken as Zabbix gave it.
    ttl: Duration,
    /// Lookups answered from the cache, and lookups that asked Zabbix (read by `/metrics`).
    hits: AtomicU64,
    misses: AtomicU64,
}

impl ApiToken {
    pub fn new(token: String) -> Self {
        let digest = Sha256::digest(token.as_bytes()).into();
        Self {
            text: Arc::from(token),
            digest,
        }
    }

    /// The token text, for the one place that sends it to Zabbix.
    pub fn expose(&self) -> &str {
        &self.text
    }

    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// Whether `text` holds this token: what an agent writes is logged and may be sent to
    /// Zabbix, and the token never is. An empty token is in no text.
    pub fn is_in(&self, text: &str) -> bool {
        !self.text.is_empty() && text.contains(&*self.text)
    }

    /// A 16-hex-digit prefix of the SHA-256 of the token: identifies it in logs.
    pub fn id(&self) -> String {
        hex::encode(&self.digest()[..8])
    }

    pub fn bearer_header(&self) -> Result<HeaderValue, ZabbixError> {
        let mut header = String::with_capacity("Bearer ".len() + self.text.len());
        header.push_str("Bearer ");
        header.push_str(&self.text);
        let mut value = HeaderValue::try_from(header)
            .map_err(|_| ZabbixError::Request("the token is not a valid header value".into()))?;
        value.set_sensitive(true);
        Ok(value)
    }
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(***)")
    }
}

impl CallerResolver {
    pub fn new(capacity: u64, ttl: Duration) -> Self {
        Self {
            cache: Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build_with_hasher(FastState::default()),
            ttl,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Lookups answered from the cache (or by a concurrent lookup of the same token).
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that asked Zabbix.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// The identity behind `token` if it is cached; Zabbix is not asked.
    pub async fn cached(&self, token: &ApiToken) -> Option<Arc<Identity>> {
        let identity = self.cache.get(&token.digest()).await?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(identity)
    }

    /// Drops the identity cached for `token`, as its TTL ends it: the next use asks Zabbix
    /// again. For tests that need that state without waiting out the TTL.
    pub async fn forget(&self, token: &ApiToken) {
        self.cache.invalidate(&token.digest()).await;
    }

    /// How often what a token keeps open looks at it again (`refusal`): a quarter of the
    /// cache's time to live, so that a revoked token is noticed within a quarter after its
    /// identity lapses, at the cost of cache reads only in between.
    pub fn recheck_every(&self) -> Duration {
        self.ttl / 4
    }

    /// Zabbix's refusal of `token`, if it refuses it now; `None` when it is accepted or
    /// Zabbix does not answer (no verdict), for what a token keeps open after its request
    /// was let in (a listen stream, a session). Groups left unread for want of an answer
    /// (a timeout, a lost answer, all Zabbix slots busy) are no verdict either: they ended
    /// every session and stream of the token; a role that denies `usergroup.get` is one.
    pub async fn refusal(&self, client: &ZabbixClient, token: &ApiToken) -> Option<CallerError> {
        match self.resolve(client, token).await {
            Ok(_) => None,
            Err(refused) => is_verdict(&refused).then_some(refused),
        }
    }

    /// The identity behind `token` as Zabbix has it now, whatever the cache holds: a write
    /// is judged on the user's groups and role as they are when it is decided, not as they
    /// were up to a TTL ago (a user taken out of the group a policy trusts kept writing for
    /// up to 60 s). The answer replaces the cached identity, so reads after it see it too; a
    /// refusal (the token, or a user left in no group) drops the cached one, and a Zabbix
    /// that does not answer leaves it (no verdict: reads go on, the write is refused).
    pub async fn current(
        &self,
        client: &ZabbixClient,
        token: &ApiToken,
    ) -> Result<Arc<Identity>, CallerError> {
        let key = token.digest();
        self.misses.fetch_add(1, Ordering::Relaxed);
        // Boxed as in `resolve`: the lookup's future is several kB.
        match Box::pin(lookup(client, token)).await {
            Ok(identity) => {
                self.cache.insert(key, identity.clone()).await;
                Ok(identity)
            }
            Err(error) => {
                if is_verdict(&error) {
                    self.cache.invalidate(&key).await;
                }
                Err(error)
            }
        }
    }

    /// Returns once `token` no longer resolves (`refusal`, every `recheck_every`).
    pub async fn until_rejected(&self, client: &ZabbixClient, token: &ApiToken) -> CallerError {
        loop {
            tokio::time::sleep(self.recheck_every()).await;
            if let Some(refused) = self.refusal(client, token).await {
                return refused;
            }
        }
    }

    /// The identity behind `token`; concurrent lookups of one token share one Zabbix call.
    pub async fn resolve(
        &self,
        client: &ZabbixClient,
        token: &ApiToken,
    ) -> Result<Arc<Identity>, CallerError> {
        let key = token.digest();
        // Nearly every call finds its caller: a plain read first. The lookup's future (a
        // Zabbix round trip inside the cache's own) is several kB; only a miss builds it,
        // in a box of its own, so a hit neither builds nor moves it.
        if let Some(identity) = self.cache.get(&key).await {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(identity);
        }
        Box::pin(self.resolve_missing(client, token, key)).await
    }

    /// [`Self::resolve`] for a token the cache did not hold when asked: one lookup for all
    /// the requests that wait for it (one may have finished meanwhile: a hit then).
    async fn resolve_missing(
        &self,
        client: &ZabbixClient,
        token: &ApiToken,
        key: [u8; 32],
    ) -> Result<Arc<Identity>, CallerError> {
        let mut asked = false;
        let ask = async {
            asked = true;
            lookup(client, token).await
        };
        let result = self.cache.try_get_with(key, ask).await;
        let counter = if asked { &self.misses } else { &self.hits };
        counter.fetch_add(1, Ordering::Relaxed);
        result.map_err(|e| match e.as_ref() {
            CallerError::InvalidToken(m) => CallerError::InvalidToken(m.clone()),
            CallerError::Upstream(z) => CallerError::Upstream(clone_upstream(z)),
            CallerError::GroupsUnavailable(z) => CallerError::GroupsUnavailable(clone_upstream(z)),
            CallerError::Incomplete { method, field } => CallerError::Incomplete {
                method: *method,
                field,
            },
        })
    }
}

/// Whether a failed lookup is Zabbix's verdict on the token or its user (refused, a user in
/// no group, a role denying `usergroup.get`), rather than no answer (a timeout, a lost
/// answer, every Zabbix slot busy), which says nothing of them.
fn is_verdict(error: &CallerError) -> bool {
    match error {
        CallerError::Upstream(_) => false,
        CallerError::GroupsUnavailable(error) => matches!(error, ZabbixError::Api { .. }),
        CallerError::InvalidToken(_) | CallerError::Incomplete { .. } => true,
    }
}

/// Whether Zabbix's error to `user.checkAuthentication` is its verdict on the token. Zabbix
/// refuses a token it does not know, a disabled user's, or a malformed one with -32602
/// (`ZBX_API_ERROR_NO_AUTH`, `ZBX_API_ERROR_PARAMETERS`), and an expired one with -32500
/// (`ZBX_API_ERROR_PERMISSIONS`, "API token expired."). -32500 is also its database and
/// internal errors, and -32603 any exception: those say nothing of the token, and taken for
/// a rejection they would lock callers out and close sessions for as long as Zabbix fails.
/// An expiry worded in another language is read as such a failure: refused all the same.
fn rejects_token(code: i64, data: &Value) -> bool {
    const EXPIRED: &str = "API token expired.";
    code == -32602 || (code == -32500 && data.as_str() == Some(EXPIRED))
}

async fn lookup(client: &ZabbixClient, token: &ApiToken) -> Result<Arc<Identity>, CallerError> {
    let version = client.version().await.map_err(CallerError::Upstream)?;
    let user = client
        .call(
            Method::UserCheckAuthentication,
            &json!({ "token": token.expose() }),
            None,
        )
        .await
        .map_err(|e| match e {
            ZabbixError::Api {
                code,
                data,
                message,
            } if rejects_token(code, &data) => {
                CallerError::InvalidToken(format!("{message} {}", data.as_str().unwrap_or("")))
            }
            other => CallerError::Upstream(other),
        })?;
    let text = |key: &str| match &user[key] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    };
    let userid = text("userid");
    if userid.is_empty() {
        return Err(CallerError::InvalidToken(
            "Zabbix returned no user for the token".into(),
        ));
    }
    let incomplete = |field| CallerError::Incomplete {
        method: Method::UserCheckAuthentication,
        field,
    };
    let username = Some(text("username"))
        .filter(|s| !s.is_empty())
        .ok_or_else(|| incomplete("username"))?;
    let roleid = Some(text("roleid"))
        .filter(|s| !s.is_empty())
        .ok_or_else(|| incomplete("roleid"))?;
    let user_type = text("type")
        .parse::<i64>()
        .ok()
        .filter(|t| (1..=3).contains(t))
        .ok_or_else(|| incomplete("type"))?;
    let groups = client
        .call(
            Method::UserGroupGet,
            &json!({ "userids": [userid], "output": ["name"], "sortfield": "name" }),
            Some((token, version)),
        )
        .await
        .map_err(CallerError::GroupsUnavailable)?;
    Ok(Arc::new(Identity {
        username,
        user_type,
        roleid,
        userid,
        usrgrps: group_names(&groups)?,
    }))
}

/// What an empty `usergroup.get` answer is refused as: Zabbix 7.0 lets a user be in no
/// group and their token works, yet a policy would see `usrgrps: []`, which every deny list by
/// group misses. Named as such, so that no one looks for a missing permission.
const NO_GROUP: &str =
    "group: the token's owner is in no user group, and a policy would see usrgrps: []";

/// The names in a `usergroup.get` answer: a non-empty list of objects with a name each.
/// Anything else is an incomplete identity.
fn group_names(groups: &Value) -> Result<Vec<String>, CallerError> {
    let incomplete = CallerError::Incomplete {
        method: Method::UserGroupGet,
        field: "name",
    };
    let Some(list) = groups.as_array() else {
        return Err(incomplete);
    };
    if list.is_empty() {
        return Err(CallerError::Incomplete {
            method: Method::UserGroupGet,
            field: NO_GROUP,
        });
    }
    list.iter()
        .map(|g| {
            g["name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
        })
        .collect::<Option<Vec<_>>>()
        .ok_or(incomplete)
}

/// moka hands errors back behind an Arc; rebuild an owned one for the caller.
pub(crate) fn clone_upstream(error: &ZabbixError) -> ZabbixError {
    error.clone()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::time::Duration;

    use super::{ApiToken, CallerError, CallerResolver, group_names};
    use crate::zabbix::{ClientSettings, ZabbixClient};

    #[test]
    fn group_names_need_a_complete_answer() {
        let names = group_names(&json!([{"name": "A"}, {"name": "B"}])).unwrap();
        assert_eq!(names, ["A", "B"]);
        for partial in [
            json!([]),
            json!(null),
            json!([{"name": "A"}, {"usrgrpid": "7"}]),
        ] {
            assert!(
                matches!(group_names(&partial), Err(CallerError::Incomplete { .. })),
                "{partial}"
            );
        }
    }

    /// Zabbix 7.0 lets a user be in no group: refused, and named as such rather than as a
    /// malformed answer (an operator would look for a missing usergroup.get permission).
    #[test]
    fn a_user_in_no_group_is_named_as_such() {
        let text = group_names(&json!([])).unwrap_err().to_string();
        assert!(text.contains("in no user group"), "{text}");
        let text = group_names(&json!([{"usrgrpid": "7"}]))
            .unwrap_err()
            .to_string();
        assert!(text.ends_with("without a valid name"), "{text}");
    }

    /// A Zabbix that does not answer is no verdict on a token: what waits for its rejection
    /// (a listen stream) goes on.
    #[tokio::test]
    async fn an_unreachable_zabbix_rejects_no_token() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let client = ZabbixClient::new(&ClientSettings {
            api_url: format!("http://127.0.0.1:{port}/api_jsonrpc.php"),
            timeout: Duration::from_secs(1),
            ca_file: None,
            ignore_cert_errors: false,
            max_response_bytes: 1 << 20,
            max_concurrency: 4,
            max_connection_age: Duration::from_secs(300),
        })
        .unwrap();
        let resolver = CallerResolver::new(16, Duration::from_millis(5));
        let token = ApiToken::new("t".repeat(64));
        let rounds = resolver.until_rejected(&client, &token);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), rounds)
                .await
                .is_err(),
            "ended on an unreachable Zabbix"
        );
        assert!(resolver.misses() >= 2, "it asked more than once");
    }

    #[test]
    fn only_zabbix_verdicts_on_the_token_reject_it() {
        use super::rejects_token;
        // What Zabbix 6.0 and 7.0 answer (CUser::checkAuthentication, CJsonRpc's codes).
        assert!(rejects_token(-32602, &json!("Not authorized.")));
        assert!(rejects_token(
            -32602,
            &json!("Session terminated, re-login, please.")
        ));
        assert!(rejects_token(-32500, &json!("API token expired.")));
        // Its database and internal errors, and any exception (api_jsonrpc.php).
        assert!(!rejects_token(
            -32500,
            &json!("SQL statement execution has failed.")
        ));
        assert!(!rejects_token(-32500, &json!(null)));
        assert!(!rejects_token(-32603, &json!("Database is down.")));
        assert!(!rejects_token(-32600, &json!("Invalid request.")));
    }

    #[test]
    fn token_never_prints() {
        let token = ApiToken::new("s3cr3t-token".into());
        assert_eq!(format!("{token:?}"), "ApiToken(***)");
        assert_eq!(token.id().len(), 16);
        assert!(!token.id().contains("s3cr3t"));
    }
}
