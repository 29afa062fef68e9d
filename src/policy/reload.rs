//! Hot reload: recompile the policy directory and swap the running set, but only for a
//! set that compiles and decides a sample input well; a broken set never replaces the
//! running one. Triggered by a polling watcher or by the server on SIGHUP.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::PolicyError;
use super::compile::PolicySet;
use super::decision::Verdict;
use super::engine::PolicyEngine;
use super::input::{
    CallerInfo, ClientInfo, INPUT_VERSION, Phase, PolicyInput, ToolInfo, ToolKind, ZabbixInfo,
};
use super::source::{Files, Fingerprint, PolicySources, Revision};

/// How often the watcher looks at the directory by default.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(2);

impl PolicyEngine {
    /// Recompiles the policy directory and, if the new set is sound, makes it the running
    /// one. On error the running set (if any) stays, and the error is kept for
    /// [`status`](Self::status). Counts every attempt, the first load included.
    pub fn reload(&self) -> Result<Revision, PolicyError> {
        let mut seen = self
            .shared
            .reload_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Stat before reading, so a change made during the read is seen by the next poll.
        *seen = Some(Fingerprint::of(&self.shared.dir).unwrap_or_default());
        let result = PolicySources::read(&self.shared.dir, Files::Policies)
            .and_then(|sources| self.install(&sources));
        self.record(result)
    }

    /// What the server calls on SIGHUP: a reload whose outcome is logged; the server
    /// does not need to handle the result.
    pub fn on_sighup(&self) -> Result<Revision, PolicyError> {
        tracing::info!(dir = %self.shared.dir.display(), "SIGHUP: reloading policies");
        self.reload()
    }

    /// Polls the directory every `every` (see [`DEFAULT_POLL_INTERVAL`]) and reloads when
    /// a policy file or `data.json` changed (names, sizes, mtimes, then revision). Must
    /// be called inside a Tokio runtime. The task ends when every clone of the engine
    /// is dropped; abort the handle to stop it earlier.
    pub fn spawn_watcher(&self, every: Duration) -> JoinHandle<()> {
        let weak = Arc::downgrade(&self.shared);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            ticks.tick().await; // the first tick is immediate; the set was just loaded
            loop {
                ticks.tick().await;
                let Some(shared) = weak.upgrade() else { break };
                let engine = PolicyEngine { shared };
                // Stat, read and compile are blocking work: keep them off the runtime.
                if tokio::task::spawn_blocking(move || engine.poll())
                    .await
                    .is_err()
                {
                    tracing::error!("policy watcher poll panicked");
                }
            }
        })
    }

    /// One watcher step. `None`: nothing changed.
    pub(crate) fn poll(&self) -> Option<Result<Revision, PolicyError>> {
        let mut seen = self
            .shared
            .reload_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // An unreadable directory fingerprints as empty: it is reported once, not every poll.
        let now = Fingerprint::of(&self.shared.dir).unwrap_or_default();
        if seen.as_ref() == Some(&now) {
            return None;
        }
        *seen = Some(now);
        let result = match PolicySources::read(&self.shared.dir, Files::Policies) {
            // Touched but identical: nothing to do.
            Ok(sources) if self.revision().as_ref() == Some(&sources.revision) => return None,
            Ok(sources) => self.install(&sources),
            Err(e) => Err(e),
        };
        Some(self.record(result))
    }

    /// Compiles, smoke-tests and swaps in `sources`.
    fn install(&self, sources: &PolicySources) -> Result<Revision, PolicyError> {
        let set = PolicySet::compile(sources)?;
        smoke(&set)?;
        let revision = set.revision.clone();
        let vm = set.uses_vm();
        *self
            .shared
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(set));
        tracing::info!(dir = %self.shared.dir.display(), %revision, vm, "policy set loaded");
        Ok(revision)
    }

    fn record(&self, result: Result<Revision, PolicyError>) -> Result<Revision, PolicyError> {
        let mut last_error = self
            .shared
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match &result {
            Ok(_) => {
                self.shared.reloads_ok.fetch_add(1, Ordering::Relaxed);
                *last_error = None;
            }
            Err(e) => {
                self.shared.reloads_failed.fetch_add(1, Ordering::Relaxed);
                *last_error = Some(e.to_string());
                tracing::error!(
                    dir = %self.shared.dir.display(),
                    error = %e,
                    running = ?self.revision().map(|r| r.to_string()),
                    "policy set rejected; the running set stays"
                );
            }
        }
        result
    }
}

/// A set must return a well-formed decision (allow or deny) for a plain read and a plain
/// write; a set that only yields undefined or malformed results would deny everything.
fn smoke(set: &PolicySet) -> Result<(), PolicyError> {
    for input in sample_inputs() {
        let fail = |message: String| PolicyError::Smoke {
            revision: set.revision.to_string(),
            message: format!("{} {}: {message}", input.tool.name, phase_name(input.phase)),
        };
        let raw = set
            .evaluate(input.to_rego())
            .map_err(|e| fail(e.to_string()))?;
        Verdict::parse(&raw, input.tool.kind).map_err(fail)?;
    }
    Ok(())
}

const fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::List => "list",
        Phase::Call => "call",
        Phase::Resource => "resource",
        Phase::Approve => "approve",
    }
}

