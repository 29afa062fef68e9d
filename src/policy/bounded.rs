//! Builtins whose work grows with the values of their arguments, not their size:
//! `numbers.range`, `numbers.range_step` and `sprintf` (its widths). One call is one VM
//! instruction, so neither
//! the instruction budget nor the timer (checked between instructions) stops it: a
//! policy that ranged over an agent's `time_from..time_till` took 3.4 s of the runtime's
//! one thread for 27 million seconds, and asked for 51 GB at once (the process aborted)
//! for `0..2147483647`. regorus 0.14.1 also panics on a step of 0 or below. `sprintf`
//! pads to any width it is given (`%2000000000d` took 58 s and 3.9 GB) and panics on a
//! width written with a non-ASCII digit (`%²d`), which a format built from agent text
//! can hold.
//!
//! More such builtins are bounded in [`values`] (`units.parse`, `units.parse_bytes`,
//! `net.cidr_expand`), and [`text`] keeps two that panicked on agent text from doing so.
//! Builtins whose work grows with the size of agent text faster than reading it once:
//! [`built`] bounds the results of `concat` and the replaces, [`cutset`] trims in time the
//! sizes add up to rather than multiply, [`yaml`] refuses nesting past the parser's, and
//! [`pairs`] bounds the comparisons of the prefix and suffix matches. [`graph`] bounds the
//! walk of `graph.reachable_paths`, which grows with the paths of its graph, exponentially
//! with its nodes.
//!
//! The compiled program's builtin table is public: these wrappers take the place of the
//! builtins there. A range beyond [`MAX_RANGE_ELEMENTS`] is a limit error, which
//! regorus propagates even where other builtin errors read as undefined (so `not` cannot
//! turn it into a yes) and the engine turns into a named denial. The interpreter fallback
//! gets the same wrappers as extensions, which it looks up before builtins.

mod built;
mod cutset;
mod graph;
mod pairs;
mod text;
mod values;
mod yaml;

use regorus::Source;
use regorus::rvm::program::Program;
use regorus::unstable::{BUILTINS, Expr, Ref, Span};
use regorus::{LimitError, Value};

use super::strict::Builtin;

/// Elements one range may have: far above an index over any list a call carries, far
/// below what stalls the runtime (a few milliseconds, some 5 MB).
pub(crate) const MAX_RANGE_ELEMENTS: u64 = 100_000;

/// Padding one `sprintf` may add, all its widths and precisions together: far above any
/// report line, far below what stalls the runtime.
pub(crate) const MAX_SPRINTF_PADDING: u64 = 100_000;

const RANGE: &str = "numbers.range";
const RANGE_STEP: &str = "numbers.range_step";
const SPRINTF: &str = "sprintf";

/// Each wrapper, the builtin whose place it takes and that builtin's number of arguments.
const WRAPPERS: [(&str, Builtin, u8); 20] = [
    (RANGE, range, 2),
    (RANGE_STEP, range_step, 3),
    (SPRINTF, sprintf, 2),
    (values::UNITS_PARSE, values::units_parse, 1),
    (values::UNITS_PARSE_BYTES, values::units_parse_bytes, 1),
    (values::CIDR_EXPAND, values::cidr_expand, 1),
    (text::PARSE_DURATION, text::parse_duration_ns, 1),
    (text::STRINGS_COUNT, text::strings_count, 2),
    (built::CONCAT, built::concat, 2),
    (built::REPLACE, built::replace, 3),
    (built::REPLACE_N, built::replace_n, 2),
    (built::REGEX_REPLACE, built::regex_replace, 3),
    (cutset::TRIM, cutset::trim, 2),
    (cutset::TRIM_LEFT, cutset::trim_left, 2),
    (cutset::TRIM_RIGHT, cutset::trim_right, 2),
    (yaml::YAML_UNMARSHAL, yaml::yaml_unmarshal, 1),
    (yaml::YAML_IS_VALID, yaml::yaml_is_valid, 1),
    (pairs::ANY_PREFIX_MATCH, pairs::any_prefix_match, 2),
    (pairs::ANY_SUFFIX_MATCH, pairs::any_suffix_match, 2),
    (graph::REACHABLE_PATHS, graph::reachable_paths, 2),
];

/// Puts the bounded wrappers in place of their builtins in a compiled program.
pub(crate) fn bound_program(program: &mut Program) {
    let Program {
        builtin_info_table,
        resolved_builtins,
        ..
    } = program;
    for (info, resolved) in builtin_info_table.iter().zip(resolved_builtins.iter_mut()) {
        if let Some((_, wrapper, _)) = WRAPPERS.iter().find(|(name, ..)| *name == info.name) {
            resolved.0 = *wrapper;
        }
    }
}

