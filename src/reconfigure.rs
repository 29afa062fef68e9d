//! Configuration reload on SIGHUP (`systemctl reload`): the configuration is read again
//! from the sources it was started with (the `-c` file and its `Include`s; variables and
//! flags are those of the start, and still win over the file), validated whole, and what
//! can change while the sidecar runs is put in force at once:
//!
//! - `AllowedIP` and `ApprovalAllowedIP`: new connections are checked against the new
//!   list, and open connections whose peer it leaves out are closed once their requests
//!   under way are answered;
//! - the exposure rules (`AllowTool`, `DenyTool`, `AllowToolRegexp`, `DenyToolRegexp`):
//!   the next `tools/list` and every call after the reload see the new tool set;
//! - `RateLimit` and `MaxConcurrent`, for the calls that follow;
//! - `DebugLevel`, for the lines logged from then on (not when `RUST_LOG` sets the filter).
//!
//! A reload keeps open connections, stateful sessions and pending approvals, which a
//! restart (with the memory store) loses. Every other parameter takes effect at the next
//! restart: a reload that changes one names it (warning) and sets
//! `config_restart_required`. A file that does not load changes nothing (fail closed: no
//! half-applied configuration) and is counted as a failed reload.

use tokio::sync::Mutex;

use crate::app::App;
use crate::config::{self, Config, ConfigError, Param, Sources};
use crate::exposure::Exposure;
use crate::metrics::ConfigReload;
use crate::telemetry;

/// What a reload puts in force without a restart.
pub const LIVE: [Param; 9] = [
    Param::AllowedIp,
    Param::ApprovalAllowedIp,
    Param::AllowTool,
    Param::DenyTool,
    Param::AllowToolRegexp,
    Param::DenyToolRegexp,
    Param::DebugLevel,
    Param::RateLimit,
    Param::MaxConcurrent,
];

/// Reloads the configuration of one running app.
pub struct Reconfigure {
    sources: Sources,
    /// What a mode changes in a loaded configuration before use (`stdio` does), done again
    /// to every reloaded one so that it compares like with like.
    adjust: fn(&mut Config),
    /// The configuration the last reload put in force (at first the started one).
    applied: Mutex<Config>,
}

/// What one reload did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// Changed and now in force.
    pub applied: Vec<Param>,
    /// Different from the running configuration; in force after a restart.
    pub restart_required: Vec<Param>,
}

impl std::fmt::Display for Reloaded {
    /// `applied AllowedIP,DenyTool; restart required for none`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "applied {}, restart required for {}",
            names(&self.applied),
            names(&self.restart_required)
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReconfigureError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("the configuration could not be read: {0}")]
    Task(String),
    /// The reload's policy set did not load: its configuration waits for one that does.
    #[error("not applied: the policy set does not load ({0}); fix it and reload again")]
    PolicyNotLoaded(String),
}

impl Reconfigure {
    pub fn new(sources: Sources, adjust: fn(&mut Config), started: &Config) -> Reconfigure {
        Reconfigure {
            sources,
            adjust,
            applied: Mutex::new(started.clone()),
        }
    }

    /// Reads the configuration again and applies it; logs and counts the outcome.
    pub async fn reload(&self, app: &App) -> Result<Reloaded, ReconfigureError> {
        let outcome = self.load_and_apply(app).await;
        match &outcome {
            Ok(done) => {
                tracing::info!(
                    applied = %names(&done.applied),
                    restart_required = %names(&done.restart_required),
                    "configuration reloaded"
                );
                if !done.restart_required.is_empty() {
                    tracing::warn!(
                        parameters = %names(&done.restart_required),
                        "configuration changes that take effect only at a restart; the running values are kept"
                    );
                }
                app.metrics.config_reload(ConfigReload::Applied {
                    restart_required: !done.restart_required.is_empty(),
                });
            }
            Err(error) => {
                tracing::error!(%error, "configuration reload failed; the running configuration is kept");
                app.metrics.config_reload(ConfigReload::Failed);
            }
        }
        outcome
    }

    /// Applies nothing of a reload whose policy set did not load: a configuration change
    /// often goes with a policy change (a `DenyTool` dropped for a rule in Rego), and half of
    /// such a change must not be put in force. Logged and counted as a failed reload.
    pub fn hold(&self, app: &App, policy_error: String) -> Result<Reloaded, ReconfigureError> {
        let error = ReconfigureError::PolicyNotLoaded(policy_error);
        tracing::error!(%error, "configuration reload failed; the running configuration is kept");
        app.metrics.config_reload(ConfigReload::Failed);
        Err(error)
    }

    async fn load_and_apply(&self, app: &App) -> Result<Reloaded, ReconfigureError> {
        let sources = self.sources.clone();
        let adjust = self.adjust;
        // File reads and the DNS names of AllowedIP block: off the async threads.
        let new = tokio::task::spawn_blocking(move || {
            Config::load(&sources).map(|mut config| {
                adjust(&mut config);
                config
            })
        })
        .await
        .map_err(|error| ReconfigureError::Task(error.to_string()))??;
        // One reload at a time: each compares against what the one before applied.
        let mut applied = self.applied.lock().await;
        let mut done = Reloaded::default();
        for param in config::changed(&applied, &new) {
            if apply(app, &new, param) {
                done.applied.push(param);
            }
        }
        done.restart_required = config::changed(&app.config, &new)
            .into_iter()
            .filter(|param| !can_apply(app, &new, *param))
            .collect();
        *applied = new;
        Ok(done)
    }
}

/// Whether `param` of `new` can be put in force in this app: one of [`LIVE`];
/// `ApprovalAllowedIP` only when the approval page runs and stays on, `DebugLevel` only
/// when it sets the filter.
fn can_apply(app: &App, new: &Config, param: Param) -> bool {
    match param {
        Param::ApprovalAllowedIp => app.approval_peers.is_some() && new.approval_page.is_some(),
        Param::DebugLevel => telemetry::debug_level_reloadable(),
        _ => LIVE.contains(&param),
    }
}

/// Puts `param` of `new` in force; false when it cannot be (see [`can_apply`]).
fn apply(app: &App, new: &Config, param: Param) -> bool {
    if !can_apply(app, new, param) {
        return false;
    }
    match param {
        Param::AllowedIp => {
            app.allowed_peers.replace(&new.allowed_ip);
        }
        Param::ApprovalAllowedIp => {
            if let (Some(peers), Some(page)) = (&app.approval_peers, &new.approval_page) {
                peers.replace(&page.allowed_ip);
            }
        }
        Param::AllowTool | Param::DenyTool | Param::AllowToolRegexp | Param::DenyToolRegexp => {
            // The prefix is the started one: tool names change only at a restart.
            let (current, _) = app.exposure();
            app.replace_exposure(Exposure::new(current.prefix(), new.tool_rules.clone()));
        }
        Param::DebugLevel => return telemetry::set_debug_level(new.debug_level),
        Param::RateLimit | Param::MaxConcurrent => app.limiter.replace_params(
            new.caller_limits.rate_limit,
            new.caller_limits.max_concurrent,
        ),
        _ => return false,
    }
    true
}

/// `AllowedIP,DenyTool`, or `none`.
fn names(params: &[Param]) -> String {
    if params.is_empty() {
        return "none".to_owned();
    }
    params
        .iter()
        .map(|p| p.name())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
#[path = "reconfigure_tests.rs"]
mod tests;
