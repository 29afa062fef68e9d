//! `yaml.unmarshal` and `yaml.is_valid` on text that nests flow collections (`[`, `{`)
//! deeply: the YAML scanner reads the whole text before the parser stops at its depth limit
//! (128), and its work grows with the depth at every token, so `{a: ` 20,000 times (80 kB
//! of an agent's text) took 1.3 s of the runtime's one thread (release build). Text whose
//! brackets nest deeper than the parser goes is refused before it is scanned.

use regorus::Value;
use regorus::unstable::{Expr, Ref, Span};

use super::{refuse, text_checked};

pub(super) const YAML_UNMARSHAL: &str = "yaml.unmarshal";
pub(super) const YAML_IS_VALID: &str = "yaml.is_valid";

/// The deepest `[` and `{` nesting taken: the YAML parser's own limit (deeper text is no
/// YAML to it).
pub(crate) const MAX_YAML_NESTING: u64 = 128;

text_checked!(yaml_unmarshal, YAML_UNMARSHAL, check_nesting);
text_checked!(yaml_is_valid, YAML_IS_VALID, check_nesting);

/// Counts every `[` and `{` still open, in quotes and comments too: it can refuse text a
/// parser would take (brackets in a string), never let through text that nests deeper.
fn check_nesting(builtin: &'static str, text: &str) -> anyhow::Result<()> {
    let mut depth: u64 = 0;
    for byte in text.bytes() {
        match byte {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_YAML_NESTING {
                    return Err(refuse(builtin, depth, MAX_YAML_NESTING));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use regorus::Value;
    use serde_json::json;

    use super::MAX_YAML_NESTING;
    use crate::policy::PolicyError;
    use crate::policy::bounded::tests::compile_rules;

    #[test]
    fn yaml_nested_past_the_parsers_depth_is_refused_before_it_is_scanned() {
        #[allow(clippy::cast_possible_truncation)]
        let deepest = MAX_YAML_NESTING as usize;
        for interpreter in [false, true] {
            let set = compile_rules(
                "x := yaml.unmarshal(input.s) if input.f == \"unmarshal\"\n\
                 x := yaml.is_valid(input.s) if input.f == \"valid\"\n\
                 decision := {\"allow\": open, \"x\": x}",
                interpreter,
            );
            let eval = |f: &str, s: &str| {
                let input = json!({"f": f, "s": s}).to_string();
                set.evaluate(Value::from_json_str(&input).expect("json"))
                    .map(|result| result["x"].clone())
            };
            let flat = eval("unmarshal", "a: [1, {b: c}]").expect("parses");
            assert_eq!(flat["a"][1]["b"], Value::from("c"), "{interpreter}");
            let deep = format!("{}{}", "[".repeat(deepest), "]".repeat(deepest));
            assert_eq!(
                eval("valid", &deep).expect("at the depth"),
                Value::from(true)
            );
            // 1.3 s of scanning before: now refused (a denial, not `false`).
            for s in ["{a: ".repeat(20_000), "[".repeat(deepest + 1)] {
                for f in ["valid", "unmarshal"] {
                    let err = eval(f, &s).map(|_| ()).expect_err("past the depth");
                    assert!(
                        matches!(&err, PolicyError::Eval(m) if m.contains("memory limit")),
                        "{interpreter} {f}: {err:?}"
                    );
                }
            }
        }
    }
}
