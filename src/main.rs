//! The `zabbix-mcp-guard` binary: parse the command line, load the configuration, run.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use zabbix_mcp_guard::app::App;
use zabbix_mcp_guard::cli::{self, Command, PolicyCommand};
use zabbix_mcp_guard::config::{
    Config, DecisionLogSink, FileAccess, LogType, SessionMode, Sources, TlsAccept,
};
use zabbix_mcp_guard::pidfile::PidFile;
use zabbix_mcp_guard::policy;
use zabbix_mcp_guard::preflight::{self, Finding};
use zabbix_mcp_guard::reconfigure::Reconfigure;
use zabbix_mcp_guard::server::Server;
use zabbix_mcp_guard::service_manager::{self, NotifyEnv, ServiceManager};
use zabbix_mcp_guard::startup::StartupWarning;
use zabbix_mcp_guard::stdio;
use zabbix_mcp_guard::telemetry;

/// mimalloc instead of glibc's malloc: a call allocates and frees a few hundred blocks,
/// and glibc spent a fifth of a call's instructions on them (README "Performance"). Built
/// without transparent huge pages (`no_thp`), which would otherwise make its first arena
/// 2 MB pages and double the idle RSS.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // First: the configuration read next may hold secrets (the seal key, a Redis URL), and
    // stdio's token is in the environment.
    zabbix_mcp_guard::core_dumps::forbid();
    escaped_panics();
    let cli = cli::parse();
    match cli.action() {
        Command::Policy { command } => policy(command, cli.params.policy_dir.as_deref()),
        Command::Stdio => stdio(&cli),
        Command::Serve => {
            let sources = cli.sources();
            match load(sources.clone()) {
                Some(config) => run(config, sources, cli.test_config, serve),
                None => ExitCode::FAILURE,
            }
        }
    }
}

/// A panic is one line of the process log with its text escaped. A builtin inside regorus
/// panics quoting agent text (`time.format` on an agent's layout): the default hook wrote
/// it to stderr as it was, newlines and all, so an agent could write lines of its own
/// there, and with `LogType=file` the panic was not in the log at all.
fn escaped_panics() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        // Cut: the text may quote a whole request's worth of agent text.
        let text: String = text.chars().take(1000).collect();
        let text = zabbix_mcp_guard::display::escape_text(&text);
        let at = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if tracing::dispatcher::has_been_set() {
            tracing::error!(panic.location = %at, panic.message = %text, "panicked");
        } else {
            eprintln!("zabbix-mcp-guard: panicked at {at}: {text}");
        }
    }));
}

/// The configuration, or `None` after printing why it is not valid.
fn load(sources: Sources) -> Option<Config> {
    Config::load(&sources)
        .map_err(|error| eprintln!("zabbix-mcp-guard: configuration error: {error}"))
        .ok()
}

/// How a mode starts: with its configuration and the sources a reload reads again.
type Start = fn(Config, Sources) -> anyhow::Result<()>;

