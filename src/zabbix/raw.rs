//! Zabbix's answers read without building value trees: one serde_json pass checks the body
//! is JSON and finds the spans of its `result` and `error` (as `RawValue`s, which allocate
//! nothing), then one pass of ours cuts the result into slices of the original text. Reads
//! keep their records as those slices ([`crate::response::record`]).

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use bytes::Bytes;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// A successful answer with its `result` as a slice of the body.
#[derive(Debug)]
pub struct RawReply {
    body: Bytes,
    result: Range<usize>,
}

/// Why a body is not a well-formed JSON-RPC answer.
#[derive(Debug, thiserror::Error)]
pub enum RawError {
    #[error("not JSON-RPC: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("not JSON-RPC: the body is not an object")]
    NotObject,
}

/// The `result` and `error` members of a JSON-RPC answer, as text (`null` counts as absent).
#[derive(Debug)]
pub struct Members<'a> {
    pub result: Option<Range<usize>>,
    pub error: Option<&'a str>,
}

impl RawReply {
    pub fn new(body: Bytes, result: Range<usize>) -> RawReply {
        RawReply { body, result }
    }

    /// The `result` member's JSON text.
    pub fn result(&self) -> &str {
        // The range was cut at value boundaries of a body checked to be UTF-8 JSON.
        std::str::from_utf8(&self.body[self.result.clone()]).unwrap_or("null")
    }
}

/// Checks `body` is JSON and finds its `result` and `error` members, in one pass.
pub fn members(body: &[u8]) -> Result<Members<'_>, RawError> {
    // Said as it is, rather than as serde_json's "invalid type" for whatever came instead.
    if body.get(skip_ws(body, 0)) != Some(&b'{') {
        return Err(RawError::NotObject);
    }
    let answer: Answer<'_> = serde_json::from_slice(body)?;
    let result = answer.result.map(|raw| {
        let start = raw.get().as_ptr() as usize - body.as_ptr() as usize;
        start..start + raw.get().len()
    });
    Ok(Members {
        result,
        error: answer.error.map(RawValue::get),
    })
}

/// The members of an answer that matter, borrowed from the body; `null` counts as absent.
struct Answer<'a> {
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
}

/// A member's key, read without allocating.
enum Key {
    Result,
    Error,
    Other,
}

struct AnswerVisitor;

struct KeyVisitor;

impl<'de> Deserialize<'de> for Answer<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(AnswerVisitor)
    }
}

impl<'de> Visitor<'de> for AnswerVisitor {
    type Value = Answer<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC answer object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Answer<'de>, A::Error> {
        let (mut result, mut error) = (None, None);
        while let Some(key) = map.next_key::<Key>()? {
            let (slot, name) = match key {
                Key::Result => (&mut result, "result"),
                Key::Error => (&mut error, "error"),
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            if slot.is_some() {
                return Err(de::Error::custom(format_args!(
                    "the body has \"{name}\" twice"
                )));
            }
            *slot = Some(map.next_value::<Option<&'de RawValue>>()?);
        }
        Ok(Answer {
            result: result.flatten(),
            error: error.flatten(),
        })
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
        Ok(match key {
            "result" => Key::Result,
            "error" => Key::Error,
            _ => Key::Other,
        })
    }
}

/// One element of a JSON array: an object with its members found, or any other value's
/// text.
pub enum Element<'a> {
    Object(Vec<(&'a str, &'a str)>),
    Other(&'a str),
}

/// The elements of a JSON array text, or `None` if it is not an array. The text must be
/// JSON checked already: this only finds boundaries.
pub fn array(text: &str) -> Option<Vec<&str>> {
    items(text, |at| {
        let end = value_end(text.as_bytes(), at);
        Some((text.get(at..end)?, end))
    })
}

/// The elements of a JSON array text with each object's members found in the same pass
/// (what [`array`] then [`object`] on each element would find), or `None` if it is not an
/// array. The text must be JSON checked already.
pub fn elements(text: &str) -> Option<Vec<Element<'_>>> {
    items(text, |at| match text.as_bytes().get(at) {
        Some(b'{') => object_at(text, at).map(|(members, end)| (Element::Object(members), end)),
        _ => {
            let end = value_end(text.as_bytes(), at);
            Some((Element::Other(text.get(at..end)?), end))
        }
    })
}

/// The members of a JSON object text as (key with its quotes, value), in order, or `None`
/// if it is not an object. The text must be JSON checked already.
pub fn object(text: &str) -> Option<Vec<(&str, &str)>> {
    object_at(text, skip_ws(text.as_bytes(), 0)).map(|(members, _)| members)
}

/// An array's items, each read by `item` from its first byte to its end.
fn items<T>(text: &str, mut item: impl FnMut(usize) -> Option<(T, usize)>) -> Option<Vec<T>> {
    let bytes = text.as_bytes();
    let mut at = skip_ws(bytes, 0);
    if bytes.get(at) != Some(&b'[') {
        return None;
    }
    let mut out = Vec::new();
    at = skip_ws(bytes, at + 1);
    if bytes.get(at) == Some(&b']') {
        return Some(out);
    }
    loop {
        let (value, end) = item(at)?;
        out.push(value);
        at = skip_ws(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_ws(bytes, at + 1),
            Some(b']') => return Some(out),
            _ => return None,
        }
    }
}

