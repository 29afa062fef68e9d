//! Zabbix's answers read without building value trees: the body is checked to be JSON once
//! (serde_json into `IgnoredAny`, which allocates nothing), then cut into slices of the
//! original text. Reads keep their records as those slices ([`crate::response::record`]).

use std::borrow::Cow;
use std::ops::Range;

use bytes::Bytes;
use serde::de::IgnoredAny;

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
    #[error("not JSON-RPC: the body has \"{0}\" twice")]
    Duplicate(&'static str),
}

/// The `result` and `error` members of a JSON-RPC answer, as text (`null` counts as absent).
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

/// Checks `body` is JSON and finds its `result` and `error` members.
pub fn members(body: &[u8]) -> Result<Members<'_>, RawError> {
    serde_json::from_slice::<IgnoredAny>(body)?;
    let text = std::str::from_utf8(body).map_err(|_| RawError::NotObject)?;
    let pairs = object(text).ok_or(RawError::NotObject)?;
    let mut found = Members {
        result: None,
        error: None,
    };
    let mut seen = (false, false);
    for (key, value) in pairs {
        let (slot_seen, name) = match unquote(key).as_ref() {
            "result" => (&mut seen.0, "result"),
            "error" => (&mut seen.1, "error"),
            _ => continue,
        };
        if std::mem::replace(slot_seen, true) {
            return Err(RawError::Duplicate(name));
        }
        if value == "null" {
            continue;
        }
        if name == "result" {
            let start = value.as_ptr() as usize - text.as_ptr() as usize;
            found.result = Some(start..start + value.len());
        } else {
            found.error = Some(value);
        }
    }
    Ok(found)
}

/// The elements of a JSON array text, or `None` if it is not an array. The text must be
/// JSON checked already: this only finds boundaries.
pub fn array(text: &str) -> Option<Vec<&str>> {
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
        let end = value_end(bytes, at);
        out.push(text.get(at..end)?);
        at = skip_ws(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_ws(bytes, at + 1),
            Some(b']') => return Some(out),
            _ => return None,
        }
    }
}

/// The members of a JSON object text as (key with its quotes, value), in order, or `None`
/// if it is not an object. The text must be JSON checked already.
pub fn object(text: &str) -> Option<Vec<(&str, &str)>> {
    let bytes = text.as_bytes();
    let mut at = skip_ws(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let mut out = Vec::new();
    at = skip_ws(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return Some(out);
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
            Some(b'}') => return Some(out),
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
    use super::{RawError, array, members, object, unquote};

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
        assert!(matches!(
            members(b"{\"result\":1,\"result\":2}"),
            Err(RawError::Duplicate("result"))
        ));
        assert!(matches!(members(b"[1]"), Err(RawError::NotObject)));
        assert!(matches!(
            members(b"{\"result\":[1,}"),
            Err(RawError::NotJson(_))
        ));
    }
}
