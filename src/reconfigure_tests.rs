//! A reload against an app built from a configuration file: what it applies, what waits
//! for a restart, and a file that does not load.

use std::path::PathBuf;
use std::sync::Arc;

use super::{Reconfigure, Reloaded};
use crate::app::App;
use crate::config::{Config, EnvContract, Param, Sources};
use crate::scratch::Scratch;

const BASE: &str = "FrontendURL=http://127.0.0.1:9/\nDecisionLog=/dev/null\n";

/// An app started from `file`, and its reloader.
fn start(file: PathBuf) -> (Reconfigure, Arc<App>) {
    let sources = Sources {
        config_file: Some(file),
        env: Default::default(),
        flags: Vec::new(),
        env_contract: EnvContract::Guard,
    };
    let config = Config::load(&sources).expect("valid");
    let reconfigure = Reconfigure::new(sources, |_| {}, &config);
    (reconfigure, App::new(config).expect("app"))
}

#[tokio::test]
async fn a_reload_applies_the_live_parameters_and_names_the_rest() {
    let dir = Scratch::new("reconfigure");
    let file = dir.write(
        "guard.conf",
        &format!("{BASE}AllowedIP=127.0.0.1\nTimeout=10\nToolPrefix=zbx_\n"),
    );
    let (reconfigure, app) = start(file);
    let me = "127.0.0.1".parse().expect("ip");
    assert!(app.allowed_peers.admits(me));
    let (_, generation) = app.exposure();

    dir.write(
        "guard.conf",
        &format!(
            "{BASE}AllowedIP=10.0.0.0/8\nTimeout=20\nToolPrefix=zbx_\nDenyTool=host_*\nRateLimit=5/60\n"
        ),
    );
    let done = reconfigure.reload(&app).await.expect("reloaded");
    assert_eq!(
        done,
        Reloaded {
            applied: vec![Param::AllowedIp, Param::DenyTool, Param::RateLimit],
            restart_required: vec![Param::Timeout],
        }
    );
    assert!(!app.allowed_peers.admits(me));
    assert!(app.allowed_peers.admits("10.9.8.7".parse().expect("ip")));
    let (exposure, now) = app.exposure();
    assert!(now > generation, "tool lists are built again");
    assert!(!exposure.allows("host_get"));
    assert_eq!(exposure.exposed_name("problem_get"), "zbx_problem_get");
    let applied = app.limiter.applied(None);
    assert_eq!(
        applied.param_calls.map(|r| r.to_string()).as_deref(),
        Some("5/60")
    );
    // The started Timeout still runs, and a second reload of the same file says so again.
    assert_eq!(app.config.timeout.as_secs(), 10);
    let again = reconfigure.reload(&app).await.expect("reloaded");
    assert!(again.applied.is_empty());
    assert_eq!(again.restart_required, vec![Param::Timeout]);
}

#[tokio::test]
async fn a_file_that_does_not_load_changes_nothing() {
    let dir = Scratch::new("reconfigure-bad");
    let file = dir.write("guard.conf", &format!("{BASE}AllowedIP=127.0.0.1\n"));
    let (reconfigure, app) = start(file);
    // A valid AllowedIP next to a rule that does not compile: neither is applied.
    dir.write(
        "guard.conf",
        &format!("{BASE}AllowedIP=10.0.0.0/8\nDenyToolRegexp=(unclosed\n"),
    );
    let error = reconfigure.reload(&app).await.expect_err("refused");
    assert!(error.to_string().contains("DenyToolRegexp"), "{error}");
    assert!(app.allowed_peers.admits("127.0.0.1".parse().expect("ip")));
    assert!(app.exposure().0.rules().is_empty());
    // Fixed, the next reload applies it.
    dir.write("guard.conf", &format!("{BASE}AllowedIP=10.0.0.0/8\n"));
    let done = reconfigure.reload(&app).await.expect("reloaded");
    assert_eq!(done.applied, vec![Param::AllowedIp]);
}

#[tokio::test]
async fn the_approval_page_peers_reload_when_the_page_runs() {
    let dir = Scratch::new("reconfigure-page");
    let page = "ApprovalListenIP=127.0.0.1\nApprovalListenPort=10099\nApprovalURL=http://127.0.0.1:10099\n";
    let file = dir.write(
        "guard.conf",
        &format!("{BASE}AllowedIP=127.0.0.1\n{page}ApprovalAllowedIP=127.0.0.1\n"),
    );
    let (reconfigure, app) = start(file);
    let peers = app.approval_peers.as_ref().expect("the page runs");
    assert!(peers.admits("127.0.0.1".parse().expect("ip")));
    dir.write(
        "guard.conf",
        &format!("{BASE}AllowedIP=127.0.0.1\n{page}ApprovalAllowedIP=192.0.2.0/24\n"),
    );
    let done = reconfigure.reload(&app).await.expect("reloaded");
    assert_eq!(done.applied, vec![Param::ApprovalAllowedIp]);
    assert!(done.restart_required.is_empty());
    assert!(!peers.admits("127.0.0.1".parse().expect("ip")));
    assert!(peers.admits("192.0.2.7".parse().expect("ip")));
    // The page turned off by the file: that waits for a restart, and its peers stay.
    dir.write("guard.conf", &format!("{BASE}AllowedIP=127.0.0.1\n"));
    let done = reconfigure.reload(&app).await.expect("reloaded");
    assert!(done.applied.is_empty());
    assert!(done.restart_required.contains(&Param::ApprovalListenPort));
    assert!(done.restart_required.contains(&Param::ApprovalAllowedIp));
    assert!(peers.admits("192.0.2.7".parse().expect("ip")));
}