/// The members of the object starting at `at`, and where it ends (exclusive).
fn object_at(text: &str, mut at: usize) -> Option<(Vec<(&str, &str)>, usize)> {
    let bytes = text.as_bytes();
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let mut out = Vec::new();
    at = skip_ws(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return Some((out, at + 1));
    }
    loop {
        let key_end = value_end(bytes, at);
        let key = text.get(at..key_end)?;
        at = skip_ws(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_ws(bytes, at + 1);
        let end = value_end(bytes, at);
        out.push((key, text.get(at..end)?));
        at = skip_ws(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_ws(bytes, at + 1),
            Some(b'}') => return Some((out, at + 1)),
            _ => return None,
        }
    }
}

/// A JSON string's text (quotes included) decoded; borrowed when it has no escapes.
pub fn unquote(quoted: &str) -> Cow<'_, str> {
    let inner = quoted
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or("");
    if inner.contains('\\') {
        Cow::Owned(serde_json::from_str::<String>(quoted).unwrap_or_default())
    } else {
        Cow::Borrowed(inner)
    }
}

fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// Where the JSON value starting at `at` ends (exclusive).
fn value_end(bytes: &[u8], at: usize) -> usize {
    match bytes.get(at) {
        Some(b'"') => string_end(bytes, at),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = at;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b'"' => {
                        i = string_end(bytes, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            i
        }
        _ => {
            let mut i = at;
            while let Some(b) = bytes.get(i) {
                if matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
                    break;
                }
                i += 1;
            }
            i
        }
    }
}

/// Where the string starting with the quote at `at` ends (after its closing quote).
/// Strings are most of Zabbix's answer: `memchr2` jumps to the next quote or backslash
/// many bytes at a time instead of looking at each.
fn string_end(bytes: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    while let Some(found) = bytes
        .get(i..)
        .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
    {
        let j = i + found;
        if bytes.get(j) == Some(&b'"') {
            return j + 1;
        }
        // A backslash: the next byte is escaped, whatever it is.
        i = j + 2;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::{Element, RawError, array, members, object, unquote};

    #[test]
    fn cuts_at_value_boundaries() {
        let text = r#" [ {"a" : "x,]}\"y", "b":[1,{"c":null}] , "d": -1.5e3}, "s", 7 ,true ] "#;
        let elements = array(text).unwrap();
        assert_eq!(elements.len(), 4);
        assert_eq!(elements[1], "\"s\"");
        assert_eq!(elements[2], "7");
        assert_eq!(elements[3], "true");
        let members = object(elements[0]).unwrap();
        let keys: Vec<_> = members.iter().map(|(k, _)| unquote(k)).collect();
        assert_eq!(keys, ["a", "b", "d"]);
        assert_eq!(members[0].1, r#""x,]}\"y""#);
        assert_eq!(members[1].1, r#"[1,{"c":null}]"#);
        assert_eq!(members[2].1, "-1.5e3");
        assert_eq!(array("[]").unwrap().len(), 0);
        // Elements find each object's members in the same pass.
        let found = super::elements(text).unwrap();
        assert_eq!(found.len(), 4);
        let Element::Object(first) = &found[0] else {
            panic!("an object first")
        };
        assert_eq!(first, &members[..]);
        assert!(matches!(found[3], Element::Other("true")));
        assert!(
            matches!(super::elements(" [ { } , {\"a\":1} ] ").unwrap()[..], [
            Element::Object(ref none),
            Element::Object(ref one)
        ] if none.is_empty() && one.len() == 1)
        );
        assert!(super::elements("{}").is_none());
        assert!(array("{}").is_none());
        assert_eq!(unquote(r#""h\u0065llo""#), "hello");
    }

    #[test]
    fn finds_result_or_error() {
        let body = br#"{"jsonrpc":"2.0","result":[{"hostid":"1"}],"id":3}"#;
        let found = members(body).unwrap();
        assert_eq!(&body[found.result.unwrap()], br#"[{"hostid":"1"}]"#);
        let body =
            br#"{"jsonrpc":"2.0","error":{"code":-32602,"message":"m","data":"d"},"result":null}"#;
        let found = members(body).unwrap();
        assert!(found.result.is_none());
        assert!(found.error.unwrap().starts_with("{\"code\""));
        let twice = members(b"{\"result\":1,\"result\":2}").unwrap_err();
        assert!(
            twice.to_string().contains("the body has \"result\" twice"),
            "{twice}"
        );
        // Escaped keys are still the members they name; null is absent.
        let body = br#"{"res\u0075lt":[1],"error":null,"id":{"result":2}}"#;
        let found = members(body).unwrap();
        assert_eq!(&body[found.result.unwrap()], b"[1]");
        assert!(found.error.is_none());
        assert!(matches!(members(b"[1]"), Err(RawError::NotObject)));
        assert!(matches!(
            members(b"{\"result\":[1,}"),
            Err(RawError::NotJson(_))
        ));
    }
}
