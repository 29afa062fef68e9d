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
//! - Lookups under way count too: a token not accepted lately takes room in its address's
//!   `MaxRejectedTokens` before Zabbix is asked ([`RejectedTokens::reserve`]), gives it
//!   back when Zabbix accepts it, and keeps it as a rejection when Zabbix rejects it.
//!   Counting only answers let a client send hundreds of tokens at once, all asked before
//!   the first rejection was counted. Concurrent requests with one token share its room
//!   (the identity cache asks Zabbix once for all of them).
//! - Tokens Zabbix accepted in the last [`ACCEPTED_MEMORY`] (from any address) are spared:
//!   the identity cache forgets a token after a minute, far sooner than a lockout ends, so
//!   without this the clients already let in from a shared address would be locked out by
//!   a neighbour guessing. Being spared only lets a token be looked up in Zabbix as usual:
//!   a token revoked since is rejected there, and forgotten here. Only SHA-256 digests are
//!   kept, never a token.
//!
//! With `SharedStore=redis://…` the replicas also share the count and the accepted tokens
//! (`store::Store::lockout`): this count is asked first, then the shared one. Lookups under
//! way are counted per replica only: the shared count holds answers.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
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
/// `Retry-After` while an address's room is taken by lookups under way rather than used up
/// by rejections: a lookup ends within `Timeout`, often far sooner.
pub(crate) const BUSY_RETRY: Duration = Duration::from_secs(1);

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
    /// Lookups under way that take room: per source, the tokens being looked up and how
    /// many requests wait for each. Only requests under way are in it, so it stays small.
    /// Read and changed together with `by_address` under this lock (never held across an
    /// await), so that rejections plus lookups never exceed `max`.
    pending: Mutex<HashMap<Source, HashMap<[u8; 32], usize>>>,
}

/// Why a token is not to be looked up now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The address's rejections used up `MaxRejectedTokens`: for this long (whole seconds,
    /// at least one), until its window ends.
    LockedOut(Duration),
    /// Its rejections and the lookups under way fill `MaxRejectedTokens`: until a lookup
    /// ends ([`BUSY_RETRY`]).
    Busy,
}

/// A lookup let through by [`RejectedTokens::reserve`]. Unless the token is one Zabbix
/// accepted lately, it holds room in its source's `MaxRejectedTokens` until Zabbix answers:
/// given back ([`Lookup::answered`]: accepted, or no verdict) or turned into a rejection
/// ([`Lookup::rejected`]). Dropped without either once Zabbix was asked (the request was
/// cancelled: a reset stream, a closed connection) it counts as a rejection: else a client
/// cancelling each lookup after sending it would have Zabbix check tokens without end,
/// never counted.
#[must_use = "the room is given back when the lookup is dropped"]
pub(crate) struct Lookup<'a> {
    tokens: &'a RejectedTokens,
    address: IpAddr,
    digest: [u8; 32],
    holds: bool,
    /// Zabbix was asked ([`Lookup::asking`]): dropped unanswered, it counts.
    asked: bool,
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
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// The most distinct rejected tokens an address may send per window.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Lets a lookup of the token with this digest from `address` go to Zabbix, or says
    /// why not: its rejections in the window and the lookups under way, this one included,
    /// may not exceed `max`. A token Zabbix accepted lately is let through without taking
    /// room; one already being looked up from this source shares that lookup's room.
    pub(crate) fn reserve(
        &self,
        address: IpAddr,
        digest: &[u8; 32],
    ) -> Result<Lookup<'_>, Refused> {
        self.reserve_at(address, digest, Instant::now())
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
    fn record(&self, address: IpAddr, digest: [u8; 32], message: &str) {
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

    fn reserve_at(
        &self,
        address: IpAddr,
        digest: &[u8; 32],
        now: Instant,
    ) -> Result<Lookup<'_>, Refused> {
        let lookup = |holds| Lookup {
            tokens: self,
            address,
            digest: *digest,
            holds,
            asked: false,
        };
        // No guess: the clients already let in from a shared address keep working.
        if self.accepted.contains_key(digest) {
            return Ok(lookup(false));
        }
        let source = Source::of(address);
        let mut pending = self.pending();
        let (rejected, left) = match self.by_address.get(&source) {
            Some(failures) => match self
                .window
                .checked_sub(now.saturating_duration_since(failures.since))
            {
                Some(left) if !left.is_zero() => (failures.count, left),
                _ => (0, Duration::ZERO),
            },
            None => (0, Duration::ZERO),
        };
        let tokens = pending.entry(source).or_default();
        if let Some(waiting) = tokens.get_mut(digest) {
            *waiting += 1;
            return Ok(lookup(true));
        }
        if rejected.saturating_add(tokens.len()) < self.max {
            tokens.insert(*digest, 1);
            return Ok(lookup(true));
        }
        if tokens.is_empty() {
            pending.remove(&source);
        }
        drop(pending);
        self.refused.fetch_add(1, Ordering::Relaxed);
        Err(if rejected >= self.max {
            Refused::LockedOut(whole_seconds(left))
        } else {
            Refused::Busy
        })
    }

    fn pending(&self) -> MutexGuard<'_, HashMap<Source, HashMap<[u8; 32], usize>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives back the room one request's lookup of `digest` held.
    fn release(
        pending: &mut HashMap<Source, HashMap<[u8; 32], usize>>,
        source: Source,
        digest: &[u8; 32],
    ) {
        let Some(tokens) = pending.get_mut(&source) else {
            return;
        };
        if let Some(waiting) = tokens.get_mut(digest) {
            *waiting = waiting.saturating_sub(1);
            if *waiting == 0 {
                tokens.remove(digest);
            }
        }
        if tokens.is_empty() {
            pending.remove(&source);
        }
    }

    /// Lookups under way that hold room for `address`'s source (distinct tokens).
    #[cfg(test)]
    fn pending_for(&self, address: IpAddr) -> usize {
        self.pending()
            .get(&Source::of(address))
            .map_or(0, HashMap::len)
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

impl Lookup<'_> {
    /// Zabbix rejected the token (`message`: its words): remembered and counted as
    /// [`RejectedTokens::record`] does, and the room this lookup held becomes that
    /// rejection, at once, so that no other lookup slips in between.
    pub(crate) fn rejected(mut self, message: &str) {
        let mut pending = self.tokens.pending();
        self.tokens.record(self.address, self.digest, message);
        if self.holds {
            self.holds = false;
            RejectedTokens::release(&mut pending, Source::of(self.address), &self.digest);
        }
    }
}

impl Lookup<'_> {
    /// Zabbix is asked now: from here on, a lookup dropped unanswered counts.
    pub(crate) fn asking(&mut self) {
        self.asked = true;
    }

    /// Zabbix accepted the token or gave no verdict: the room is given back.
    pub(crate) fn answered(mut self) {
        self.give_back(false);
    }

    fn give_back(&mut self, count_it: bool) {
        if self.holds {
            self.holds = false;
            let mut pending = self.tokens.pending();
            if count_it {
                self.tokens.record_at(self.address, Instant::now());
            }
            RejectedTokens::release(&mut pending, Source::of(self.address), &self.digest);
        }
    }
}

impl Drop for Lookup<'_> {
    fn drop(&mut self) {
        // Neither answered nor rejected: abandoned (see the type), or never asked.
        self.give_back(self.asked);
    }
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
#[path = "rejected_tests.rs"]
mod tests;
