//! Hot reload: recompile the policy directory and swap the running set, but only for a
//! set that compiles and decides a sample input well; a broken set never replaces the
//! running one. Triggered by a polling watcher or by the server on SIGHUP.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::PolicyError;
use super::compile::PolicySet;
use super::decision::{Approval, Verdict};
use super::engine::PolicyEngine;
use super::input::{
    CallerInfo, ClientInfo, INPUT_VERSION, Phase, PolicyInput, ToolInfo, ToolKind, ZabbixInfo,
};
use super::source::{Files, Fingerprint, PolicySource, PolicySources, Revision};

/// How often the watcher looks at the directory by default.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(2);

impl PolicyEngine {
    /// Recompiles the policy set and, if the new set is sound, makes it the running one.
    /// On error the running set (if any) stays, and the error is kept for
    /// [`status`](Self::status). Counts every attempt, the first load included. A
    /// directory that changes while it is read is refused (the next poll sees it again).
    pub fn reload(&self) -> Result<Revision, PolicyError> {
        let mut watched = self
            .shared
            .reload_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let result = match &self.shared.source {
            PolicySource::BuiltIn => self.install(&PolicySources::built_in()),
            PolicySource::Dir(dir) => {
                // Stat before reading, so a change made during the read is seen again.
                let before = Fingerprint::of(dir).unwrap_or_default();
                let result = read_stable(dir, &before).and_then(|sources| self.install(&sources));
                watched.loaded(before);
                result
            }
        };
        self.record(result)
    }

    /// What the server calls on SIGHUP: a reload whose outcome is logged. Reading and
    /// compiling are blocking work, so they run on the blocking pool, never on a
    /// runtime worker. Must be called inside a Tokio runtime.
    pub async fn on_sighup(&self) -> Result<Revision, PolicyError> {
        tracing::info!(source = %self.shared.source, "SIGHUP: reloading policies");
        let engine = self.clone();
        tokio::task::spawn_blocking(move || engine.reload())
            .await
            .unwrap_or_else(|e| Err(PolicyError::ReloadTask(e.to_string())))
    }

    /// Polls the directory every `every` (see [`DEFAULT_POLL_INTERVAL`]) and reloads when
    /// a policy file or `data.json` changed and then stayed unchanged for one more poll
    /// (names, sizes, mtimes, then revision), so a directory being written file by file
    /// is never installed half-updated. Must be called inside a Tokio runtime. The task
    /// ends when every clone of the engine is dropped, or at once for the built-in set;
    /// abort the handle to stop it earlier.
    pub fn spawn_watcher(&self, every: Duration) -> JoinHandle<()> {
        let weak = Arc::downgrade(&self.shared);
        let watch = matches!(self.shared.source, PolicySource::Dir(_));
        tokio::spawn(async move {
            if !watch {
                return;
            }
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

    /// One watcher step. `None`: nothing to do yet (no change, or a change that has not
    /// been seen unchanged by two polls in a row).
    pub(crate) fn poll(&self) -> Option<Result<Revision, PolicyError>> {
        let PolicySource::Dir(dir) = &self.shared.source else {
            return None;
        };
        let mut watched = self
            .shared
            .reload_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // An unreadable directory fingerprints as empty: it is reported once, not every poll.
        let now = watched.changed(Fingerprint::of(dir).unwrap_or_default())?;
        let result = match read_stable(dir, now) {
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
        tracing::info!(source = %self.shared.source, %revision, vm, "policy set loaded");
        self.shared.installed.send_if_modified(|installed| {
            let changed = installed.as_ref() != Some(&revision);
            if changed {
                *installed = Some(revision.clone());
            }
            changed
        });
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
                    source = %self.shared.source,
                    error = %e,
                    running = ?self.revision().map(|r| r.to_string()),
                    "policy set rejected; the running set stays"
                );
            }
        }
        result
    }
}

/// Reads the set in `dir` and checks that the directory still is as `before` described
/// it: a set that changed during the read may mix old and new files.
fn read_stable(dir: &Path, before: &Fingerprint) -> Result<PolicySources, PolicyError> {
    let sources = PolicySources::read(dir, Files::Policies)?;
    let after = Fingerprint::of(dir).unwrap_or_default();
    if &after != before {
        return Err(PolicyError::Unstable(dir.to_path_buf()));
    }
    Ok(sources)
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
    [
        sample_input(Phase::Call, "host_get", ToolKind::Read, "host.get"),
        sample_input(
            Phase::List,
            "problem_acknowledge",
            ToolKind::Write,
            "event.acknowledge",
        ),
    ]
}

/// A plain input for `name` from an anonymous caller, as the smoke test and the start
/// checks evaluate it.
fn sample_input(phase: Phase, name: &str, kind: ToolKind, method: &str) -> PolicyInput {
    PolicyInput {
        version: INPUT_VERSION,
        phase,
        tool: ToolInfo {
            name: name.into(),
            exposed_name: name.into(),
            kind,
            method: method.into(),
            destructive: false,
            idempotent: true,
        },
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
        targets: None,
        approver: None,
    }
}

impl PolicyEngine {
    /// The approval the running policy asks for a plain write call (`problem_acknowledge`
    /// from an anonymous caller); `None` when it denies it or no set is loaded.
    pub fn sample_write_approval(&self) -> Option<Approval> {
        let input = sample_input(
            Phase::Call,
            "problem_acknowledge",
            ToolKind::Write,
            "event.acknowledge",
        );
        let decision = self.decide(&input);
        (decision.allow && !decision.dry_run_would_deny).then_some(decision.approval)
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;
    use std::time::{Duration, Instant};

    use crate::policy::input::tests::sample_input;
    use crate::policy::source::tests::temp_dir;
    use crate::policy::{PolicyEngine, PolicyError, PolicyMode, PolicySource};
    use crate::telemetry::fallback::capture::Capture;

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
        assert!(engine.poll().is_none() && engine.poll().is_none());
        write(&dir, DENY);
        assert!(engine.poll().is_none(), "a change waits for one quiet poll");
        assert!(matches!(engine.poll(), Some(Ok(_))));
        assert!(!engine.decide(&sample_input()).allow);
        // A broken set is reported once, not on every poll.
        write(&dir, "package zabbix.mcp\ndecision := {\n");
        assert!(engine.poll().is_none());
        assert!(matches!(engine.poll(), Some(Err(_))));
        assert!(engine.poll().is_none());
        assert_eq!(engine.status().reloads_failed, 1);
        fs::remove_dir_all(&dir).ok();
    }

