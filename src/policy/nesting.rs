//! A bound on how deep array, set and object brackets nest in a policy file, checked
//! before regorus parses it. regorus 0.14.1 reads each `[` or `{` as a comprehension
//! first and, when that fails, again as a literal, so parsing time doubles with each
//! level: 22 nested arrays took 22 s, 30 would take hours. A reload stuck there holds the
//! reload lock (no later set loads until a restart) and a core; a first load never ends.
//! Parentheses need no bound here: regorus refuses more than 32 of them.

/// Deeper than any hand-written policy nests (a decision object with `approvers` and
/// its group list inside a rule body is 4); regorus parses 16 in well under a second.
pub(crate) const MAX_NESTING: usize = 16;

/// Refuses `text` if its `[`/`{` brackets, outside strings and comments, nest deeper
/// than [`MAX_NESTING`]; the error names the line.
pub(crate) fn check(text: &str) -> Result<(), String> {
    let mut depth = 0usize;
    let mut line = 1usize;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            // A comment runs to the end of its line.
            '#' if chars.by_ref().any(|c| c == '\n') => line += 1,
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '`' => {
                for c in chars.by_ref() {
                    match c {
                        '\n' => line += 1,
                        '`' => break,
                        _ => {}
                    }
                }
            }
            '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(format!(
                        "line {line}: brackets nested deeper than {MAX_NESTING} (regorus takes exponential time to parse them)"
                    ));
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::{MAX_NESTING, check};
    use crate::policy::PolicyError;
    use crate::policy::source::tests::temp_dir;
    use crate::policy::source::{Files, PolicySources};

    #[test]
    fn a_deeply_nested_file_is_refused_before_regorus_parses_it() {
        // 30 levels: some hours of parsing before (22 took 22 s in a debug build).
        let dir = temp_dir("nesting");
        let deep = format!(
            "package zabbix.mcp\nx := {}1{}\ndecision := {{\"allow\": false}}\n",
            "[".repeat(30),
            "]".repeat(30)
        );
        fs::write(dir.join("p.rego"), deep).expect("write");
        for files in [Files::Policies, Files::WithTests] {
            let err = PolicySources::read(&dir, files).expect_err("refused");
            assert!(
                matches!(&err, PolicyError::Compile(m) if m.starts_with("p.rego: line 2: brackets nested deeper than 16")),
                "{err:?}"
            );
        }
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn nesting_is_bounded_outside_strings_and_comments() {
        let nested = |n: usize| format!("x := {}1{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(check(&nested(MAX_NESTING)), Ok(()));
        let err = check(&format!("package p\n\n{}", nested(MAX_NESTING + 1))).expect_err("deep");
        assert!(
            err.starts_with("line 3: brackets nested deeper than 16"),
            "{err}"
        );
        let objects = format!("x := {}1{}", "{\"a\": ".repeat(17), "}".repeat(17));
        assert!(check(&objects).is_err());
        // Brackets in strings, raw strings and comments are text.
        let text = format!(
            "# {}\nx := \"{}\\\"{}\"\ny := `{}\n{}`\nz := [1]\n",
            "[".repeat(40),
            "{".repeat(40),
            "[".repeat(40),
            "[".repeat(40),
            "{".repeat(40),
        );
        assert_eq!(check(&text), Ok(()));
        let after = format!("{text}{}", nested(17));
        assert!(check(&after).expect_err("deep").starts_with("line 6:"));
    }
}