/// `-T` prints the effective configuration and loads what a start would load from files;
/// otherwise `start` runs until shutdown.
fn run(config: Config, sources: Sources, test_config: bool, start: Start) -> ExitCode {
    if test_config {
        return test(&config, &sources);
    }
    match start(config, sources) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("zabbix-mcp-guard: {}", causes(&error));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, `: `-joined, each cause left out when the text before it
/// already ends with it: most errors here say their source in their own message, and
/// `{:#}` wrote it twice (`decision log /x/d.log: No such file or directory (os error 2):
/// No such file or directory (os error 2)`).
fn causes(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.ends_with(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

/// `-T`: the effective configuration, then a line per file loaded, warnings, and every
/// failure (on stderr); it passes only when nothing failed.
fn test(config: &Config, sources: &Sources) -> ExitCode {
    cli::print_line(config.render_effective().trim_end_matches('\n'));
    for warning in sources.secret_flag_warnings() {
        cli::print_line(&format!("warning: {warning}"));
    }
    let mut failed = false;
    for finding in preflight::check(config) {
        match finding {
            Finding::Loaded(text) => cli::print_line(&text),
            Finding::Warning(text) => cli::print_line(&format!("warning: {text}")),
            Finding::Failed(error) => {
                failed = true;
                eprintln!("zabbix-mcp-guard: {error}");
            }
        }
    }
    if failed {
        return ExitCode::FAILURE;
    }
    cli::print_line("configuration OK");
    ExitCode::SUCCESS
}

/// `policy test [DIR]` and `policy eval --input FILE [--dir DIR]`; DIR defaults to the
/// `--policy-dir` flag, then `policies`.
fn policy(command: PolicyCommand, default_dir: Option<&str>) -> ExitCode {
    let default_dir = PathBuf::from(default_dir.unwrap_or("policies"));
    let code = match command {
        PolicyCommand::Test { dir } => policy::cli_test(&dir.unwrap_or(default_dir)),
        PolicyCommand::Eval { input, dir } => policy::cli_eval(&dir.unwrap_or(default_dir), &input),
    };
    ExitCode::from(u8::try_from(code).unwrap_or(2))
}

fn serve(config: Config, sources: Sources) -> anyhow::Result<()> {
    // Before anything else: a malformed NOTIFY_SOCKET stops the start with its name.
    let manager = Arc::new(ServiceManager::open(
        &NotifyEnv::current(),
        std::process::id(),
    )?);
    let logging = telemetry::init(&config).context("cannot set up logging")?;
    // Dropped after the runtime finishes: the PID file is removed on a clean exit.
    let _pid_file = config
        .pid_file
        .as_deref()
        .map(PidFile::create)
        .transpose()?;
    tracing::info!(target: telemetry::LIFECYCLE_TARGET, log = %logging, "logging started");
    zabbix_mcp_guard::core_dumps::log_outcome();
    let files = zabbix_mcp_guard::fd_limit::raise(&config);
    if files.short() {
        tracing::warn!(before = ?files.before, now = ?files.now, needed = files.needed,
            "the open-file limit is below what MaxConnections and MaxZabbixConcurrency may take; raise it (LimitNOFILE=, ulimit -n)");
    } else {
        tracing::info!(target: telemetry::LIFECYCLE_TARGET, before = ?files.before, now = ?files.now, "open-file limit");
    }
    let runtime = async_runtime(config.limits.worker_threads)?;
    tracing::info!(
        target: telemetry::LIFECYCLE_TARGET,
        worker_threads = runtime.metrics().num_workers(),
        "async runtime started"
    );
    let secret_flags = sources.secret_flag_warnings();
    runtime.block_on(async move {
        let secret_files = config.secret_file_warnings();
        let tls_key = config
            .tls_key_file
            .as_deref()
            .filter(|_| config.tls_accept == TlsAccept::Cert)
            .and_then(|key| FileAccess::warning_for("TLSKeyFile", key));
        for warning in secret_flags.into_iter().chain(secret_files).chain(tls_key) {
            tracing::warn!("{warning}");
        }
        let reconfigure = Reconfigure::new(sources, |_| {}, &config);
        let app = App::new(config).context("cannot set up the sidecar")?;
        for warning in StartupWarning::check(&app.config, &app.policy) {
            warning.log();
        }
        match app.zabbix.version().await {
            Ok(version) => tracing::info!(
                target: telemetry::LIFECYCLE_TARGET,
                version = %version,
                "Zabbix API reachable"
            ),
            Err(error) => {
                tracing::warn!(%error, "Zabbix API not reachable yet; /readyz will say so")
            }
        }
        // Every signal is listened for before the manager hears READY=1 and may send one.
        reload_on_sighup(&app, reconfigure, manager.clone());
        let shutdown = shutdown_signal(manager.clone())?;
        let server = Server::start(app)
            .await
            .context("cannot start the server")?;
        manager.ready(service_manager::serving(&server));
        let watchdog = manager.spawn_watchdog();
        if manager.is_active() {
            tracing::info!(
                target: telemetry::LIFECYCLE_TARGET,
                watchdog_every_ms = manager.watchdog_every().map(|d| d.as_millis()),
                "service manager notified: ready"
            );
        }
        server.run_until(shutdown).await;
        if let Some(watchdog) = watchdog {
            watchdog.abort();
        }
        Ok(())
    })
}

/// SIGTERM or SIGINT, listened for from now on; the manager hears STOPPING=1 when one
/// comes.
#[cfg(unix)]
fn shutdown_signal(
    manager: Arc<ServiceManager>,
) -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = interrupt.recv() => {},
        }
        manager.stopping();
    })
}

#[cfg(not(unix))]
fn shutdown_signal(
    manager: Arc<ServiceManager>,
) -> anyhow::Result<impl std::future::Future<Output = ()>> {
    Ok(async move {
        let _ = tokio::signal::ctrl_c().await;
        manager.stopping();
    })
}

/// `stdio`: the configuration as for `serve` (AllowedIP, unused here, defaults to
/// loopback); stdout carries MCP only, so `DecisionLog=stdout` becomes stderr.
fn stdio(cli: &cli::Cli) -> ExitCode {
    let mut sources = cli.sources();
    sources
        .env
        .entry("ZABBIX_MCP_GUARD_ALLOWED_IP".to_owned())
        .or_insert_with(|| "127.0.0.1".to_owned());
    let Some(mut config) = load(sources.clone()) else {
        return ExitCode::FAILURE;
    };
    stdio_adjust(&mut config);
    run(config, sources, cli.test_config, run_stdio)
}

