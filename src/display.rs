//! Showing agent-controlled text to a person: a JSON-RPC payload pretty-printed with the
//! decisive fields first and every character that could reorder, hide or impersonate text
//! escaped; and the check that refuses bidirectional and invisible format characters in
//! text arguments. Used by the in-client approval question and the approval page.

use serde_json::{Map, Value};

/// Why a payload could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum DisplayError {
    #[error("the payload is not a JSON object: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("the payload is not a JSON object")]
    NotObject,
}

/// Lists of `{hostid}` / `{groupid}` objects: what a maintenance touches, shown with the IDs.
const DECISIVE_TARGETS: &[&str] = &["hosts", "groups"];

/// Parameter keys shown first, in this order, after the ID lists: what a change touches and
/// when.
const DECISIVE_TIMES: &[&str] = &[
    "active_since",
    "active_till",
    "suppress_until",
    "time_from",
    "time_till",
];

/// The body pretty-printed for a person: `method` first, then `params` with ID fields (and
/// `hosts`/`groups` objects) and times first, the rest after; every non-ASCII, control or invisible character escaped
/// as `\uXXXX`, so the text shown is valid JSON that means exactly what is sent and
/// cannot be reordered or hidden by the characters in it.
pub fn pretty_payload(body: &[u8]) -> Result<String, DisplayError> {
    let Value::Object(mut request) = serde_json::from_slice::<Value>(body)? else {
        return Err(DisplayError::NotObject);
    };
    let mut shown = Map::new();
    for key in ["method", "params"] {
        if let Some(value) = request.shift_remove(key) {
            let value = if key == "params" {
                decisive_first(value)
            } else {
                value
            };
            shown.insert(key.to_owned(), value);
        }
    }
    shown.extend(request);
    let text = serde_json::to_string_pretty(&Value::Object(shown))?;
    Ok(escape_json_text(&text))
}

/// Escapes one line of agent text for a person (a name, a message): printable ASCII stays,
/// everything else becomes `\u{XXXX}` and a backslash is doubled, so nothing hides.
pub fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            other => out.push_str(&format!("\\u{{{:04X}}}", u32::from(other))),
        }
    }
    out
}

/// The first bidirectional control or invisible format character in `text`, with its
/// character index: such characters make text display differently from what it is.
pub fn hidden_format_char(text: &str) -> Option<(usize, char)> {
    text.chars().enumerate().find(|(_, c)| is_hidden_format(*c))
}

/// Bidirectional controls and invisible characters (Unicode format characters, line and
/// paragraph separators, fillers that render as nothing).
fn is_hidden_format(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AD                      // soft hyphen
        | 0x034F                    // combining grapheme joiner
        | 0x061C                    // Arabic letter mark
        | 0x115F | 0x1160           // Hangul fillers
        | 0x17B4 | 0x17B5           // Khmer inherent vowels
        | 0x180B..=0x180F           // Mongolian selectors and vowel separator
        | 0x200B..=0x200F           // zero-width space/joiners, LRM, RLM
        | 0x2028..=0x202E           // separators, bidi embeddings and overrides
        | 0x2060..=0x206F           // word joiner, invisible operators, bidi isolates
        | 0x3164                    // Hangul filler
        | 0xFE00..=0xFE0F           // variation selectors
        | 0xFEFF                    // zero-width no-break space
        | 0xFFA0                    // halfwidth Hangul filler
        | 0xFFF9..=0xFFFB           // interlinear annotation
        | 0x1D173..=0x1D17A         // musical format characters
        | 0xE0000..=0xE0FFF // tags and variation selectors supplement
    )
}

/// A string this long is pointed out: its end may be far from its start on screen.
const LONG_TEXT_CHARS: usize = 1000;
/// A whitespace run this long is pointed out: it can push the rest of a value out of sight.
const WHITESPACE_RUN_CHARS: usize = 16;

/// Warnings about strings in the body whose text a person may not see whole: very long
/// values and long runs of whitespace (which pretty-printing cannot escape and which can
/// push the rest of a value off screen), each named by its JSON path. Empty for a body
/// that is not JSON (pretty_payload reports that).
pub fn long_text_notes(body: &[u8]) -> Vec<String> {
    let mut notes = Vec::new();
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        collect_notes(&value, "", &mut notes);
    }
    notes
}

fn collect_notes(value: &Value, path: &str, notes: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                let path = if path.is_empty() {
                    escape_text(key)
                } else {
                    format!("{path}.{}", escape_text(key))
                };
                collect_notes(value, &path, notes);
            }
        }
        Value::Array(list) => {
            for (i, value) in list.iter().enumerate() {
                collect_notes(value, &format!("{path}[{i}]"), notes);
            }
        }
        Value::String(text) => {
            let (run, at) = longest_whitespace_run(text);
            let chars = text.chars().count();
            if run >= WHITESPACE_RUN_CHARS {
                notes.push(format!(
                    "{path} is {chars} characters long and holds a run of {run} whitespace \
                     characters at character {at}: read it to its end"
                ));
            } else if chars > LONG_TEXT_CHARS {
                notes.push(format!(
                    "{path} is {chars} characters long: read it to its end"
                ));
            }
        }
        _ => {}
    }
}

