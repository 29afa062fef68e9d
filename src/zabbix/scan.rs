//! One pass over Zabbix's answer that checks it is JSON (RFC 8259, as serde_json reads it)
//! and finds, in the same pass, what the read path needs: the spans of the answer's
//! `result` and `error` members and, when the result is an array, of each element, with an
//! object element's members. Nothing is decoded or copied: spans are byte ranges of the
//! body. Was: serde_json checked the body, then a scan of ours cut the result.

use std::borrow::Cow;
use std::ops::Range;

use crate::{simd, swar};

/// How deep arrays and objects may nest. A Zabbix answer nests five levels at most; a
/// read's records sit two levels deeper in the MCP response (`result`,
/// `structuredContent`), which clients reading with serde_json (rmcp's) refuse past 128
/// levels, failing the call. Ours is a recursion, so it has a limit for all values.
const MAX_DEPTH: usize = 64;

/// Where and why a body is not JSON (or not an answer we read).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{what} at byte {at}")]
pub struct ScanError {
    what: &'static str,
    at: usize,
}

impl ScanError {
    /// Whether the body is refused for a result longer, or with a record wider, than a
    /// read asks for (the rest of it unread).
    pub(crate) fn not_asked(&self) -> bool {
        self.what == MORE_THAN_ASKED || self.what == WIDER_THAN_ASKED
    }
}

/// The spans of an answer object's members that matter; `null` counts as absent (but for
/// `id`, whose `null` is a value to compare).
#[derive(Debug, Default)]
pub struct Spans {
    pub result: Option<Range<usize>>,
    pub error: Option<Range<usize>>,
    /// The `id` member's JSON text, `null` included.
    pub id: Option<Range<usize>>,
    /// The result's elements, when the result is an array.
    pub elements: Option<ElementSpans>,
    /// Whether a member named `result` or `error` is there at all, `null` or not (what
    /// tells a JSON-RPC request from a response).
    pub result_or_error_named: bool,
}

/// The result array's elements, and the members of those that are objects.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ElementSpans {
    pub elements: Vec<ElementSpan>,
    /// Every object element's members, one element after another: one buffer for the
    /// whole array, not one per element.
    pub members: Vec<MemberSpan>,
}

/// One member of an object element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpan {
    /// The key, quotes included.
    pub key: Range<usize>,
    pub value: Range<usize>,
    /// Whether the key has an escape: only then does its name need decoding (Zabbix's
    /// never do, and the scan knows it already).
    pub escaped_key: bool,
}

/// One element of the result array.
#[derive(Debug, PartialEq, Eq)]
pub enum ElementSpan {
    /// An object: which of [`ElementSpans::members`] are its members.
    Object(Range<usize>),
    /// Any other value.
    Other(Range<usize>),
}

/// Which member of the answer a key names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Result,
    Error,
    Id,
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: usize,
}

/// How many members an object element of the result may have. Zabbix's records have the
/// output fields and selects a read asks for, two dozen at most.
const MAX_MEMBERS: usize = 256;

/// What the scan says of a result longer, or with a record wider, than a read asks for.
const MORE_THAN_ASKED: &str = "more elements in the result than asked for";
const WIDER_THAN_ASKED: &str = "an element of the result with more than 256 members";

/// Checks `body` is one JSON object and finds its `result`, `error` and `id` members (a
/// member named twice is an error) and the result's elements, at most `max_elements`.
pub fn answer(body: &[u8], max_elements: usize) -> Result<Spans, ScanError> {
    answer_text(std::str::from_utf8(body).map_err(not_utf8)?, max_elements)
}

/// `body` as text, checked once for all: a reply keeps it ([`crate::zabbix::raw`]).
pub fn text(body: Vec<u8>) -> Result<String, ScanError> {
    String::from_utf8(body).map_err(|e| not_utf8(e.utf8_error()))
}

fn not_utf8(error: std::str::Utf8Error) -> ScanError {
    ScanError {
        what: "not UTF-8",
        at: error.valid_up_to(),
    }
}

