//! Builtins whose result can be far larger than their arguments: `concat` repeats its
//! delimiter between every two elements, and `replace`, `strings.replace_n` and
//! `regex.replace` put their replacement in at every match (an empty pattern matches
//! between every two characters). With both texts an agent's, 64 KiB each, the result is
//! 4 GiB: `concat(input.s, split(input.s, ""))` held the runtime's one thread for 253 s
//! (debug build). One call is one VM instruction, so neither the instruction budget nor
//! the timer stops it. The result's size is worked out (or bounded from above) first, and
//! past [`MAX_BUILT_TEXT`] the call is a limit error (a denial).

use regorus::Value;
use regorus::unstable::{Expr, Ref, Span};

use super::{original, refuse};

pub(super) const CONCAT: &str = "concat";
pub(super) const REPLACE: &str = "replace";
pub(super) const REPLACE_N: &str = "strings.replace_n";
pub(super) const REGEX_REPLACE: &str = "regex.replace";

/// Bytes one builtin may build into one text: as much as the largest request body, far
/// above what a policy writes into a reason or compares, far below what stalls the
/// runtime (building it takes a fraction of a millisecond).
pub(crate) const MAX_BUILT_TEXT: u64 = 1 << 20;

pub(super) fn concat(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    if let [Value::String(delimiter), collection] = args {
        let (count, total) = match collection {
            Value::Array(items) => text_sizes(items.iter()),
            Value::Set(items) => text_sizes(items.iter()),
            _ => (0, 0),
        };
        let size = total.saturating_add(len(delimiter).saturating_mul(count.saturating_sub(1)));
        check(CONCAT, size)?;
    }
    original(CONCAT)?(span, params, args, strict)
}

pub(super) fn replace(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    if let [Value::String(text), Value::String(old), Value::String(new)] = args {
        check(REPLACE, replaced_size(text, old, new))?;
    }
    original(REPLACE)?(span, params, args, strict)
}

pub(super) fn replace_n(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    if let [Value::Object(patterns), Value::String(text)] = args {
        // The patterns apply one after the other, each to the last one's result: bounded
        // from above step by step, as that result is not built yet.
        let mut size = len(text);
        for (old, new) in patterns.iter() {
            if let (Value::String(old), Value::String(new)) = (old, new) {
                size = at_most_replaced(size, len(old), len(new));
            }
        }
        check(REPLACE_N, size)?;
    }
    original(REPLACE_N)?(span, params, args, strict)
}

pub(super) fn regex_replace(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    if let [Value::String(text), Value::String(_), Value::String(value)] = args {
        // At most one match per character and one more (an empty match), each replaced by
        // the value's text; each `$` reference adds a capture, and a group's captures lie
        // in matches that do not overlap, so they add at most the text once per reference.
        let matches = chars(text).saturating_add(1);
        let references = u64::try_from(value.matches('$').count()).unwrap_or(u64::MAX);
        let size = len(text)
            .saturating_add(matches.saturating_mul(len(value)))
            .saturating_add(references.saturating_mul(len(text)));
        check(REGEX_REPLACE, size)?;
    }
    original(REGEX_REPLACE)?(span, params, args, strict)
}

/// The exact size of `text` with every `old` replaced by `new`, as Rust's `str::replace`
/// does it (an empty `old` matches before every character and at the end); counted only
/// when the text can grow.
fn replaced_size(text: &str, old: &str, new: &str) -> u64 {
    if new.len() <= old.len() && !old.is_empty() {
        return len(text);
    }
    let matches = if old.is_empty() {
        chars(text).saturating_add(1)
    } else {
        u64::try_from(text.matches(old).count()).unwrap_or(u64::MAX)
    };
    let grown = len(new).saturating_sub(len(old));
    len(text).saturating_add(matches.saturating_mul(grown))
}

/// The most a text of `size` bytes can become with a pattern of `old` bytes replaced by
/// `new` bytes (at most one match per `old` bytes; an empty one at every byte and the end).
fn at_most_replaced(size: u64, old: u64, new: u64) -> u64 {
    if new <= old && old > 0 {
        return size;
    }
    let matches = size.checked_div(old).unwrap_or(size.saturating_add(1));
    size.saturating_add(matches.saturating_mul(new - old.min(new)))
}