/// Registers the wrappers as extensions of an interpreter engine (it looks extensions up
/// before builtins, so they take the builtins' place).
pub(crate) fn bound_engine(engine: &mut regorus::Engine) -> anyhow::Result<()> {
    for (name, wrapper, args) in WRAPPERS {
        engine.add_extension(
            name.into(),
            args,
            Box::new(move |args: Vec<Value>| as_extension(wrapper, &args)),
        )?;
    }
    Ok(())
}

fn range(span: &Span, params: &[Ref<Expr>], args: &[Value], strict: bool) -> anyhow::Result<Value> {
    if let [from, to] = args {
        check(from, to, 1.0)?;
    }
    original(RANGE)?(span, params, args, strict)
}

fn range_step(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    if let [from, to, step] = args {
        // regorus divides by the step before it checks it (outside strict mode).
        let step = match step {
            Value::Number(n) if n.is_integer() && n.as_f64().is_some_and(|s| s >= 1.0) => {
                n.as_f64().unwrap_or(1.0)
            }
            _ => anyhow::bail!("{RANGE_STEP}: step must be a positive integer"),
        };
        check(from, to, step)?;
    }
    original(RANGE_STEP)?(span, params, args, strict)
}

fn sprintf(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    if let Some(Value::String(format)) = args.first() {
        check_format(format)?;
    }
    original(SPRINTF)?(span, params, args, strict)
}

/// Reads the widths and precisions of `format` as regorus 0.14.1 does (after `%`, a `.` or
/// any character Unicode calls numeric, then more such characters): a non-ASCII digit is
/// an error where regorus panics, and padding past [`MAX_SPRINTF_PADDING`] in all is a
/// limit error.
fn check_format(format: &str) -> anyhow::Result<()> {
    let digit = |c: char| {
        c.to_digit(10)
            .map(u64::from)
            .ok_or_else(|| anyhow::anyhow!("{SPRINTF}: {c:?} in a width is not a digit 0-9"))
    };
    let mut chars = format.chars().peekable();
    let mut padding: u64 = 0;
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        let Some(&first) = chars.peek() else {
            break;
        };
        chars.next();
        if first != '.' && !first.is_numeric() {
            // `%%` or a verb without a width.
            continue;
        }
        let mut width = if first == '.' { 0 } else { digit(first)? };
        while let Some(&next) = chars.peek().filter(|c| c.is_numeric()) {
            chars.next();
            width = width.saturating_mul(10).saturating_add(digit(next)?);
        }
        padding = padding.saturating_add(width);
    }
    if padding <= MAX_SPRINTF_PADDING {
        return Ok(());
    }
    tracing::warn!(
        padding,
        limit = MAX_SPRINTF_PADDING,
        "policy sprintf refused: too wide"
    );
    Err(LimitError::MemoryLimitExceeded {
        usage: padding,
        limit: MAX_SPRINTF_PADDING,
    }
    .into())
}

/// Refuses a range of more than [`MAX_RANGE_ELEMENTS`]; anything that is not two
/// numbers is left to the builtin's own checks.
fn check(from: &Value, to: &Value, step: f64) -> anyhow::Result<()> {
    let (Value::Number(from), Value::Number(to)) = (from, to) else {
        return Ok(());
    };
    let (Some(from), Some(to)) = (from.as_f64(), to.as_f64()) else {
        return Ok(());
    };
    let elements = ((to - from).abs() / step).floor() + 1.0;
    // NaN or infinite bounds fail the comparison too: refused, not guessed.
    #[allow(clippy::cast_precision_loss)]
    if elements <= MAX_RANGE_ELEMENTS as f64 {
        return Ok(());
    }
    // The limit error's own words name no builtin: the process log does, for the author.
    tracing::warn!(
        elements,
        limit = MAX_RANGE_ELEMENTS,
        "policy numbers.range refused: too many elements"
    );
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let usage = (elements.min(u64::MAX as f64) as u64).saturating_mul(VALUE_BYTES);
    Err(LimitError::MemoryLimitExceeded {
        usage,
        limit: MAX_RANGE_ELEMENTS * VALUE_BYTES,
    }
    .into())
}

const VALUE_BYTES: u64 = size_of::<Value>() as u64;

/// The limit error for a call refused before it runs (regorus propagates it even where
/// other builtin errors read as undefined, so `not` cannot turn it into a yes). Its own
/// words name no builtin: the process log does, for the author.
fn refuse(builtin: &'static str, usage: u64, limit: u64) -> anyhow::Error {
    tracing::warn!(
        builtin,
        usage,
        limit,
        "policy builtin refused: past its bound"
    );
    LimitError::MemoryLimitExceeded { usage, limit }.into()
}