/// [`answer`] for a body already known to be UTF-8.
pub fn answer_text(text: &str, max_elements: usize) -> Result<Spans, ScanError> {
    let body = text.as_bytes();
    let mut scanner = Scanner {
        bytes: body,
        at: 0,
        depth: 0,
    };
    scanner.skip_ws();
    if scanner.peek() != Some(b'{') {
        return scanner.fail("expected an object");
    }
    let mut spans = Spans::default();
    let mut seen = [false; 3];
    scanner.object(|s, key, escaped| {
        let Ok(slot) = slot_of(&s.bytes[key.clone()], escaped) else {
            return Err(ScanError {
                what: "a member name that does not decode",
                at: key.start,
            });
        };
        let Some(slot) = slot else {
            return s.value();
        };
        if std::mem::replace(&mut seen[slot as usize], true) {
            return Err(ScanError {
                what: match slot {
                    Slot::Result => "the body has \"result\" twice",
                    Slot::Error => "the body has \"error\" twice",
                    Slot::Id => "the body has \"id\" twice",
                },
                at: key.start,
            });
        }
        let start = s.at;
        if slot == Slot::Id {
            s.value()?;
            spans.id = Some(start..s.at);
            return Ok(());
        }
        let elements = match s.peek() {
            Some(b'[') if slot == Slot::Result => Some(s.elements(max_elements)?),
            _ => {
                s.value()?;
                None
            }
        };
        let span = Some(start..s.at).filter(|span| &s.bytes[span.clone()] != b"null");
        match slot {
            Slot::Result => (spans.result, spans.elements) = (span, elements),
            Slot::Error => spans.error = span,
            Slot::Id => {}
        }
        Ok(())
    })?;
    scanner.skip_ws();
    if scanner.at != body.len() {
        return scanner.fail("trailing characters");
    }
    spans.result_or_error_named = seen[Slot::Result as usize] || seen[Slot::Error as usize];
    Ok(spans)
}

