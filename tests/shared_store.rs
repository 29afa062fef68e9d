//! What a sidecar shares through Redis (`SharedStore`) besides approvals and limits, and
//! how it fares without it. `MaxRejectedTokens` across replicas: two sidecars sharing the
//! lab's Redis count one address's rejected tokens together, so a client spreading its
//! guesses over them gets one budget, not one each; a token Zabbix accepted through one
//! replica is spared by the other. A store that does not answer refuses a lookup instead
//! of skipping the check, and makes the sidecar not ready (`/readyz`, `shared_store_up`).
//! Zabbix's traffic is recorded to show what was not asked.

mod common;

use std::net::IpAddr;
use std::time::Duration;

use common::recorder::{self, Recorder};
use common::zapi::TestUser;
use serde_json::{Value, json};
use zabbix_mcp_guard::config::Config;

/// A source address of this test process's own in 127/8, so that the lockout it causes
/// (kept in Redis for a minute) touches no other test sharing the lab's Redis.
fn source() -> IpAddr {
    let pid = std::process::id();
    IpAddr::from([127, 100 + (pid % 100) as u8, ((pid / 100) % 250) as u8, 7])
}

fn config(zabbix: &str, store: &str) -> Config {
    let mut config = common::config_for(zabbix);
    config.allowed_ip = vec!["127.0.0.0/8".parse().expect("net")];
    config.limits.max_rejected_tokens = 2;
    common::on_redis(config, store)
}

/// One raw `initialize` POST from [`source`]: the identity is resolved before MCP.
async fn initialize(url: &str, token: &str) -> (u16, Value) {
    let http = reqwest::Client::builder()
        .local_address(source())
        .build()
        .expect("client");
    common::raw_initialize(&http, url, token).await
}

/// A GET of `path` on the sidecar's listener (from loopback): the status and the body
/// (JSON, or its text).
async fn get(guard: &common::Guard, path: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{}{path}", guard.base))
        .await
        .expect("an answer");
    common::status_and_body(response).await
}

/// 64 hex digits, shaped as a Zabbix API token, that no Zabbix issued.
fn made_up_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// How many token lookups reached Zabbix since the last look.
fn lookups(recorder: &Recorder) -> usize {
    recorder
        .taken()
        .iter()
        .filter(|body| body.contains("user.checkAuthentication"))
        .count()
}

#[tokio::test]
async fn replicas_sharing_redis_count_rejected_tokens_together() {
    let lab = common::lab(7);
    // A token no replica has seen before (an accepted token is remembered for a day).
    let viewers = common::seed_id(&lab, "user_groups", "MCP Viewers");
    let user = TestUser::create(&lab, &viewers, &[]).await;
    user.run(&lab, count_together(lab.clone(), user.token.clone()))
        .await;
}

async fn count_together(lab: common::Lab, token: String) {
    let (zabbix, recorder) = recorder::start(&lab.url).await;
    let redis = common::redis_url();
    let a = common::start_with(config(&zabbix, &redis)).await;
    let b = common::start_with(config(&zabbix, &redis)).await;

    // A client let in through A before the guessing starts.
    let (status, body) = initialize(&a.url, &token).await;
    assert_eq!(status, 200, "{body}");
    // One rejected token through each replica: two from this address, the most allowed.
    for replica in [&a, &b] {
        let (status, body) = initialize(&replica.url, &made_up_token()).await;
        assert_eq!(status, 401, "{body}");
    }
    assert_eq!(lookups(&recorder), 3);

    // Each replica saw one; together they saw two: both refuse, Zabbix not asked.
    for replica in [&a, &b] {
        let (status, body) = initialize(&replica.url, &made_up_token()).await;
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["error"], "rate_limited", "{body}");
        let message = body["message"].as_str().expect("message");
        assert!(
            message.starts_with(&format!(
                "2 tokens from {} were rejected by Zabbix within 60 s",
                source()
            )),
            "{message}"
        );
    }
    assert_eq!(lookups(&recorder), 0, "Zabbix asked during the lockout");

    // The token A saw accepted is spared by B, which never saw it: looked up, let in.
    let (status, body) = initialize(&b.url, &token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(lookups(&recorder), 1);
    // /readyz waits for the first check; /metrics then reads it.
    let (status, ready) = get(&b, "/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(
        ready["shared_store"],
        json!({"backend": "redis", "reachable": true})
    );
    let metrics = get(&b, "/metrics").await.1;
    let metrics = metrics.as_str().expect("text");
    assert!(
        metrics.contains(r#"zabbix_mcp_guard_identity_cache_lookups_total{result="refused"} 1"#),
        "{metrics}"
    );
    for line in [
        "zabbix_mcp_guard_shared_store_up 1",
        "zabbix_mcp_guard_zabbix_up 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line}: {metrics}");
    }
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_shared_store_that_does_not_answer_refuses_the_lookup() {
    let lab = common::lab(7);
    // A port nothing listens on: the store cannot say whether the address is locked out.
    let closed = format!("redis://127.0.0.1:{}/", common::free_port());
    let guard = common::start_with(config(&lab.url, &closed)).await;
    let (status, body) = initialize(&guard.url, &lab.token).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["error"], "internal_error", "{body}");
    let message = body["message"].as_str().expect("message");
    assert!(
        message == "cannot check the rejected-token lockout: the shared store failed",
        "{message}"
    );
    // Not ready, and says why; the gauge an alert reads.
    let (status, ready) = get(&guard, "/readyz").await;
    assert_eq!(status, 503, "{ready}");
    let reason = ready["reason"].as_str().expect("reason");
    assert!(reason.starts_with("shared store unreachable: "), "{reason}");
    assert_eq!(ready["shared_store"]["reachable"], false, "{ready}");
    shows_the_store_down(&guard).await;
    guard.stop().await;
}

