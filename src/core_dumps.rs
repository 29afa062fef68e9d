//! Core dumps off for the whole process, before it reads any secret. It holds callers' API
//! tokens (the identity cache, every request in flight), approval-page sessions, the seal
//! key and, for a moment, approvers' passwords: a core file (a crash, an abort, `kill
//! -ABRT` where `ulimit -c` allows one) held them all in clear, and so did its copies sent
//! with bug reports. Not dumpable, the kernel writes no core, and other processes of the
//! sidecar's own user can no longer attach to it or read its memory or `environ` (its
//! `/proc/<pid>` files become root's); root still can (`gcore` as root takes a core on
//! purpose). Zeroing freed tokens would add little once no one but root can read them.

use std::sync::OnceLock;

/// What [`forbid`] did, kept for the log line once logging is set up.
static OUTCOME: OnceLock<Result<(), String>> = OnceLock::new();

/// Makes the process not dumpable (`PR_SET_DUMPABLE` 0). Kept across threads and for the
/// process's life; only an `execve` or a change of user would reset it, and the sidecar
/// does neither.
pub fn forbid() {
    OUTCOME.get_or_init(|| not_dumpable().map_err(|error| error.to_string()));
}

/// One line of the process log saying whether [`forbid`] worked.
pub fn log_outcome() {
    match OUTCOME.get() {
        Some(Ok(())) => tracing::info!(
            target: crate::telemetry::LIFECYCLE_TARGET,
            "core dumps disabled (not dumpable)"
        ),
        Some(Err(error)) => tracing::warn!(
            %error,
            "core dumps could not be disabled: a core file would hold callers' tokens"
        ),
        None => {}
    }
}

#[cfg(target_os = "linux")]
fn not_dumpable() -> std::io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(std::io::Error::from)
}

#[cfg(not(target_os = "linux"))]
fn not_dumpable() -> std::io::Result<()> {
    Ok(())
}
