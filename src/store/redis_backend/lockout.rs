//! The rejected-token lockout shared by replicas (`MaxRejectedTokens` with
//! `SharedStore=redis://…`): without it each replica counts its own rejections, and a
//! client spreading its guesses over N replicas gets N times the budget.
//!
//! Layout (in the installation's space, see `keys.rs`): `rejected:<source>` a set of the digests of the tokens Zabbix rejected
//! from that source (an IPv4 address or an IPv6 /64), expiring one window after its
//! first member, as the local count does; `accepted:<digest>` marks a token Zabbix
//! accepted lately, which a lockout spares. Digests are SHA-256 in hex: never a token.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::super::StoreError;
use super::RedisStore;

// KEYS: the source's set, the token's accepted marker, the write probe. ARGV: the most
// rejections, the probe's life in ms. Returns the milliseconds the source stays locked
// out for this token; 0 when it is not. It writes first: a Redis that takes no writes (a
// read-only replica, one over its maxmemory) answers the reads, but would not count this
// lookup's rejection, and each replica would go on with its own budget unseen.
static CHECK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
redis.call('SET', KEYS[3], '1', 'PX', ARGV[2])
if redis.call('SCARD', KEYS[1]) < tonumber(ARGV[1]) then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local left = redis.call('PTTL', KEYS[1])
if left < 1 then return 0 end
return left
",
    )
});

// KEYS: the source's set, the token's accepted marker. ARGV: the digest, the window in
// ms. The window starts at the source's first rejection. Returns 1 when the token is new
// to the set.
static RECORD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
redis.call('DEL', KEYS[2])
local added = redis.call('SADD', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return added
",
    )
});

impl RedisStore {
    /// How long `source` stays locked out for the token with this digest, shared by every
    /// replica: `None` when it is not (fewer than `max` rejections in its window, or the
    /// token was accepted lately).
    pub(crate) async fn lockout(
        &self,
        source: &str,
        digest: &str,
        max: usize,
    ) -> Result<Option<Duration>, StoreError> {
        let left: u64 = self
            .run(|mut c| async move {
                CHECK
                    .key(self.keys.rejected(source))
                    .key(self.keys.accepted(digest))
                    .key(self.keys.ready())
                    .arg(max)
                    .arg(super::READY_PROBE_MS)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok((left > 0).then(|| Duration::from_millis(left)))
    }

    /// Counts a token Zabbix rejected for `source` (once per token per window); it is
    /// spared no more.
    pub(crate) async fn record_rejected(
        &self,
        source: &str,
        digest: &str,
        window: Duration,
    ) -> Result<(), StoreError> {
        let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1);
        let _added: u64 = self
            .run(|mut c| async move {
                RECORD
                    .key(self.keys.rejected(source))
                    .key(self.keys.accepted(digest))
                    .arg(digest)
                    .arg(window_ms)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok(())
    }

    /// Marks a token Zabbix accepted: spared from lockouts for `remember`.
    pub(crate) async fn record_accepted(
        &self,
        digest: &str,
        remember: Duration,
    ) -> Result<(), StoreError> {
        let millis = u64::try_from(remember.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        self.run(|mut c| async move {
            redis::cmd("SET")
                .arg(self.keys.accepted(digest))
                .arg(1)
                .arg("PX")
                .arg(millis)
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }
}
