//! `policy test` and `policy eval`: an `opa test`-like runner over a policy directory and a
//! one-off evaluation of an input file. Tests run on the interpreter (they use `with`);
//! `eval` runs on the same compiled VM path as the server.

use std::fmt;
use std::fs;
use std::path::Path;

use regorus::unstable::{Rule, RuleHead};
use regorus::{Engine, Value};
use serde::Serialize;

use super::compile::PolicySet;
use super::convert::json_value;
use super::decision::Verdict;
use super::engine::build;
use super::input::ToolKind;
use super::source::{Files, PolicySources};
use super::{PolicyError, PolicyMode};

/// Outcome of running every `test_*` rule of a directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestReport {
    pub passed: usize,
    pub failed: usize,
    pub failures: Vec<TestFailure>,
}

/// One failed test: `data.<package>.<rule>` and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestFailure {
    pub name: String,
    pub reason: String,
}

impl TestReport {
    /// `N passed, N failed`.
    pub fn summary(&self) -> String {
        format!("{} passed, {} failed", self.passed, self.failed)
    }
}

impl fmt::Display for TestReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for failure in &self.failures {
            writeln!(f, "FAIL {}: {}", failure.name, failure.reason)?;
        }
        write!(f, "{}", self.summary())
    }
}

/// Loads every `*.rego` of `dir` (tests included, not recursive) and `data.json`, and
/// evaluates every rule named `test_*` of every package; a test passes iff it is `true`.
pub fn run_tests(dir: &Path) -> Result<TestReport, PolicyError> {
    let sources = PolicySources::read(dir, Files::WithTests)?;
    let mut engine = Engine::new();
    for (name, contents) in &sources.modules {
        engine
            .add_policy(name.clone(), contents.clone())
            .map_err(|e| PolicyError::Compile(e.to_string()))?;
    }
    if let Some(data) = &sources.data {
        let data = Value::from_json_str(data).map_err(|e| PolicyError::Data {
            path: sources.data_path(),
            message: e.to_string(),
        })?;
        engine
            .add_data(data)
            .map_err(|e| PolicyError::Compile(format!("data.json: {e}")))?;
    }
    let mut report = TestReport {
        passed: 0,
        failed: 0,
        failures: Vec::new(),
    };
    for name in test_rules(&mut engine) {
        match engine.eval_rule(name.clone()) {
            Ok(Value::Bool(true)) => report.passed += 1,
            outcome => {
                report.failed += 1;
                let reason = match outcome {
                    Ok(Value::Undefined) => "undefined (a condition in the body is false)".into(),
                    Ok(other) => format!("evaluated to {other}, expected true"),
                    Err(e) => format!("error: {e}"),
                };
                report.failures.push(TestFailure { name, reason });
            }
        }
    }
    Ok(report)
}

/// Evaluates `data.zabbix.mcp.decision` of `dir` for `input` (any JSON, not only a full
/// input document) and returns `{revision, vm, result, decision}`: the raw result
/// (`null` if undefined) and the decision the server would enforce.
pub fn eval_input(dir: &Path, input: &serde_json::Value) -> Result<serde_json::Value, PolicyError> {
    let sources = PolicySources::read(dir, Files::Policies)?;
    let set = PolicySet::compile(&sources)?;
    let raw = set.evaluate(json_value(input))?;
    // Approval defaults depend on the tool kind; a partial input counts as a read.
    let kind = match input.pointer("/tool/kind").and_then(|k| k.as_str()) {
        Some("write") => ToolKind::Write,
        _ => ToolKind::Read,
    };
    let result = if raw == Value::Undefined {
        serde_json::Value::Null
    } else {
        serde_json::to_value(&raw).map_err(|e| PolicyError::Eval(e.to_string()))?
    };
    let verdict = Verdict::parse(&raw, kind);
    let revision = set.revision.to_string();
    let decision = build(verdict, raw, kind, 0, revision, PolicyMode::Enforce);
    let decision = serde_json::json!({
        "allow": decision.allow,
        "reasons": decision.reasons,
        "approval": decision.approval,
        "history": decision.history,
        "max_limit": decision.max_limit,
    });
    Ok(serde_json::json!({
        "revision": set.revision.as_str(),
        "vm": set.uses_vm(),
        "result": result,
        "decision": decision,
    }))
}

/// `policy test [DIR]`: prints failures and `N passed, N failed`; exit code 0 when
/// nothing failed, 1 when a test failed, 2 when the directory could not be loaded.
pub fn cli_test(dir: &Path) -> i32 {
    match run_tests(dir) {
        Ok(report) => {
            crate::cli::print_line(&report.to_string());
            i32::from(report.failed > 0)
        }
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

/// `policy eval --input FILE [DIR]`: prints the result and decision as JSON; exit code 0
/// when the policy was evaluated (whatever the decision), 2 on any error.
pub fn cli_eval(dir: &Path, input: &Path) -> i32 {
    let outcome = fs::read_to_string(input)
        .map_err(|source| PolicyError::Io {
            path: input.to_path_buf(),
            source,
        })
        .and_then(|text| {
            serde_json::from_str(&text)
                .map_err(|e| PolicyError::Input(format!("{}: {e}", input.display())))
        })
        .and_then(|value| eval_input(dir, &value));
    match outcome.and_then(|v| {
        serde_json::to_string_pretty(&v).map_err(|e| PolicyError::Eval(e.to_string()))
    }) {
        Ok(text) => {
            crate::cli::print_line(&text);
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

/// `data.<package>.<rule>` of every rule named `test_*`, in file order, each once (a rule
/// defined by several bodies is one test, as in OPA). Functions are not tests.
fn test_rules(engine: &mut Engine) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    // The parsed modules are only reachable through regorus' unstable AST API.
    for module in engine.get_modules() {
        let package = module.package.refr.span().text();
        for rule in &module.policy {
            let refr = match rule.as_ref() {
                Rule::Spec {
                    head: RuleHead::Compr { refr, .. },
                    ..
                } => refr,
                _ => continue,
            };
            let rule_name = refr.span().text();
            let is_test = rule_name.starts_with("test_")
                && rule_name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_');
            let full = format!("data.{package}.{rule_name}");
            if is_test && !names.contains(&full) {
                names.push(full);
            }
        }
    }
    names
}

#[cfg(test)]
#[path = "test_runner_tests.rs"]
pub(crate) mod tests;