/// The wrong Redis after a failover: a read-only replica answers `PING` and refuses every
/// write, so every call with a limit and every page approval fails there (`internal_error`,
/// seen with the MCP Python SDK). Before, a sidecar on it was ready (`/readyz` 200,
/// `shared_store_up` 1) and a load balancer kept sending it calls; the probe now writes.
/// A token lookup is refused as on a Redis that does not answer: before, the lockout
/// check read the replica and let Zabbix be asked, and the rejection it could not record
/// went uncounted by the other replicas.
#[tokio::test]
async fn a_read_only_replica_is_not_ready() {
    let lab = common::lab(7);
    let redis = common::redis_server::RedisServer::start().await;
    // A replica of a primary that is not there: read-only, answering PING.
    let client = redis::Client::open(redis.url()).expect("url");
    let mut connection = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(common::free_port())
        .query_async(&mut connection)
        .await
        .expect("replicaof");
    let guard = common::start_with(config(&lab.url, &redis.url())).await;
    let (status, body) = initialize(&guard.url, &lab.token).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        body["message"], "cannot check the rejected-token lockout: the shared store failed",
        "{body}"
    );
    let (status, ready) = get(&guard, "/readyz").await;
    assert_eq!(status, 503, "{ready}");
    let reason = ready["reason"].as_str().expect("reason");
    assert!(
        reason.starts_with("shared store unreachable: ") && reason.contains("read only replica"),
        "{reason}"
    );
    shows_the_store_down(&guard).await;
    guard.stop().await;
}

/// `rediss://`: the released binary reaches a Redis that serves TLS only, verifying its
/// certificate against the system's roots, which `SSL_CERT_FILE` points elsewhere (here at
/// the test CA); a Redis whose certificate it cannot verify counts as unreachable. Before,
/// the binary was built without Redis' TLS and refused `rediss://` at start.
#[tokio::test]
async fn a_redis_over_tls_is_reached_and_verified() {
    common::init();
    let lab = common::lab(7);
    let pki = common::tls::pki("redis");
    let redis = common::redis_server::RedisServer::start_tls(&pki).await;
    let store = format!("rediss://localhost:{}/", redis.port);
    let start = |trusted: bool| {
        let port = common::free_port();
        let log = common::temp_path("redis-tls.log");
        let mut command = common::binary(&lab.url, port, &log);
        command
            .env("ZABBIX_MCP_GUARD_SHARED_STORE", &store)
            .env("ZABBIX_MCP_GUARD_APPROVAL_SEAL_KEY", "ab".repeat(32))
            .stdout(std::process::Stdio::null());
        if trusted {
            command.env("SSL_CERT_FILE", &pki.ca_file);
        } else {
            // Roots that do not hold the test CA.
            let other = common::tls::pki("redis-other");
            command.env("SSL_CERT_FILE", &other.ca_file);
        }
        (common::Running(command.spawn().expect("the binary")), port)
    };
    let ready = |port: u16| async move {
        let answer = reqwest::get(format!("http://127.0.0.1:{port}/readyz"))
            .await
            .ok()?;
        let (_, body) = common::status_and_body(answer).await;
        body["shared_store"]["reachable"].as_bool()
    };

    let (_trusted, port) = start(true);
    let reachable = common::eventually("a readiness answer", Duration::from_secs(30), || {
        ready(port)
    })
    .await;
    assert!(reachable, "Redis over TLS is reached");

    let (_untrusted, port) = start(false);
    let reachable = common::eventually("a readiness answer", Duration::from_secs(30), || {
        ready(port)
    })
    .await;
    assert!(!reachable, "a certificate not verified is no Redis");
}

/// `/metrics` says the shared store is down.
async fn shows_the_store_down(guard: &common::Guard) {
    let metrics = get(guard, "/metrics").await.1;
    let metrics = metrics.as_str().expect("text");
    assert!(
        metrics
            .lines()
            .any(|l| l == "zabbix_mcp_guard_shared_store_up 0"),
        "{metrics}"
    );
}
