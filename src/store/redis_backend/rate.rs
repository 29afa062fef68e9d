//! Per-caller limits shared by replicas: one Lua script admits a call (concurrency
//! leases and GCRA call budgets, on the Redis server's clock so replicas' clocks do not
//! matter), one renews a call's leases, one gives them back.
//!
//! Layout (in the installation's space, see `keys.rs`): `rate:<bucket>` a string, the budget's theoretical arrival time in µs
//! (expires when the budget is full again); `slots:<bucket>` a sorted set of lease ids
//! scored by their expiry in µs: a replica that dies stops renewing and its leases lapse.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::super::StoreError;
use super::RedisStore;

/// One admission: budgets checked in order (each one that passes is counted), then the
/// leases taken, all or none, only if every budget passed.
#[derive(Debug, Clone)]
pub struct RateAdmit {
    /// (bucket name, emission interval in µs, burst)
    pub rates: Vec<(String, u64, u32)>,
    /// (bucket name, cap)
    pub slots: Vec<(String, u32)>,
    pub lease: String,
    pub lease_ttl: Duration,
}

/// What the script answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmitReply {
    Admitted,
    /// The budget at this index of `rates` refused; the call conforms after `wait`.
    Rate {
        index: usize,
        wait: Duration,
    },
    /// The cap at this index of `slots` is full.
    Slots {
        index: usize,
    },
}

// KEYS: slot sets, then budgets. ARGV: #slots, #rates, lease, ttl µs, caps..., then
// (emission µs, burst) pairs. Slots are checked first (nothing is changed if one is
// full), then each budget in order; only then are the leases added.
static ADMIT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ns = tonumber(ARGV[1])
local nr = tonumber(ARGV[2])
local lease = ARGV[3]
local ttl = tonumber(ARGV[4])
for i = 1, ns do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[4 + i]) then
    return {'slots', i, 0}
  end
end
for j = 1, nr do
  local key = KEYS[ns + j]
  local emission = tonumber(ARGV[4 + ns + 2 * j - 1])
  local burst = tonumber(ARGV[4 + ns + 2 * j])
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local allow_at = tat + emission - burst * emission
  if allow_at > now then
    return {'rate', j, allow_at - now}
  end
  local new = tat + emission
  redis.call('SET', key, string.format('%d', new), 'PX', math.floor((new - now) / 1000) + 1)
end
for i = 1, ns do
  redis.call('ZADD', KEYS[i], now + ttl, lease)
  redis.call('PEXPIRE', KEYS[i], math.floor(ttl / 1000) + 1)
end
return {'ok', 0, 0}
",
    )
});

// KEYS: slot sets. ARGV: lease, ttl µs. Extends the lease, and puts it back where Redis
// lost it (restarted empty, a failover to a replica that had not got it, a renewal
// missed for longer than the TTL): the call still runs, so it still holds a slot. Only
// the renewal of a running call sends this (stopped before the release), so a released
// lease comes back only if a renewal already sent races the release, and then lapses.
static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[2])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now + ttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[i], math.floor(ttl / 1000) + 1)
end
return 1
",
    )
});

// KEYS: slot sets. ARGV: lease.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
for i = 1, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
return 1
",
    )
});

impl RedisStore {
    pub(crate) async fn rate_admit(&self, admit: &RateAdmit) -> Result<AdmitReply, StoreError> {
        let ttl_us = micros(admit.lease_ttl);
        let reply: (String, i64, i64) = self
            .run(|mut c| async move {
                let mut call = ADMIT.prepare_invoke();
                for (bucket, _) in &admit.slots {
                    call.key(self.keys.slots(bucket));
                }
                for (bucket, _, _) in &admit.rates {
                    call.key(self.keys.rate(bucket));
                }
                call.arg(admit.slots.len())
                    .arg(admit.rates.len())
                    .arg(&admit.lease)
                    .arg(ttl_us);
                for (_, cap) in &admit.slots {
                    call.arg(*cap);
                }
                for (_, emission, burst) in &admit.rates {
                    call.arg(*emission).arg(*burst);
                }
                call.invoke_async(&mut c).await
            })
            .await?;
        let index = |i: i64| usize::try_from(i.saturating_sub(1)).unwrap_or(0);
        match reply {
            (status, _, _) if status == "ok" => Ok(AdmitReply::Admitted),
            (status, i, wait) if status == "rate" => Ok(AdmitReply::Rate {
                index: index(i),
                wait: Duration::from_micros(u64::try_from(wait).unwrap_or(0)),
            }),
            (status, i, _) if status == "slots" => Ok(AdmitReply::Slots { index: index(i) }),
            _ => Err(StoreError::Corrupt("unexpected reply to rate admit".into())),
        }
    }

    pub(crate) async fn rate_renew(
        &self,
        buckets: &[String],
        lease: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.run(|mut c| async move {
            let mut call = RENEW.prepare_invoke();
            for bucket in buckets {
                call.key(self.keys.slots(bucket));
            }
            call.arg(lease).arg(micros(ttl));
            call.invoke_async::<i64>(&mut c).await
        })
        .await
        .map(|_| ())
    }

    pub(crate) async fn rate_release(
        &self,
        buckets: &[String],
        lease: &str,
    ) -> Result<(), StoreError> {
        self.run(|mut c| async move {
            let mut call = RELEASE.prepare_invoke();
            for bucket in buckets {
                call.key(self.keys.slots(bucket));
            }
            call.arg(lease);
            call.invoke_async::<i64>(&mut c).await
        })
        .await
        .map(|_| ())
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
