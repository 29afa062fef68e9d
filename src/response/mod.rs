//! The read-tool response envelope `{results, count, truncated, truncated_by, limit, note}`,
//! cut by the `limit` argument and by `MaxResponseSize`, only ever between results.
//!
//! Each record is serialized once; the same bytes make the text block and count toward
//! the size limit, so the limit holds for exactly the JSON text the agent receives.

pub mod record;
#[cfg(test)]
mod tests_generated;

use serde_json::Value;

pub use record::{Records, Shaping};

use crate::decimal::push_number;
use crate::zabbix::raw;

/// Which limit cut a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncatedBy {
    Count,
    Size,
}

/// A finished read-tool response: the JSON text the agent receives.
#[derive(Debug)]
pub struct Envelope {
    pub text: String,
    pub count: usize,
    pub truncated_by: Option<TruncatedBy>,
}

#[derive(Debug, thiserror::Error)]
pub enum ResponseError {
    #[error("cannot serialize a result: {0}")]
    Serialize(#[from] serde_json::Error),
}

impl Envelope {
    /// The same document as a value (for transports that serialize one).
    pub fn value(&self) -> Result<Value, ResponseError> {
        Ok(serde_json::from_str(&self.text)?)
    }
}

impl TruncatedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            TruncatedBy::Count => "count",
            TruncatedBy::Size => "size",
        }
    }
}

/// Builds the envelope from the elements of Zabbix's result, each shaped as it is written
/// (asked with `limit + 1`, so more than `limit` elements means more exist).
pub fn envelope<'a>(
    elements: impl ExactSizeIterator<Item = raw::Element<'a>>,
    shaping: &Shaping<'_>,
    limit: u32,
    max_size: usize,
) -> Envelope {
    let limit_len = usize::try_from(limit).unwrap_or(usize::MAX);
    let more_than_limit = elements.len() > limit_len;
    // The envelope around the results, at its largest, counts toward the limit too: with
    // the note of whichever limit may cut it (the count note is the longer one).
    let shown = elements.len().min(limit_len);
    let frame_of = |by| frame_text(limit, shown, Some(by), shown, max_size).len();
    let mut frame = frame_of(TruncatedBy::Size);
    if more_than_limit {
        frame = frame.max(frame_of(TruncatedBy::Count));
    }
    // Records are written straight into the text; one that would cross the size limit is
    // cut off again, so the limit is checked on exactly the bytes sent.
    let mut text = String::with_capacity(max_size.min(1 << 20));
    text.push_str("{\"results\":[");
    let mut kept = 0usize;
    let mut truncated_by = None;
    let mut records = Records::default();
    for element in elements.take(limit_len) {
        let mark = text.len();
        if kept > 0 {
            text.push(',');
        }
        records.write(element, shaping, &mut text);
        // The text so far and the closing bracket: every byte sent counts.
        if frame + text.len() + 1 > max_size {
            text.truncate(mark);
            truncated_by = Some(TruncatedBy::Size);
            break;
        }
        kept += 1;
    }
    if truncated_by.is_none() && more_than_limit {
        truncated_by = Some(TruncatedBy::Count);
    }
    let count = kept;
    text.push(']');
    text.push_str(&frame_text(limit, count, truncated_by, count, max_size));
    Envelope {
        text,
        count,
        truncated_by,
    }
}

/// Everything after the results array: `,"count":…,"truncated":…,"truncated_by":…,"limit":…,"note":…}`.
/// Written by hand rather than by `format!`: every read pays for it twice.
fn frame_text(
    limit: u32,
    count: usize,
    truncated_by: Option<TruncatedBy>,
    kept: usize,
    max_size: usize,
) -> String {
    let note = truncated_by.map(|by| note(by, limit, kept, max_size));
    let mut text = String::with_capacity(96 + note.as_ref().map_or(0, String::len));
    text.push_str(",\"count\":");
    push_number(&mut text, u64::try_from(count).unwrap_or(u64::MAX));
    text.push_str(match truncated_by {
        Some(TruncatedBy::Count) => ",\"truncated\":true,\"truncated_by\":\"count\"",
        Some(TruncatedBy::Size) => ",\"truncated\":true,\"truncated_by\":\"size\"",
        None => ",\"truncated\":false,\"truncated_by\":null",
    });
    text.push_str(",\"limit\":");
    push_number(&mut text, u64::from(limit));
    text.push_str(",\"note\":");
    match note {
        // Our own text: no quote, backslash or control character to escape.
        Some(note) => {
            text.push('"');
            text.push_str(&note);
            text.push('"');
        }
        None => text.push_str("null"),
    }
    text.push('}');
    text
}

