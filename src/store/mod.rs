//! Shared state: pending and decided page approvals, and single-use records (sealed
//! 2026-07-28 approval states). In memory by default (one replica), or in Redis
//! (`SharedStore=redis://…`) when replicas must agree. Every state change is a
//! compare-and-set done atomically by the backend, so a decision is taken once and an
//! approved payload is redeemed once, also under a race across replicas.

mod memory;
#[cfg(test)]
pub(crate) mod own_redis;
mod redis_backend;
mod seal;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_index;
#[cfg(test)]
mod tests_seal;
#[cfg(test)]
mod tests_spaces;

use serde::{Deserialize, Serialize};

use crate::policy::{Approvers, PolicyInput};

pub use memory::MemoryStore;
pub use redis_backend::{AdmitReply, RateAdmit, RedisStore, key_prefix};

/// How long a finished record (decided, redeemed, expired) is kept after its expiry, so a
/// late retry gets a precise answer instead of a new approval request.
pub const RETAIN_SECONDS: u64 = 3600;
/// At most this many approval records in memory (pending and retained); beyond it new
/// requests are refused rather than growing without bound.
pub const MEMORY_CAPACITY: usize = 10_000;

/// One store, one of two backends.
pub enum Store {
    Memory(MemoryStore),
    Redis(RedisStore),
}

/// A page approval: the pending call as it will be sent, and where it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// Random; the last path segment of the approval URL.
    pub id: String,
    /// The call's `decision_id`: every event of this approval is logged under it.
    pub decision_id: String,
    /// The `call`-phase policy input of the pending call (tool, arguments, caller, client).
    pub input: PolicyInput,
    /// The exact JSON-RPC body (without the token) that is sent after a yes.
    pub body: String,
    pub sha256: String,
    /// Who may decide, from the call decision.
    pub approvers: Approvers,
    pub created_at: u64,
    /// Unix seconds after which it can neither be decided nor redeemed.
    pub expires_at: u64,
    pub status: Status,
}

/// Where an approval stands. Transitions: pending → approved | declined | expired;
/// approved → redeemed | withdrawn | expired. Each happens once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Status {
    Pending,
    Approved(DecidedBy),
    Declined(DecidedBy),
    Expired,
    Redeemed(DecidedBy),
    /// An approver took the yes back before a retry redeemed it.
    Withdrawn(DecidedBy),
}

/// The person who decided, as resolved from their own sign-in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecidedBy {
    pub userid: String,
    pub username: String,
    pub at: u64,
}

/// One of the approval page's counts of attempts the replicas share.
#[derive(Debug, Clone, Copy)]
pub enum SignInCount<'a> {
    /// Wrong passwords for a username, by its SHA-256 (the name typed is not stored).
    Username(&'a [u8; 32]),
    /// Failed sign-ins from a client address (an IPv6 client's /64), as text.
    Address(&'a str),
}

/// The state a transition starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    Pending,
    Approved,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("shared store: {0}")]
    Backend(String),
    #[error("shared store did not answer within {0:?}")]
    Timeout(std::time::Duration),
    #[error("shared store holds a record it cannot read: {0}")]
    Corrupt(String),
    #[error("too many pending approvals (at most {MEMORY_CAPACITY})")]
    Full,
    #[error(
        "{0} approvals were redeemed within their lifetime, as many as this replica remembers: retry later; nothing was sent to Zabbix"
    )]
    UsedFull(usize),
    /// The caller's user has `max` approvals waiting already (`MaxPendingApprovals`).
    #[error(
        "{max} {approvals} of this Zabbix user {are} waiting already (MaxPendingApprovals): wait until the approvers decide them or they expire; nothing was sent to Zabbix",
        approvals = if *max == 1 { "approval" } else { "approvals" },
        are = if *max == 1 { "is" } else { "are" }
    )]
    CallerFull { max: usize },
    #[error("SharedStore must be memory or a redis:// or rediss:// URL: {0}")]
    BadUrl(String),
    #[error(
        "SharedStore=redis needs ApprovalSealKey (or ApprovalSealKeyFile), the same on every replica: approvals kept in Redis are signed with it"
    )]
    NoSealKey,
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Approved(_) => "approved",
            Status::Declined(_) => "declined",
            Status::Expired => "expired",
            Status::Redeemed(_) => "redeemed",
            Status::Withdrawn(_) => "withdrawn",
        }
    }

    pub(crate) fn is(&self, from: From) -> bool {
        matches!(
            (self, from),
            (Status::Pending, From::Pending) | (Status::Approved(_), From::Approved)
        )
    }
}

