//! The approval page's counts of attempts, shared by replicas (`SharedStore=redis://…`):
//! wrong passwords per username, without which each replica sent a username its own
//! `login_attempts - 1` wrong passwords, and two of them got an account blocked in Zabbix;
//! and failed sign-ins per client address, without which N replicas let an address fail
//! N times the 20 every 5 minutes.
//!
//! Layout (in the installation's space, see `keys.rs`): `signin:<digest>` the attempts
//! counted for a username, its SHA-256 in hex (the name typed is not kept), and
//! `signin-from:<address>` those of an address (an IPv6 /64), each expiring one window
//! after its last attempt, as the page's local counts do.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::super::{SignInCount, StoreError};
use super::RedisStore;

// KEYS: the username's count. ARGV: the most attempts, the window in ms. Takes a place
// and returns 1, or returns 0 with none taken when the count is at its most; either way
// the window starts anew (as a held attempt renews the local count).
static TAKE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if n > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return 0
end
return 1
",
    )
});

// KEYS: the username's count. Gives back one place; an empty count is removed.
static GIVE_BACK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('DECR', KEYS[1]) <= 0 then redis.call('DEL', KEYS[1]) end
return 1
",
    )
});

impl RedisStore {
    /// Takes a place in the count: `false`, none taken, when `max` are counted already.
    pub(crate) async fn take_sign_in(
        &self,
        count: SignInCount<'_>,
        max: u32,
        window: Duration,
    ) -> Result<bool, StoreError> {
        let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1);
        let taken: u64 = self
            .run(|mut c| async move {
                TAKE.key(self.keys.sign_in(count))
                    .arg(max)
                    .arg(window_ms)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok(taken == 1)
    }

    /// Gives back the place an attempt took (it was no wrong password).
    pub(crate) async fn give_back_sign_in(&self, count: SignInCount<'_>) -> Result<(), StoreError> {
        let _given: u64 = self
            .run(|mut c| async move {
                GIVE_BACK
                    .key(self.keys.sign_in(count))
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok(())
    }

    /// Forgets the count: a username's at a right password, which Zabbix's count forgets too.
    pub(crate) async fn forget_sign_in(&self, count: SignInCount<'_>) -> Result<(), StoreError> {
        self.run(|mut c| async move {
            redis::cmd("DEL")
                .arg(self.keys.sign_in(count))
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }
}
