//! A read result's document, written into rmcp's JSON response by us rather than by rmcp:
//! rmcp would serialize it twice, once as the text block (escaping it byte by byte through
//! serde's writer, a fifth of a call's instructions) and once as the structured content
//! (from a `serde_json::Value` tree that would have to be built first).
//!
//! Stateless HTTP only: the route puts a [`Splice`] into the request; the read path puts
//! placeholders (random per response) where the text and the structured content go and
//! leaves the document in the slot; the route replaces the placeholders' JSON text in the
//! finished response body with the escaped document and the document. Where no slot exists
//! (stateful sessions, stdio) rmcp serializes both forms, as before.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::StatusCode;
use http::header::CONTENT_LENGTH;
use http_body_util::{BodyExt, Full};
use memchr::memmem;
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use crate::server::routes::{Body, json_response};
use crate::{simd, swar};

/// The text placeholder's start and the structured placeholder's key, each written once:
/// the constants below are made of them.
macro_rules! text_prefix {
    () => {
        "zabbix-mcp-guard-text-"
    };
}
macro_rules! structured_key {
    () => {
        "zabbix-mcp-guard-structured"
    };
}

/// What surrounds each placeholder's nonce in rmcp's JSON: `"text":"…` and
/// `"structuredContent":{"…` cannot occur inside a JSON string (its quotes would be
/// escaped), only as rmcp's fields.
const TEXT_BEFORE: &[u8] = concat!("\"text\":\"", text_prefix!()).as_bytes();
const TEXT_AFTER: &[u8] = b"\"";
const STRUCTURED_BEFORE: &[u8] =
    concat!("\"structuredContent\":{\"", structured_key!(), "\":\"").as_bytes();
const STRUCTURED_AFTER: &[u8] = b"\"}";
/// The fields the document is written under.
const TEXT_FIELD: &[u8] = b"\"text\":";
const STRUCTURED_FIELD: &[u8] = b"\"structuredContent\":";

const TEXT_PREFIX: &str = text_prefix!();
const STRUCTURED_KEY: &str = structured_key!();

/// One response's slot for its document.
#[derive(Clone, Default)]
pub struct Splice {
    slot: Arc<Mutex<Option<Filled>>>,
}

/// What the read path puts into rmcp's result in place of the document.
pub struct Placeholders {
    /// The text block's text.
    pub text: String,
    /// The structured content: an object, so rmcp keeps it for every protocol version (it
    /// drops non-object structured content for older ones).
    pub structured: Value,
}

struct Filled {
    /// Random per response; both placeholders carry it.
    nonce: String,
    /// The document: a complete JSON object.
    document: String,
}

/// How a finished body relates to its slot.
enum Spliced {
    Done(Bytes),
    /// No placeholder anywhere: the call did not answer with the read result (an error).
    Absent,
    /// A placeholder where neither of rmcp's fields is, or a document that does not
    /// escape: never sent.
    Failed,
}

