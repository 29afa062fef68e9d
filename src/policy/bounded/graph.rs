//! `graph.reachable_paths` follows every path from its start nodes that repeats no node, and
//! a graph has exponentially many of those: a graph built from an agent's names, each
//! `a/b` an edge (`{e[0]: [f[1] | some f in edges; f[0] == e[0]] | some e in edges}`), 160
//! names making 40 diamonds, held the runtime's one thread past 30 s and would for days
//! (2^40 paths; release build). One call is one VM instruction, so neither the
//! instruction budget nor the timer stops it. The same walk is counted first, without
//! building anything, and stopped at [`MAX_PATH_STEPS`]: past it the call is a limit error
//! (a denial). `graph.reachable` visits each node once and is left as it is.

use std::collections::BTreeSet;

use regorus::Value;
use regorus::unstable::{Expr, Ref, Span};
use regorus::value::Object;

use super::{original, refuse};

pub(super) const REACHABLE_PATHS: &str = "graph.reachable_paths";

/// Steps one call may take, each node visited counting one and each path found its length:
/// far above the paths of a group tree of a thousand nodes, some milliseconds.
pub(crate) const MAX_PATH_STEPS: u64 = 100_000;

pub(super) fn reachable_paths(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    if let [Value::Object(graph), starts] = args {
        let mut walk = Walk {
            graph,
            on_path: BTreeSet::new(),
            steps: 0,
        };
        let nodes: Box<dyn Iterator<Item = &Value>> = match starts {
            Value::Array(nodes) => Box::new(nodes.iter()),
            Value::Set(nodes) => Box::new(nodes.iter()),
            _ => Box::new(std::iter::empty()),
        };
        for node in nodes {
            if walk.visit(node).is_err() {
                return Err(refuse(REACHABLE_PATHS, walk.steps, MAX_PATH_STEPS));
            }
        }
    }
    original(REACHABLE_PATHS)?(span, params, args, strict)
}

/// The builtin's walk (regorus 0.14.1 `graph::visit`), counted instead of recorded.
struct Walk<'a> {
    graph: &'a Object,
    /// The nodes of the path walked (the builtin's `visited`; no node is on it twice).
    on_path: BTreeSet<&'a Value>,
    steps: u64,
}

/// The walk went past [`MAX_PATH_STEPS`].
struct TooLong;

impl<'a> Walk<'a> {
    fn visit(&mut self, node: &'a Value) -> Result<(), TooLong> {
        self.step(1)?;
        if matches!(node, Value::String(s) if s.is_empty()) {
            return self.record();
        }
        let Some(neighbors) = self.graph.get(node) else {
            return self.record();
        };
        if !self.on_path.insert(node) {
            return self.record();
        }
        // Anything but a list of neighbors or null is the builtin's to refuse.
        let result = match neighbors {
            Value::Array(next) if !next.is_empty() => {
                next.iter().rev().try_for_each(|n| self.visit(n))
            }
            Value::Set(next) if !next.is_empty() => {
                next.iter().rev().try_for_each(|n| self.visit(n))
            }
            Value::Array(_) | Value::Set(_) | Value::Null => self.record(),
            _ => Ok(()),
        };
        self.on_path.remove(node);
        result
    }

    /// The builtin copies the path into its result.
    fn record(&mut self) -> Result<(), TooLong> {
        self.step(u64::try_from(self.on_path.len()).unwrap_or(u64::MAX))
    }

    fn step(&mut self, steps: u64) -> Result<(), TooLong> {
        self.steps = self.steps.saturating_add(steps);
        if self.steps > MAX_PATH_STEPS {
            return Err(TooLong);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use regorus::Value;
    use serde_json::json;

    use crate::policy::PolicyError;
    use crate::policy::bounded::tests::compile_rules;

    /// Names `n0/a0, n0/b0, a0/n1, b0/n1, ...`: `layers` diamonds in a row, 2^layers paths.
    fn diamonds(layers: usize) -> Vec<String> {
        (0..layers)
            .flat_map(|l| {
                [
                    format!("n{l}/a{l}"),
                    format!("n{l}/b{l}"),
                    format!("a{l}/n{}", l + 1),
                    format!("b{l}/n{}", l + 1),
                ]
            })
            .collect()
    }

    #[test]
    fn paths_of_an_agent_built_graph_past_the_bound_are_refused() {
        for interpreter in [false, true] {
            let set = compile_rules(
                "edges := [split(n, \"/\") | some n in input.names]\n\
                 g := {e[0]: [f[1] | some f in edges; f[0] == e[0]] | some e in edges}\n\
                 paths := graph.reachable_paths(g, [\"n0\"])\n\
                 decision := {\"allow\": open, \"paths\": count(paths)}",
                interpreter,
            );
            let eval = |layers: usize| {
                let input = json!({ "names": diamonds(layers) }).to_string();
                set.evaluate(Value::from_json_str(&input).expect("json"))
            };
            // 2^10 paths, the same as the builtin's: the walk is only counted first.
            let ok = eval(10).expect("within the bound");
            assert_eq!(ok["paths"], Value::from(1024), "{interpreter}");
            // 2^16 paths; 2^40 held the runtime's one thread for days.
            let err = eval(16).expect_err("past the bound");
            assert!(
                matches!(&err, PolicyError::Eval(m) if m.contains("memory limit")),
                "{interpreter}: {err:?}"
            );
        }
    }
}
