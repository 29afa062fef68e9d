use std::num::NonZeroU32;
use std::sync::Arc;

use super::{Applied, CallRate, RateLimitError, RateLimiter, Scope};
use crate::store::Store;

fn limiter(param_calls: Option<&str>, param_concurrent: Option<u32>) -> RateLimiter {
    let store =
        Arc::new(Store::open(None, std::time::Duration::from_secs(3), None).expect("memory"));
    RateLimiter::new(
        store,
        param_calls.map(|r| CallRate::parse(r).expect("rate")),
        param_concurrent.and_then(NonZeroU32::new),
        Arc::default(),
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

/// A reload that changes `MaxConcurrent` counts the calls already in flight against the
/// new value: before, they held slots under the old value only, and for a while old and
/// new calls both ran in full. Both backends.
#[tokio::test]
async fn calls_in_flight_count_against_a_reloaded_max_concurrent() {
    for store in [
        Arc::new(Store::open(None, std::time::Duration::from_secs(3), None).expect("memory")),
        redis(),
    ] {
        let l = RateLimiter::new(store, None, NonZeroU32::new(3), Arc::default());
        let caller = uuid::Uuid::new_v4().to_string();
        let held = hold(&l, &caller, 3).await;
        l.replace_params(None, NonZeroU32::new(4));
        let fourth = l
            .admit(&caller, &l.applied(None))
            .await
            .expect("room for one");
        assert_eq!(
            scope_of(l.admit(&caller, &l.applied(None)).await),
            Some(Scope::MaxConcurrent),
            "three from before and one now fill MaxConcurrent=4"
        );
        l.replace_params(None, NonZeroU32::new(2));
        drop(fourth);
        assert_eq!(
            scope_of(l.admit(&caller, &l.applied(None)).await),
            Some(Scope::MaxConcurrent),
            "three in flight are over MaxConcurrent=2"
        );
        drop(held);
    }
}

async fn hold(l: &RateLimiter, caller: &str, n: usize) -> Vec<super::Admission> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(l.admit(caller, &l.applied(None)).await.expect("room"));
    }
    held
}