impl Splice {
    /// The request's slot, if its route splices.
    pub fn of(context: &RequestContext<RoleServer>) -> Option<Splice> {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Splice>())
            .cloned()
    }

    /// Keeps `document` (a complete JSON object) for the response; returns what to put
    /// where it goes, or gives it back if the slot is unusable (the caller then puts the
    /// document itself into the result).
    pub fn fill(&self, document: String) -> Result<Placeholders, String> {
        let Ok(mut slot) = self.slot.lock() else {
            return Err(document);
        };
        let mut digits = uuid::Uuid::encode_buffer();
        let nonce = uuid::Uuid::new_v4()
            .simple()
            .encode_lower(&mut digits)
            .to_owned();
        let mut text = String::with_capacity(TEXT_PREFIX.len() + nonce.len());
        text.push_str(TEXT_PREFIX);
        text.push_str(&nonce);
        let placeholders = Placeholders {
            text,
            structured: json!({ STRUCTURED_KEY: nonce }),
        };
        *slot = Some(Filled { nonce, document });
        Ok(placeholders)
    }

    /// Writes the kept document over the placeholders in `response`'s body. A response
    /// whose slot was not filled, or that carries no placeholder (the call failed after
    /// all), passes unchanged; rmcp leaves the structured content out for protocol versions
    /// before 2025-06-18, and then only the text is written. A placeholder anywhere else is
    /// our failure: an internal error, never a response carrying it.
    pub async fn apply(&self, response: http::Response<Body>) -> http::Response<Body> {
        let filled = match self.slot.lock() {
            Ok(mut slot) => slot.take(),
            Err(_) => return splice_failed(),
        };
        let Some(filled) = filled else {
            return response;
        };
        let (mut parts, body) = response.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(never) => match never {},
        };
        let body = match splice(&body, &filled) {
            Spliced::Done(spliced) => spliced,
            Spliced::Absent => body,
            Spliced::Failed => return splice_failed(),
        };
        parts.headers.remove(CONTENT_LENGTH);
        http::Response::from_parts(parts, Full::new(body).boxed())
    }
}

/// `body` with `"text":"<text placeholder>"` turned into the escaped document and
/// `"structuredContent":<placeholder>` (if present) into the document. The nonce is looked
/// for once: it must occur in the text placeholder and then at most in the structured one
/// (rmcp writes the structured content after the content), and nowhere else.
fn splice(body: &[u8], filled: &Filled) -> Spliced {
    let nonce = filled.nonce.as_bytes();
    let mut found = memmem::find_iter(body, nonce);
    let Some(text) = found.next() else {
        return Spliced::Absent;
    };
    let Some(text) = placeholder(body, text, nonce.len(), TEXT_BEFORE, TEXT_AFTER) else {
        return Spliced::Failed;
    };
    let structured = match found.next() {
        Some(at) => match placeholder(body, at, nonce.len(), STRUCTURED_BEFORE, STRUCTURED_AFTER) {
            Some(range) if range.start >= text.end => Some(range),
            _ => return Spliced::Failed,
        },
        None => None,
    };
    if found.next().is_some() {
        return Spliced::Failed;
    }
    let document = filled.document.as_bytes();
    // The escaped text (at most twice the document, quotes, sixteen bytes of slack) and the
    // document.
    let mut out = Vec::with_capacity(body.len() + document.len() * 3 + 18);
    out.extend_from_slice(&body[..text.start]);
    out.extend_from_slice(TEXT_FIELD);
    if !push_json_string(&mut out, &filled.document) {
        return Spliced::Failed;
    }
    match structured {
        Some(structured) => {
            out.extend_from_slice(&body[text.end..structured.start]);
            out.extend_from_slice(STRUCTURED_FIELD);
            out.extend_from_slice(document);
            out.extend_from_slice(&body[structured.end..]);
        }
        None => out.extend_from_slice(&body[text.end..]),
    }
    Spliced::Done(Bytes::from(out))
}

/// The placeholder around the nonce found at `at`: `before`, the nonce, `after`.
fn placeholder(
    body: &[u8],
    at: usize,
    nonce_len: usize,
    before: &[u8],
    after: &[u8],
) -> Option<std::ops::Range<usize>> {
    let start = at.checked_sub(before.len())?;
    let end = at + nonce_len + after.len();
    let whole = body.get(start..end)?;
    (whole.starts_with(before) && whole.ends_with(after)).then_some(start..end)
}

/// Appends `text` as a JSON string, quotes included, escaped exactly as serde_json escapes
/// it; false if serde_json could not write it either (nothing is appended then).
fn push_json_string(out: &mut Vec<u8>, text: &str) -> bool {
    let start = out.len();
    if push_escaped_words(out, text.as_bytes()).is_some() {
        return true;
    }
    out.truncate(start);
    serde_json::to_writer(&mut *out, text).is_ok()
}

