//! The scan against serde_json: the same bodies accepted and refused, the same spans found.

use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

use super::{ElementSpan, MAX_DEPTH, MAX_MEMBERS, answer};
use crate::mutate::Mutations;

/// A realistic answer: escapes of every kind, numbers in every form, nesting, whitespace.
const BODY: &str = r#"{"jsonrpc":"2.0","result":[{"hostid":"10084","host":"web-01","name":"W\u00e9b \"01\"\\\/\b\f\n\r\t \ud83d\ude00","status":"0",
 "groups":[{"groupid":"2","name":"Linux servers"}],"tags":[],"n":-1.5e3,"m":0,"k":12.25E+2,"z":-0.0e-1,"big":1e308},
 [1, 2, {"a": [true, false, null]}], "plain", 7, {}, {"é":"ü€😀"}],
 "id": 3}"#;

/// The top-level member names, decoded, with each value read as serde_json reads a value
/// (a client reading the records does): strings with their surrogates paired, numbers
/// within an `f64`. Skipping a value (`IgnoredAny`) would take both.
struct Keys(Vec<String>);

struct KeysVisitor;

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(KeysVisitor)
    }
}

impl<'de> Visitor<'de> for KeysVisitor {
    type Value = Keys;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
        let mut keys = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<Value>()?;
            keys.push(key);
        }
        Ok(Keys(keys))
    }
}

/// Whether serde_json reads `body` as an answer: UTF-8, one object, `result` and `error`
/// at most once each.
fn serde_accepts(body: &[u8]) -> bool {
    let Ok(Keys(keys)) = serde_json::from_slice::<Keys>(body) else {
        return false;
    };
    let once = |name: &str| keys.iter().filter(|k| *k == name).count() <= 1;
    std::str::from_utf8(body).is_ok() && once("result") && once("error")
}

/// Checks the spans of an accepted body against serde_json's reading of it.
fn check_spans(body: &[u8]) {
    let spans = answer(body, usize::MAX).unwrap();
    let text = std::str::from_utf8(body).unwrap();
    // A string with a lone surrogate escape is JSON but not a serde_json `Value`.
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let parse = |range: &std::ops::Range<usize>| {
        serde_json::from_str::<Value>(&text[range.clone()]).unwrap()
    };
    let expected = |name: &str| Some(&value[name]).filter(|v| !v.is_null());
    assert_eq!(
        spans.result.as_ref().map(parse).as_ref(),
        expected("result"),
        "{text}"
    );
    assert_eq!(
        spans.error.as_ref().map(parse).as_ref(),
        expected("error"),
        "{text}"
    );
    let Some(elements) = spans.elements else {
        assert!(!value["result"].is_array(), "{text}");
        return;
    };
    let list = value["result"].as_array().unwrap();
    assert_eq!(elements.elements.len(), list.len(), "{text}");
    for (element, expected) in elements.elements.iter().zip(list) {
        match element {
            ElementSpan::Other(range) => assert_eq!(&parse(range), expected, "{text}"),
            ElementSpan::Object(members) => {
                let mut object = serde_json::Map::new();
                for member in &elements.members[members.clone()] {
                    let quoted = &text[member.key.clone()];
                    assert_eq!(member.escaped_key, quoted.contains('\\'), "{text}");
                    let key: String = serde_json::from_str(quoted).unwrap();
                    object.insert(key, parse(&member.value));
                }
                assert_eq!(&Value::Object(object), expected, "{text}");
            }
        }
    }
}

#[test]
fn finds_what_serde_json_finds() {
    for body in [
        BODY,
        r#"{"result":[]}"#,
        r#" {"error":{"code":-32602,"message":"m","data":"d"},"result":null,"id":1} "#,
        r#"{"result":{"a":[1]}}"#,
        r#"{"result":[{"h\u006fst":"a","x\"y":1,"plain":2,"\\":3}]}"#,
        r#"{"result":"x"}"#,
        r#"{"res\u0075lt":[{"a":1}],"id":{"result":2}}"#,
        r#"{}"#,
        r#"{"result":["\ud83d\ude00","\uD834\uDD1E x"]}"#,
        r#"{"result":[1e-400,1.7976931348623157e308,-0.0E+0]}"#,
        &format!("{{\"result\":[1{}]}}", "0".repeat(308)),
    ] {
        assert!(serde_accepts(body.as_bytes()), "{body}");
        check_spans(body.as_bytes());
    }
}

