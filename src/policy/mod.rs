//! Rego policy: the versioned input document, the decision, the engine that evaluates
//! `data.zabbix.mcp.decision` with regorus, hot reload, the decision log and an
//! `opa test`-like runner.
//!
//! Everything here fails closed: no policy, an evaluation error or anything but a
//! well-formed decision object with `allow == true` is a denial (see [`Decision`]).
//! Per-call evaluation runs on regorus' compiled VM (`rvm`); the tree-walking interpreter
//! is only used for `test_*` rules (they need `with`) and as a fallback for a policy the
//! VM compiler rejects.

mod bounded;
mod compile;
mod convert;
mod decision;
mod engine;
mod input;
mod log;
mod log_writer;
mod memo;
mod nesting;
mod recursion;
mod reload;
mod source;
mod strict;
mod test_runner;
pub(crate) mod timestamp;
mod unique_keys;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

pub(crate) use decision::new_decision_id;
pub use decision::{Approval, Approvers, Decision, HistoryLimits, RateLimits};
pub use engine::{PolicyEngine, PolicyStatus};
pub use input::{
    ApproverInfo, CallerInfo, ClientInfo, INPUT_VERSION, Phase, PolicyInput, ResourceInfo, SignIn,
    TargetGroup, TargetHost, Targets, ToolInfo, ToolKind, ZabbixInfo,
};
pub use log::list::{HiddenTool, ListRecord};
pub use log::{DecisionLog, DecisionLogOptions, DecisionLogSink, Logged};
pub use log_writer::flush_all as flush_decision_logs;
pub use reload::DEFAULT_POLL_INTERVAL;
pub use source::{PolicySource, Revision};
pub use test_runner::{TestFailure, TestReport, cli_eval, cli_test, eval_input, run_tests};

/// The rule every policy set must define; its value is the decision object.
pub const ENTRYPOINT: &str = "data.zabbix.mcp.decision";

/// The decision log `path` field: the entrypoint the way OPA writes it.
pub const DECISION_PATH: &str = "zabbix/mcp/decision";

/// Everything that can go wrong in this module.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// Reading a policy directory or one of its files failed.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The directory holds no `*.rego` file to load.
    #[error("{}: no *.rego policy files (subdirectories are not searched)", .0.display())]
    NoPolicyFiles(PathBuf),
    /// The directory changed while it was being read; it is read again once it settles.
    #[error("{}: the policy directory changed while it was being read", .0.display())]
    Unstable(PathBuf),
    /// The blocking reload task did not finish (it panicked or the runtime is stopping).
    #[error("policy reload task failed: {0}")]
    ReloadTask(String),
    /// `data.json` is not a JSON object.
    #[error("{}: invalid data document: {message}", path.display())]
    Data { path: PathBuf, message: String },
    /// A policy file does not parse or the set does not compile.
    #[error("policy compilation failed: {0}")]
    Compile(String),
    /// The compiled set did not produce a well-formed decision for a sample input.
    #[error("policy set {revision} failed its smoke evaluation: {message}")]
    Smoke { revision: String, message: String },
    /// Evaluating a policy failed (error, instruction or time limit).
    #[error("policy evaluation failed: {0}")]
    Eval(String),
    /// regorus panicked during an evaluation (a bug of a builtin); the process log has the
    /// panic's message, which may quote agent text.
    #[error("policy evaluation failed: the policy engine panicked (see the process log)")]
    Panic,
    /// An input document could not be converted for evaluation.
    #[error("invalid policy input: {0}")]
    Input(String),
    /// The decision log sink could not be opened.
    #[error("decision log {target}: {source}")]
    Log {
        target: String,
        #[source]
        source: std::io::Error,
    },
}

/// `enforce` blocks denied calls; `dry-run` evaluates and logs but lets everything through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyMode {
    #[default]
    Enforce,
    DryRun,
}

impl PolicyMode {
    /// The configuration spelling (`enforce` / `dry-run`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::DryRun => "dry-run",
        }
    }
}

impl fmt::Display for PolicyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PolicyMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "enforce" => Ok(Self::Enforce),
            "dry-run" => Ok(Self::DryRun),
            other => Err(format!(
                "policy mode must be enforce or dry-run, got {other:?}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PolicyMode;

    #[test]
    fn policy_mode_round_trips() {
        for mode in [PolicyMode::Enforce, PolicyMode::DryRun] {
            assert_eq!(mode.as_str().parse::<PolicyMode>(), Ok(mode));
        }
        assert!("permissive".parse::<PolicyMode>().is_err());
    }
}
