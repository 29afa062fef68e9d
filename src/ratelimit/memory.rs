//! The in-memory limiter (one replica): call budgets are `governor` keyed GCRA limiters,
//! one per distinct budget (kind and value) keyed by caller; concurrency is a count per
//! caller and cap. Memory stays bounded: keys whose budget is full again are swept, slot
//! counts are dropped at zero, and the number of distinct budgets is capped.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::{DefaultKeyedRateLimiter, Quota};

use super::limits::{Applied, CallRate, Scope};
use super::{Refusal, SlotKey};
use crate::hashing::{FastMap, FastState};

/// At most this many distinct call budgets (a policy that computes its rate from the
/// input could otherwise make one limiter per call).
pub const MAX_BUDGETS: usize = 1024;
/// Sweep the limiters for stale keys every this many admissions.
const SWEEP_EVERY: u64 = 4096;

type Limiter =
    DefaultKeyedRateLimiter<String, NoOpMiddleware<<DefaultClock as Clock>::Instant>, FastState>;

pub(crate) struct MemoryLimiter {
    clock: DefaultClock,
    budgets: Mutex<FastMap<(&'static str, CallRate), Arc<Limiter>>>,
    slots: Mutex<FastMap<SlotKey, u32>>,
    admissions: AtomicU64,
}

impl MemoryLimiter {
    pub(crate) fn new() -> Self {
        MemoryLimiter {
            clock: DefaultClock::default(),
            budgets: Mutex::new(FastMap::default()),
            slots: Mutex::new(FastMap::default()),
            admissions: AtomicU64::new(0),
        }
    }

    /// Takes the concurrency slots (all or none), then checks the call budgets in order.
    /// On success returns the slots to give back when the call ends.
    pub(crate) fn admit(&self, caller: &str, applied: &Applied) -> Result<Vec<SlotKey>, Refusal> {
        if self.admissions.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep();
        }
        let slots = self.take_slots(caller, applied)?;
        for (scope, rate) in applied.rates() {
            let limiter = match self.limiter(scope, rate) {
                Ok(limiter) => limiter,
                Err(refusal) => {
                    self.release(&slots);
                    return Err(refusal);
                }
            };
            if let Err(not_until) = limiter.check_key(&caller.to_owned()) {
                self.release(&slots);
                let wait = not_until.wait_time_from(self.clock.now());
                return Err(Refusal::Limited {
                    scope,
                    retry_after: wait.max(Duration::from_millis(1)),
                });
            }
        }
        Ok(slots)
    }

    pub(crate) fn release(&self, slots: &[SlotKey]) {
        if slots.is_empty() {
            return;
        }
        let mut map = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        for key in slots {
            if let Some(count) = map.get_mut(key) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    map.remove(key);
                }
            }
        }
    }

    /// Concurrency slots held (calls in flight under some cap, counted once per cap).
    pub(crate) fn slots_in_use(&self) -> usize {
        let map = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        map.values().map(|c| *c as usize).sum()
    }

    fn take_slots(&self, caller: &str, applied: &Applied) -> Result<Vec<SlotKey>, Refusal> {
        let wanted: Vec<(Scope, NonZeroU32)> = applied.slots().collect();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<SlotKey> = wanted
            .iter()
            .map(|(scope, cap)| SlotKey::new(*scope, *cap, caller))
            .collect();
        let mut map = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        for ((scope, cap), key) in wanted.iter().zip(&keys) {
            if map.get(key).copied().unwrap_or(0) >= cap.get() {
                return Err(Refusal::Limited {
                    scope: *scope,
                    retry_after: super::CONCURRENCY_RETRY,
                });
            }
        }
        for key in &keys {
            *map.entry(key.clone()).or_insert(0) += 1;
        }
        Ok(keys)
    }

    fn limiter(&self, scope: Scope, rate: CallRate) -> Result<Arc<Limiter>, Refusal> {
        let mut budgets = self.budgets.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (scope.bucket(), rate);
        if let Some(limiter) = budgets.get(&key) {
            return Ok(limiter.clone());
        }
        if budgets.len() >= MAX_BUDGETS {
            // Budgets no caller is using any more hold nothing worth keeping.
            budgets.retain(|_, limiter| {
                limiter.retain_recent();
                !limiter.is_empty()
            });
            if budgets.len() >= MAX_BUDGETS {
                return Err(Refusal::TooManyBudgets);
            }
        }
        let quota = Quota::with_period(rate.emission())
            .unwrap_or_else(|| Quota::per_second(rate.burst()))
            .allow_burst(rate.burst());
        let limiter = Arc::new(Limiter::dashmap_with_hasher(quota, FastState::default()));
        budgets.insert(key, limiter.clone());
        Ok(limiter)
    }

    /// Forgets callers whose budget is full again (indistinguishable from a new caller).
    fn sweep(&self) {
        let budgets = self.budgets.lock().unwrap_or_else(PoisonError::into_inner);
        for limiter in budgets.values() {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// Keys held across all budgets (for the bounded-memory test).
    #[cfg(test)]
    pub(crate) fn keys(&self) -> usize {
        let budgets = self.budgets.lock().unwrap_or_else(PoisonError::into_inner);
        budgets.values().map(|l| l.len()).sum()
    }

    #[cfg(test)]
    pub(crate) fn sweep_now(&self) {
        self.sweep();
    }
}