fn sample_inputs() -> [PolicyInput; 2] {
    let tool = |name: &str, kind, method: &str| ToolInfo {
        name: name.into(),
        exposed_name: name.into(),
        kind,
        method: method.into(),
        destructive: false,
        idempotent: true,
    };
    let sample = |phase, tool| PolicyInput {
        version: INPUT_VERSION,
        phase,
        tool,
        arguments: serde_json::Map::new(),
        caller: CallerInfo {
            userid: "0".into(),
            username: "policy-smoke-test".into(),
            user_type: 1,
            roleid: "0".into(),
            usrgrps: Vec::new(),
            token_id: String::new(),
        },
        client: ClientInfo {
            address: "127.0.0.1".into(),
            name: None,
            version: None,
            protocol_version: None,
            elicitation: Vec::new(),
        },
        zabbix: ZabbixInfo {
            version: "7.0.0".into(),
        },
        now: super::input::unix_now(),
        resource: None,
        approver: None,
    };
    [
        sample(Phase::Call, tool("host_get", ToolKind::Read, "host.get")),
        sample(
            Phase::List,
            tool("problem_acknowledge", ToolKind::Write, "event.acknowledge"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;
    use std::time::{Duration, Instant};

    use crate::policy::input::tests::sample_input;
    use crate::policy::source::tests::temp_dir;
    use crate::policy::{PolicyEngine, PolicyError, PolicyMode};

    const ALLOW: &str = "package zabbix.mcp\ndecision := {\"allow\": true}\n";
    const DENY: &str =
        "package zabbix.mcp\ndecision := {\"allow\": false, \"reasons\": [\"v2\"]}\n";

    fn write(dir: &Path, text: &str) {
        fs::write(dir.join("policy.rego"), text).expect("write");
    }

    #[test]
    fn broken_sets_never_replace_the_running_one() {
        let dir = temp_dir("reload");
        write(&dir, ALLOW);
        let engine = PolicyEngine::load(&dir, PolicyMode::Enforce).expect("loads");
        let first = engine.revision().expect("revision");

        write(&dir, "package zabbix.mcp\ndecision := {\n");
        assert!(matches!(engine.reload(), Err(PolicyError::Compile(_))));
        // A set that compiles but never yields a decision fails the smoke evaluation.
        write(
            &dir,
            "package zabbix.mcp\ndecision := {\"allow\": true} if input.nothing\n",
        );
        let smoke = engine.reload();
        assert!(matches!(smoke, Err(PolicyError::Smoke { .. })), "{smoke:?}");
        fs::write(dir.join("data.json"), "[]").expect("write");
        assert!(matches!(engine.reload(), Err(PolicyError::Data { .. })));
        fs::remove_file(dir.join("data.json")).expect("rm");

        let status = engine.status();
        assert_eq!(status.revision.as_deref(), Some(first.as_str()));
        assert!(status.last_error.expect("error").contains("data.json"));
        assert_eq!((status.reloads_ok, status.reloads_failed), (1, 3));
        assert!(engine.decide(&sample_input()).allow);

        write(&dir, DENY);
        let second = engine.reload().expect("reloads");
        assert_ne!(second, first);
        let status = engine.status();
        assert!(status.last_error.is_none());
        assert_eq!(status.reloads_ok, 2);
        let d = engine.decide(&sample_input());
        assert_eq!(
            (d.allow, d.reasons.as_slice()),
            (false, ["v2".to_string()].as_slice())
        );
        assert_eq!(d.revision, second.to_string());
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn poll_reloads_only_on_content_changes() {
        let dir = temp_dir("poll");
        write(&dir, ALLOW);
        let engine = PolicyEngine::load(&dir, PolicyMode::Enforce).expect("loads");
        assert!(engine.poll().is_none(), "nothing changed");
        // Same content, new mtime: fingerprint differs, revision does not.
        std::thread::sleep(Duration::from_millis(20));
        write(&dir, ALLOW);
        assert!(engine.poll().is_none());
        write(&dir, DENY);
        assert!(matches!(engine.poll(), Some(Ok(_))));
        assert!(!engine.decide(&sample_input()).allow);
        // A broken set is reported once, not on every poll.
        write(&dir, "package zabbix.mcp\ndecision := {\n");
        assert!(matches!(engine.poll(), Some(Err(_))));
        assert!(engine.poll().is_none());
        assert_eq!(engine.status().reloads_failed, 1);
        fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test]
    async fn watcher_picks_up_changes_and_sighup_reloads() {
        let dir = temp_dir("watch");
        write(&dir, ALLOW);
        let engine = PolicyEngine::load(&dir, PolicyMode::Enforce).expect("loads");
        let first = engine.revision().expect("revision");
        let watcher = engine.spawn_watcher(Duration::from_millis(20));
        write(&dir, DENY);
        let deadline = Instant::now() + Duration::from_secs(10);
        while engine.revision().as_ref() == Some(&first) {
            assert!(Instant::now() < deadline, "watcher did not reload");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!engine.decide(&sample_input()).allow);
        watcher.abort();

        write(&dir, ALLOW);
        assert_eq!(engine.on_sighup().expect("reloads"), first);
        assert!(engine.decide(&sample_input()).allow);
        fs::remove_dir_all(&dir).ok();
    }
}