impl ApprovalRecord {
    /// The key that makes a retry find its approval: same caller token, tool and payload.
    /// Seconds since the Unix epoch; 0 if the clock is before it.
    pub fn unix_now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    pub fn dedupe_key(&self) -> String {
        dedupe_key(
            &self.input.caller.token_id,
            &self.input.tool.name,
            &self.sha256,
        )
    }
}

/// Seconds since the Unix epoch; 0 if the clock is before it.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub fn dedupe_key(token_id: &str, tool: &str, sha256: &str) -> String {
    format!("{token_id}:{tool}:{sha256}")
}

impl Store {
    /// `None` or `memory`: in memory; `redis://` / `rediss://`: Redis (connected lazily),
    /// which needs `seal_key` (`ApprovalSealKey`) to sign what it keeps there.
    pub fn open(
        url: Option<&str>,
        timeout: std::time::Duration,
        seal_key: Option<&[u8]>,
    ) -> Result<Store, StoreError> {
        match url {
            None | Some("memory") => Ok(Store::Memory(MemoryStore::new())),
            Some(url) if url.starts_with("redis://") || url.starts_with("rediss://") => {
                let key = seal_key.ok_or(StoreError::NoSealKey)?;
                Ok(Store::Redis(RedisStore::new(url, timeout, key)?))
            }
            // Only the scheme: the rest may hold a password.
            Some(other) => Err(StoreError::BadUrl(format!(
                "{}://…",
                other.split("://").next().unwrap_or_default()
            ))),
        }
    }

    /// The pending (or decided) approval of the same caller, tool and payload, or `new`
    /// stored as pending, unless its user has `max_pending` approvals waiting already
    /// ([`StoreError::CallerFull`]). Returns the record and whether it was created now.
    pub async fn create_or_get(
        &self,
        new: ApprovalRecord,
        max_pending: usize,
    ) -> Result<(ApprovalRecord, bool), StoreError> {
        let key = new.dedupe_key();
        let (record, created) = match self {
            Store::Memory(m) => m.create_or_get(new, max_pending)?,
            Store::Redis(r) => r.create_or_get(new, max_pending).await?,
        };
        // A retry finds the approval of its own payload, never another one the index
        // was made to point at.
        if record.dedupe_key() != key {
            return Err(StoreError::Corrupt(format!(
                "approval {} is not of this call",
                record.id
            )));
        }
        Ok((record, created))
    }

    pub async fn get(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        match self {
            Store::Memory(m) => Ok(m.get(id)),
            Store::Redis(r) => r.get(id).await,
        }
    }

    /// Pending approvals that have not expired, oldest first.
    pub async fn list_pending(&self, now: u64) -> Result<Vec<ApprovalRecord>, StoreError> {
        let mut records = match self {
            Store::Memory(m) => m.list_pending(),
            Store::Redis(r) => r.list_pending(now).await?,
        };
        records.retain(|r| r.status == Status::Pending && r.expires_at > now);
        records.sort_by_key(|r| r.created_at);
        Ok(records)
    }

    /// Moves the record from `from` to `to` if it is in `from` (and, for a decision or a
    /// redemption, not expired at `now`). `Ok(None)`: it was not (someone else won, or it
    /// expired); the caller reads the record again to say why.
    pub async fn transition(
        &self,
        id: &str,
        from: From,
        to: Status,
        now: u64,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        match self {
            Store::Memory(m) => Ok(m.transition(id, from, to, now)),
            Store::Redis(r) => r.transition(id, from, to, now).await,
        }
    }

    /// Forgets which approval a retry of this payload finds, so the next call asks anew
    /// (after an expiry). The record itself stays until it is retired.
    pub async fn forget_key(&self, key: &str, id: &str) -> Result<(), StoreError> {
        match self {
            Store::Memory(m) => {
                m.forget_key(key, id);
                Ok(())
            }
            Store::Redis(r) => r.forget_key(key, id).await,
        }
    }