/// A wrapper of the builtin `$builtin` that takes one text: `$check(builtin, text)` reads
/// the text first and refuses it, or the builtin runs. (Builtins are plain `fn`s, so each
/// wrapper is one.)
macro_rules! text_checked {
    ($wrapper:ident, $builtin:expr, $check:expr) => {
        pub(super) fn $wrapper(
            span: &Span,
            params: &[Ref<Expr>],
            args: &[Value],
            strict: bool,
        ) -> anyhow::Result<Value> {
            if let [Value::String(text)] = args {
                $check($builtin, text)?;
            }
            super::original($builtin)?(span, params, args, strict)
        }
    };
}
use text_checked;

fn original(name: &str) -> anyhow::Result<Builtin> {
    BUILTINS
        .get(name)
        .map(|builtin| builtin.0)
        .ok_or_else(|| anyhow::anyhow!("builtin {name} is missing"))
}

/// Calls a wrapper the way the VM calls builtins: an extension call has no spans, so the
/// builtin gets empty ones to name in its errors (as the VM does).
fn as_extension(wrapper: Builtin, args: &[Value]) -> anyhow::Result<Value> {
    let source = Source::from_contents("<builtin>".into(), String::new())?;
    let span = Span {
        source,
        line: 1,
        col: 1,
        start: 0,
        end: 0,
    };
    let params: Vec<Ref<Expr>> = args
        .iter()
        .map(|_| {
            Ref::new(Expr::Null {
                span: span.clone(),
                value: Value::Null,
                eidx: 0,
            })
        })
        .collect();
    wrapper(&span, &params, args, false)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use regorus::Value;

    use crate::policy::PolicyError;
    use crate::policy::compile::PolicySet;
    use crate::policy::source::tests::temp_dir;
    use crate::policy::source::{Files, PolicySources};

    /// `interpreter`: a rule reading `data` as a whole, which the VM does not compile.
    /// `rules` in a policy of their own, where `open` is true (on the interpreter, read
    /// from data: a policy with data falls back to it), compiled on the VM or not.
    pub(super) fn compile_rules(rules: &str, interpreter: bool) -> PolicySet {
        let dir = temp_dir("bounded");
        let extra = if interpreter {
            "open := object.get(data, \"open\", true)"
        } else {
            "open := true"
        };
        let policy = format!("package zabbix.mcp\nimport rego.v1\n{extra}\n{rules}\n");
        fs::write(dir.join("p.rego"), policy).expect("write");
        let sources = PolicySources::read(&dir, Files::Policies).expect("read");
        fs::remove_dir_all(&dir).ok();
        let set = PolicySet::compile(&sources).expect("compiles");
        assert_eq!(set.uses_vm(), !interpreter);
        set
    }

    fn compile(decision: &str, interpreter: bool) -> PolicySet {
        compile_rules(
            &format!(
                "wide if count(numbers.range(input.from, input.to)) > 10\n\
                 narrow if not wide\n\
                 stepped if count(numbers.range_step(input.from, input.to, input.step)) > 0\n\
                 {decision}"
            ),
            interpreter,
        )
    }

    fn eval(set: &PolicySet, from: i64, to: i64, step: i64) -> Result<Value, PolicyError> {
        let input = format!(r#"{{"from": {from}, "to": {to}, "step": {step}}}"#);
        set.evaluate(Value::from_json_str(&input).expect("json"))
    }

    #[test]
    fn ranges_past_the_bound_are_errors_not_allocations() {
        for interpreter in [false, true] {
            // `not wide` would allow if the refusal read as undefined.
            let set = compile(
                "decision := {\"allow\": open, \"narrow\": narrow}",
                interpreter,
            );
            let narrow = eval(&set, 1, 5, 1).expect("small range");
            assert_eq!(narrow["narrow"], Value::from(true), "{interpreter}");
            let ok = eval(&set, 0, 99_999, 1).expect("at the bound");
            assert_eq!(ok, Value::Undefined, "{interpreter}");
            for (from, to) in [(0, 1_000_000), (0, 2_147_483_647), (5, -1_000_000)] {
                let err = eval(&set, from, to, 1).expect_err("past the bound");
                assert!(
                    matches!(&err, PolicyError::Eval(m) if m.contains("memory limit")),
                    "{interpreter} {from}..{to}: {err:?}"
                );
            }
        }
    }

    #[test]
    fn sprintf_widths_past_the_bound_are_errors_not_allocations() {
        for interpreter in [false, true] {
            let set = compile_rules(
                "text := sprintf(input.format, [7])\n\
                 short if count(text) < 100\n\
                 default long := false\n\
                 long if not short\n\
                 decision := {\"allow\": open, \"text\": text, \"long\": long}",
                interpreter,
            );
            let eval = |format: &str| {
                let input = serde_json::json!({ "format": format }).to_string();
                set.evaluate(Value::from_json_str(&input).expect("json"))
            };
            let ok = eval("%05d|%%").expect("small widths");
            assert_eq!(ok["text"], Value::from("00007|%"), "{interpreter}");
            let wide = eval("%99999d").expect("at the bound");
            assert_eq!(wide["long"], Value::from(true), "{interpreter}");
            // Past the bound in one width, in a sum of them, and past u32 (regorus
            // overflowed); `not short` would allow if the refusal read as undefined.
            for format in ["%2000000000d", "%60000d%60000d", "%99999999999d"] {
                let err = eval(format).expect_err("past the bound");
                assert!(
                    matches!(&err, PolicyError::Eval(m) if m.contains("memory limit")),
                    "{interpreter} {format}: {err:?}"
                );
            }
            // regorus panicked on a width in other digits; now it is an error (a denial).
            for format in ["%²d", "%1٣d"] {
                let err = eval(format).expect_err("no width");
                assert!(
                    err.to_string().contains("not a digit"),
                    "{interpreter}: {err}"
                );
            }
        }
    }

    #[test]
    fn range_steps_below_one_and_past_the_bound() {
        for interpreter in [false, true] {
            let set = compile(
                "decision := {\"allow\": open, \"stepped\": stepped}",
                interpreter,
            );
            let ok = eval(&set, 10, 1, 3).expect("steps down");
            assert_eq!(ok["stepped"], Value::from(true), "{interpreter}");
            // regorus 0.14.1 divided by the step (0: a panic; -1: capacity overflow). Now
            // it is an error (a denial).
            for step in [0, -1] {
                let err = eval(&set, 1, 10, step).expect_err("no step");
                assert!(
                    err.to_string().contains("step must be"),
                    "{interpreter}: {err}"
                );
            }
            let err = eval(&set, 0, 2_147_483_647, 2).expect_err("past the bound");
            assert!(
                matches!(&err, PolicyError::Eval(m) if m.contains("memory limit")),
                "{interpreter}: {err:?}"
            );
            assert!(
                eval(&set, 0, 2_147_483_647, 100_000).is_ok(),
                "{interpreter}"
            );
        }
    }

    #[test]
    fn units_prefixes_durations_and_counts_on_agent_text() {
        for interpreter in [false, true] {
            let set = compile_rules(
                "x := units.parse(input.s) if input.f == \"units\"\n\
                 x := units.parse_bytes(input.s) if input.f == \"bytes\"\n\
                 x := count(net.cidr_expand(input.s)) if input.f == \"cidr\"\n\
                 x := time.parse_duration_ns(input.s) if input.f == \"duration\"\n\
                 x := strings.count(input.s, \"\") if input.f == \"count\"\n\
                 decision := {\"allow\": open, \"x\": x}",
                interpreter,
            );
            let eval = |f: &str, s: &str| {
                let input = serde_json::json!({ "f": f, "s": s }).to_string();
                set.evaluate(Value::from_json_str(&input).expect("json"))
            };
            let x = |f: &str, s: &str| eval(f, s).expect("evaluates")["x"].clone();
            assert_eq!(x("units", "5M"), Value::from(5_000_000), "{interpreter}");
            assert_eq!(x("bytes", "2KiB"), Value::from(2048), "{interpreter}");
            assert_eq!(
                x("cidr", "10.0.0.0/16"),
                Value::from(65536),
                "{interpreter}"
            );
            assert_eq!(x("duration", "1m"), Value::from(60_000_000_000_u64));
            assert_eq!(x("count", "aé"), Value::from(3), "{interpreter}");
            // Minutes of one thread (10^999999999), 39 s, without end: refused at once.
            for (f, s) in [
                ("units", "1e999999999"),
                ("bytes", "1e999999999KB"),
                ("cidr", "10.0.0.0/8"),
                ("cidr", "::/0"),
            ] {
                let err = eval(f, s).expect_err("past the bound");
                assert!(
                    matches!(&err, PolicyError::Eval(m) if m.contains("memory limit")),
                    "{interpreter} {f} {s}: {err:?}"
                );
            }
            // regorus panicked on this; now it is no duration (an error, a denial).
            let err = eval("duration", "1é").expect_err("no duration");
            assert!(
                err.to_string().contains("unknown unit"),
                "{interpreter}: {err}"
            );
        }
    }
}
