//! Tokens Zabbix rejected, remembered and counted per client address, and the tokens it
//! accepted, which an address's lockout spares. A token is cached only once Zabbix
//! accepted it, so every unknown token costs a `user.checkAuthentication` in Zabbix's PHP:
//! without a bound, one client sending token after token makes the sidecar load Zabbix for
//! it.
//! - A rejected token is remembered for [`WINDOW`]: sent again (a client retrying with a
//!   revoked token), it gets the same refusal without Zabbix being asked, and is not
//!   counted again.
//! - After `MaxRejectedTokens` distinct rejected tokens from one address within [`WINDOW`],
//!   tokens from there that Zabbix has not accepted lately are refused without asking
//!   Zabbix until the window has passed.
//! - Tokens Zabbix accepted in the last [`ACCEPTED_MEMORY`] (from any address) are spared:
//!   the identity cache forgets a token after a minute, far sooner than a lockout ends, so
//!   without this the clients already let in from a shared address would be locked out by
//!   a neighbour guessing. Being spared only lets a token be looked up in Zabbix as usual:
//!   a token revoked since is rejected there, and forgotten here. Only SHA-256 digests are
//!   kept, never a token.
//!
//! With `SharedStore=redis://…` the replicas also share the count and the accepted tokens
//! (`store::Store::lockout`): this count is asked first, then the shared one.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use moka::sync::Cache;

/// The window starts at an address's first rejection.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);
/// Addresses, and rejected tokens, tracked at once (least used dropped beyond).
const CAPACITY: u64 = 100_000;
/// How long a token Zabbix accepted is spared from lockouts after its last acceptance
/// (renewed each time the identity cache asks Zabbix again, about once a minute while the
/// token is in use): a client used daily stays known across idle hours.
pub(crate) const ACCEPTED_MEMORY: Duration = Duration::from_secs(24 * 60 * 60);
/// Accepted tokens remembered at once. Only a token Zabbix accepted gets in, so a client
/// guessing cannot fill it; beyond it, the least used are dropped (and a lockout refuses
/// them like unknown tokens until Zabbix accepts them again).
const ACCEPTED_CAPACITY: u64 = 100_000;

/// The rejections of each address in its current window, the tokens rejected, and the
/// tokens accepted.
pub(crate) struct RejectedTokens {
    by_address: Cache<Source, Failures>,
    /// Token digest → Zabbix's words when it rejected the token.
    tokens: Cache<[u8; 32], Arc<str>>,
    /// Digests of the tokens Zabbix accepted lately: spared from lockouts.
    accepted: Cache<[u8; 32], ()>,
    max: usize,
    window: Duration,
    /// Lookups refused without asking Zabbix (read by `/metrics`).
    refused: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: usize,
    since: Instant,
}

/// Who is counted: an IPv4 address, or the /64 of an IPv6 address (one host can hold a
/// whole /64 and pick a new address per request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Source(IpAddr);

impl RejectedTokens {
    /// `remember`: how long an accepted token is spared after its last acceptance.
    pub(crate) fn new(max: usize, window: Duration, remember: Duration) -> Self {
        Self {
            by_address: Cache::builder()
                .max_capacity(CAPACITY)
                .time_to_live(window)
                .build(),
            tokens: Cache::builder()
                .max_capacity(CAPACITY)
                .time_to_live(window)
                .build(),
            accepted: Cache::builder()
                .max_capacity(ACCEPTED_CAPACITY)
                .time_to_live(remember)
                .build(),
            max,
            window,
            refused: AtomicU64::new(0),
        }
    }

    /// The most distinct rejected tokens an address may send per window.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// `Err(wait)` while `address` has used up its rejections and the token with this
    /// digest is not one Zabbix accepted lately: it is not to be looked up for `wait`
    /// (whole seconds, at least one).
    pub(crate) fn check(&self, address: IpAddr, digest: &[u8; 32]) -> Result<(), Duration> {
        self.check_at(address, digest, Instant::now())
    }

    /// Remembers (again, for [`ACCEPTED_MEMORY`] from now) that Zabbix accepted the token
    /// with this digest.
    pub(crate) fn accept(&self, digest: [u8; 32]) {
        self.accepted.insert(digest, ());
    }

