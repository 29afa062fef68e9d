//! `trim`, `trim_left` and `trim_right` take off the characters of a cutset. regorus 0.14.1
//! looks each character of the text up in the cutset text, so a text and a cutset of an
//! agent's, 64 KiB each, took 0.9 s of the runtime's one thread (debug build): one call is
//! one VM instruction, so neither the instruction budget nor the timer stops it. These do
//! the same with the cutset's characters sorted once, in time that grows with the sizes
//! added rather than multiplied.

use regorus::Value;
use regorus::unstable::{Expr, Ref, Span};

use super::original;

pub(super) const TRIM: &str = "trim";
pub(super) const TRIM_LEFT: &str = "trim_left";
pub(super) const TRIM_RIGHT: &str = "trim_right";

/// Which ends are trimmed.
#[derive(Clone, Copy)]
enum Ends {
    Both,
    Start,
    End,
}

pub(super) fn trim(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    trimmed(TRIM, Ends::Both, span, params, args, strict)
}

pub(super) fn trim_left(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    trimmed(TRIM_LEFT, Ends::Start, span, params, args, strict)
}

pub(super) fn trim_right(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    trimmed(TRIM_RIGHT, Ends::End, span, params, args, strict)
}

/// Two texts are trimmed here; anything else goes to the builtin, for its own error.
fn trimmed(
    builtin: &'static str,
    ends: Ends,
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    let [Value::String(text), Value::String(cutset)] = args else {
        return original(builtin)?(span, params, args, strict);
    };
    Ok(Value::String(trim_text(text, cutset, ends).into()))
}

fn trim_text<'a>(text: &'a str, cutset: &str, ends: Ends) -> &'a str {
    let mut cut: Vec<char> = cutset.chars().collect();
    cut.sort_unstable();
    cut.dedup();
    let in_cutset = |c: char| cut.binary_search(&c).is_ok();
    match ends {
        Ends::Both => text.trim_matches(in_cutset),
        Ends::Start => text.trim_start_matches(in_cutset),
        Ends::End => text.trim_end_matches(in_cutset),
    }
}

#[cfg(test)]
mod tests {
    use regorus::Value;
    use serde_json::json;

    use super::{Ends, trim_text};
    use crate::policy::bounded::tests::compile_rules;

    /// As regorus 0.14.1 trims (`str::trim_matches(|c| cutset.contains(c))`).
    fn reference<'a>(text: &'a str, cutset: &str, ends: Ends) -> &'a str {
        let in_cutset = |c: char| cutset.contains(c);
        match ends {
            Ends::Both => text.trim_matches(in_cutset),
            Ends::Start => text.trim_start_matches(in_cutset),
            Ends::End => text.trim_end_matches(in_cutset),
        }
    }

    #[test]
    fn trims_as_regorus_does() {
        let texts = ["", "  a b  ", "xxaxx", "éaé", "aaa", "\t\n x \n", "abcba"];
        let cutsets = ["", " ", "x", "é", "a", " \t\n", "ba", "ab", "éa"];
        for text in texts {
            for cutset in cutsets {
                for ends in [Ends::Both, Ends::Start, Ends::End] {
                    assert_eq!(
                        trim_text(text, cutset, ends),
                        reference(text, cutset, ends),
                        "{text:?} {cutset:?}"
                    );
                }
            }
        }
    }

    /// A text and a cutset of 1 MiB each, the cutset's one match at its end: regorus looked
    /// the whole cutset through for each character (hours); this takes milliseconds.
    #[test]
    fn agent_sized_texts_and_cutsets_trim_at_once() {
        let text = "a".repeat(1 << 20);
        let cutset = format!("{}a", "b".repeat(1 << 20));
        for interpreter in [false, true] {
            let set = compile_rules(
                "x := trim(input.s, input.c) if input.f == \"both\"\n\
                 x := trim_left(input.s, input.c) if input.f == \"left\"\n\
                 x := trim_right(input.s, input.c) if input.f == \"right\"\n\
                 decision := {\"allow\": open, \"x\": x}",
                interpreter,
            );
            for f in ["both", "left", "right"] {
                let small = json!({"f": f, "s": " xa bx ", "c": "x "}).to_string();
                let small = set.evaluate(Value::from_json_str(&small).expect("json"));
                let expected = match f {
                    "both" => "a b",
                    "left" => "a bx ",
                    _ => " xa b",
                };
                assert_eq!(small.expect("trims")["x"], Value::from(expected));
                let input = json!({"f": f, "s": text, "c": cutset}).to_string();
                let result = set.evaluate(Value::from_json_str(&input).expect("json"));
                assert_eq!(
                    result.expect("trims")["x"],
                    Value::from(""),
                    "{interpreter} {f}"
                );
            }
        }
    }
}
