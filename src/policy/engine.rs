//! The policy engine: the current compiled set behind an atomic swap, and `decide`.
//! Evaluation takes a read lock only long enough to clone an `Arc`; a reload compiles
//! without touching that lock and then swaps the pointer, so it never stalls a decision.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use regorus::Value;
use serde::Serialize;

use super::compile::PolicySet;
use super::decision::{Approval, Decision, Verdict, new_decision_id};
use super::input::{PolicyInput, ToolKind};
use super::source::{Fingerprint, PolicySource, Revision};
use super::{PolicyError, PolicyMode};
use crate::reload::Settle;

/// Evaluates every policy decision of the sidecar. Cheap to clone (shared state).
#[derive(Clone)]
pub struct PolicyEngine {
    pub(crate) shared: Arc<Shared>,
}

/// What `/readyz` and `zabbix://about` show about the policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyStatus {
    /// The configured directory, or the built-in default policy.
    pub source: PolicySource,
    pub mode: PolicyMode,
    /// Revision of the running set; `None` until a set has loaded.
    pub revision: Option<String>,
    /// Whether a set is running (false: every decision denies).
    pub loaded: bool,
    /// Whether the running set is evaluated by the compiled VM (false: interpreter).
    pub vm: bool,
    /// Why the latest load or reload failed; cleared by the next success.
    pub last_error: Option<String>,
    pub reloads_ok: u64,
    pub reloads_failed: u64,
}

/// State shared by clones of one engine and its watcher.
pub(crate) struct Shared {
    pub(crate) source: PolicySource,
    pub(crate) mode: PolicyMode,
    pub(crate) current: RwLock<Option<Arc<PolicySet>>>,
    pub(crate) last_error: Mutex<Option<String>>,
    /// Serializes reloads (watcher vs SIGHUP) and remembers the directory as they saw it.
    pub(crate) reload_lock: Mutex<Settle<Fingerprint>>,
    pub(crate) reloads_ok: AtomicU64,
    pub(crate) reloads_failed: AtomicU64,
    /// The revision in force, for those who act when it changes ([`PolicyEngine::revisions`]).
    pub(crate) installed: tokio::sync::watch::Sender<Option<Revision>>,
}

impl PolicyEngine {
    /// Loads and compiles the policy set in `dir` (not recursive). Fails if the set does
    /// not compile or does not produce a well-formed decision for a sample input.
    pub fn load(dir: &Path, mode: PolicyMode) -> Result<Self, PolicyError> {
        let engine = Self::empty(PolicySource::Dir(dir.to_path_buf()), mode);
        engine.reload()?;
        Ok(engine)
    }

    /// Like [`load`](Self::load) for any source, but a failed first load yields an engine
    /// that denies everything, with the error in [`status`](Self::status); a later reload
    /// (watcher, SIGHUP) can still bring a fixed set in.
    pub fn load_or_deny_all(source: PolicySource, mode: PolicyMode) -> Self {
        let engine = Self::empty(source, mode);
        if let Err(e) = engine.reload() {
            tracing::error!(
                source = %engine.shared.source,
                error = %e,
                "no policy loaded: denying every call"
            );
        }
        engine
    }

    fn empty(source: PolicySource, mode: PolicyMode) -> Self {
        Self {
            shared: Arc::new(Shared {
                source,
                mode,
                current: RwLock::new(None),
                last_error: Mutex::new(None),
                reload_lock: Mutex::new(Settle::new()),
                reloads_ok: AtomicU64::new(0),
                reloads_failed: AtomicU64::new(0),
                installed: tokio::sync::watch::Sender::new(None),
            }),
        }
    }

    /// Where the policy set comes from.
    pub fn source(&self) -> &PolicySource {
        &self.shared.source
    }

    /// Enforce or dry-run.
    pub fn mode(&self) -> PolicyMode {
        self.shared.mode
    }

    /// Revision of the running set, if any.
    pub fn revision(&self) -> Option<Revision> {
        self.current().map(|set| set.revision.clone())
    }

    /// The revision in force, marked changed each time a different one is installed (a
    /// set installed again unchanged, as SIGHUP does, is no change).
    pub fn revisions(&self) -> tokio::sync::watch::Receiver<Option<Revision>> {
        self.shared.installed.subscribe()
    }

    /// Decides `input`. Never fails: every problem is a denial with a reason.
    pub fn decide(&self, input: &PolicyInput) -> Decision {
        let started = Instant::now();
        let set = self.current();
        let (outcome, raw) = match &set {
            None => (Err("no policy loaded".to_string()), Value::Undefined),
            Some(set) => match set.evaluate(input.to_rego()) {
                Ok(raw) => (super::memo::verdict(&raw, input.tool.kind), raw),
                Err(e) => (Err(e.to_string()), Value::Undefined),
            },
        };
        let eval_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let revision = set.map(|s| s.revision.to_string()).unwrap_or_default();
        let decision = build(
            outcome,
            raw,
            input.tool.kind,
            eval_ns,
            revision,
            self.shared.mode,
        );
        if decision.dry_run_would_deny {
            tracing::info!(
                decision_id = %decision.decision_id,
                tool = %input.tool.name,
                reasons = ?decision.reasons,
                "dry-run: policy would deny"
            );
        }
        decision
    }

