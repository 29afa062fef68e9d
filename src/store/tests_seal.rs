//! Whoever writes to Redis without `ApprovalSealKey` cannot approve: against the lab's
//! Redis, records and statuses written around the sidecar are refused.

use std::time::Duration;

use super::tests::{ROOM, SEAL_KEY, admin, fresh, record, redis_url};
use super::{From, Status, Store, StoreError, unix_now};

fn store(key: &[u8]) -> Store {
    Store::open(Some(&redis_url()), Duration::from_secs(5), Some(key)).expect("redis")
}

async fn raw() -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis_url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis connection")
}

async fn set_field(id: &str, field: &str, value: &str) {
    set_field_of(&SEAL_KEY, id, field, value).await;
}

/// Sets a field of the approval `id` in the key space of the installation holding `key`.
async fn set_field_of(key: &[u8], id: &str, field: &str, value: &str) {
    let _: () = redis::cmd("HSET")
        .arg(format!("{}approval:{id}", super::key_prefix(key)))
        .arg(field)
        .arg(value)
        .query_async(&mut raw().await)
        .await
        .expect("HSET");
}

async fn field(id: &str, field: &str) -> String {
    redis::cmd("HGET")
        .arg(format!("{}approval:{id}", super::key_prefix(&SEAL_KEY)))
        .arg(field)
        .query_async(&mut raw().await)
        .await
        .expect("HGET")
}

fn unsigned(result: Result<Option<super::ApprovalRecord>, StoreError>) -> String {
    match result {
        Err(StoreError::Corrupt(reason)) => reason,
        other => panic!("read a record nobody signed: {other:?}"),
    }
}

#[test]
fn redis_without_a_seal_key_is_refused() {
    let error = Store::open(Some("redis://127.0.0.1:1/"), Duration::from_secs(1), None)
        .err()
        .expect("refused");
    assert!(matches!(error, StoreError::NoSealKey), "{error}");
    assert!(error.to_string().contains("ApprovalSealKey"), "{error}");
}

#[tokio::test]
async fn an_approval_written_around_the_sidecar_is_not_read() {
    let store = store(&SEAL_KEY);
    let pending = record(&fresh(), &fresh(), 600);
    let id = pending.id.clone();
    store.create_or_get(pending, ROOM).await.expect("create");
    let signed_pending = field(&id, "status").await;

    // The status the Lua script would write, without the key: the state field agrees.
    // In the stored form (a tag, then the JSON), under a tag made up.
    let json = serde_json::to_string(&Status::Approved(admin())).expect("json");
    let forged = format!("{}{json}", "0".repeat(64));
    set_field(&id, "status", &forged).await;
    set_field(&id, "state", "approved").await;
    let reason = unsigned(store.get(&id).await);
    assert!(reason.contains("status of approval"), "{reason}");
    assert!(
        store
            .transition(&id, From::Approved, Status::Redeemed(admin()), unix_now())
            .await
            .is_err(),
        "a forged approval must not be redeemed"
    );
    assert_eq!(
        field(&id, "status").await,
        forged,
        "nothing signed was written"
    );
    // The state field alone, on a genuine pending status, decides nothing either.
    set_field(&id, "status", &signed_pending).await;
    assert_eq!(
        store
            .transition(&id, From::Approved, Status::Redeemed(admin()), unix_now())
            .await
            .expect("readable"),
        None,
        "a pending approval is not redeemed, whatever `state` says"
    );
    assert_eq!(field(&id, "status").await, signed_pending);

    // Another approval's genuine yes, moved onto this one.
    let other = record(&fresh(), &fresh(), 600);
    let other_id = other.id.clone();
    store.create_or_get(other, ROOM).await.expect("create");
    store
        .transition(
            &other_id,
            From::Pending,
            Status::Approved(admin()),
            unix_now(),
        )
        .await
        .expect("decide")
        .expect("decided");
    set_field(&id, "status", &field(&other_id, "status").await).await;
    unsigned(store.get(&id).await);

    // Signed by a replica with another key: copied into that replica's key space, as
    // its own names differ (keys.rs), where it finds nothing at all.
    set_field(&id, "status", &signed_pending).await;
    assert!(store.get(&id).await.expect("own key").is_some());
    let other = self::store(&[9; 32]);
    assert!(other.get(&id).await.expect("readable").is_none());
    for name in ["record", "status"] {
        set_field_of(&[9; 32], &id, name, &field(&id, name).await).await;
    }
    let reason = unsigned(other.get(&id).await);
    assert!(reason.contains("another key"), "{reason}");

    // A record rewritten: the approvers widened, signed or not.
    let record_text = field(&id, "record").await;
    let widened = record_text.replace("Zabbix administrators", "Guests");
    assert_ne!(widened, record_text);
    set_field(&id, "record", &widened).await;
    let reason = unsigned(store.get(&id).await);
    assert!(reason.contains("record of approval"), "{reason}");
    let listed = store
        .list_pending(unix_now())
        .await
        .expect("one unreadable hides no other");
    assert!(listed.iter().all(|r| r.id != id));
}

#[tokio::test]
async fn a_retry_is_never_pointed_at_another_approval() {
    let store = store(&SEAL_KEY);
    let token = fresh();
    let mine = record(&token, "a1", 600);
    let theirs = record(&fresh(), "b2", 600);
    store
        .create_or_get(mine.clone(), ROOM)
        .await
        .expect("create");
    store
        .create_or_get(theirs.clone(), ROOM)
        .await
        .expect("create");
    let _: () = redis::cmd("SET")
        .arg(format!(
            "{}key:{}",
            super::key_prefix(&SEAL_KEY),
            mine.dedupe_key()
        ))
        .arg(&theirs.id)
        .query_async(&mut raw().await)
        .await
        .expect("SET");
    match store.create_or_get(record(&token, "a1", 600), ROOM).await {
        Err(StoreError::Corrupt(reason)) => {
            assert!(reason.contains("not of this call"), "{reason}")
        }
        other => panic!("a retry took another call's approval: {other:?}"),
    }
}
