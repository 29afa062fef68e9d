//! The read-tool response envelope `{results, count, truncated, truncated_by, limit, note}`,
//! cut by the `limit` argument and by `MaxResponseSize`, only ever between results.
//!
//! Each record is serialized once; the same bytes make the text block and count toward
//! the size limit, so the limit holds for exactly the JSON text the agent receives.

use serde_json::{Map, Value};

/// Which limit cut a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncatedBy {
    Count,
    Size,
}

/// A finished read-tool response: the JSON text and the same document as a value.
#[derive(Debug)]
pub struct Envelope {
    pub text: String,
    pub value: Value,
    pub count: usize,
    pub truncated_by: Option<TruncatedBy>,
}

#[derive(Debug, thiserror::Error)]
pub enum ResponseError {
    #[error("cannot serialize a result: {0}")]
    Serialize(#[from] serde_json::Error),
}

impl TruncatedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            TruncatedBy::Count => "count",
            TruncatedBy::Size => "size",
        }
    }
}

/// Builds the envelope from Zabbix's records (asked with `limit + 1`, so `records.len() >
/// limit` means more exist).
pub fn envelope(
    records: Vec<Value>,
    limit: u32,
    max_size: usize,
) -> Result<Envelope, ResponseError> {
    let limit_len = usize::try_from(limit).unwrap_or(usize::MAX);
    let more_than_limit = records.len() > limit_len;
    // The envelope around the results, at its largest, counts toward the limit too.
    let shown = records.len().min(limit_len);
    let frame = frame_text(limit, shown, Some(TruncatedBy::Size), shown, max_size)?.len();
    let mut body = String::with_capacity(max_size.min(1 << 20));
    let mut kept = Vec::new();
    let mut truncated_by = None;
    for record in records.into_iter().take(limit_len) {
        let text = serde_json::to_string(&record)?;
        let separator = usize::from(!kept.is_empty());
        if frame + body.len() + separator + text.len() > max_size {
            truncated_by = Some(TruncatedBy::Size);
            break;
        }
        if separator == 1 {
            body.push(',');
        }
        body.push_str(&text);
        kept.push(record);
    }
    if truncated_by.is_none() && more_than_limit {
        truncated_by = Some(TruncatedBy::Count);
    }
    let count = kept.len();
    let tail = frame_text(limit, count, truncated_by, count, max_size)?;
    let text = format!("{{\"results\":[{body}]{tail}");
    let mut value = Map::new();
    value.insert("results".into(), Value::Array(kept));
    if let Value::Object(rest) = serde_json::from_str::<Value>(&format!("{{{}", &tail[1..]))? {
        value.extend(rest);
    }
    Ok(Envelope {
        text,
        value: Value::Object(value),
        count,
        truncated_by,
    })
}

/// Everything after the results array: `,"count":…,"truncated":…,"truncated_by":…,"limit":…,"note":…}`.
fn frame_text(
    limit: u32,
    count: usize,
    truncated_by: Option<TruncatedBy>,
    kept: usize,
    max_size: usize,
) -> Result<String, ResponseError> {
    let note = truncated_by.map(|by| note(by, limit, kept, max_size));
    Ok(format!(
        ",\"count\":{count},\"truncated\":{},\"truncated_by\":{},\"limit\":{limit},\"note\":{}}}",
        truncated_by.is_some(),
        serde_json::to_string(&truncated_by.map(TruncatedBy::as_str))?,
        serde_json::to_string(&note)?,
    ))
}

fn note(by: TruncatedBy, limit: u32, kept: usize, max_size: usize) -> String {
    match by {
        TruncatedBy::Count => format!(
            "The result count limit was reached (limit {limit}): more results exist. Narrow \
             the query with filters or search, or raise limit (at most 1000). There is no paging."
        ),
        TruncatedBy::Size => format!(
            "The response size limit ({max_size} bytes) was reached after {kept} results: more \
             results exist. Narrow the query with filters or search. There is no paging."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{TruncatedBy, envelope};
    use serde_json::{Value, json};

    fn records(n: usize, pad: usize) -> Vec<Value> {
        (0..n)
            .map(|i| json!({"id": i.to_string(), "pad": "x".repeat(pad)}))
            .collect()
    }

    #[test]
    fn not_truncated() {
        let e = envelope(records(3, 1), 5, 65536).unwrap();
        assert_eq!(e.truncated_by, None);
        let v: Value = serde_json::from_str(&e.text).unwrap();
        assert_eq!(v, e.value);
        assert_eq!(v["count"], 3);
        assert_eq!(v["truncated"], false);
        assert_eq!(v["truncated_by"], Value::Null);
    }

    #[test]
    fn truncated_by_count() {
        let e = envelope(records(4, 1), 3, 65536).unwrap();
        assert_eq!(e.truncated_by, Some(TruncatedBy::Count));
        assert_eq!(e.value["count"], 3);
        assert_eq!(e.value["results"][2]["id"], "2");
        assert!(e.value["note"].as_str().unwrap().contains("limit 3"));
    }

    #[test]
    fn truncated_by_size_between_results_only() {
        let max = 16 * 1024;
        let e = envelope(records(100, 1000), 100, max).unwrap();
        assert_eq!(e.truncated_by, Some(TruncatedBy::Size));
        assert!(e.text.len() <= max, "{} > {max}", e.text.len());
        let v: Value = serde_json::from_str(&e.text).unwrap();
        assert_eq!(v, e.value);
        let n = e.count;
        assert!(n > 10 && n < 16, "{n}");
        // Whole records only, in order.
        for (i, r) in v["results"].as_array().unwrap().iter().enumerate() {
            assert_eq!(r["id"], i.to_string());
            assert_eq!(r["pad"].as_str().unwrap().len(), 1000);
        }
    }

    #[test]
    fn first_record_too_big() {
        let e = envelope(records(2, 20_000), 10, 16 * 1024).unwrap();
        assert_eq!(e.count, 0);
        assert_eq!(e.truncated_by, Some(TruncatedBy::Size));
    }
}