    /// Snapshot for health and about endpoints.
    pub fn status(&self) -> PolicyStatus {
        let current = self.current();
        PolicyStatus {
            source: self.shared.source.clone(),
            mode: self.shared.mode,
            revision: current.as_ref().map(|s| s.revision.to_string()),
            loaded: current.is_some(),
            vm: current.as_ref().is_some_and(|s| s.uses_vm()),
            last_error: self
                .shared
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            reloads_ok: self.shared.reloads_ok.load(Ordering::Relaxed),
            reloads_failed: self.shared.reloads_failed.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn current(&self) -> Option<Arc<PolicySet>> {
        // A poisoned lock still holds a valid Arc (the writer only swaps it).
        self.shared
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Turns an evaluation outcome into the decision the caller acts on, applying the
/// fail-closed rules and the mode.
pub(crate) fn build(
    outcome: Result<Verdict, String>,
    raw: Value,
    kind: ToolKind,
    eval_ns: u64,
    revision: String,
    mode: PolicyMode,
) -> Decision {
    let verdict = outcome.unwrap_or_else(|reason| Verdict {
        allow: false,
        reasons: vec![reason],
        approval: Approval::default_for(kind),
        approvers: None,
        history: None,
        max_limit: None,
        rate: None,
    });
    let mut reasons = verdict.reasons;
    if !verdict.allow && reasons.is_empty() {
        reasons.push("denied by policy (no reason given)".into());
    }
    let dry_run_would_deny = mode == PolicyMode::DryRun && !verdict.allow;
    Decision {
        decision_id: new_decision_id(),
        allow: verdict.allow || dry_run_would_deny,
        reasons,
        approval: verdict.approval,
        approvers: verdict.approvers,
        history: verdict.history,
        max_limit: verdict.max_limit,
        // Dry-run blocks nothing the policy says, its limits included.
        rate: if mode == PolicyMode::DryRun {
            None
        } else {
            verdict.rate
        },
        dry_run_would_deny,
        eval_ns,
        revision,
        raw,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use regorus::{Engine, Value};
    use serde_json::json;

    use super::PolicyEngine;
    use crate::policy::compile::PolicySet;
    use crate::policy::decision::{Approval, HistoryLimits};
    use crate::policy::input::tests::sample_input;
    use crate::policy::input::{Phase, ToolKind};
    use crate::policy::source::tests::temp_dir;
    use crate::policy::source::{Files, PolicySources};
    use crate::policy::test_runner::tests::{shipped_policies, shipped_policy_dirs};
    use crate::policy::{ENTRYPOINT, PolicyMode, PolicySource};

    fn engine_with(policy: &str, mode: PolicyMode) -> PolicyEngine {
        let dir = temp_dir("engine");
        fs::write(dir.join("p.rego"), policy).expect("write");
        let engine = PolicyEngine::load(&dir, mode).expect("loads");
        fs::remove_dir_all(&dir).ok();
        engine
    }

    #[test]
    fn default_policy_allows_reads_and_writes_with_approval() {
        let engine = PolicyEngine::load(&shipped_policies(), PolicyMode::Enforce).expect("loads");
        let mut input = sample_input();
        let write = engine.decide(&input);
        assert!(write.allow, "{write:?}");
        assert_eq!(write.approval, Approval::IfSupported);
        assert_eq!(
            write.history,
            Some(HistoryLimits {
                max_window_seconds: 604_800,
                max_age_seconds: 604_800
            })
        );
        assert_eq!(write.max_limit, Some(1000));
        assert!(write.reasons.is_empty());
        assert!(write.eval_ns > 0);
        assert_eq!(Some(write.revision.clone()), engine.status().revision);
        let id = uuid::Uuid::parse_str(&write.decision_id).expect("uuid");
        assert_eq!(id.get_version_num(), 4);
        assert_eq!(write.decision_id, id.hyphenated().to_string());

        input.tool.kind = ToolKind::Read;
        input.phase = Phase::List;
        let read = engine.decide(&input);
        assert!(read.allow);
        assert_eq!(read.approval, Approval::None);
        assert_ne!(read.decision_id, write.decision_id);
        let status = engine.status();
        assert!(status.loaded && status.vm && status.last_error.is_none());
        assert_eq!((status.reloads_ok, status.reloads_failed), (1, 0));
    }

    #[test]
    fn no_policy_denies_everything() {
        let dir = temp_dir("engine-empty");
        assert!(PolicyEngine::load(&dir, PolicyMode::Enforce).is_err());
        let engine =
            PolicyEngine::load_or_deny_all(PolicySource::Dir(dir.clone()), PolicyMode::Enforce);
        let d = engine.decide(&sample_input());
        assert!(!d.allow);
        assert_eq!(d.reasons, ["no policy loaded"]);
        assert!(d.revision.is_empty());
        let status = engine.status();
        assert!(!status.loaded);
        assert!(status.last_error.expect("error").contains("no *.rego"));
        assert_eq!(status.reloads_failed, 1);
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn malformed_and_denying_results_deny_with_reasons() {
        let policy = "package zabbix.mcp\nimport rego.v1\n\
            decision := {\"allow\": true, \"approval\": \"later\"} if input.arguments.name == \"bad\"\n\
            decision := {\"allow\": false} if input.arguments.name == \"silent\"\n\
            decision := {\"allow\": false, \"reasons\": [\"nope\"]} if input.arguments.name == \"no\"\n\
            decision := {\"allow\": true} if input.arguments.name == \"minimal\"\n\
            n := numbers.range(1, 5000)\n\
            decision := {\"allow\": count([1 | some a in n; some b in n; a == b]) > 0} if input.arguments.name == \"loop\"\n\
            decision := {\"allow\": false} if not input.arguments.name\n";
        let engine = engine_with(policy, PolicyMode::Enforce);
        let decide = |name: &str| {
            let mut input = sample_input();
            input.arguments.insert("name".into(), json!(name));
            engine.decide(&input)
        };
        let bad = decide("bad");
        assert!(!bad.allow);
        assert_eq!(
            bad.reasons,
            ["approval must be one of none|if_supported|required|page"]
        );
        assert_eq!(
            decide("silent").reasons,
            ["denied by policy (no reason given)"]
        );
        assert_eq!(decide("no").reasons, ["nope"]);
        let undefined = decide("other");
        assert!(!undefined.allow);
        assert!(undefined.reasons[0].starts_with("policy result undefined"));
        let runaway = decide("loop");
        assert!(!runaway.allow);
        assert!(
            runaway.reasons[0].starts_with("policy evaluation failed"),
            "{runaway:?}"
        );
        let minimal = decide("minimal");
        assert!(minimal.allow);
        assert_eq!(
            minimal.approval,
            Approval::IfSupported,
            "writes default to if_supported"
        );
    }

    #[test]
    fn dry_run_lets_denials_through_but_records_them() {
        let engine = engine_with(
            "package zabbix.mcp\ndecision := {\"allow\": false, \"reasons\": [\"closed\"]}\n",
            PolicyMode::DryRun,
        );
        let d = engine.decide(&sample_input());
        assert!(d.allow && d.dry_run_would_deny);
        assert_eq!(d.reasons, ["closed"]);
        assert_eq!(
            d.raw_result(),
            Some(json!({"allow": false, "reasons": ["closed"]}))
        );
        let open = engine_with(
            "package zabbix.mcp\ndecision := {\"allow\": true}\n",
            PolicyMode::DryRun,
        );
        assert!(!open.decide(&sample_input()).dry_run_would_deny);
    }

    /// The VM must agree with the reference interpreter on every shipped policy.
    #[test]
    fn vm_matches_interpreter_on_shipped_policies() {
        let mut inputs = Vec::new();
        for (tool, kind, groups, args) in [
            (
                "host_get",
                ToolKind::Read,
                vec!["Zabbix administrators"],
                json!({"search": "a*"}),
            ),
            (
                "problem_get",
                ToolKind::Read,
                vec!["Tier 1 operators"],
                json!({"groupids": ["2"]}),
            ),
            (
                "problem_acknowledge",
                ToolKind::Write,
                vec!["Tier 1 operators"],
                json!({}),
            ),
            (
                "maintenance_create",
                ToolKind::Write,
                vec!["Operators"],
                json!({"groupids": ["9"]}),
            ),
            (
                "history_get",
                ToolKind::Read,
                vec!["Operators"],
                json!({"hostids": vec!["1"; 30]}),
            ),
        ] {
            for phase in [Phase::List, Phase::Call] {
                let mut input = sample_input();
                input.phase = phase;
                input.tool.name = tool.into();
                input.tool.kind = kind;
                input.caller.usrgrps = groups.iter().map(|g| (*g).to_string()).collect();
                input.arguments = args.as_object().cloned().unwrap_or_default();
                inputs.push(input);
            }
        }
        for dir in shipped_policy_dirs() {
            let sources = PolicySources::read(&dir, Files::Policies).expect("read");
            let set = PolicySet::compile(&sources).expect("compiles");
            assert!(
                set.uses_vm(),
                "{} fell back to the interpreter",
                dir.display()
            );
            let mut reference = Engine::new();
            for (name, text) in &sources.modules {
                reference
                    .add_policy(name.clone(), text.clone())
                    .expect("parses");
            }
            if let Some(data) = &sources.data {
                reference
                    .add_data(Value::from_json_str(data).expect("json"))
                    .expect("data");
            }
            for input in &inputs {
                let value = input.to_rego();
                let vm = set.evaluate(value.clone()).expect("vm evaluates");
                reference.set_input(value);
                let expected = reference.eval_rule(ENTRYPOINT.into()).expect("evaluates");
                assert_eq!(vm, expected, "{} {}", dir.display(), input.tool.name);
            }
        }
    }
}
