//! The same test functions run against both backends. The Redis tests use the lab's
//! Redis (`deploy/lab/start-zabbix.sh approval`; `ZMG_TEST_REDIS_URL` overrides) and
//! fail, not skip, when it is not there.

use std::sync::Arc;
use std::time::Duration;

use super::{ApprovalRecord, DecidedBy, From, Status, Store, StoreError, unix_now};
use crate::policy::{
    Approvers, CallerInfo, ClientInfo, Phase, PolicyInput, ToolInfo, ToolKind, ZabbixInfo,
};

pub(super) fn redis_url() -> String {
    if let Ok(url) = std::env::var("ZMG_TEST_REDIS_URL") {
        return url;
    }
    let env = std::fs::read_to_string("/var/lib/zbx-test/approval.env").expect(
        "no ZMG_TEST_REDIS_URL and no lab approval.env: run deploy/lab/start-zabbix.sh approval",
    );
    env.lines()
        .find_map(|l| l.strip_prefix("ZMG_TEST_REDIS_URL="))
        .expect("ZMG_TEST_REDIS_URL in approval.env")
        .to_owned()
}

fn stores() -> Vec<Arc<Store>> {
    let timeout = Duration::from_secs(5);
    vec![
        Arc::new(Store::open(None, timeout, None).expect("memory")),
        Arc::new(Store::open(Some(&redis_url()), timeout, Some(&SEAL_KEY)).expect("redis")),
    ]
}

/// `ApprovalSealKey` of the Redis stores.
pub(super) const SEAL_KEY: [u8; 32] = [7; 32];

/// `MaxPendingApprovals` for the tests that are not about it: the test records share
/// one user, and the lab's Redis keeps pending ones from earlier runs for their TTL.
pub(super) const ROOM: usize = 10_000;

pub(super) fn record(token_id: &str, sha256: &str, ttl: u64) -> ApprovalRecord {
    record_of("7", token_id, sha256, ttl)
}

fn record_of(userid: &str, token_id: &str, sha256: &str, ttl: u64) -> ApprovalRecord {
    let now = unix_now();
    let input = PolicyInput::new(
        Phase::Call,
        ToolInfo {
            name: "problem_acknowledge".into(),
            exposed_name: "problem_acknowledge".into(),
            kind: ToolKind::Write,
            method: "event.acknowledge".into(),
            destructive: false,
            idempotent: false,
        },
        CallerInfo {
            userid: userid.into(),
            username: "mcp-operator".into(),
            user_type: 1,
            roleid: "1".into(),
            usrgrps: vec!["Operators".into()],
            token_id: token_id.into(),
        },
        ClientInfo {
            address: "127.0.0.1".into(),
            name: Some("test".into()),
            version: None,
            protocol_version: None,
            elicitation: Vec::new(),
        },
        ZabbixInfo {
            version: "7.0.22".into(),
        },
    );
    ApprovalRecord {
        id: uuid::Uuid::new_v4().to_string(),
        decision_id: uuid::Uuid::new_v4().to_string(),
        input,
        body: r#"{"jsonrpc":"2.0","method":"event.acknowledge","params":{},"id":1}"#.into(),
        sha256: sha256.into(),
        approvers: Approvers {
            usrgrps: vec!["Zabbix administrators".into()],
            distinct_from_caller: true,
        },
        created_at: now,
        expires_at: now + ttl,
        status: Status::Pending,
    }
}

pub(super) fn admin() -> DecidedBy {
    DecidedBy {
        userid: "1".into(),
        username: "Admin".into(),
        at: unix_now(),
    }
}

pub(super) fn fresh() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

async fn same_payload_gets_the_same_pending_approval(store: &Store) {
    let token = fresh();
    let first = record(&token, "aa", 600);
    let (created, new) = store
        .create_or_get(first.clone(), ROOM)
        .await
        .expect("create");
    assert!(new);
    assert_eq!(created, first);
    let (again, new) = store
        .create_or_get(record(&token, "aa", 600), ROOM)
        .await
        .expect("get");
    assert!(!new, "a retry must not make a second approval");
    assert_eq!(again.id, first.id);
    let (other, new) = store
        .create_or_get(record(&token, "bb", 600), ROOM)
        .await
        .expect("other payload");
    assert!(new);
    assert_ne!(other.id, first.id);
    let (other_caller, new) = store
        .create_or_get(record(&fresh(), "aa", 600), ROOM)
        .await
        .expect("other caller");
    assert!(new);
    assert_ne!(other_caller.id, first.id);
    assert_eq!(
        store.get(&first.id).await.expect("get"),
        Some(first.clone())
    );
    assert_eq!(store.get(&fresh()).await.expect("get"), None);
    let pending = store.list_pending(unix_now()).await.expect("list");
    assert!(pending.iter().any(|r| r.id == first.id));
}

async fn decided_once_and_redeemed_once(store: &Store) {
    let first = record(&fresh(), "cc", 600);
    store
        .create_or_get(first.clone(), ROOM)
        .await
        .expect("create");
    let now = unix_now();
    let approved = store
        .transition(&first.id, From::Pending, Status::Approved(admin()), now)
        .await
        .expect("decide")
        .expect("was pending");
    assert_eq!(approved.status, Status::Approved(admin()));
    assert_eq!(approved.body, first.body);
    let second = store
        .transition(&first.id, From::Pending, Status::Declined(admin()), now)
        .await
        .expect("decide");
    assert_eq!(second, None, "a decision is taken once");
    let pending = store.list_pending(now).await.expect("list");
    assert!(pending.iter().all(|r| r.id != first.id));
    // A retry finds the decided record.
    let (found, new) = store.create_or_get(first.clone(), ROOM).await.expect("get");
    assert!(!new);
    assert!(matches!(found.status, Status::Approved(_)));
    let redeemed = store
        .transition(&first.id, From::Approved, Status::Redeemed(admin()), now)
        .await
        .expect("redeem");
    assert!(redeemed.is_some());
    let again = store
        .transition(&first.id, From::Approved, Status::Redeemed(admin()), now)
        .await
        .expect("redeem");
    assert_eq!(again, None, "redeemed once");
}

