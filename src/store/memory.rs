//! The in-memory backend: one replica. A mutex around two maps; every operation is a few
//! map lookups, so the lock is never held across an await.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::unix_now;
use super::{ApprovalRecord, From, MEMORY_CAPACITY, RETAIN_SECONDS, Status, StoreError};

pub struct MemoryStore {
    inner: Mutex<Inner>,
    /// Used nonces, each kept for the TTL it was used with.
    used: moka::future::Cache<String, Duration>,
}

#[derive(Default)]
struct Inner {
    records: HashMap<String, ApprovalRecord>,
    /// dedupe key → record id.
    keys: HashMap<String, String>,
}

impl MemoryStore {
    pub fn new() -> Self {
        MemoryStore {
            inner: Mutex::new(Inner::default()),
            used: moka::future::Cache::builder()
                .max_capacity(100_000)
                .expire_after(PerEntryTtl)
                .build(),
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

    pub(super) async fn use_once(&self, nonce: &str, ttl: Duration) -> bool {
        self.used
            .entry(nonce.to_owned())
            .or_insert(ttl)
            .await
            .is_fresh()
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

/// A used nonce expires after the TTL stored with it.
struct PerEntryTtl;

impl moka::Expiry<String, Duration> for PerEntryTtl {
    fn expire_after_create(
        &self,
        _key: &String,
        ttl: &Duration,
        _created_at: std::time::Instant,
    ) -> Option<Duration> {
        Some(*ttl)
    }
}