/// The member a key (quotes included, checked already; `escaped` if it has an escape, as
/// the scan found) names, if one we look for; `Err` if its escapes do not decode (the string check refuses the one such case, a lone surrogate,
/// already; a failure here still refuses the body).
fn slot_of(quoted: &[u8], escaped: bool) -> Result<Option<Slot>, ()> {
    let inner = &quoted[1..quoted.len() - 1];
    let name: Cow<'_, [u8]> = if escaped {
        // Escaped keys still name the members they spell.
        let decoded = serde_json::from_slice::<String>(quoted).map_err(|_| ())?;
        Cow::Owned(decoded.into_bytes())
    } else {
        Cow::Borrowed(inner)
    };
    Ok(match &*name {
        b"result" => Some(Slot::Result),
        b"error" => Some(Slot::Error),
        b"id" => Some(Slot::Id),
        _ => None,
    })
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn fail<T>(&self, what: &'static str) -> Result<T, ScanError> {
        Err(ScanError { what, at: self.at })
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// Reads one value starting at `self.at` (whitespace skipped already): a string, most
    /// of an answer's values, where it is read, anything else through [`Self::value`].
    #[inline]
    fn item(&mut self) -> Result<(), ScanError> {
        if self.peek() == Some(b'"') {
            return self.string().map(drop);
        }
        self.value()
    }

    /// Reads one value starting at `self.at` (whitespace skipped already).
    fn value(&mut self) -> Result<(), ScanError> {
        match self.peek() {
            Some(b'"') => self.string().map(drop),
            Some(b'{') => self.object(|s, _, _| s.item()),
            Some(b'[') => self.array(Scanner::item),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => self.fail("expected a value"),
            None => self.fail("unexpected end of the body"),
        }
    }

    /// The result's elements, each object's members found as it is read; more than `max`
    /// elements, or more than [`MAX_MEMBERS`] members in one, is an error. A read asks
    /// Zabbix for `limit + 1` records of the fields it names: an answer with more is not
    /// the one asked for, and its spans (24 bytes an element, 40 a member, for an element
    /// of two bytes and a member of six) would take some 15 times the body.
    fn elements(&mut self, max: usize) -> Result<ElementSpans, ScanError> {
        let mut out = ElementSpans::default();
        let mut sized = false;
        self.array(|s| {
            if out.elements.len() == max {
                return s.fail(MORE_THAN_ASKED);
            }
            let start = s.at;
            if s.peek() != Some(b'{') {
                s.value()?;
                out.elements.push(ElementSpan::Other(start..s.at));
                return Ok(());
            }
            let first = out.members.len();
            s.object(|s, key, escaped_key| {
                if out.members.len() - first == MAX_MEMBERS {
                    s.at = key.start;
                    return s.fail(WIDER_THAN_ASKED);
                }
                let value = s.at;
                s.item()?;
                out.members.push(MemberSpan {
                    key,
                    value: value..s.at,
                    escaped_key,
                });
                Ok(())
            })?;
            if !sized {
                // Zabbix's records are alike: the first one's members per byte, over the
                // rest of the body, size the buffer once instead of doubling it as it fills.
                // Never more than the rest could hold: a member takes five bytes at least.
                sized = true;
                let per_record = out.members.len() - first;
                let rest =
                    ((s.bytes.len() - s.at) / (s.at - start).max(1)).min(max.saturating_sub(1));
                out.members.reserve(per_record.saturating_mul(rest));
            }
            out.elements
                .push(ElementSpan::Object(first..out.members.len()));
            Ok(())
        })?;
        Ok(out)
    }

    /// Reads the object at `self.at`; `member` gets each key's span and whether it has an
    /// escape, with the scanner at the member's value, and reads the value.
    fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, Range<usize>, bool) -> Result<(), ScanError>,
    ) -> Result<(), ScanError> {
        if !self.open(b'}')? {
            return Ok(());
        }
        loop {
            if self.peek() != Some(b'"') {
                return self.fail("expected a member name");
            }
            let key = self.at;
            let escaped = self.string()?;
            let key = key..self.at;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return self.fail("expected ':'");
            }
            self.at += 1;
            self.skip_ws();
            member(self, key, escaped)?;
            if !self.more(b'}', "expected ',' or '}'")? {
                return Ok(());
            }
        }
    }

    /// Reads the array at `self.at`; `element` reads each element.
    fn array(
        &mut self,
        mut element: impl FnMut(&mut Self) -> Result<(), ScanError>,
    ) -> Result<(), ScanError> {
        if !self.open(b']')? {
            return Ok(());
        }
        loop {
            element(self)?;
            if !self.more(b']', "expected ',' or ']'")? {
                return Ok(());
            }
        }
    }

    /// Steps into the array or object at `self.at`: false if it is empty (and left again),
    /// true with the scanner at its first item.
    fn open(&mut self, close: u8) -> Result<bool, ScanError> {
        if self.depth == MAX_DEPTH {
            return self.fail("nested too deep");
        }
        self.depth += 1;
        self.at += 1;
        self.skip_ws();
        Ok(!self.left(close))
    }

    /// After an item: true past a comma (at the next item), false past `close`.
    fn more(&mut self, close: u8, expected: &'static str) -> Result<bool, ScanError> {
        self.skip_ws();
        if self.left(close) {
            return Ok(false);
        }
        if self.peek() != Some(b',') {
            return self.fail(expected);
        }
        self.at += 1;
        self.skip_ws();
        Ok(true)
    }

    /// Steps out of the current array or object if `close` is next.
    fn left(&mut self, close: u8) -> bool {
        if self.peek() != Some(close) {
            return false;
        }
        self.depth -= 1;
        self.at += 1;
        true
    }

    /// Reads the string at `self.at`. Strings are most of an answer, and most are short
    /// and plain: their closing quote is the first quote, backslash or control character,
    /// found here sixteen bytes at a time where the CPU can; small enough to be inlined
    /// where strings are read. The others go the long way ([`Self::string_from`]). True if
    /// the string has an escape.
    #[inline]
    fn string(&mut self) -> Result<bool, ScanError> {
        // The long way goes on from where this search stopped: nothing before it is special.
        let rest = match simd::find_special(self.bytes, self.at + 1) {
            Ok(end) if self.bytes.get(end) == Some(&b'"') => {
                self.at = end + 1;
                return Ok(false);
            }
            Ok(special) => special,
            Err(rest) => rest,
        };
        self.string_from(rest)
    }

    /// Reads the rest of a string from `i`, its escapes checked: sixteen bytes are looked
    /// at at once for a quote, a backslash or a control character where the CPU can,
    /// eight elsewhere and in the last sixteen, as serde_json does. True if it met an escape.
    #[inline(never)]
    fn string_from(&mut self, mut i: usize) -> Result<bool, ScanError> {
        let bytes = self.bytes;
        let mut escaped = false;
        loop {
            i = simd::find_special(bytes, i).unwrap_or_else(|rest| swar::find_special(bytes, rest));
            match bytes.get(i) {
                Some(b'"') => {
                    self.at = i + 1;
                    return Ok(escaped);
                }
                Some(b'\\') => {
                    escaped = true;
                    i = self.escape(i)?;
                }
                Some(0..0x20) => {
                    self.at = i;
                    return self.fail("control character in a string");
                }
                Some(_) => i += 1,
                None => {
                    self.at = i;
                    return self.fail("unterminated string");
                }
            }
        }
    }

    /// Checks the escape at `i` (a backslash) and returns where it ends. A `\u` escape of
    /// a UTF-16 surrogate must be the first of a pair, followed at once by the second:
    /// serde_json reads a string only so (it would skip a lone one, but then refuses the
    /// text where a client reads it), and records keep Zabbix's escapes as they came.
    fn escape(&mut self, i: usize) -> Result<usize, ScanError> {
        match self.bytes.get(i + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 2),
            Some(b'u') => match self.code_unit(i)? {
                0xD800..=0xDBFF => match self.bytes.get(i + 6..i + 8) {
                    Some(b"\\u") if matches!(self.code_unit(i + 6)?, 0xDC00..=0xDFFF) => Ok(i + 12),
                    _ => {
                        self.at = i;
                        self.fail("unpaired surrogate in a \\u escape")
                    }
                },
                0xDC00..=0xDFFF => {
                    self.at = i;
                    self.fail("unpaired surrogate in a \\u escape")
                }
                _ => Ok(i + 6),
            },
            Some(_) => {
                self.at = i;
                self.fail("invalid escape")
            }
            None => {
                self.at = i;
                self.fail("unterminated string")
            }
        }
    }

    /// The UTF-16 code unit of the `\u` escape at `i`: its four hex digits.
    fn code_unit(&mut self, i: usize) -> Result<u16, ScanError> {
        let unit = self.bytes.get(i + 2..i + 6).and_then(|hex| {
            hex.iter().try_fold(0u16, |unit, &digit| {
                let value = char::from(digit).to_digit(16)?;
                Some(unit << 4 | value as u16)
            })
        });
        match unit {
            Some(unit) => Ok(unit),
            None => {
                self.at = i;
                self.fail("invalid \\u escape")
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), ScanError> {
        if self.bytes.get(self.at..self.at + word.len()) != Some(word) {
            return self.fail("expected a value");
        }
        self.at += word.len();
        Ok(())
    }

    /// Reads a number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, and checks
    /// its value where it could be beyond an `f64`: serde_json refuses `1e400` or a
    /// 400-digit integer (it would be infinite), and so does a client reading the record.
    /// Only an exponent or some 309 digits get there; those few numbers are read by
    /// serde_json itself, so the verdict is its own.
    fn number(&mut self) -> Result<(), ScanError> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return self.fail("invalid number"),
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.required_digits()?;
        }
        let mut exponent = false;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            exponent = true;
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.required_digits()?;
        }
        let text = self.bytes.get(start..self.at).unwrap_or_default();
        if (exponent || text.len() > 300) && serde_json::from_slice::<f64>(text).is_err() {
            self.at = start;
            return self.fail("number out of range");
        }
        Ok(())
    }

    fn required_digits(&mut self) -> Result<(), ScanError> {
        if !matches!(self.peek(), Some(b'0'..=b'9')) {
            return self.fail("invalid number");
        }
        self.digits();
        Ok(())
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
    }
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
