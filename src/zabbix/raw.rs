//! Zabbix's answers read without building value trees: one pass ([`scan`]) checks the body
//! is JSON and finds the spans of its `result` and `error` and of the result's elements.
//! Reads keep their records as slices of the body ([`crate::response::record`]).

use std::borrow::Cow;
use std::ops::Range;
use std::slice;

use bytes::Bytes;

use crate::zabbix::scan::{self, ElementSpan, ElementSpans, MemberSpan, ScanError};

/// A successful answer: the body, with its `result` and the result's elements as spans.
#[derive(Debug)]
pub struct RawReply {
    /// Checked to be UTF-8 once, as it arrived (and cut at value boundaries by the scan).
    body: String,
    result: Range<usize>,
    elements: Option<ElementSpans>,
}

/// What a well-formed JSON-RPC answer holds.
#[derive(Debug)]
pub enum Answer {
    Result(RawReply),
    /// The `error` member's JSON text.
    Error(String),
    Neither,
}

/// Why a body is not a well-formed JSON-RPC answer.
#[derive(Debug, thiserror::Error)]
pub enum RawError {
    #[error("not JSON-RPC: {0}")]
    NotJson(#[from] ScanError),
    #[error("not JSON-RPC: the body is not an object")]
    NotObject,
    /// The answer of another request (or of none): a frontend or proxy out of step with
    /// the connection. Never taken for this request's.
    #[error("the answer's id is {found}, not {sent}, the id of the request sent")]
    WrongId { sent: u64, found: String },
    /// A result longer than the request's `limit`, or with a record wider than any of
    /// Zabbix's: not the answer asked for (the scan stops there, before its spans grow
    /// with the body).
    #[error("not the answer asked for (at most {asked} records): {error}")]
    NotAsked { asked: usize, error: ScanError },
}

/// One element of a result array: an object's members, or any other value's text.
pub enum Element<'a> {
    Object(Members<'a>),
    Other(&'a str),
}

/// An object element's members, in order.
pub struct Members<'a> {
    text: &'a str,
    spans: slice::Iter<'a, MemberSpan>,
}

/// One member of an object element: spans of the body, sliced when asked for.
#[derive(Debug, Clone, Copy)]
pub struct Member<'a> {
    text: &'a str,
    span: &'a MemberSpan,
}

impl RawReply {
    /// The `result` member's JSON text.
    pub fn result(&self) -> &str {
        self.text().get(self.result.clone()).unwrap_or("null")
    }

    /// The result's elements, or `None` if it is not an array.
    pub fn elements(&self) -> Option<impl ExactSizeIterator<Item = Element<'_>>> {
        let text = self.text();
        let spans = self.elements.as_ref()?;
        Some(
            spans
                .elements
                .iter()
                .map(move |span| element(text, span, &spans.members)),
        )
    }

    fn text(&self) -> &str {
        &self.body
    }
}

/// An element's span as a slice of the body's text; an object's members are `members[range]`.
fn element<'a>(text: &'a str, span: &'a ElementSpan, members: &'a [MemberSpan]) -> Element<'a> {
    match span {
        ElementSpan::Object(range) => Element::Object(Members {
            text,
            spans: members.get(range.clone()).unwrap_or_default().iter(),
        }),
        ElementSpan::Other(range) => Element::Other(text.get(range.clone()).unwrap_or("null")),
    }
}

impl<'a> Members<'a> {
    /// The whole body the members' spans index.
    pub fn text(&self) -> &'a str {
        self.text
    }
}