    /// What Zabbix answered when it rejected the token with this digest in the last
    /// [`WINDOW`], if it did.
    pub(crate) fn rejection(&self, digest: &[u8; 32]) -> Option<Arc<str>> {
        self.tokens.get(digest)
    }

    /// Remembers a token Zabbix rejected (`message`: its words) and counts it for
    /// `address` unless it was already remembered. A token once accepted is spared no
    /// more: Zabbix no longer takes it.
    pub(crate) fn record(&self, address: IpAddr, digest: [u8; 32], message: &str) {
        self.accepted.invalidate(&digest);
        let fresh = self
            .tokens
            .entry(digest)
            .or_insert_with(|| Arc::from(message))
            .is_fresh();
        if fresh {
            self.record_at(address, Instant::now());
        }
    }

    fn check_at(&self, address: IpAddr, digest: &[u8; 32], now: Instant) -> Result<(), Duration> {
        let Some(failures) = self.by_address.get(&Source::of(address)) else {
            return Ok(());
        };
        let elapsed = now.saturating_duration_since(failures.since);
        if failures.count < self.max || elapsed >= self.window {
            return Ok(());
        }
        // Asked only of a locked-out address: the common path costs nothing more.
        if self.accepted.contains_key(digest) {
            return Ok(());
        }
        self.refused.fetch_add(1, Ordering::Relaxed);
        Err(whole_seconds(self.window - elapsed))
    }

    fn record_at(&self, address: IpAddr, now: Instant) {
        let window = self.window;
        self.by_address
            .entry(Source::of(address))
            .and_upsert_with(|current| match current.map(|entry| entry.into_value()) {
                Some(failures) if now.saturating_duration_since(failures.since) < window => {
                    Failures {
                        count: failures.count.saturating_add(1),
                        since: failures.since,
                    }
                }
                _ => Failures {
                    count: 1,
                    since: now,
                },
            });
    }

    /// Lookups refused without asking Zabbix.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// A lookup refused by the lockout the replicas share (`SharedStore=redis://…`).
    pub(crate) fn count_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }
}

/// Who `address` counts as, as text: the address, or its IPv6 /64 (the shared store's key).
pub(crate) fn source_key(address: IpAddr) -> String {
    Source::of(address).0.to_string()
}

/// `left` rounded up to whole seconds, at least one (what `Retry-After` says).
pub(crate) fn whole_seconds(left: Duration) -> Duration {
    let seconds = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    Duration::from_secs(seconds.max(1))
}

