//! The Redis pending index: what the approval page lists. Against a Redis of the test's
//! own: the lab's is shared, and these leave a thousand dead entries behind.

use std::time::Duration;

use super::own_redis::OwnRedis;
use super::tests::{ROOM, SEAL_KEY, fresh, record};
use super::{Store, unix_now};

fn store(redis: &OwnRedis) -> Store {
    Store::open(Some(&redis.url()), Duration::from_secs(5), Some(&SEAL_KEY)).expect("redis")
}

/// One agent's writes with a short `ApprovalTimeout`, never retried: each expired approval
/// stays in Redis an hour. Before, the page read the index's 1000 oldest entries, all
/// dead, and listed nothing of what waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_approvals_do_not_hide_the_ones_waiting() {
    let redis = OwnRedis::start();
    let store = store(&redis);
    let now = unix_now();
    for _ in 0..1001 {
        let mut dead = record(&fresh(), "ff", 60);
        dead.created_at = now - 120;
        dead.expires_at = now - 60;
        store.create_or_get(dead, ROOM).await.expect("create");
    }
    let waiting = record(&fresh(), "ff", 600);
    store
        .create_or_get(waiting.clone(), ROOM)
        .await
        .expect("create");
    let listed = store.list_pending(unix_now()).await.expect("list");
    assert_eq!(
        listed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        vec![waiting.id.as_str()]
    );
    let mut c = redis.connection().expect("redis");
    let left: u64 = redis::cmd("ZCARD")
        .arg(format!("{}pending", super::key_prefix(&SEAL_KEY)))
        .query(&mut c)
        .expect("zcard");
    assert_eq!(left, 1, "dead entries are dropped from the index");
}

/// Nobody opens the page: entries older than any record can live are trimmed at the next
/// creation, so the index does not grow without bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_is_trimmed_without_a_page_view() {
    let redis = OwnRedis::start();
    let store = store(&redis);
    let mut c = redis.connection().expect("redis");
    let ancient = unix_now() - super::redis_backend::INDEX_KEEP - 10;
    let () = redis::cmd("ZADD")
        .arg(format!("{}pending", super::key_prefix(&SEAL_KEY)))
        .arg(ancient)
        .arg("ghost")
        .query(&mut c)
        .expect("zadd");
    store
        .create_or_get(record(&fresh(), "ff", 600), ROOM)
        .await
        .expect("create");
    let score: Option<u64> = redis::cmd("ZSCORE")
        .arg(format!("{}pending", super::key_prefix(&SEAL_KEY)))
        .arg("ghost")
        .query(&mut c)
        .expect("zscore");
    assert_eq!(score, None);
}