impl<'a> Member<'a> {
    /// The key as Zabbix wrote it, quotes included.
    pub fn key(&self) -> &'a str {
        self.text.get(self.span.key.clone()).unwrap_or("\"\"")
    }

    /// The key's place in the body.
    pub fn key_span(&self) -> Range<usize> {
        self.span.key.clone()
    }

    /// The value's JSON text.
    pub fn value(&self) -> &'a str {
        self.text.get(self.span.value.clone()).unwrap_or("null")
    }

    /// The value's place in the body.
    pub fn value_span(&self) -> Range<usize> {
        self.span.value.clone()
    }

    /// The key's name, as bytes (UTF-8): a slice of the body unless the key has an escape.
    /// Bytes, not text, because it is only compared: the body is UTF-8 already, and a
    /// slice of text would check both its ends for a character boundary, for every member.
    pub fn name(&self) -> Cow<'a, [u8]> {
        let key = &self.span.key;
        if self.span.escaped_key {
            Cow::Owned(unquote(self.key()).into_owned().into_bytes())
        } else {
            let inner = key.start + 1..key.end.saturating_sub(1);
            Cow::Borrowed(self.text.as_bytes().get(inner).unwrap_or_default())
        }
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = Member<'a>;

    fn next(&mut self) -> Option<Member<'a>> {
        Some(Member {
            text: self.text,
            span: self.spans.next()?,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.spans.size_hint()
    }
}

impl ExactSizeIterator for Members<'_> {}

/// Reads a JSON-RPC answer: checks it is a JSON object and finds its `result` or `error`
/// and the result's elements, at most `max_elements`, in one pass (a member named twice is
/// an error).
pub fn answer(body: Bytes, sent_id: u64, max_elements: usize) -> Result<Answer, RawError> {
    // Said as it is, rather than as the scan's "expected an object at byte 0".
    let first = body
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    if first != Some(&b'{') {
        return Err(RawError::NotObject);
    }
    // The body's buffer becomes the text's without a copy when nothing else shares it.
    let body = scan::text(Vec::from(body))?;
    let spans = scan::answer_text(&body, max_elements).map_err(|error| {
        if error.not_asked() {
            RawError::NotAsked {
                asked: max_elements,
                error,
            }
        } else {
            RawError::NotJson(error)
        }
    })?;
    let found = spans.id.and_then(|id| body.get(id)).unwrap_or("none");
    if !same_id(found, sent_id) {
        return Err(RawError::WrongId {
            sent: sent_id,
            found: crate::display::escape_text(found),
        });
    }
    Ok(match (spans.result, spans.error) {
        (_, Some(error)) => Answer::Error(body.get(error).unwrap_or("null").to_owned()),
        (Some(result), None) => Answer::Result(RawReply {
            body,
            result,
            elements: spans.elements,
        }),
        (None, None) => Answer::Neither,
    })
}