impl Source {
    fn of(address: IpAddr) -> Source {
        match address {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Source(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    Source(IpAddr::V6(prefix.into()))
                }
            },
            v4 => Source(v4),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::time::{Duration, Instant};

    use super::{ACCEPTED_MEMORY, RejectedTokens};

    /// The digest of a token Zabbix has not accepted.
    const UNKNOWN: [u8; 32] = [0; 32];

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    fn tokens(max: usize) -> RejectedTokens {
        RejectedTokens::new(max, Duration::from_secs(60), ACCEPTED_MEMORY)
    }

    #[test]
    fn an_address_waits_after_its_rejections_and_others_do_not() {
        let rejected = tokens(3);
        for _ in 0..3 {
            assert!(rejected.check(ip("10.0.0.1"), &UNKNOWN).is_ok());
            rejected.record_at(ip("10.0.0.1"), Instant::now());
        }
        let wait = rejected
            .check(ip("10.0.0.1"), &UNKNOWN)
            .expect_err("used up");
        assert!(
            wait > Duration::from_secs(58) && wait <= Duration::from_secs(60),
            "{wait:?}"
        );
        assert!(rejected.check(ip("10.0.0.2"), &UNKNOWN).is_ok());
        assert_eq!(rejected.refused(), 1);
    }

    #[test]
    fn a_token_sent_again_is_remembered_not_counted_again() {
        let rejected = tokens(2);
        assert!(rejected.rejection(&[1; 32]).is_none());
        for _ in 0..5 {
            rejected.record(ip("10.0.0.1"), [1; 32], "Not authorized.");
        }
        assert_eq!(
            rejected.rejection(&[1; 32]).as_deref(),
            Some("Not authorized.")
        );
        assert!(
            rejected.check(ip("10.0.0.1"), &UNKNOWN).is_ok(),
            "one token, counted once"
        );
        rejected.record(ip("10.0.0.1"), [2; 32], "Not authorized.");
        assert!(
            rejected.check(ip("10.0.0.1"), &UNKNOWN).is_err(),
            "two distinct tokens"
        );
    }

    #[test]
    fn the_window_ends() {
        let rejected = tokens(2);
        let start = Instant::now();
        rejected.record_at(ip("10.0.0.1"), start);
        rejected.record_at(ip("10.0.0.1"), start + Duration::from_secs(10));
        let later = start + Duration::from_millis(59_500);
        assert_eq!(
            rejected.check_at(ip("10.0.0.1"), &UNKNOWN, later),
            Err(Duration::from_secs(1))
        );
        let after = start + Duration::from_secs(60);
        assert!(rejected.check_at(ip("10.0.0.1"), &UNKNOWN, after).is_ok());
        // A rejection after the window starts a new one.
        rejected.record_at(ip("10.0.0.1"), after);
        assert!(rejected.check_at(ip("10.0.0.1"), &UNKNOWN, after).is_ok());
    }

    #[test]
    fn an_ipv6_slash_64_counts_as_one_and_mapped_ipv4_as_its_ipv4() {
        let rejected = tokens(2);
        rejected.record_at(ip("2001:db8:1:2::1"), Instant::now());
        rejected.record_at(ip("2001:db8:1:2:ffff::7"), Instant::now());
        assert!(rejected.check(ip("2001:db8:1:2::99"), &UNKNOWN).is_err());
        assert!(rejected.check(ip("2001:db8:1:3::1"), &UNKNOWN).is_ok());
        rejected.record_at(ip("::ffff:10.0.0.9"), Instant::now());
        rejected.record_at(ip("10.0.0.9"), Instant::now());
        assert!(rejected.check(ip("10.0.0.9"), &UNKNOWN).is_err());
    }

    #[test]
    fn a_token_accepted_before_is_spared_a_lockout_and_others_are_not() {
        let rejected = tokens(2);
        let known = [7; 32];
        rejected.accept(known);
        rejected.record(ip("10.0.0.1"), [1; 32], "Not authorized.");
        rejected.record(ip("10.0.0.1"), [2; 32], "Not authorized.");
        assert!(rejected.check(ip("10.0.0.1"), &UNKNOWN).is_err());
        assert!(rejected.check(ip("10.0.0.1"), &[8; 32]).is_err());
        // Spared from the same address and from its IPv6 form, as often as it comes.
        for _ in 0..3 {
            assert!(rejected.check(ip("10.0.0.1"), &known).is_ok());
        }
        assert!(rejected.check(ip("::ffff:10.0.0.1"), &known).is_ok());
        assert_eq!(
            rejected.refused(),
            2,
            "a spared token is not counted as refused"
        );
    }

    #[test]
    fn a_token_rejected_after_its_acceptance_is_spared_no_more() {
        let rejected = tokens(2);
        let revoked = [7; 32];
        rejected.accept(revoked);
        // Revoked in Zabbix since: its next lookup is rejected, from anywhere.
        rejected.record(ip("10.0.0.2"), revoked, "Not authorized.");
        rejected.record(ip("10.0.0.1"), [1; 32], "Not authorized.");
        rejected.record(ip("10.0.0.1"), [2; 32], "Not authorized.");
        assert!(rejected.check(ip("10.0.0.1"), &revoked).is_err());
        // Accepted again (a token Zabbix takes once more) is spared again.
        rejected.accept(revoked);
        assert!(rejected.check(ip("10.0.0.1"), &revoked).is_ok());
    }

    #[test]
    fn the_memory_of_accepted_tokens_ends() {
        let rejected = RejectedTokens::new(1, Duration::from_secs(60), Duration::ZERO);
        rejected.accept([7; 32]);
        rejected.record(ip("10.0.0.1"), [1; 32], "Not authorized.");
        assert!(rejected.check(ip("10.0.0.1"), &[7; 32]).is_err());
    }
}
