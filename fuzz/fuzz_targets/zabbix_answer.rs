//! Zabbix's answer as the adversary: arbitrary bytes as the body of Zabbix's answer to the
//! `host.get` of a `tools/call host_get {"limit":5}`, through `server::Router` (the direct
//! stateless path, the one-pass scan of the answer, the records writer, the splice of the
//! document into the response). A stub Zabbix answers the identity calls as a super admin
//! and `host.get` with the input, verbatim.
//!
//! Every input must get an HTTP answer, and a read result only when the answer is one:
//! - a successful read means serde_json reads the body as an object whose `result` is an
//!   array (the scan never takes what serde_json refuses);
//! - its text block is the JSON text of its structured content;
//! - it holds the answer's first five elements (`truncated` when there were more), each
//!   requested field as serde_json reads it from the answer (values keep Zabbix's text).
#![no_main]

mod common {
    pub mod world;
}

use std::net::IpAddr;
use std::sync::Mutex;

use bytes::Bytes;
use http_body_util::BodyExt;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

use common::world::{mcp_post, world};

const LIMIT: usize = 5;
const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"host_get","arguments":{"limit":5}}}"#;
/// Fields host_get asks for that keep their name in a record on 7.0.
const FIELDS: [&str; 7] = [
    "hostid",
    "host",
    "name",
    "status",
    "description",
    "maintenance_status",
    "flags",
];

/// The body the stub sends for the next `host.get`.
static ANSWER: Mutex<Bytes> = Mutex::new(Bytes::new());

/// The stub's `host.get` answer: [`ANSWER`], verbatim.
fn host_get(method: &str) -> Option<Bytes> {
    (method == "host.get").then(|| ANSWER.lock().expect("answer").clone())
}

/// What the sidecar answered: a read's structured content, or anything else.
fn read_result(body: &[u8]) -> Option<Value> {
    let message: Value = serde_json::from_slice(body).expect("the sidecar's answer is JSON");
    let result = message.get("result")?;
    if result["isError"] == json!(true) {
        return None;
    }
    let text = result["content"][0]["text"]
        .as_str()
        .expect("a read result has a text block");
    let structured = result
        .get("structuredContent")
        .expect("a read result has structured content");
    let from_text: Value = serde_json::from_str(text).expect("the text block is JSON");
    assert_eq!(
        &from_text, structured,
        "text block and structured content differ"
    );
    Some(structured.clone())
}

fuzz_target!(|data: &[u8]| {
    let world = world(host_get);
    *ANSWER.lock().expect("answer") = Bytes::copy_from_slice(data);
    let request = mcp_post(Bytes::from_static(CALL.as_bytes()));
    let peer: IpAddr = [127, 0, 0, 1].into();
    let body = world.runtime.block_on(async {
        let response = world.router.handle(request, peer).await;
        assert!(response.status().as_u16() < 600);
        response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default()
    });
    let Some(document) = read_result(&body) else {
        return;
    };
    let answer: Value =
        serde_json::from_slice(data).expect("a read from a body serde_json refuses");
    let elements = answer["result"]
        .as_array()
        .expect("a read from an answer whose result is no array");
    let results = document["results"].as_array().expect("results");
    assert_eq!(results.len(), elements.len().min(LIMIT), "records kept");
    assert_eq!(document["count"], json!(results.len()), "count");
    assert_eq!(
        document["truncated"],
        json!(elements.len() > LIMIT),
        "truncated"
    );
    for (record, element) in results.iter().zip(elements) {
        let Some(element) = element.as_object() else {
            continue;
        };
        for field in FIELDS {
            if let (Some(kept), Some(sent)) = (record.get(field), element.get(field)) {
                assert_eq!(kept, sent, "field {field} changed");
            }
        }
    }
});