/// How many elements there are and the bytes of those that are strings (the builtin
/// refuses any other).
fn text_sizes<'a>(items: impl Iterator<Item = &'a Value>) -> (u64, u64) {
    items.fold((0, 0), |(count, total), item| {
        let size = match item {
            Value::String(s) => len(s),
            _ => 0,
        };
        (count.saturating_add(1), total.saturating_add(size))
    })
}

fn check(builtin: &'static str, size: u64) -> anyhow::Result<()> {
    if size <= MAX_BUILT_TEXT {
        return Ok(());
    }
    Err(refuse(builtin, size, MAX_BUILT_TEXT))
}

fn len(text: &str) -> u64 {
    u64::try_from(text.len()).unwrap_or(u64::MAX)
}

fn chars(text: &str) -> u64 {
    u64::try_from(text.chars().count()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use regorus::Value;
    use serde_json::json;

    use super::MAX_BUILT_TEXT;
    use crate::policy::PolicyError;
    use crate::policy::bounded::tests::compile_rules;

    const RULES: &str = "x := concat(input.a, input.list) if input.f == \"concat\"\n\
        x := replace(input.s, input.a, input.b) if input.f == \"replace\"\n\
        x := strings.replace_n({input.a: input.b}, input.s) if input.f == \"replace_n\"\n\
        x := regex.replace(input.s, input.a, input.b) if input.f == \"regex\"\n\
        short if count(x) < 100\n\
        default long := false\n\
        long if not short\n\
        decision := {\"allow\": open, \"x\": x, \"long\": long}";

    #[test]
    fn texts_built_past_the_bound_are_errors_not_allocations() {
        #[allow(clippy::cast_possible_truncation)]
        let mib = MAX_BUILT_TEXT as usize;
        for interpreter in [false, true] {
            let set = compile_rules(RULES, interpreter);
            let eval = |input: serde_json::Value| {
                set.evaluate(Value::from_json_str(&input.to_string()).expect("json"))
            };
            // As regorus builds them, within the bound.
            for (input, expected) in [
                (
                    json!({"f": "concat", "a": ", ", "list": ["a", "b"]}),
                    "a, b",
                ),
                (
                    json!({"f": "replace", "s": "a*b", "a": "*", "b": "%"}),
                    "a%b",
                ),
                (
                    json!({"f": "replace", "s": "ab", "a": "", "b": "-"}),
                    "-a-b-",
                ),
                (
                    json!({"f": "replace_n", "s": "a*b", "a": "*", "b": "."}),
                    "a.b",
                ),
                (
                    json!({"f": "regex", "s": "a1b22", "a": "([0-9]+)", "b": "<$1>"}),
                    "a<1>b<22>",
                ),
            ] {
                let result = eval(input.clone()).expect("within the bound");
                assert_eq!(result["x"], Value::from(expected), "{interpreter} {input}");
            }
            let big = "a".repeat(mib / 2);
            let at_bound = eval(json!({"f": "concat", "a": "", "list": [big, big]}));
            assert_eq!(at_bound.expect("at the bound")["long"], Value::from(true));
            // Just past the bound, then 64 KiB of an agent's text in both places (4 GiB
            // built). `not short` would allow if the refusal read as undefined.
            let kib = "a".repeat(1024);
            let past = "b".repeat(1100);
            let agent = "a".repeat(65_536);
            let letters: Vec<String> = agent.chars().map(String::from).collect();
            for input in [
                json!({"f": "concat", "a": "", "list": [big, big, "a"]}),
                json!({"f": "replace", "s": kib, "a": "a", "b": past}),
                json!({"f": "replace_n", "s": kib, "a": "a", "b": past}),
                json!({"f": "regex", "s": kib, "a": "a", "b": past}),
                json!({"f": "concat", "a": agent, "list": letters}),
                json!({"f": "replace", "s": agent, "a": "a", "b": agent}),
                json!({"f": "replace", "s": agent, "a": "", "b": agent}),
                json!({"f": "replace_n", "s": agent, "a": "a", "b": agent}),
                json!({"f": "regex", "s": agent, "a": "a", "b": agent}),
                json!({"f": "regex", "s": agent, "a": "(a*)", "b": "$1".repeat(20)}),
            ] {
                // Mapped to `()`: a failure prints no megabyte of text.
                let err = eval(input).map(|_| ()).expect_err("past the bound");
                assert!(
                    matches!(&err, PolicyError::Eval(m) if m.contains("memory limit")),
                    "{interpreter}: {err:?}"
                );
            }
        }
    }
}
