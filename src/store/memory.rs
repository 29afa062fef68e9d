//! The in-memory backend: one replica. A mutex around two maps; every operation is a few
//! map lookups, so the lock is never held across an await.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::unix_now;
use super::{ApprovalRecord, From, MEMORY_CAPACITY, RETAIN_SECONDS, Status, StoreError};

/// Nonces remembered at most: a flood of redeemed approvals beyond this within their TTL
/// is refused, never forgotten.
const USED_CAPACITY: usize = 100_000;

pub struct MemoryStore {
    inner: Mutex<Inner>,
    used: Mutex<Used>,
}

#[derive(Default)]
struct Inner {
    records: HashMap<String, ApprovalRecord>,
    /// dedupe key → record id.
    keys: HashMap<String, String>,
}

/// Used nonces, each until the TTL it was used with runs out: exact, so a second use is
/// always refused. (A cache that evicts forgot them when full: 100,000 redeemed within the
/// TTL let each next one be redeemed again at once.)
#[derive(Default)]
struct Used {
    until: HashMap<String, Instant>,
    by_expiry: BTreeSet<(Instant, String)>,
}

impl MemoryStore {
    pub fn new() -> Self {
        MemoryStore {
            inner: Mutex::new(Inner::default()),
            used: Mutex::new(Used::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A poisoned map is still consistent: every change is one insert or remove.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn create_or_get(
        &self,
        new: ApprovalRecord,
        max_pending: usize,
    ) -> Result<(ApprovalRecord, bool), StoreError> {
        let now = unix_now();
        let mut inner = self.lock();
        inner.retire(now);
        let key = new.dedupe_key();
        if let Some(existing) = inner.keys.get(&key).and_then(|id| inner.records.get(id)) {
            return Ok((existing.clone(), false));
        }
        // A scan of at most MEMORY_CAPACITY records, on the rare path that asks a person.
        let user = &new.input.caller.userid;
        let waiting = inner
            .records
            .values()
            .filter(|r| r.status == Status::Pending && r.expires_at > now)
            .filter(|r| &r.input.caller.userid == user)
            .count();
        if waiting >= max_pending {
            return Err(StoreError::CallerFull { max: max_pending });
        }
        if inner.records.len() >= MEMORY_CAPACITY {
            return Err(StoreError::Full);
        }
        inner.keys.insert(key, new.id.clone());
        inner.records.insert(new.id.clone(), new.clone());
        Ok((new, true))
    }

    pub(super) fn get(&self, id: &str) -> Option<ApprovalRecord> {
        self.lock().records.get(id).cloned()
    }

    pub(super) fn list_pending(&self) -> Vec<ApprovalRecord> {
        self.lock()
            .records
            .values()
            .filter(|r| r.status == Status::Pending)
            .cloned()
            .collect()
    }

    pub(super) fn transition(
        &self,
        id: &str,
        from: From,
        to: Status,
        now: u64,
    ) -> Option<ApprovalRecord> {
        let mut inner = self.lock();
        let record = inner.records.get_mut(id)?;
        // Expiring is the only move allowed after the expiry; everything else needs time left.
        let in_time = to == Status::Expired || record.expires_at > now;
        if !record.status.is(from) || !in_time {
            return None;
        }
        record.status = to;
        Some(record.clone())
    }

    pub(super) fn forget_key(&self, key: &str, id: &str) {
        let mut inner = self.lock();
        if inner.keys.get(key).is_some_and(|current| current == id) {
            inner.keys.remove(key);
        }
    }

    /// Whether `nonce` is used now for the first time within its TTL.
    pub(super) fn use_once(&self, nonce: &str, ttl: Duration) -> Result<bool, StoreError> {
        let now = Instant::now();
        // A poisoned set is still consistent: every change is an insert or a removal.
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        used.retire(now);
        if used.until.contains_key(nonce) {
            return Ok(false);
        }
        if used.until.len() >= USED_CAPACITY {
            return Err(StoreError::UsedFull(USED_CAPACITY));
        }
        let until = now + ttl;
        used.until.insert(nonce.to_owned(), until);
        used.by_expiry.insert((until, nonce.to_owned()));
        Ok(true)
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl Inner {
    /// Drops records retained long enough past their expiry, and their keys.
    fn retire(&mut self, now: u64) {
        let cutoff = now.saturating_sub(RETAIN_SECONDS);
        self.records.retain(|_, r| r.expires_at > cutoff);
        let records = &self.records;
        self.keys.retain(|_, id| records.contains_key(id));
    }
}

impl Used {
    /// Forgets the nonces whose TTL ran out, oldest first.
    fn retire(&mut self, now: Instant) {
        while let Some((until, _)) = self.by_expiry.first()
            && *until <= now
        {
            if let Some((_, nonce)) = self.by_expiry.pop_first() {
                self.until.remove(&nonce);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{MemoryStore, USED_CAPACITY};
    use crate::store::StoreError;

    /// Before, past 100,000 nonces within the TTL each next one was redeemed twice.
    #[test]
    fn a_used_nonce_is_never_forgotten_within_its_ttl() {
        let store = MemoryStore::new();
        let ttl = Duration::from_secs(600);
        for i in 0..USED_CAPACITY {
            assert_eq!(store.use_once(&format!("n{i}"), ttl).ok(), Some(true));
        }
        for i in [0, 1, USED_CAPACITY / 2, USED_CAPACITY - 1] {
            assert_eq!(store.use_once(&format!("n{i}"), ttl).ok(), Some(false));
        }
        match store.use_once("one more", ttl) {
            Err(StoreError::UsedFull(max)) => assert_eq!(max, USED_CAPACITY),
            other => panic!("a full set forgot or took one more: {other:?}"),
        }
    }

    #[test]
    fn a_nonce_is_forgotten_once_its_ttl_ran_out() {
        let store = MemoryStore::new();
        assert_eq!(store.use_once("a", Duration::ZERO).ok(), Some(true));
        assert_eq!(
            store.use_once("b", Duration::from_secs(600)).ok(),
            Some(true)
        );
        // "a" lapsed at once: its TTL was zero.
        assert_eq!(
            store.use_once("a", Duration::from_secs(600)).ok(),
            Some(true)
        );
        assert_eq!(
            store.use_once("b", Duration::from_secs(600)).ok(),
            Some(false)
        );
    }
}