    /// Records `nonce` as used: `true` the first time, `false` ever after (within `ttl`).
    pub async fn use_once(
        &self,
        nonce: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, StoreError> {
        match self {
            Store::Memory(m) => m.use_once(nonce, ttl),
            Store::Redis(r) => r.use_once(nonce, ttl).await,
        }
    }

    /// How long `source` (an address or IPv6 /64, as text) stays locked out for the token
    /// with this SHA-256 digest, as every replica sharing the store counted it (see
    /// `server::rejected`); `None` when it is not. In memory there is nothing shared: the
    /// sidecar's own count is all there is.
    pub async fn lockout(
        &self,
        source: &str,
        digest: &[u8; 32],
        max: usize,
    ) -> Result<Option<std::time::Duration>, StoreError> {
        match self {
            Store::Memory(_) => Ok(None),
            Store::Redis(r) => r.lockout(source, &hex::encode(digest), max).await,
        }
    }

    /// Counts a token Zabbix rejected from `source` for every replica, in a window that
    /// starts at the source's first rejection; the token is spared no more.
    pub async fn record_rejected(
        &self,
        source: &str,
        digest: &[u8; 32],
        window: std::time::Duration,
    ) -> Result<(), StoreError> {
        match self {
            Store::Memory(_) => Ok(()),
            Store::Redis(r) => {
                r.record_rejected(source, &hex::encode(digest), window)
                    .await
            }
        }
    }

    /// Marks a token Zabbix accepted, for every replica: spared from lockouts for `remember`.
    pub async fn record_accepted(
        &self,
        digest: &[u8; 32],
        remember: std::time::Duration,
    ) -> Result<(), StoreError> {
        match self {
            Store::Memory(_) => Ok(()),
            Store::Redis(r) => r.record_accepted(&hex::encode(digest), remember).await,
        }
    }

    /// Takes a place in one of the approval page's counts of attempts (a username's wrong
    /// passwords, an address's failed sign-ins), for every replica: `false`, none taken,
    /// when `max` are counted (see `approval_page::session`). In memory there is nothing
    /// shared: the page's own count is all there is.
    pub async fn take_sign_in(
        &self,
        count: SignInCount<'_>,
        max: u32,
        window: std::time::Duration,
    ) -> Result<bool, StoreError> {
        match self {
            Store::Memory(_) => Ok(true),
            Store::Redis(r) => r.take_sign_in(count, max, window).await,
        }
    }

    /// Gives back a place [`Store::take_sign_in`] took (the attempt did not fail).
    pub async fn give_back_sign_in(&self, count: SignInCount<'_>) -> Result<(), StoreError> {
        match self {
            Store::Memory(_) => Ok(()),
            Store::Redis(r) => r.give_back_sign_in(count).await,
        }
    }

    /// Forgets the count for every replica (a username's, at a right password).
    pub async fn forget_sign_in(&self, count: SignInCount<'_>) -> Result<(), StoreError> {
        match self {
            Store::Memory(_) => Ok(()),
            Store::Redis(r) => r.forget_sign_in(count).await,
        }
    }

    /// Shares Zabbix's `login_attempts`, read at `read_at` (Unix seconds), with every
    /// replica for `ttl` (see `approval_page::attempts`). In memory there is no one to tell.
    pub async fn put_login_attempts(
        &self,
        attempts: u32,
        read_at: u64,
        ttl: std::time::Duration,
    ) -> Result<(), StoreError> {
        match self {
            Store::Memory(_) => Ok(()),
            Store::Redis(r) => r.put_login_attempts(attempts, read_at, ttl).await,
        }
    }

    /// Zabbix's `login_attempts` as a replica last shared it, with when it was read.
    pub async fn login_attempts(&self) -> Result<Option<(u32, u64)>, StoreError> {
        match self {
            Store::Memory(_) => Ok(None),
            Store::Redis(r) => r.login_attempts().await,
        }
    }

    /// Whether the store answers (Redis: takes a write within the timeout); memory always does.
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            Store::Memory(_) => Ok(()),
            Store::Redis(r) => r.ping().await,
        }
    }

    /// What this installation's Redis keys start with; `None` in memory.
    pub fn redis_key_prefix(&self) -> Option<&str> {
        match self {
            Store::Memory(_) => None,
            Store::Redis(r) => Some(r.key_prefix()),
        }
    }

    pub fn backend(&self) -> &'static str {
        match self {
            Store::Memory(_) => "memory",
            Store::Redis(_) => "redis",
        }
    }
}
