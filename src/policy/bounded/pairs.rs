//! `strings.any_prefix_match` and `strings.any_suffix_match` compare every text of their
//! first argument with every text of their second: with both lists made of an agent's text
//! (`split(input.arguments.description, "")`), 16,384 by 16,384 took 2.7 s of the
//! runtime's one thread for the two (release build). One call is one VM instruction, so
//! neither the instruction budget nor the timer stops it. Past [`MAX_PAIRS`] comparisons
//! the call is a limit error (a denial).

use regorus::Value;
use regorus::unstable::{Expr, Ref, Span};

use super::{original, refuse};

pub(super) const ANY_PREFIX_MATCH: &str = "strings.any_prefix_match";
pub(super) const ANY_SUFFIX_MATCH: &str = "strings.any_suffix_match";

/// Comparisons one call may make: every name of one 1000-entry list argument with every
/// name of another, some milliseconds.
pub(crate) const MAX_PAIRS: u64 = 1_000_000;

pub(super) fn any_prefix_match(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    check(ANY_PREFIX_MATCH, args)?;
    original(ANY_PREFIX_MATCH)?(span, params, args, strict)
}

pub(super) fn any_suffix_match(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    check(ANY_SUFFIX_MATCH, args)?;
    original(ANY_SUFFIX_MATCH)?(span, params, args, strict)
}

fn check(builtin: &'static str, args: &[Value]) -> anyhow::Result<()> {
    let [search, base] = args else {
        return Ok(());
    };
    let pairs = texts(search).saturating_mul(texts(base));
    if pairs <= MAX_PAIRS {
        return Ok(());
    }
    Err(refuse(builtin, pairs, MAX_PAIRS))
}

/// How many texts the builtin compares on one side (a text alone is one); anything else
/// is left to its own checks.
fn texts(value: &Value) -> u64 {
    let count = match value {
        Value::Array(items) => items.len(),
        Value::Set(items) => items.len(),
        _ => 1,
    };
    u64::try_from(count).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use regorus::Value;
    use serde_json::json;

    use crate::policy::PolicyError;
    use crate::policy::bounded::tests::compile_rules;

    #[test]
    fn comparisons_past_the_bound_are_refused() {
        for interpreter in [false, true] {
            let set = compile_rules(
                "x := strings.any_prefix_match(input.s, input.b) if input.f == \"prefix\"\n\
                 x := strings.any_suffix_match(input.s, input.b) if input.f == \"suffix\"\n\
                 decision := {\"allow\": open, \"x\": x}",
                interpreter,
            );
            let eval = |input: serde_json::Value| {
                set.evaluate(Value::from_json_str(&input.to_string()).expect("json"))
                    .map(|result| result["x"].clone())
            };
            let names: Vec<String> = (0..1000).map(|n| format!("web{n}")).collect();
            for f in ["prefix", "suffix"] {
                let small = eval(json!({"f": f, "s": "web-01", "b": ["web", "-01"]}));
                assert_eq!(small.expect("compares"), Value::from(true), "{interpreter}");
                // 1000 by 1000: at the bound.
                let at = eval(json!({"f": f, "s": names, "b": names}));
                assert_eq!(at.expect("compares"), Value::from(true), "{interpreter}");
                let letters: Vec<String> = (0..1001).map(|_| "a".to_owned()).collect();
                let err = eval(json!({"f": f, "s": letters, "b": names}))
                    .map(|_| ())
                    .expect_err("past the bound");
                assert!(
                    matches!(&err, PolicyError::Eval(m) if m.contains("memory limit")),
                    "{interpreter} {f}: {err:?}"
                );
            }
        }
    }
}