/// What `stdio` changes in a loaded configuration. A path that names stdout
/// (`/dev/stdout`) is stdout too: before, its lines went into the MCP stream.
fn stdio_adjust(config: &mut Config) {
    let to_stdout = match &config.decision_log {
        DecisionLogSink::Stdout => true,
        DecisionLogSink::File(path) => stdio::names_stdout(path),
    };
    if to_stdout {
        config.decision_log = DecisionLogSink::File(PathBuf::from("/dev/stderr"));
        // Never rotate: that would rename /dev/stderr.
        config.decision_log_file_size_mb = 0;
    }
    if config.log_type == LogType::File
        && config.log_file.as_deref().is_some_and(stdio::names_stdout)
    {
        config.log_type = LogType::Console;
    }
    // One client for the life of the process: its initialize describes it.
    config.session_mode = SessionMode::Stateful;
}

fn run_stdio(config: Config, sources: Sources) -> anyhow::Result<()> {
    let token = stdio::token_from_env()?;
    let logging = telemetry::init(&config).context("cannot set up logging")?;
    tracing::info!(target: telemetry::LIFECYCLE_TARGET, log = %logging, "logging started");
    zabbix_mcp_guard::core_dumps::log_outcome();
    for warning in sources.secret_flag_warnings() {
        tracing::warn!("{warning}");
    }
    let runtime = async_runtime(config.limits.worker_threads)?;
    runtime.block_on(async move {
        let reconfigure = Reconfigure::new(sources, stdio_adjust, &config);
        let app = App::new(config).context("cannot set up the sidecar")?;
        reload_on_sighup(&app, reconfigure, Arc::new(ServiceManager::none()));
        stdio::run(app, token).await?;
        Ok(())
    })
}

/// The runtime `WorkerThreads` asks for. One thread is tokio's current-thread scheduler
/// (no hand-offs between workers, as linkerd2-proxy runs with one core); more, or one per
/// CPU (`None`, which `TOKIO_WORKER_THREADS` may still set), the multi-thread one.
fn async_runtime(workers: Option<NonZeroUsize>) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = match workers.map(NonZeroUsize::get) {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(n);
            builder
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    builder
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// SIGHUP reloads the policy set now (the file watcher also picks policy changes up) and
/// then the configuration (what can change live, see `reconfigure`), only if the policy set
/// loads: half of a change made to both is never put in force. Each logs its own outcome. The service manager hears
/// RELOADING=1 before and READY=1 after, with the outcome in STATUS=. The signal is
/// listened for before this returns.
fn reload_on_sighup(app: &Arc<App>, reconfigure: Reconfigure, manager: Arc<ServiceManager>) {
    #[cfg(unix)]
    {
        let kind = tokio::signal::unix::SignalKind::hangup();
        let Ok(mut hangups) = tokio::signal::unix::signal(kind) else {
            tracing::warn!(
                "cannot listen for SIGHUP; configuration reload off, policy reload by file watching only"
            );
            return;
        };
        let app = app.clone();
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                tracing::info!(target: telemetry::LIFECYCLE_TARGET, "SIGHUP: reloading the configuration");
                manager.reloading();
                let policy = app.policy.on_sighup().await;
                let config = match &policy {
                    Ok(_) => reconfigure.reload(&app).await,
                    Err(error) => {
                        tracing::error!(%error, "policy reload failed; the running policy is kept");
                        reconfigure.hold(&app, error.to_string())
                    }
                };
                manager.reloaded(&service_manager::reload_outcome(&config, &policy));
            }
        });
    }
    #[cfg(not(unix))]
    let _ = (app, reconfigure, manager);
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    #[derive(Debug, thiserror::Error)]
    #[error("decision log /x/d.log: {source}")]
    struct Opening {
        source: std::io::Error,
    }

    #[test]
    fn a_cause_the_message_already_says_is_written_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let said = io.to_string();
        let error = Err::<(), _>(Opening { source: io })
            .context("cannot set up the sidecar")
            .unwrap_err();
        assert_eq!(
            super::causes(&error),
            format!("cannot set up the sidecar: decision log /x/d.log: {said}")
        );
        // A cause the message does not say is still written.
        let error = Err::<(), _>(std::io::Error::other("disk full"))
            .context("cannot write")
            .unwrap_err();
        assert_eq!(super::causes(&error), "cannot write: disk full");
    }
}
