//! Two installations, each with its own `ApprovalSealKey`, on one Redis database: each
//! keeps to its own key space. Before, every key was `zmg:…`: the 7.0 and 6.0 labs on one
//! Redis shared Admin's budget (userid 1 on every Zabbix), and each page warned of the
//! other's approvals it could not read.

use std::time::Duration;

use super::own_redis::OwnRedis;
use super::tests::{ROOM, fresh, record};
use super::{AdmitReply, RateAdmit, Store, unix_now};

fn installation(redis: &OwnRedis, seal_key: &[u8]) -> Store {
    Store::open(Some(&redis.url()), Duration::from_secs(5), Some(seal_key)).expect("redis")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installations_on_one_redis_share_nothing() {
    let redis = OwnRedis::start();
    let (one, other) = (
        installation(&redis, &[1; 32]),
        installation(&redis, &[2; 32]),
    );
    let (Store::Redis(one_r), Store::Redis(other_r)) = (&one, &other) else {
        panic!("redis")
    };
    // Admin's budget, one call an hour, under the same bucket name in both.
    let admit = RateAdmit {
        rates: vec![("user:1".into(), 3_600_000_000, 1)],
        slots: vec![("user:1".into(), 1)],
        lease: "call".into(),
        lease_ttl: Duration::from_secs(30),
    };
    assert_eq!(
        one_r.rate_admit(&admit).await.expect("redis"),
        AdmitReply::Admitted
    );
    assert_ne!(
        one_r.rate_admit(&admit).await.expect("redis"),
        AdmitReply::Admitted
    );
    assert_eq!(
        other_r.rate_admit(&admit).await.expect("redis"),
        AdmitReply::Admitted,
        "the other installation's Admin has a budget of their own"
    );

    // The rejected-token lockout of one address.
    let window = Duration::from_secs(60);
    for n in 0..3u8 {
        one.record_rejected("192.0.2.1", &[n; 32], window)
            .await
            .expect("redis");
    }
    assert!(
        one.lockout("192.0.2.1", &[9; 32], 3)
            .await
            .expect("redis")
            .is_some()
    );
    assert_eq!(
        other
            .lockout("192.0.2.1", &[9; 32], 3)
            .await
            .expect("redis"),
        None
    );

    // The approval page lists only its own installation's approvals.
    let mine = record(&fresh(), "aa", 600);
    one.create_or_get(mine.clone(), ROOM).await.expect("create");
    let listed = one.list_pending(unix_now()).await.expect("list");
    assert_eq!(
        listed.iter().map(|r| &r.id).collect::<Vec<_>>(),
        vec![&mine.id]
    );
    assert!(
        other
            .list_pending(unix_now())
            .await
            .expect("list")
            .is_empty()
    );
    assert!(other.get(&mine.id).await.expect("readable").is_none());

    let mut c = redis.connection().expect("redis");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).expect("keys");
    let (a, b) = (super::key_prefix(&[1; 32]), super::key_prefix(&[2; 32]));
    assert!(
        keys.iter().all(|k| k.starts_with(&a) || k.starts_with(&b)),
        "every key is in one installation's space: {keys:?}"
    );
}