/// Written piece by piece, not by `format!`: every read writes the size note once, to
/// measure the frame it reserves room for.
fn note(by: TruncatedBy, limit: u32, kept: usize, max_size: usize) -> String {
    let mut text = String::with_capacity(192);
    match by {
        TruncatedBy::Count => {
            text.push_str("The result count limit was reached (limit ");
            push_number(&mut text, u64::from(limit));
            text.push_str(
                "): more results exist. Narrow the query with filters or search, or raise \
                 limit (at most 1000). There is no paging.",
            );
        }
        TruncatedBy::Size => {
            text.push_str("The response size limit (");
            push_number(&mut text, u64::try_from(max_size).unwrap_or(u64::MAX));
            text.push_str(" bytes) was reached after ");
            push_number(&mut text, u64::try_from(kept).unwrap_or(u64::MAX));
            text.push_str(
                " results: more results exist. Narrow the query with filters or search. There \
                 is no paging.",
            );
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{Envelope, Shaping, TruncatedBy, envelope, frame_text, note};
    use crate::zabbix::raw::{self, RawReply};
    use serde_json::{Value, json};

    /// Zabbix's answer with `n` records.
    fn answer(n: usize, pad: usize) -> RawReply {
        let list: Vec<Value> = (0..n)
            .map(|i| json!({"id": i.to_string(), "pad": "x".repeat(pad)}))
            .collect();
        raw::reply_of(&Value::Array(list).to_string())
    }

    /// The envelope of `answer`'s records, unshaped.
    fn of(answer: &RawReply, limit: u32, max_size: usize) -> Envelope {
        envelope(
            answer.elements().unwrap(),
            &Shaping::none(),
            limit,
            max_size,
        )
    }

    #[test]
    fn not_truncated() {
        let e = of(&answer(3, 1), 5, 65536);
        assert_eq!(e.truncated_by, None);
        let v: Value = serde_json::from_str(&e.text).unwrap();
        assert_eq!(v, e.value().unwrap());
        assert_eq!(v["count"], 3);
        assert_eq!(v["truncated"], false);
        assert_eq!(v["truncated_by"], Value::Null);
    }

    #[test]
    fn truncated_by_count() {
        let e = of(&answer(4, 1), 3, 65536);
        assert_eq!(e.truncated_by, Some(TruncatedBy::Count));
        assert_eq!(e.value().unwrap()["count"], 3);
        assert_eq!(e.value().unwrap()["results"][2]["id"], "2");
        assert!(
            e.value().unwrap()["note"]
                .as_str()
                .unwrap()
                .contains("limit 3")
        );
    }

    #[test]
    fn truncated_by_size_between_results_only() {
        let max = 16 * 1024;
        let e = of(&answer(100, 1000), 100, max);
        assert_eq!(e.truncated_by, Some(TruncatedBy::Size));
        assert!(e.text.len() <= max, "{} > {max}", e.text.len());
        let v: Value = serde_json::from_str(&e.text).unwrap();
        assert_eq!(v, e.value().unwrap());
        let n = e.count;
        assert!(n > 10 && n < 16, "{n}");
        // Whole records only, in order.
        for (i, r) in v["results"].as_array().unwrap().iter().enumerate() {
            assert_eq!(r["id"], i.to_string());
            assert_eq!(r["pad"].as_str().unwrap().len(), 1000);
        }
    }

    /// At every size limit around a cut, the text sent fits, its `{"results":[` and `]`
    /// included (before, those 13 bytes were not counted).
    #[test]
    fn the_limit_counts_every_byte() {
        let answer = answer(20, 100);
        for max in 1000..1400 {
            let e = of(&answer, 20, max);
            assert!(e.text.len() <= max, "{} > {max}", e.text.len());
        }
    }

    /// Cut by `limit`, the text sent fits too: its note is the count note, longer than the
    /// size note the records were measured against (before, 13 bytes past the limit here).
    #[test]
    fn the_limit_counts_every_byte_when_cut_by_count() {
        let answer = answer(6, 100);
        let mut by_count = 0;
        for max in 500..1200 {
            let e = of(&answer, 5, max);
            assert!(e.text.len() <= max, "{} > {max}", e.text.len());
            by_count += usize::from(e.truncated_by == Some(TruncatedBy::Count));
        }
        assert!(by_count > 0);
    }

    #[test]
    fn first_record_too_big() {
        let e = of(&answer(2, 20_000), 10, 16 * 1024);
        assert_eq!(e.count, 0);
        assert_eq!(e.truncated_by, Some(TruncatedBy::Size));
    }

    /// The notes read as they did when `format!` wrote them.
    #[test]
    fn notes_read_as_formatted() {
        for (limit, kept, max) in [(1, 0, 16384), (100, 37, 65536), (1000, 999, 262144)] {
            assert_eq!(
                note(TruncatedBy::Count, limit, kept, max),
                format!(
                    "The result count limit was reached (limit {limit}): more results exist. \
                     Narrow the query with filters or search, or raise limit (at most 1000). \
                     There is no paging."
                )
            );
            assert_eq!(
                note(TruncatedBy::Size, limit, kept, max),
                format!(
                    "The response size limit ({max} bytes) was reached after {kept} results: \
                     more results exist. Narrow the query with filters or search. There is no \
                     paging."
                )
            );
        }
    }

    /// The hand-written frame is what serde_json writes for the same fields.
    #[test]
    fn frame_text_is_serde_json_text() {
        for by in [None, Some(TruncatedBy::Count), Some(TruncatedBy::Size)] {
            for (limit, count) in [(0, 0), (100, 7), (u32::MAX, 1000)] {
                let expected = json!({
                    "count": count,
                    "truncated": by.is_some(),
                    "truncated_by": by.map(TruncatedBy::as_str),
                    "limit": limit,
                    "note": by.map(|by| note(by, limit, count, 65536)),
                })
                .to_string();
                let text = frame_text(limit, count, by, count, 65536);
                assert_eq!(text, format!(",{}", &expected[1..]));
            }
        }
    }
}