/// Whether an answer's `id` text (checked JSON already) is the number `sent`. A JSON
/// number has no sign or leading zero, so only the text Zabbix writes back parses to it.
pub fn same_id(text: &str, sent: u64) -> bool {
    text.parse::<u64>().is_ok_and(|id| id == sent)
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

/// The reply whose `result` is `text` (JSON), for tests that start from a result.
#[cfg(test)]
pub fn reply_of(text: &str) -> RawReply {
    match answer(
        Bytes::from(format!("{{\"result\":{text},\"id\":1}}")),
        1,
        usize::MAX,
    ) {
        Ok(Answer::Result(reply)) => reply,
        other => panic!("not a result: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{Answer, Element, RawError, answer, reply_of, unquote};
    use bytes::Bytes;

    fn objects(text: &str) -> Vec<Result<Vec<(String, String)>, String>> {
        let reply = reply_of(text);
        let body = reply.text();
        reply
            .elements()
            .unwrap()
            .map(|element| match element {
                Element::Object(members) => Ok(members
                    .map(|m| {
                        let name = String::from_utf8(m.name().into_owned()).unwrap();
                        assert_eq!(name, unquote(m.key()));
                        assert_eq!(&body[m.key_span()], m.key());
                        assert_eq!(&body[m.value_span()], m.value());
                        (name, m.value().to_owned())
                    })
                    .collect()),
                Element::Other(text) => Err(text.to_owned()),
            })
            .collect()
    }

    #[test]
    fn cuts_at_value_boundaries() {
        let text =
            r#" [ {"a" : "x,]}\"y", "b":[1,{"c":null}] , "d": -1.5e3}, "s", 7 ,true, { } ] "#;
        let found = objects(text);
        assert_eq!(found.len(), 5);
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            found[0],
            Ok(pairs(&[
                ("a", r#""x,]}\"y""#),
                ("b", r#"[1,{"c":null}]"#),
                ("d", "-1.5e3")
            ]))
        );
        assert_eq!(found[1], Err("\"s\"".into()));
        assert_eq!(found[2], Err("7".into()));
        assert_eq!(found[3], Err("true".into()));
        assert_eq!(found[4], Ok(vec![]));
        assert_eq!(objects("[]").len(), 0);
        assert_eq!(reply_of(" [1] ").result(), "[1]");
        assert!(reply_of("{}").elements().is_none());
        assert!(reply_of("\"x\"").elements().is_none());
        assert_eq!(unquote(r#""h\u0065llo""#), "hello");
        assert_eq!(
            objects(r#"[{"h\u0065llo":1,"b":2 , "c" :3}]"#)[0],
            Ok(pairs(&[("hello", "1"), ("b", "2"), ("c", "3")]))
        );
    }

    fn read(body: &[u8]) -> Result<Answer, RawError> {
        answer(Bytes::copy_from_slice(body), 3, usize::MAX)
    }

    #[test]
    fn finds_result_or_error() {
        let found = read(br#"{"jsonrpc":"2.0","result":[{"hostid":"1"}],"id":3}"#);
        let Ok(Answer::Result(reply)) = found else {
            panic!("{found:?}")
        };
        assert_eq!(reply.result(), r#"[{"hostid":"1"}]"#);
        let found = read(
            br#"{"jsonrpc":"2.0","error":{"code":-32602,"message":"m","data":"d"},"result":null,"id":3}"#,
        );
        let Ok(Answer::Error(error)) = found else {
            panic!("{found:?}")
        };
        assert!(error.starts_with("{\"code\""));
        let twice = read(b"{\"result\":1,\"result\":2}").unwrap_err();
        assert!(
            twice.to_string().contains("the body has \"result\" twice"),
            "{twice}"
        );
        // A null result counts as absent but still as said.
        assert!(read(b"{\"error\":null,\"error\":{}}").is_err());
        // Escaped keys are still the members they name; null is absent.
        let found = read(br#"{"res\u0075lt":[1],"error":null,"x":{"result":2},"i\u0064":3}"#);
        let Ok(Answer::Result(reply)) = found else {
            panic!("{found:?}")
        };
        assert_eq!(reply.result(), "[1]");
        assert!(matches!(
            read(b"{\"result\":null,\"id\":3}"),
            Ok(Answer::Neither)
        ));
        assert!(matches!(read(b" [1]"), Err(RawError::NotObject)));
        let bad = read(b"{\"result\":\"\xff\"}").unwrap_err();
        assert_eq!(bad.to_string(), "not JSON-RPC: not UTF-8 at byte 11");
        let more = answer(Bytes::from_static(b"{\"result\":[1,2],\"id\":3}"), 3, 1).unwrap_err();
        assert_eq!(
            more.to_string(),
            "not the answer asked for (at most 1 records): more elements in the result than \
             asked for at byte 13"
        );
        let bad = read(b"{\"result\":[1,}").unwrap_err();
        assert_eq!(bad.to_string(), "not JSON-RPC: expected a value at byte 13");
    }

    /// Only the answer to the request sent is taken: another id, none, `null`, a string
    /// or a number written otherwise is another request's answer (or none's).
    #[test]
    fn the_answer_is_the_requests_own() {
        for (body, found) in [
            (br#"{"result":[1],"id":4}"#.as_slice(), "4"),
            (br#"{"result":[1]}"#, "none"),
            (br#"{"result":[1],"id":null}"#, "null"),
            (br#"{"result":[1],"id":"3"}"#, "\"3\""),
            (br#"{"result":[1],"id":3.0}"#, "3.0"),
            (br#"{"result":[1],"id":3e0}"#, "3e0"),
            (br#"{"error":{"code":1,"message":"m"},"id":33}"#, "33"),
        ] {
            match read(body) {
                Err(RawError::WrongId { sent: 3, found: f }) => assert_eq!(f, found),
                other => panic!("{}: {other:?}", String::from_utf8_lossy(body)),
            }
        }
        let twice = read(br#"{"result":[1],"id":3,"id":3}"#).unwrap_err();
        assert!(twice.to_string().contains("\"id\" twice"), "{twice}");
        assert!(super::same_id("18446744073709551615", u64::MAX));
        assert!(!super::same_id("18446744073709551616", 0));
    }
}
