//! The Redis backend: replicas share approvals and single-use records. Every state change
//! is one Lua script (atomic on the server), so two replicas racing to decide or redeem
//! the same approval cannot both win.
//!
//! Layout (every key in the installation's space, `zmg:<space>:`, see `keys.rs`):
//! `approval:<id>` a hash {record, status, state, expires_at};
//! `key:<token_id>:<tool>:<sha256>` → id; `pending` a sorted set of pending ids by
//! creation time; `waiting:<userid>` a sorted set of each user's approvals by expiry (for
//! `MaxPendingApprovals`); `once:<nonce>` single-use markers (SET NX PX); `rate:…` and
//! `slots:…` the per-caller limits (see `rate.rs`); `rejected:…` and `accepted:…` the
//! rejected-token lockout (see `lockout.rs`); `ready` the readiness probe's write.

use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};
use tokio::sync::OnceCell;

use super::seal::{Part, Seal};
use super::{ApprovalRecord, From, RETAIN_SECONDS, Status, StoreError};

mod keys;
mod lockout;
mod rate;
mod setting;
mod sign_in;
use keys::Keys;
pub use rate::{AdmitReply, RateAdmit};

/// What every Redis key of the installation holding `seal_key` starts with
/// (`zmg:<space>:`): to look at or clear one installation's keys (`--scan --pattern`).
pub fn key_prefix(seal_key: &[u8]) -> String {
    Keys::new(seal_key).prefix().to_owned()
}

/// At most this many pending approvals are listed.
const LIST_MAX: isize = 1000;
/// A listing drops dead entries from the pending index (approvals past their expiry,
/// decided, or retired) and reads on, at most this many times: enough that a page view
/// gets past the dead entries one user can leave in an hour, bounded all the same.
const LIST_ROUNDS: usize = 16;
/// No record outlives its creation by more than the longest `ApprovalTimeout` plus
/// [`RETAIN_SECONDS`]: index entries older than that are trimmed at every creation, so
/// the index stays bounded also when nobody opens the page.
pub(super) const INDEX_KEEP: u64 = crate::config::APPROVAL_TIMEOUT_RANGE.1 + RETAIN_SECONDS;
/// The write probe's key lives this long (ms): every replica rewrites it every 10 s.
const READY_PROBE_MS: u64 = 60_000;

pub struct RedisStore {
    client: Client,
    connection: OnceCell<ConnectionManager>,
    timeout: Duration,
    /// Every record and status is stored signed, and read only if it verifies.
    seal: Seal,
    /// The names of the keys, in this installation's space.
    keys: Keys,
}

static CREATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local id = redis.call('GET', KEYS[1])
if id then
  local k = ARGV[6] .. id
  if redis.call('EXISTS', k) == 1 then
    return {id, redis.call('HGET', k, 'record'), redis.call('HGET', k, 'status'), '0'}
  end
end
-- The user's approvals that have not expired; those still pending count.
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[8])
local waiting = 0
for _, other in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  if redis.call('HGET', ARGV[6] .. other, 'state') == 'pending' then waiting = waiting + 1 end
end
if waiting >= tonumber(ARGV[9]) then return {'full'} end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[10])
redis.call('HSET', KEYS[2], 'record', ARGV[2], 'status', ARGV[3], 'state', 'pending', 'expires_at', ARGV[7])
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[7], ARGV[1])
redis.call('EXPIRE', KEYS[4], ARGV[4])
return {ARGV[1], ARGV[2], ARGV[3], '1'}
",
    )
});

static TRANSITION: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('HGET', KEYS[1], 'status') ~= ARGV[1] then return false end
if ARGV[6] == '1' and tonumber(redis.call('HGET', KEYS[1], 'expires_at')) <= tonumber(ARGV[4]) then
  return false
end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'status', ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[5])
return {redis.call('HGET', KEYS[1], 'record'), ARGV[3]}
",
    )
});

static FORGET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
",
    )
});

impl RedisStore {
    /// Checks the URL; the connection is made on first use (and re-made when it drops).
    /// `seal_key` is `ApprovalSealKey`, which every replica sharing the Redis holds.
    pub fn new(url: &str, timeout: Duration, seal_key: &[u8]) -> Result<Self, StoreError> {
        // The URL may hold a password: never echo it.
        let client = Client::open(url)
            .map_err(|_| StoreError::BadUrl("a redis URL that does not parse".into()))?;
        Ok(RedisStore {
            client,
            connection: OnceCell::new(),
            timeout,
            seal: Seal::new(seal_key),
            keys: Keys::new(seal_key),
        })
    }

    pub(super) fn key_prefix(&self) -> &str {
        self.keys.prefix()
    }

