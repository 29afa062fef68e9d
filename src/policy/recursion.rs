//! Refusing recursive rules at load. Rego forbids recursion (OPA refuses it when it
//! compiles); regorus 0.14.1 notices only some of it, and its VM calls rules on the
//! native stack, so `a if b` with `b if a` compiled, loaded and aborted the process with
//! a stack overflow when evaluated: at the smoke test of a reload, or at the first call
//! whose input reached the cycle. A fault in a policy must deny or be refused, never take
//! the sidecar down.
//!
//! The check reads the compiled program: the compiler compiles one rule at a time, so
//! each rule's code runs from its first body to the next rule's; a `CallRule` or a
//! `FunctionCall` in that code is an edge, and a cycle among the edges is refused.

use regorus::rvm::Instruction;
use regorus::rvm::program::Program;

/// The names of a cycle of rules that call each other (the first repeated at the end), if
/// there is one.
pub(crate) fn find_cycle(program: &Program) -> Option<Vec<String>> {
    let calls = calls(program);
    // 0: not seen, 1: on the current path, 2: done.
    let mut state = vec![0u8; calls.len()];
    for start in 0..calls.len() {
        let mut path = Vec::new();
        if let Some(cycle) = visit(start, &calls, &mut state, &mut path) {
            let names = cycle
                .into_iter()
                .map(|rule| {
                    program
                        .rule_infos
                        .get(rule)
                        .map_or_else(|| format!("rule {rule}"), |info| info.name.clone())
                })
                .collect();
            return Some(names);
        }
    }
    None
}

/// Depth-first search without recursion of our own (a long chain of rules is data).
fn visit(
    start: usize,
    calls: &[Vec<usize>],
    state: &mut [u8],
    path: &mut Vec<usize>,
) -> Option<Vec<usize>> {
    if state.get(start) != Some(&0) {
        return None;
    }
    // (rule, index of its next callee to look at)
    let mut stack = vec![(start, 0usize)];
    state[start] = 1;
    path.push(start);
    while let Some((rule, next)) = stack.last_mut() {
        let rule = *rule;
        let Some(&callee) = calls[rule].get(*next) else {
            state[rule] = 2;
            stack.pop();
            path.pop();
            continue;
        };
        *next += 1;
        match state.get(callee) {
            Some(0) => {
                state[callee] = 1;
                path.push(callee);
                stack.push((callee, 0));
            }
            Some(1) => {
                let from = path.iter().position(|r| *r == callee).unwrap_or(0);
                let mut cycle = path[from..].to_vec();
                cycle.push(callee);
                return Some(cycle);
            }
            _ => {}
        }
    }
    None
}

/// The rules each rule calls, by rule index.
fn calls(program: &Program) -> Vec<Vec<usize>> {
    let rules = program.rule_infos.len();
    // Where each rule's code starts: its first body or destructuring block.
    let mut starts: Vec<(usize, usize)> = Vec::new();
    for (rule, info) in program.rule_infos.iter().enumerate() {
        let bodies = info.definitions.iter().flatten().copied();
        let blocks = info.destructuring_blocks.iter().flatten().copied();
        if let Some(start) = bodies.chain(blocks).min() {
            starts.push((start as usize, rule));
        }
    }
    starts.sort_unstable();
    let mut calls = vec![Vec::new(); rules];
    for (pc, instruction) in program.instructions.iter().enumerate() {
        let callee = match instruction {
            Instruction::CallRule { rule_index, .. } => usize::from(*rule_index),
            Instruction::FunctionCall { params_index } => {
                match program
                    .instruction_data
                    .get_function_call_params(*params_index)
                {
                    Some(params) => usize::from(params.func_rule_index),
                    None => continue,
                }
            }
            _ => continue,
        };
        // The rule whose code this is: the last to start at or before `pc` (the entry
        // points' code comes before every rule's and belongs to none).
        let owner = starts.partition_point(|(start, _)| *start <= pc);
        let Some((_, caller)) = owner.checked_sub(1).and_then(|i| starts.get(i)) else {
            continue;
        };
        if callee < rules && !calls[*caller].contains(&callee) {
            calls[*caller].push(callee);
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use std::fs;

    use crate::policy::PolicyError;
    use crate::policy::compile::PolicySet;
    use crate::policy::source::tests::temp_dir;
    use crate::policy::source::{Files, PolicySources};

    fn compile(rules: &str) -> Result<PolicySet, PolicyError> {
        let dir = temp_dir("recursion");
        let policy = format!("package zabbix.mcp\nimport rego.v1\n{rules}\n");
        fs::write(dir.join("p.rego"), policy).expect("write");
        let sources = PolicySources::read(&dir, Files::Policies).expect("read");
        fs::remove_dir_all(&dir).ok();
        PolicySet::compile(&sources)
    }

    #[test]
    fn recursive_rules_are_refused_at_load() {
        // Each compiled before, and overflowed the stack (aborting the process) when a
        // call's input reached the cycle: the first two at once, the last for one tool.
        let cases = [
            (
                "f(x) := y if { x > 0; y := f(x - 1) }\nf(0) := 0\n\
                 decision := {\"allow\": f(input.now) >= 0}",
                "data.zabbix.mcp.f -> data.zabbix.mcp.f",
            ),
            (
                "f(x) := g(x)\ng(x) := f(x)\ndecision := {\"allow\": f(1) == 1}",
                "data.zabbix.mcp.f -> data.zabbix.mcp.g -> data.zabbix.mcp.f",
            ),
            (
                "a if { input.tool.name == \"none\"; b }\nb if a\n\
                 decision := {\"allow\": true} if not a",
                "data.zabbix.mcp.a -> data.zabbix.mcp.b -> data.zabbix.mcp.a",
            ),
        ];
        for (rules, chain) in cases {
            let err = compile(rules).expect_err(rules);
            assert!(
                matches!(&err, PolicyError::Compile(m) if m.ends_with(chain)),
                "{rules}: {err:?}"
            );
        }
    }

    #[test]
    fn shared_helpers_are_no_cycle() {
        // Two rules calling one helper, a function called twice, a chain: a diamond, no loop.
        let set = compile(
            "helper := input.now\nf(x) := x + helper\n\
             a if f(1) > 0\nb if { f(2) > 0; a }\nc if { a; b }\n\
             decision := {\"allow\": c} if a\ndecision := {\"allow\": false} if not a",
        )
        .expect("compiles");
        assert!(set.uses_vm());
    }
}