/// Retries redeeming and approvers withdrawing, all at once: exactly one of them wins.
async fn concurrent_redeems_and_withdrawals_win_once(store: Arc<Store>) {
    let first = record(&fresh(), "dd", 600);
    store
        .create_or_get(first.clone(), ROOM)
        .await
        .expect("create");
    let now = unix_now();
    store
        .transition(&first.id, From::Pending, Status::Approved(admin()), now)
        .await
        .expect("decide")
        .expect("was pending");
    let tasks: Vec<_> = (0..16)
        .map(|n| {
            let store = store.clone();
            let id = first.id.clone();
            let to = if n % 2 == 0 {
                Status::Redeemed(admin())
            } else {
                Status::Withdrawn(admin())
            };
            tokio::spawn(async move {
                let won = store
                    .transition(&id, From::Approved, to.clone(), now)
                    .await
                    .expect("redeem or withdraw");
                won.map(|r| (r.status == to).then_some(to))
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        if let Some(won) = task.await.expect("task") {
            winners.push(won.expect("the winner's own status"));
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let stored = store.get(&first.id).await.expect("get").expect("record");
    assert_eq!(stored.status, winners[0]);
}

async fn expired_cannot_be_decided_and_is_forgotten(store: &Store) {
    let token = fresh();
    let mut old = record(&token, "ee", 600);
    old.created_at -= 700;
    old.expires_at -= 700;
    store
        .create_or_get(old.clone(), ROOM)
        .await
        .expect("create");
    let now = unix_now();
    assert!(
        !store
            .list_pending(now)
            .await
            .expect("list")
            .iter()
            .any(|r| r.id == old.id)
    );
    let decided = store
        .transition(&old.id, From::Pending, Status::Approved(admin()), now)
        .await
        .expect("decide");
    assert_eq!(decided, None, "no decision after the expiry");
    let expired = store
        .transition(&old.id, From::Pending, Status::Expired, now)
        .await
        .expect("expire");
    assert_eq!(expired.map(|r| r.status), Some(Status::Expired));
    store
        .forget_key(&old.dedupe_key(), &old.id)
        .await
        .expect("forget");
    let (next, new) = store
        .create_or_get(record(&token, "ee", 600), ROOM)
        .await
        .expect("create");
    assert!(new, "after an expiry the retry asks anew");
    assert_ne!(next.id, old.id);
}

async fn nonce_is_used_once(store: &Store) {
    let nonce = fresh();
    let ttl = Duration::from_secs(60);
    assert!(store.use_once(&nonce, ttl).await.expect("first"));
    assert!(!store.use_once(&nonce, ttl).await.expect("second"));
    assert!(store.use_once(&fresh(), ttl).await.expect("other"));
}

async fn a_user_waits_on_at_most_max_pending_approvals(store: &Store) {
    let (user, token) = (fresh(), fresh());
    let mine = |sha: &str| record_of(&user, &token, sha, 600);
    let (first, _) = store.create_or_get(mine("a1"), 2).await.expect("first");
    store.create_or_get(mine("a2"), 2).await.expect("second");
    let refused = store.create_or_get(mine("a3"), 2).await;
    assert!(
        matches!(refused, Err(StoreError::CallerFull { max: 2 })),
        "{refused:?}"
    );
    // A retry of a waiting one finds it; another user is not held back.
    let (again, created) = store.create_or_get(mine("a1"), 2).await.expect("retry");
    assert_eq!((again.id.as_str(), created), (first.id.as_str(), false));
    let other = record_of(&fresh(), &fresh(), "a3", 600);
    store.create_or_get(other, 2).await.expect("another user");
    // Once one is decided, it no longer waits: there is room again.
    let decided = Status::Approved(admin());
    let now = unix_now();
    let moved = store
        .transition(&first.id, From::Pending, decided, now)
        .await;
    assert!(moved.expect("transition").is_some());
    store
        .create_or_get(mine("a3"), 2)
        .await
        .expect("room again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn both_backends_behave_the_same() {
    for store in stores() {
        let backend = store.backend();
        eprintln!("backend {backend}");
        same_payload_gets_the_same_pending_approval(&store).await;
        decided_once_and_redeemed_once(&store).await;
        concurrent_redeems_and_withdrawals_win_once(store.clone()).await;
        expired_cannot_be_decided_and_is_forgotten(&store).await;
        nonce_is_used_once(&store).await;
        a_user_waits_on_at_most_max_pending_approvals(&store).await;
    }
}

#[test]
fn bad_store_urls_are_refused_without_echoing_secrets() {
    let error = Store::open(
        Some("postgres://user:secret@x"),
        Duration::from_secs(1),
        None,
    )
    .err()
    .expect("refused");
    assert!(!error.to_string().contains("secret"), "{error}");
}

#[test]
fn the_caller_full_message_counts_in_words() {
    assert!(
        StoreError::CallerFull { max: 1 }
            .to_string()
            .starts_with("1 approval of this Zabbix user is waiting already")
    );
    assert!(
        StoreError::CallerFull { max: 20 }
            .to_string()
            .starts_with("20 approvals of this Zabbix user are waiting already")
    );
}