    /// A directory updated file by file (here: a policy that needs its data, then the
    /// data) must never run in between: the watcher installs only a set that two polls in
    /// a row saw unchanged.
    #[test]
    fn a_directory_written_in_two_steps_is_installed_only_when_complete() {
        let dir = temp_dir("two-steps");
        write(&dir, DENY);
        let engine = PolicyEngine::load(&dir, PolicyMode::Enforce).expect("loads");
        let first = engine.revision().expect("revision");
        // Step 1: a policy that allows unless the data lists the tool. Alone, it allows all.
        write(
            &dir,
            "package zabbix.mcp\nimport rego.v1\n\
             decision := {\"allow\": false, \"reasons\": [\"listed\"]} if input.tool.name in object.get(data, \"blocked\", [])\n\
             else := {\"allow\": true}\n",
        );
        assert!(engine.poll().is_none());
        assert_eq!(
            engine.revision(),
            Some(first.clone()),
            "half-written set installed"
        );
        // Step 2, before the next poll: the data.
        fs::write(
            dir.join("data.json"),
            r#"{"blocked": ["maintenance_create"]}"#,
        )
        .expect("write");
        assert!(engine.poll().is_none());
        assert_eq!(
            engine.revision(),
            Some(first.clone()),
            "half-written set installed"
        );
        // Settled: the complete set goes in.
        assert!(matches!(engine.poll(), Some(Ok(_))));
        let d = engine.decide(&sample_input());
        assert_eq!(
            (d.allow, d.reasons.as_slice()),
            (false, ["listed".to_string()].as_slice())
        );
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn built_in_source_loads_the_default_policy_and_is_not_watched() {
        let engine = PolicyEngine::load_or_deny_all(PolicySource::BuiltIn, PolicyMode::Enforce);
        let status = engine.status();
        assert!(status.loaded && status.last_error.is_none(), "{status:?}");
        assert_eq!(status.source, PolicySource::BuiltIn);
        assert_eq!(status.source.to_string(), "built-in policies/default.rego");
        assert!(engine.decide(&sample_input()).allow);
        assert!(engine.poll().is_none());
        assert!(engine.reload().is_ok());
    }

    /// SIGHUP must not compile on the runtime's own thread: with a thread-local log
    /// subscriber on the (single) runtime thread, the reload's "policy set loaded" line
    /// must come from elsewhere, while the SIGHUP line itself is seen.
    #[tokio::test(flavor = "current_thread")]
    async fn sighup_compiles_off_the_runtime_thread() {
        let dir = temp_dir("sighup-thread");
        write(&dir, ALLOW);
        let engine = PolicyEngine::load(&dir, PolicyMode::Enforce).expect("loads");
        write(&dir, DENY);
        let capture = Capture::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(capture.clone())
            .with_ansi(false)
            .finish();
        let _local = tracing::subscriber::set_default(subscriber);
        let revision = engine.on_sighup().await.expect("reloads");
        assert_eq!(engine.revision(), Some(revision));
        let text = capture.text();
        assert!(text.contains("SIGHUP: reloading policies"), "{text}");
        assert!(
            !text.contains("policy set loaded"),
            "compiled on the runtime thread:\n{text}"
        );
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
        assert_eq!(engine.on_sighup().await.expect("reloads"), first);
        assert!(engine.decide(&sample_input()).allow);
        fs::remove_dir_all(&dir).ok();
    }
}
