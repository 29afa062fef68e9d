use std::num::NonZeroU32;
use std::sync::Arc;

use super::{Applied, CallRate, RateLimitError, RateLimiter, Scope};
use crate::store::Store;

fn limiter(param_calls: Option<&str>, param_concurrent: Option<u32>) -> RateLimiter {
    let store = Arc::new(Store::open(None, std::time::Duration::from_secs(3)).expect("memory"));
    RateLimiter::new(
        store,
        param_calls.map(|r| CallRate::parse(r).expect("rate")),
        param_concurrent.and_then(NonZeroU32::new),
    )
}

fn policy(calls: &str, concurrent: Option<u32>) -> crate::policy::RateLimits {
    crate::policy::RateLimits {
        calls: Some(CallRate::parse(calls).expect("rate")),
        concurrent: concurrent.and_then(NonZeroU32::new),
    }
}

fn scope_of(result: Result<super::Admission, RateLimitError>) -> Option<Scope> {
    result.err().and_then(|e| e.scope())
}

#[tokio::test]
async fn no_limit_admits_everything_without_counting() {
    let l = limiter(None, None);
    let applied = l.applied(None);
    assert!(!applied.any());
    for _ in 0..100 {
        assert!(l.admit("1", &applied).await.is_ok());
    }
}

#[tokio::test]
async fn policy_budget_per_caller_and_value() {
    let l = limiter(None, None);
    let tight = policy("2/3600", None);
    let applied = l.applied(Some(&tight));
    assert!(l.admit("1", &applied).await.is_ok());
    assert!(l.admit("1", &applied).await.is_ok());
    let refused = l
        .admit("1", &applied)
        .await
        .err()
        .expect("third call refused");
    assert_eq!(refused.scope(), Some(Scope::PolicyRate));
    // One call comes back every 1800 s.
    let retry = refused.retry_after_seconds().expect("retry");
    assert!((1790..=1800).contains(&retry), "{retry}");
    assert_eq!(l.refused(Scope::PolicyRate), 1);
    // Another caller, and another budget value of the same caller, are untouched.
    assert!(l.admit("2", &applied).await.is_ok());
    let other = policy("3/3600", None);
    assert!(l.admit("1", &l.applied(Some(&other))).await.is_ok());
}

#[tokio::test]
async fn the_parameter_ceiling_beats_a_generous_policy() {
    let l = limiter(Some("1/3600"), None);
    let generous = policy("1000/1", None);
    let applied = l.applied(Some(&generous));
    assert!(l.admit("1", &applied).await.is_ok());
    assert_eq!(
        scope_of(l.admit("1", &applied).await),
        Some(Scope::RateLimit)
    );
    // The ceiling is one budget per caller whatever the policy says.
    assert_eq!(
        scope_of(l.admit("1", &l.applied(None)).await),
        Some(Scope::RateLimit)
    );
}

#[tokio::test]
async fn concurrency_slots_come_back_when_calls_end() {
    let l = limiter(None, Some(3));
    let two = policy("1000/1", Some(2));
    let applied = l.applied(Some(&two));
    let a = l.admit("1", &applied).await.expect("first");
    let b = l.admit("1", &applied).await.expect("second");
    let refused = l.admit("1", &applied).await.err().expect("third refused");
    assert_eq!(refused.scope(), Some(Scope::PolicyConcurrent));
    assert_eq!(refused.retry_after_seconds(), Some(1));
    // MaxConcurrent=3 counts every call of the caller: the third slot is left.
    let c = l
        .admit("1", &l.applied(None))
        .await
        .expect("under MaxConcurrent");
    assert_eq!(
        scope_of(l.admit("1", &l.applied(None)).await),
        Some(Scope::MaxConcurrent)
    );
    drop((a, b, c));
    assert_eq!(l.slots_in_use(), 0, "counts are dropped at zero");
    assert!(l.admit("1", &applied).await.is_ok());
}

#[tokio::test]
async fn a_refused_budget_gives_the_slots_back() {
    let l = limiter(None, None);
    let p = policy("1/3600", Some(1));
    let applied = l.applied(Some(&p));
    let first = l.admit("1", &applied).await.expect("first");
    drop(first);
    assert_eq!(
        scope_of(l.admit("1", &applied).await),
        Some(Scope::PolicyRate)
    );
    assert_eq!(l.slots_in_use(), 0);
}

#[test]
fn stale_keys_are_swept() {
    let memory = super::memory::MemoryLimiter::new();
    let applied = Applied {
        policy_calls: Some(CallRate::parse("1000000/1").expect("rate")),
        ..Applied::default()
    };
    for caller in 0..500 {
        assert!(memory.admit(&caller.to_string(), &applied).is_ok());
    }
    assert_eq!(memory.keys(), 500);
    // 1 µs per call: every budget is full again almost at once, then swept.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        memory.sweep_now();
        if memory.keys() == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "stale keys not swept");
        std::thread::yield_now();
    }
}