#[tokio::test]
async fn equal_policy_and_parameter_caps_are_separate_slots() {
    let l = limiter(None, Some(2));
    let two = policy("1000/1", Some(2));
    let applied = l.applied(Some(&two));
    let a = l.admit("1", &applied).await.expect("first");
    let b = l
        .admit("1", &applied)
        .await
        .expect("second: one slot of each cap per call");
    assert_eq!(l.slots_in_use(), 4);
    assert_eq!(
        scope_of(l.admit("1", &applied).await),
        Some(Scope::PolicyConcurrent)
    );
    drop((a, b));
    assert_eq!(l.slots_in_use(), 0);
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

/// The lab's Redis (`deploy/lab/start-zabbix.sh approval`; `ZMG_TEST_REDIS_URL`
/// overrides); these fail, not skip, without it.
fn redis() -> Arc<Store> {
    let url = std::env::var("ZMG_TEST_REDIS_URL").unwrap_or_else(|_| {
        let env = std::fs::read_to_string("/var/lib/zbx-test/approval.env")
            .expect("no ZMG_TEST_REDIS_URL and no lab approval.env");
        env.lines()
            .find_map(|l| l.strip_prefix("ZMG_TEST_REDIS_URL="))
            .expect("ZMG_TEST_REDIS_URL in approval.env")
            .to_owned()
    });
    Arc::new(
        Store::open(
            Some(&url),
            std::time::Duration::from_secs(5),
            Some(&[7; 32]),
        )
        .expect("redis"),
    )
}

fn unique(name: &str) -> String {
    format!("test:{name}:{}", uuid::Uuid::new_v4())
}

#[tokio::test]
async fn redis_gcra_admits_the_burst_then_names_the_wait() {
    let store = redis();
    let Store::Redis(r) = &*store else {
        panic!("redis")
    };
    let bucket = unique("gcra");
    // 2 at once, then one every 1800 s.
    let admit = crate::store::RateAdmit {
        rates: vec![(bucket, 1_800_000_000, 2)],
        slots: Vec::new(),
        lease: "l".into(),
        lease_ttl: std::time::Duration::from_secs(30),
    };
    for _ in 0..2 {
        assert_eq!(
            r.rate_admit(&admit).await.expect("redis"),
            crate::store::AdmitReply::Admitted
        );
    }
    match r.rate_admit(&admit).await.expect("redis") {
        crate::store::AdmitReply::Rate { index: 0, wait } => {
            assert!(wait.as_secs() > 1790 && wait.as_secs() <= 1800, "{wait:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_redis_lease_lapses_when_its_holder_stops_renewing() {
    let store = redis();
    let Store::Redis(r) = &*store else {
        panic!("redis")
    };
    let bucket = unique("lease");
    let admit = |lease: &str| crate::store::RateAdmit {
        rates: Vec::new(),
        slots: vec![(bucket.clone(), 1)],
        lease: lease.into(),
        lease_ttl: std::time::Duration::from_millis(300),
    };
    use crate::store::AdmitReply::{Admitted, Slots};
    // The "crashed replica": takes the slot and never renews nor releases it.
    assert_eq!(r.rate_admit(&admit("dead")).await.expect("redis"), Admitted);
    assert_eq!(
        r.rate_admit(&admit("alive")).await.expect("redis"),
        Slots { index: 0 }
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while r.rate_admit(&admit("alive")).await.expect("redis") != Admitted {
        assert!(
            std::time::Instant::now() < deadline,
            "the lease never lapsed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // A renewed lease holds; a released one frees the slot at once.
    r.rate_renew(
        std::slice::from_ref(&bucket),
        "alive",
        std::time::Duration::from_secs(30),
    )
    .await
    .expect("renew");
    assert_eq!(
        r.rate_admit(&admit("third")).await.expect("redis"),
        Slots { index: 0 }
    );
    r.rate_release(std::slice::from_ref(&bucket), "alive")
        .await
        .expect("release");
    assert_eq!(
        r.rate_admit(&admit("third")).await.expect("redis"),
        Admitted
    );
}

/// Redis restarted empty (or a failover to a replica that had not got the lease) while a
/// call runs: its next renewal puts the lease back. Before, the renewal extended only a
/// lease still there, and the user's calls ran beyond the cap until the held ones ended.
#[tokio::test]
async fn a_lease_redis_lost_is_put_back_by_its_renewal() {
    let redis = crate::store::own_redis::OwnRedis::start();
    let store = Store::open(
        Some(&redis.url()),
        std::time::Duration::from_secs(5),
        Some(&[7; 32]),
    )
    .expect("redis");
    let Store::Redis(r) = &store else {
        panic!("redis")
    };
    let bucket = unique("lost");
    let admit = |lease: &str| crate::store::RateAdmit {
        rates: Vec::new(),
        slots: vec![(bucket.clone(), 1)],
        lease: lease.into(),
        lease_ttl: std::time::Duration::from_secs(30),
    };
    use crate::store::AdmitReply::{Admitted, Slots};
    assert_eq!(
        r.rate_admit(&admit("running")).await.expect("redis"),
        Admitted
    );
    let mut c = redis.connection().expect("redis");
    let () = redis::cmd("FLUSHALL").query(&mut c).expect("flush");
    r.rate_renew(
        std::slice::from_ref(&bucket),
        "running",
        std::time::Duration::from_secs(30),
    )
    .await
    .expect("renew");
    assert_eq!(
        r.rate_admit(&admit("second")).await.expect("redis"),
        Slots { index: 0 },
        "the running call's lease was not put back"
    );
}

#[tokio::test]
async fn the_shared_limiter_gives_slots_back_when_a_call_ends() {
    let l = RateLimiter::new(redis(), None, NonZeroU32::new(1), Arc::default());
    let caller = unique("caller");
    let applied = l.applied(None);
    let held = l.admit(&caller, &applied).await.expect("first");
    assert_eq!(
        scope_of(l.admit(&caller, &applied).await),
        Some(Scope::MaxConcurrent)
    );
    drop(held);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while l.admit(&caller, &applied).await.is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the slot never came back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
