//! Builtins that panicked inside regorus on text an agent can send: `time.parse_duration_ns`
//! slices a unit by bytes (`"1é"`, `"5µ"`: not a char boundary) and `strings.count` with an
//! empty substring ("window size must be non-zero"). Such a panic ended the request's task
//! without an answer or a decision line; the engine now catches any panic, but these never
//! get that far.

use regorus::Value;
use regorus::unstable::{Expr, Ref, Span};

use super::{original, text_checked};

pub(super) const PARSE_DURATION: &str = "time.parse_duration_ns";
pub(super) const STRINGS_COUNT: &str = "strings.count";

text_checked!(parse_duration_ns, PARSE_DURATION, check_duration);

pub(super) fn strings_count(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    if let [Value::String(text), Value::String(substring)] = args
        && substring.is_empty()
    {
        // As OPA (Go's strings.Count): the places between characters, both ends included.
        let places = u64::try_from(text.chars().count()).unwrap_or(u64::MAX);
        return Ok(Value::from(places.saturating_add(1)));
    }
    original(STRINGS_COUNT)?(span, params, args, strict)
}

/// regorus ends a unit at the last character before a digit, a `.` or the end of the text
/// and slices there by bytes. No unit ends in a character outside ASCII (`µs` and `μs` end
/// in `s`), so text where one would is no duration, as Go says too.
fn check_duration(builtin: &'static str, text: &str) -> anyhow::Result<()> {
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let ends_unit = chars
            .peek()
            .is_none_or(|next| next.is_ascii_digit() || *next == '.');
        if !c.is_ascii() && ends_unit {
            anyhow::bail!("{builtin}: invalid duration: unknown unit");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{PARSE_DURATION, check_duration};

    #[test]
    fn durations_whose_unit_ends_outside_ascii_are_errors() {
        for ok in ["1h30m", "5µs", "2μs", "1.5s", "-0", "abc", ""] {
            assert!(check_duration(PARSE_DURATION, ok).is_ok(), "{ok}");
        }
        for bad in ["1é", "5µ", "5µ3s", "1é2s", "1h2m\u{3000}", "1é.5s"] {
            assert!(check_duration(PARSE_DURATION, bad).is_err(), "{bad}");
        }
    }
}