/// The length and start (character index) of the longest run of whitespace.
fn longest_whitespace_run(text: &str) -> (usize, usize) {
    let (mut best, mut best_at, mut run, mut run_at) = (0, 0, 0, 0);
    for (i, c) in text.chars().enumerate() {
        if c.is_whitespace() {
            if run == 0 {
                run_at = i;
            }
            run += 1;
            if run > best {
                (best, best_at) = (run, run_at);
            }
        } else {
            run = 0;
        }
    }
    (best, best_at)
}

/// `params` with ID fields first, then times, then everything else in its order.
fn decisive_first(params: Value) -> Value {
    let Value::Object(mut params) = params else {
        return params;
    };
    let mut ordered = Map::new();
    let ids: Vec<String> = params
        .keys()
        .filter(|k| {
            k.ends_with("ids") || k.ends_with("id") || DECISIVE_TARGETS.contains(&k.as_str())
        })
        .cloned()
        .collect();
    for key in ids
        .iter()
        .map(String::as_str)
        .chain(DECISIVE_TIMES.iter().copied())
    {
        if let Some((key, value)) = params.shift_remove_entry(key) {
            ordered.insert(key, value);
        }
    }
    ordered.extend(params);
    Value::Object(ordered)
}

/// Escapes every character of serialized JSON that is not printable ASCII. serde_json
/// already escapes control characters below U+0020; what remains can only stand inside
/// strings, where `\uXXXX` (a surrogate pair above U+FFFF) means the same character.
fn escape_json_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() && c != '\u{7f}' {
            out.push(c);
            continue;
        }
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            out.push_str(&format!("\\u{unit:04x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{escape_text, hidden_format_char, long_text_notes, pretty_payload};

    #[test]
    fn decisive_fields_come_first_and_everything_hidden_is_escaped() {
        let body = json!({
            "jsonrpc": "2.0",
            "method": "maintenance.create",
            "params": {
                "name": "night \u{202E}lanigiro\u{202C} 🚀 caf\u{e9}\u{200B}",
                "description": "x",
                "active_till": 200,
                "groups": [{"groupid": "2"}],
                "hostids": ["10084"],
                "active_since": 100
            },
            "id": 1
        });
        let bytes = serde_json::to_vec(&body).unwrap();
        let shown = pretty_payload(&bytes).unwrap();
        assert!(shown.is_ascii(), "{shown}");
        assert!(shown.contains("\\u202e"), "{shown}");
        assert!(shown.contains("\\ud83d\\ude80"), "{shown}");
        // Keys of the request and of params (nested ones are indented deeper).
        let keys: Vec<&str> = shown
            .lines()
            .filter(|l| !l.starts_with("      "))
            .filter_map(|l| l.trim().strip_prefix('"'))
            .filter_map(|l| l.split_once("\":").map(|(key, _)| key))
            .collect();
        assert_eq!(
            &keys[..7],
            [
                "method",
                "params",
                "groups",
                "hostids",
                "active_since",
                "active_till",
                "name"
            ]
        );
        // What is shown means exactly what is sent.
        assert_eq!(serde_json::from_str::<Value>(&shown).unwrap(), body);
    }

    #[test]
    fn text_escaping_and_hidden_characters() {
        assert_eq!(escape_text("a\u{202E}b\\c\n"), "a\\u{202E}b\\\\c\\u{000A}");
        assert_eq!(hidden_format_char("plain text, café"), None);
        assert_eq!(hidden_format_char("ab\u{2067}c"), Some((2, '\u{2067}')));
        assert_eq!(hidden_format_char("\u{feff}x"), Some((0, '\u{feff}')));
        assert_eq!(hidden_format_char("tag\u{E0041}"), Some((3, '\u{E0041}')));
    }

    #[test]
    fn long_text_and_whitespace_runs_are_pointed_out() {
        let hidden = format!("routine{}and delete everything", " ".repeat(60_000));
        let body = json!({"method": "maintenance.create", "params": {
            "name": "short", "description": hidden, "tags": [{"tag": "x".repeat(1001)}],
            "timeperiods": [{"period": 3600}]}});
        let notes = long_text_notes(&serde_json::to_vec(&body).unwrap());
        assert_eq!(
            notes,
            [
                "params.description is 60028 characters long and holds a run of 60000 \
                 whitespace characters at character 7: read it to its end",
                "params.tags[0].tag is 1001 characters long: read it to its end",
            ]
        );
        assert!(long_text_notes(br#"{"params":{"name":"a    b"}}"#).is_empty());
    }

    #[test]
    fn not_an_object_is_an_error() {
        assert!(pretty_payload(b"[1]").is_err());
        assert!(pretty_payload(b"{").is_err());
    }
}