thread_local! {
    /// The room a document is escaped into before it is copied to the response, kept per
    /// thread with its length: room handed out fresh had to be zeroed first (twice the
    /// document), a fifth of the escaping's cost by valgrind's count and more memory
    /// touched than the copy out of a room already in the cache.
    static ROOM: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The largest room kept: the default `MaxResponseSize`'s document (64 KiB) escaped, with
/// slack. A larger one (up to 256K documents) is given back after use, so that one large
/// read does not hold half a megabyte for the thread's life.
const KEPT_ROOM: usize = 2 * 65536 + 64;

/// Appends `text` escaped (quotes included), escaped in the thread's room; `None` as
/// [`escape_into`] (nothing is appended then).
fn push_escaped_words(out: &mut Vec<u8>, text: &[u8]) -> Option<()> {
    let kept = ROOM.try_with(|room| {
        room.try_borrow_mut()
            .ok()
            .map(|mut room| escape_via(&mut room, out, text))
    });
    match kept {
        Ok(Some(escaped)) => escaped,
        // No room of the thread's (its exit, or a use within one): a room of its own.
        _ => escape_via(&mut Vec::new(), out, text),
    }
}

fn escape_via(room: &mut Vec<u8>, out: &mut Vec<u8>, text: &[u8]) -> Option<()> {
    // Escaping doubles a byte at most; sixteen bytes of slack let every copy be a whole
    // block or word. Only what is escaped this time is copied out: the rest of the room
    // holds an earlier document's bytes.
    let need = 2 * text.len() + 2 + 16;
    if room.len() < need {
        room.resize(need, 0);
    }
    let escaped = escape_into(room, text).and_then(|len| room.get(..len));
    let done = escaped.map(|escaped| out.extend_from_slice(escaped));
    if room.len() > KEPT_ROOM {
        *room = Vec::new();
    }
    done
}

/// The escaping a document needs, written into `dst` from its start (room for twice the
/// text and eighteen bytes): sixteen bytes at a time where the CPU can
/// ([`simd::escape_blocks`]), then eight: a document has a quote every few bytes, so a
/// search for the next one costs more than it skips. The rest of each word is copied whole
/// from its next quote or backslash on; that byte is overwritten by its backslash, and the
/// next copy, one byte further, starts with it. Returns the escaped length; `None` at a
/// control character (raw whitespace Zabbix left between tokens; strings carry theirs
/// escaped): serde_json writes those.
fn escape_into(dst: &mut [u8], text: &[u8]) -> Option<usize> {
    *dst.get_mut(0)? = b'"';
    let (done, mut at) = simd::escape_blocks(text, dst, 1)?;
    let mut words = text.get(done..)?.chunks_exact(8);
    for chunk in &mut words {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        if swar::below_space(word) != 0 {
            return None;
        }
        let mut specials = swar::equal_to(word, b'"') | swar::equal_to(word, b'\\');
        // The byte of the word the next copy starts at: always below 8.
        let mut from = 0;
        loop {
            let rest = word >> (8 * from);
            dst.get_mut(at..at + 8)?
                .copy_from_slice(&rest.to_le_bytes());
            if specials == 0 {
                at += 8 - from;
                break;
            }
            let special = swar::first(specials);
            at += special - from;
            *dst.get_mut(at)? = b'\\';
            at += 1;
            from = special;
            specials &= specials - 1;
        }
    }
    for &byte in words.remainder() {
        match byte {
            b'"' | b'\\' => {
                *dst.get_mut(at)? = b'\\';
                *dst.get_mut(at + 1)? = byte;
                at += 2;
            }
            0x20.. => {
                *dst.get_mut(at)? = byte;
                at += 1;
            }
            _ => return None,
        }
    }
    *dst.get_mut(at)? = b'"';
    Some(at + 1)
}

fn splice_failed() -> http::Response<Body> {
    tracing::error!("read result not completed: its document has no place in the response");
    json_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        &json!({"error": "internal_error", "message": "the response could not be completed"}),
    )
}

#[cfg(test)]
#[path = "splice_tests.rs"]
mod tests;