    async fn run<T, F, Fut>(&self, op: F) -> Result<T, StoreError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let work = async {
            // The crate's own bounds (1 s to connect, 500 ms for an answer) would cut
            // `Timeout` short: a slow Redis answering in 2 s is slow, not failed. Its
            // answer bound is left a second beyond ours, so ours is the one that says so.
            let connection = self
                .connection
                .get_or_try_init(|| {
                    // Two quick retries, not the crate's six over 6 s: a Redis that refuses
                    // is told to the caller at once (the next call connects anew).
                    let config = ConnectionManagerConfig::new()
                        .set_connection_timeout(Some(self.timeout))
                        .set_response_timeout(Some(self.timeout + Duration::from_secs(1)))
                        .set_number_of_retries(2);
                    self.client.get_connection_manager_with_config(config)
                })
                .await
                .map_err(backend)?;
            op(connection.clone()).await.map_err(backend)
        };
        tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| StoreError::Timeout(self.timeout))?
    }

    pub(super) async fn create_or_get(
        &self,
        new: ApprovalRecord,
        max_pending: usize,
    ) -> Result<(ApprovalRecord, bool), StoreError> {
        let now = super::unix_now();
        let record = serde_json::to_string(&new).map_err(corrupt)?;
        let record = self.seal.sign(Part::Record, &new.id, &record);
        let status = serde_json::to_string(&new.status).map_err(corrupt)?;
        let status = self.seal.sign(Part::Status, &new.id, &status);
        let ttl = new
            .expires_at
            .saturating_sub(new.created_at)
            .saturating_add(RETAIN_SECONDS);
        let reply: Vec<String> = self
            .run(|mut c| async move {
                CREATE
                    .key(self.keys.dedupe(&new.dedupe_key()))
                    .key(self.keys.approval(&new.id))
                    .key(self.keys.pending())
                    .key(self.keys.waiting(&new.input.caller.userid))
                    .arg(&new.id)
                    .arg(&record)
                    .arg(&status)
                    .arg(ttl)
                    .arg(new.created_at)
                    .arg(self.keys.approval_prefix())
                    .arg(new.expires_at)
                    .arg(now)
                    .arg(max_pending)
                    .arg(now.saturating_sub(INDEX_KEEP))
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        match reply.as_slice() {
            [full] if full == "full" => Err(StoreError::CallerFull { max: max_pending }),
            [id, record, status, created] => Ok((self.decode(id, record, status)?, created == "1")),
            _ => Err(StoreError::Corrupt("unexpected reply to create".into())),
        }
    }

    pub(super) async fn get(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        match self.stored(id).await? {
            Some((record, status)) => self.decode(id, &record, &status).map(Some),
            None => Ok(None),
        }
    }

    /// The record's text and its status' text as stored (signed), if it is there.
    async fn stored(&self, id: &str) -> Result<Option<(String, String)>, StoreError> {
        let key = self.keys.approval(id);
        let (record, status): (Option<String>, Option<String>) = self
            .run(|mut c| async move {
                redis::cmd("HMGET")
                    .arg(&key)
                    .arg("record")
                    .arg("status")
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(record.zip(status))
    }

    /// The approvals still pending at `now`, up to [`LIST_MAX`]. Entries of approvals no
    /// longer pending (past their expiry, decided, retired by Redis' TTL) are dropped from
    /// the index as they are met: an approval nobody retries stays in Redis for an hour
    /// past its expiry, and such entries, oldest first, would otherwise fill the listing
    /// and hide the approvals that wait (one user with a short `ApprovalTimeout` left
    /// more than LIST_MAX of them within the hour).
    pub(super) async fn list_pending(&self, now: u64) -> Result<Vec<ApprovalRecord>, StoreError> {
        let mut records = Vec::new();
        for _ in 0..LIST_ROUNDS {
            let ids: Vec<String> = self
                .run(|mut c| async move {
                    redis::cmd("ZRANGE")
                        .arg(self.keys.pending())
                        .arg(0)
                        .arg(LIST_MAX - 1)
                        .query_async(&mut c)
                        .await
                })
                .await?;
            let full = ids.len() >= usize::try_from(LIST_MAX).unwrap_or(usize::MAX);
            records.clear();
            let mut dead = Vec::new();
            for (id, stored) in ids.iter().zip(self.stored_many(&ids).await?) {
                let Some((record, status)) = stored else {
                    dead.push(id.as_str());
                    continue;
                };
                match self.decode(id, &record, &status) {
                    Ok(r) if r.status == Status::Pending && r.expires_at > now => records.push(r),
                    Ok(_) => dead.push(id.as_str()),
                    // One record nobody can read (not signed with the key) hides no other.
                    Err(StoreError::Corrupt(reason)) => {
                        tracing::warn!(approval_id = %id, %reason, "unreadable approval left out");
                    }
                    Err(error) => return Err(error),
                }
            }
            if dead.is_empty() {
                break;
            }
            self.run(|mut c| async move {
                redis::cmd("ZREM")
                    .arg(self.keys.pending())
                    .arg(&dead)
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await?;
            if !full {
                break;
            }
        }
        Ok(records)
    }

    /// The stored texts of many records, in one round trip.
    async fn stored_many(
        &self,
        ids: &[String],
    ) -> Result<Vec<Option<(String, String)>>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let replies: Vec<(Option<String>, Option<String>)> = self
            .run(|mut c| async move {
                let mut pipe = redis::pipe();
                for id in ids {
                    pipe.cmd("HMGET")
                        .arg(self.keys.approval(id))
                        .arg("record")
                        .arg("status");
                }
                pipe.query_async(&mut c).await
            })
            .await?;
        Ok(replies.into_iter().map(|(r, s)| r.zip(s)).collect())
    }

    /// Read first, then one script that changes the status only if it is still the very
    /// text read and verified: the `state` field, which anyone with Redis can write, decides
    /// nothing here.
    pub(super) async fn transition(
        &self,
        id: &str,
        from: From,
        to: Status,
        now: u64,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        let Some((record, current)) = self.stored(id).await? else {
            return Ok(None);
        };
        let before = self.decode(id, &record, &current)?;
        // Expiry as signed: the `expires_at` field the script reads is anyone's to write.
        if !before.status.is(from) || (to != Status::Expired && before.expires_at <= now) {
            return Ok(None);
        }
        let to_name = to.as_str();
        let needs_time = if to == Status::Expired { "0" } else { "1" };
        let status = serde_json::to_string(&to).map_err(corrupt)?;
        let status = self.seal.sign(Part::Status, id, &status);
        let reply: Option<Vec<String>> = self
            .run(|mut c| async move {
                TRANSITION
                    .key(self.keys.approval(id))
                    .key(self.keys.pending())
                    .arg(&current)
                    .arg(to_name)
                    .arg(&status)
                    .arg(now)
                    .arg(id)
                    .arg(needs_time)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        match reply.as_deref() {
            None => Ok(None),
            Some([record, status]) => self.decode(id, record, status).map(Some),
            Some(_) => Err(StoreError::Corrupt("unexpected reply to transition".into())),
        }
    }

    pub(super) async fn forget_key(&self, key: &str, id: &str) -> Result<(), StoreError> {
        self.run(|mut c| async move {
            FORGET
                .key(self.keys.dedupe(key))
                .arg(id)
                .invoke_async::<i64>(&mut c)
                .await
        })
        .await
        .map(|_| ())
    }

    /// A write, not a `PING`: a read-only replica (the wrong Redis after a failover), a
    /// Redis out of memory or refusing writes after a failed save answers `PING` and
    /// refuses every admission and approval, so a replica on it must not look ready.
    pub(super) async fn ping(&self) -> Result<(), StoreError> {
        self.run(|mut c| async move {
            redis::cmd("SET")
                .arg(self.keys.ready())
                .arg(1)
                .arg("PX")
                .arg(READY_PROBE_MS)
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }

    pub(super) async fn use_once(&self, nonce: &str, ttl: Duration) -> Result<bool, StoreError> {
        let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let reply: Option<String> = self
            .run(|mut c| async move {
                redis::cmd("SET")
                    .arg(self.keys.once(nonce))
                    .arg(1)
                    .arg("NX")
                    .arg("PX")
                    .arg(millis)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(reply.is_some())
    }
}

impl RedisStore {
    /// The record of `id` as stored at creation, with its current status: both signed
    /// for this id by a holder of the key, or it is not read.
    fn decode(&self, id: &str, record: &str, status: &str) -> Result<ApprovalRecord, StoreError> {
        let text = self.seal.open(Part::Record, id, record)?;
        let mut record: ApprovalRecord = serde_json::from_str(text).map_err(corrupt)?;
        if record.id != id {
            return Err(StoreError::Corrupt(format!(
                "approval {id} holds another id"
            )));
        }
        let text = self.seal.open(Part::Status, id, status)?;
        record.status = serde_json::from_str(text).map_err(corrupt)?;
        Ok(record)
    }
}

fn backend(error: redis::RedisError) -> StoreError {
    // Redis errors name commands and addresses, never the URL's password.
    StoreError::Backend(error.to_string())
}

fn corrupt(error: serde_json::Error) -> StoreError {
    StoreError::Corrupt(error.to_string())
}
