use rmcp::model::{NumberOrString, RequestId};

use super::IdScan;

fn id_of(body: &str) -> Option<RequestId> {
    let mut scan = IdScan::default();
    scan.feed(body.as_bytes());
    scan.request_id()
}

#[test]
fn the_top_level_id_is_found_wherever_it_stands() {
    // The official Python SDK writes the id last, after params; the TypeScript SDK first.
    let python = r#"{"method": "tools/call", "params": {"name": "host_get", "arguments": {"id": 9, "search": "x}\"{,"}}, "jsonrpc": "2.0", "id": 7}"#;
    assert_eq!(id_of(python), Some(NumberOrString::Number(7)));
    let typescript = r#"{"jsonrpc":"2.0","id":"req-1","method":"tools/call","params":{"arguments":{"id":"no"}}}"#;
    assert_eq!(
        id_of(typescript),
        Some(NumberOrString::String("req-1".into()))
    );
    let spaced = " { \"id\" :\n 12 , \"method\" : \"ping\" } ";
    assert_eq!(id_of(spaced), Some(NumberOrString::Number(12)));
}

#[test]
fn the_id_is_found_in_pieces_cut_at_any_byte() {
    let body = r#"{"method":"tools/call","params":{"a":["\"id\":1",{"id":2}]},"jsonrpc":"2.0","id":"a\"b"}"#;
    let bytes = body.as_bytes();
    for cut in 0..bytes.len() {
        let mut scan = IdScan::default();
        scan.feed(&bytes[..cut]);
        scan.feed(&bytes[cut..]);
        assert_eq!(
            scan.request_id(),
            Some(NumberOrString::String("a\"b".into())),
            "cut at {cut}"
        );
    }
}

#[test]
fn no_id_without_a_whole_request_object() {
    // A notification, an answer, a batch, a cut body, an id given twice, a nested id only,
    // an escaped name, an id that is no id, one too long.
    for body in [
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping""#,
        r#"{"id":1,"method":"ping","id":2}"#,
        r#"{"method":"ping","params":{"id":1}}"#,
        r#"{"method":"ping","i\u0064":1}"#,
        r#"{"method":"ping","id":{"a":1}}"#,
        "1 {\"method\":\"ping\",\"id\":1}",
    ] {
        assert_eq!(id_of(body), None, "{body}");
    }
    let long = format!(r#"{{"method":"ping","id":"{}"}}"#, "x".repeat(300));
    assert_eq!(id_of(&long), None);
}