#[test]
fn refuses_what_serde_json_refuses() {
    let long = format!("{{\"result\":[2{}]}}", "0".repeat(308));
    let deep = format!(
        "{{\"result\":{}{}}}",
        "[".repeat(MAX_DEPTH),
        "]".repeat(MAX_DEPTH)
    );
    // The first bracket past the limit: after `{"result":` and the ones within it.
    let deep_at = format!("nested too deep at byte {}", 10 + MAX_DEPTH - 1);
    for (body, error) in [
        ("", "expected an object at byte 0"),
        ("[1]", "expected an object at byte 0"),
        ("{\"result\":\"ab", "unterminated string at byte 13"),
        (
            "{\"result\":\"a\u{1}b\"}",
            "control character in a string at byte 12",
        ),
        (r#"{"result":"\x"}"#, "invalid escape at byte 11"),
        (r#"{"result":"\u12g4"}"#, "invalid \\u escape at byte 11"),
        (r#"{"result":-}"#, "invalid number at byte 11"),
        (r#"{"result":1.}"#, "invalid number at byte 12"),
        (r#"{"result":1e}"#, "invalid number at byte 12"),
        (r#"{"result":01}"#, "expected ',' or '}' at byte 11"),
        (r#"{"result":.5}"#, "expected a value at byte 10"),
        (r#"{"result":tru}"#, "expected a value at byte 10"),
        (r#"{"result":[1,]}"#, "expected a value at byte 13"),
        (r#"{"result":1,}"#, "expected a member name at byte 12"),
        (r#"{result:1}"#, "expected a member name at byte 1"),
        (r#"{"result" 1}"#, "expected ':' at byte 10"),
        (r#"{"result":1} x"#, "trailing characters at byte 13"),
        (
            r#"{"result":1,"result":2}"#,
            "the body has \"result\" twice at byte 12",
        ),
        (
            r#"{"error":null,"error":{}}"#,
            "the body has \"error\" twice at byte 14",
        ),
        (
            r#"{"\ud800":1}"#,
            "unpaired surrogate in a \\u escape at byte 2",
        ),
        (&deep, &deep_at),
        (
            r#"{"result":"\udc00"}"#,
            "unpaired surrogate in a \\u escape at byte 11",
        ),
        (
            r#"{"result":"a\ud800"}"#,
            "unpaired surrogate in a \\u escape at byte 12",
        ),
        (
            r#"{"result":"\ud800\u0041"}"#,
            "unpaired surrogate in a \\u escape at byte 11",
        ),
        (
            r#"{"result":"\ud800\n"}"#,
            "unpaired surrogate in a \\u escape at byte 11",
        ),
        (
            r#"{"result":"\ud800\ud800\udc00"}"#,
            "unpaired surrogate in a \\u escape at byte 11",
        ),
        (
            r#"{"result":"\ud800\u12g4"}"#,
            "invalid \\u escape at byte 17",
        ),
        (r#"{"result":1e400}"#, "number out of range at byte 10"),
        (
            r#"{"result":[-2.5E+308]}"#,
            "number out of range at byte 11",
        ),
        (&long, "number out of range at byte 11"),
    ] {
        assert!(!serde_accepts(body.as_bytes()) || body == deep, "{body}");
        assert_eq!(
            answer(body.as_bytes(), usize::MAX).unwrap_err().to_string(),
            error,
            "{body}"
        );
    }
    assert_eq!(
        answer(b"{\"result\":\"\xff\"}", usize::MAX)
            .unwrap_err()
            .to_string(),
        "not UTF-8 at byte 11"
    );
}

/// Every mutation (`crate::mutate`) is accepted by both or refused by both, and what is
/// accepted is cut alike.
#[test]
fn agrees_with_serde_json_on_mutations() {
    let original = BODY.as_bytes();
    let mut mutations = Mutations::new();
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..20_000 {
        let body = mutations.of(original);
        let ours = answer(&body, usize::MAX);
        assert_eq!(
            ours.is_ok(),
            serde_accepts(&body),
            "{:?}: {ours:?}",
            String::from_utf8_lossy(&body)
        );
        if ours.is_ok() {
            check_spans(&body);
            accepted += 1;
        } else {
            refused += 1;
        }
    }
    // Both kinds were exercised, not only one.
    assert!(
        accepted > 1_000 && refused > 1_000,
        "{accepted} / {refused}"
    );
}

/// A result with more elements than asked for is refused where the one too many starts, a
/// record wider than `MAX_MEMBERS` where its member too many does, and the members' buffer
/// is never sized for more records than asked for.
#[test]
fn refuses_more_elements_than_asked_for() {
    let body = br#"{"result":[{"a":0},2,{"b":[1,2,3]}],"id":1}"#;
    assert_eq!(answer(body, 3).unwrap().elements.unwrap().elements.len(), 3);
    let error = answer(body, 2).unwrap_err();
    assert!(error.not_asked());
    assert_eq!(
        error.to_string(),
        "more elements in the result than asked for at byte 21"
    );
    assert!(answer(br#"{"result":[]}"#, 0).is_ok());
    assert!(answer(br#"{"result":{"a":[1,2]}}"#, 0).is_ok());
    assert!(!answer(b"{\"result\":[1,]}", 5).unwrap_err().not_asked());
    let members = |n: usize| (0..n).map(|n| format!("\"k{n}\":{n}")).collect::<Vec<_>>();
    // Wider objects elsewhere in the answer are not records.
    let wide = |n| {
        format!(
            "{{\"result\":[{{{}}}],\"x\":{{{}}}}}",
            members(n).join(","),
            members(999).join(",")
        )
    };
    assert!(answer(wide(MAX_MEMBERS).as_bytes(), 1).is_ok());
    let body = wide(MAX_MEMBERS + 1);
    let error = answer(body.as_bytes(), 1).unwrap_err();
    assert!(error.not_asked());
    let at = body.find(&format!("\"k{MAX_MEMBERS}\"")).unwrap();
    assert_eq!(
        error.to_string(),
        format!("an element of the result with more than 256 members at byte {at}")
    );
    // A first record of one member and a megabyte after it: sized for two records, not for
    // the 150,000 the rest could hold were they all like the first.
    let big = format!(r#"{{"result":[{{"a":0}},"{}"]}}"#, "x".repeat(1 << 20));
    let spans = answer(big.as_bytes(), 2).unwrap().elements.unwrap();
    assert!(
        spans.members.capacity() < 100,
        "{}",
        spans.members.capacity()
    );
}
