//! The quick way against rmcp's parse: whatever it takes, rmcp reads alike.

use rmcp::model::{ClientRequest, RequestId};
use serde_json::Value;

use super::{full, quick};
use crate::mutate::Mutations;

/// Requests the quick way takes: ids of both kinds, `_meta`, members rmcp ignores.
const TAKEN: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"host_get","arguments":{"limit":100,"search":"mcp-"}}}"#,
    r#"{"jsonrpc":"2.0","id":"a-7","method":"tools/call","params":{"_meta":{"progressToken":"p1"},"name":"problem_get","arguments":{"severities":[4,5],"recent":true}}}"#,
    r#" { "params" : { "arguments" : null , "name" : "x\u0041\"" , "extra" : [ 1 , 2.5e3 ] } , "other" : true , "method" : "tools/call" , "id" : -3 , "jsonrpc" : "2.0" } "#,
    r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    r#"{"jsonrpc":"2.0","id":"l","method":"tools/list","params":{"cursor":"c","_meta":{"k":"v"}}}"#,
];

/// Messages it leaves to rmcp.
const LEFT: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x"},"result":null}"#,
    r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x"},"\u0065rror":{}}"#,
    r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#,
    r#"{"jsonrpc":"2.0","id":7,"method":"resources/list"}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":8,"result":{}}"#,
    r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#,
    r#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#,
];

fn same(quick: &(RequestId, ClientRequest), full: &(RequestId, ClientRequest)) -> bool {
    let text = |request: &ClientRequest| serde_json::to_value(request).unwrap_or(Value::Null);
    quick.0 == full.0 && text(&quick.1) == text(&full.1)
}

#[test]
fn takes_tools_requests_as_rmcp_reads_them() {
    for body in TAKEN {
        let quick = quick(body.as_bytes()).unwrap_or_else(|| panic!("not taken: {body}"));
        let full = full(body.as_bytes()).expect("rmcp reads it");
        assert!(same(&quick, &full), "{body}");
    }
    for body in LEFT {
        assert!(quick(body.as_bytes()).is_none(), "taken: {body}");
    }
}

/// Every mutated request the quick way takes, rmcp takes too and reads alike.
#[test]
fn agrees_with_rmcp_on_mutations() {
    let mut mutations = Mutations::new();
    let (mut taken, mut left) = (0, 0);
    for round in 0..20_000 {
        let body = mutations.of(TAKEN[round % TAKEN.len()].as_bytes());
        match quick(&body) {
            Some(quick) => {
                let full = full(&body);
                assert!(
                    full.as_ref().is_some_and(|full| same(&quick, full)),
                    "{:?}: quick {quick:?}, rmcp {full:?}",
                    String::from_utf8_lossy(&body)
                );
                taken += 1;
            }
            None => left += 1,
        }
    }
    // Both kinds were exercised, not only one.
    assert!(taken > 1_000 && left > 1_000, "{taken} / {left}");
}
