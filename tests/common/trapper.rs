//! Real problems, made the real way: values pushed through the Zabbix trapper protocol
//! fire the lab's triggers, and zabbix_server opens the problems.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Client, Lab, read, results};

fn trapper_port(lab: &Lab) -> u16 {
    lab.seed["trapper_port"]
        .as_u64()
        .expect("trapper_port in the seed manifest") as u16
}

/// Sends one value; returns Zabbix's answer ("processed: 1; failed: 0; ...").
pub fn send(lab: &Lab, host: &str, key: &str, value: &str) -> String {
    let payload =
        json!({"request": "sender data", "data": [{"host": host, "key": key, "value": value}]})
            .to_string();
    let mut stream =
        std::net::TcpStream::connect(("127.0.0.1", trapper_port(lab))).expect("trapper port");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut packet = b"ZBXD\x01".to_vec();
    packet.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    packet.extend_from_slice(payload.as_bytes());
    stream.write_all(&packet).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let json: Value = serde_json::from_slice(&answer[13..]).unwrap_or(Value::Null);
    json["info"].as_str().unwrap_or_default().to_owned()
}

/// Resolves then re-fires `trigger` (by pushing `low` then `high` to `key` on `host`) and
/// returns the new problem's event ID.
pub async fn fresh_problem(
    client: &Client,
    lab: &Lab,
    host: &str,
    key: &str,
    trigger: &str,
    low: &str,
    high: &str,
) -> String {
    let hostid = lab.seed["hosts"][host].as_str().unwrap().to_owned();
    let open = |env: &Value| -> Vec<u64> {
        results(env)
            .iter()
            .filter(|p| p["name"] == trigger)
            .filter_map(|p| p["eventid"].as_str().and_then(|s| s.parse().ok()))
            .collect()
    };
    let before = read(client, "problem_get", json!({"hostids": [hostid.clone()]})).await;
    let known_max = open(&before).into_iter().max().unwrap_or(0);
    assert!(
        send(lab, host, key, low).contains("processed: 1"),
        "trapper refused {key}"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        send(lab, host, key, high).contains("processed: 1"),
        "trapper refused {key}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let env = read(client, "problem_get", json!({"hostids": [hostid.clone()]})).await;
        if let Some(id) = open(&env).into_iter().find(|id| *id > known_max) {
            return id.to_string();
        }
        assert!(Instant::now() < deadline, "no new problem for {trigger}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Polls problem_get for one event until `check` holds (Zabbix applies some changes
/// asynchronously, e.g. suppression).
pub async fn wait_problem<F: Fn(Option<&Value>) -> bool>(client: &Client, eventid: &str, check: F) {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let env = read(
            client,
            "problem_get",
            json!({"eventids": [eventid], "recent": true}),
        )
        .await;
        if check(results(&env).first()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "problem {eventid} did not reach the expected state: {env}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// An open problem of one of the seeded `hosts` that `client` can see, asked by host:
/// Admin's unfiltered `problem.get` also lists, for a while, the problem of a trigger
/// another test just deleted, which has no host and denies as unresolvable.
pub async fn open_problem(client: &Client, lab: &Lab, hosts: &[&str]) -> String {
    let hostids: Vec<String> = hosts
        .iter()
        .map(|host| super::seed_id(lab, "hosts", host))
        .collect();
    let env = read(
        client,
        "problem_get",
        json!({"hostids": hostids, "limit": 1}),
    )
    .await;
    env["results"][0]["eventid"]
        .as_str()
        .unwrap_or_else(|| panic!("an open problem on {hosts:?} (the lab keeps some)"))
        .to_owned()
}
