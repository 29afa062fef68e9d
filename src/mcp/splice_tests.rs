use serde_json::{Value, json};

use super::{Filled, KEPT_ROOM, ROOM, Splice, Spliced, push_json_string, splice};

fn filled(document: &str) -> Filled {
    Filled {
        nonce: "0123abcd".into(),
        document: document.into(),
    }
}

/// rmcp's body for a result whose text is `text` and structured content `structured`.
fn body(text: &str, structured: Option<Value>) -> Vec<u8> {
    let mut result = json!({"content": [{"type": "text", "text": text}], "isError": false});
    if let Some(structured) = structured {
        result["structuredContent"] = structured;
    }
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "result": result})).unwrap()
}

fn done(spliced: Spliced) -> Value {
    match spliced {
        Spliced::Done(bytes) => serde_json::from_slice(&bytes).unwrap(),
        Spliced::Absent => panic!("absent"),
        Spliced::Failed => panic!("failed"),
    }
}

/// What `push_json_string` appends after `prefix`, next to what serde_json writes.
fn escaped(text: &str) -> (String, String) {
    let mut out = b"prefix".to_vec();
    assert!(push_json_string(&mut out, text));
    let expected = format!("prefix{}", serde_json::to_string(text).unwrap());
    (String::from_utf8(out).unwrap(), expected)
}

#[test]
fn escapes_as_serde_json_does() {
    let mut text: String = (0u8..0x80).map(char::from).collect();
    text.push_str("é ü \u{2028} 😀 \\\" end");
    let (out, expected) = escaped(&text);
    assert_eq!(out, expected);
    let document = r#"{"results":[{"hostid":"10084","name":"a \"b\" \\ c"}],"count":1}"#;
    let (out, expected) = escaped(document);
    assert_eq!(out, expected);
}

/// Quotes, backslashes, controls and multi-byte characters at every place in a word, in
/// texts of every length around a word's (a fixed pseudo-random sequence).
#[test]
fn escapes_any_text_as_serde_json_does() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for n in 0..5000 {
        let mut text = String::new();
        for _ in 0..n % 41 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let low = (seed >> 8) as u8;
            text.push(match seed % 8 {
                0 => '"',
                1 => '\\',
                2 => char::from(low % 0x20),
                3 => 'é',
                4 => '\u{7f}',
                5 => '😀',
                _ => char::from(0x20 + low % 0x5f),
            });
        }
        let (out, expected) = escaped(&text);
        assert_eq!(out, expected, "{text:?}");
    }
}

/// Long texts, controls rare, quotes and backslashes dense or sparse, so that sixteen-byte
/// blocks run, at every alignment, with any tail after them, and a control in a block
/// falls back to serde_json.
#[test]
fn escapes_long_text_as_serde_json_does() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for n in 0..3000 {
        let mut text = String::new();
        let special_odds = 2 + n % 13;
        for _ in 0..n % 173 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let low = (seed >> 8) as u8;
            text.push(match seed % (special_odds * 16) {
                0 if n % 5 == 0 => char::from(low % 0x20),
                1 => 'é',
                2 => '😀',
                k if k % special_odds == 0 => '"',
                k if k % special_odds == 1 => '\\',
                _ => char::from(0x20 + low % 0x60),
            });
        }
        let (out, expected) = escaped(&text);
        assert_eq!(out, expected, "{text:?}");
    }
}

/// The thread's room holds the last document's escaped bytes: a shorter text escaped after
/// a longer one (each of them a quote, backslash, control or plain byte where the other
/// has another), in one thread, is still exactly what serde_json writes.
#[test]
fn a_kept_room_escapes_a_shorter_text_alike() {
    let long = "\"\\é".repeat(4000);
    let (out, expected) = escaped(&long);
    assert_eq!(out, expected);
    for text in [
        "",
        "a",
        "{\"results\":[{\"a\":\"b\"}]}",
        "x".repeat(100).as_str(),
        "\n",
    ] {
        let (out, expected) = escaped(text);
        assert_eq!(out, expected, "{text:?}");
    }
}

/// The room stays with its thread up to the default MaxResponseSize's document escaped;
/// a larger one is given back.
#[test]
fn the_room_is_kept_up_to_its_bound() {
    let room = || ROOM.with_borrow(Vec::len);
    let text = "\"".repeat(60_000);
    escaped(&text);
    assert!(room() >= 2 * 60_000, "{}", room());
    let text = "\"".repeat(KEPT_ROOM);
    escaped(&text);
    assert_eq!(ROOM.with_borrow(Vec::capacity), 0);
    escaped("ab");
    assert!(room() <= 64, "{}", room());
}

#[test]
fn both_placeholders_are_replaced_by_the_document() {
    let document = r#"{"results":[{"name":"a\"b\\c\nd"}],"count":1}"#;
    let filled = filled(document);
    let v = done(splice(
        &body(
            "zabbix-mcp-guard-text-0123abcd",
            Some(json!({"zabbix-mcp-guard-structured": "0123abcd"})),
        ),
        &filled,
    ));
    assert_eq!(v["result"]["content"][0]["text"], document);
    assert_eq!(
        v["result"]["structuredContent"],
        serde_json::from_str::<Value>(document).unwrap()
    );
    assert_eq!(v["result"]["isError"], false);
}

#[test]
fn without_structured_content_only_the_text_is_written() {
    let v = done(splice(
        &body("zabbix-mcp-guard-text-0123abcd", None),
        &filled(r#"{"count":0}"#),
    ));
    assert_eq!(v["result"]["content"][0]["text"], r#"{"count":0}"#);
    assert!(v["result"].get("structuredContent").is_none());
}

#[test]
fn a_body_without_placeholders_passes_and_a_misplaced_one_fails() {
    let filled = filled("{}");
    assert!(matches!(
        splice(&body("an error", None), &filled),
        Spliced::Absent
    ));
    // The nonce in a text that is not the placeholder: in a JSON string, quotes escaped.
    assert!(matches!(
        splice(
            &body(r#"{"text":"zabbix-mcp-guard-text-0123abcd"}"#, None),
            &filled
        ),
        Spliced::Failed
    ));
    // The structured placeholder without the text one.
    assert!(matches!(
        splice(
            &body(
                "x",
                Some(json!({"zabbix-mcp-guard-structured": "0123abcd"}))
            ),
            &filled
        ),
        Spliced::Failed
    ));
    // A second text placeholder beside the real one.
    let v = body(
        "zabbix-mcp-guard-text-0123abcd",
        Some(json!({"x": "0123abcd"})),
    );
    assert!(matches!(splice(&v, &filled), Spliced::Failed));
    // The nonce in rmcp's own parts (a request id the client chose).
    let mut v: Value =
        serde_json::from_slice(&body("zabbix-mcp-guard-text-0123abcd", None)).unwrap();
    v["id"] = json!("0123abcd");
    assert!(matches!(
        splice(&serde_json::to_vec(&v).unwrap(), &filled),
        Spliced::Failed
    ));
}

/// The placeholders `fill` hands out are the ones `splice` looks for, once rmcp wrote them.
#[test]
fn placeholders_from_fill_are_found() {
    let slot = Splice::default();
    let placeholders = slot.fill(r#"{"count":0}"#.into()).ok().unwrap();
    let filled = slot.slot.lock().unwrap().take().unwrap();
    let v = done(splice(
        &body(&placeholders.text, Some(placeholders.structured)),
        &filled,
    ));
    assert_eq!(v["result"]["content"][0]["text"], r#"{"count":0}"#);
    assert_eq!(v["result"]["structuredContent"], json!({"count": 0}));
}
