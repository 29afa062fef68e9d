//! The `zabbix-mcp-guard` binary: parse the command line, load the configuration, run.

use std::process::ExitCode;

use anyhow::Context;
use zabbix_mcp_guard::app::App;
use zabbix_mcp_guard::cli::{self, Command, PolicyCommand};
use zabbix_mcp_guard::config::Config;
use zabbix_mcp_guard::pidfile::PidFile;
use zabbix_mcp_guard::server::Server;
use zabbix_mcp_guard::telemetry;

fn main() -> ExitCode {
    let cli = cli::parse();
    match cli.action() {
        Command::Policy { command } => policy(command),
        Command::Serve => {
            let config = match Config::load(&cli.sources()) {
                Ok(config) => config,
                Err(error) => {
                    eprintln!("zabbix-mcp-guard: configuration error: {error}");
                    return ExitCode::FAILURE;
                }
            };
            if cli.test_config {
                print!("{}", config.render_effective());
                println!("configuration OK");
                return ExitCode::SUCCESS;
            }
            match serve(config) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("zabbix-mcp-guard: {error:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

fn policy(command: PolicyCommand) -> ExitCode {
    match command {
        PolicyCommand::Test { .. } | PolicyCommand::Eval { .. } => {
            eprintln!("zabbix-mcp-guard: policy commands are not available in this build yet");
            ExitCode::from(2)
        }
    }
}

fn serve(config: Config) -> anyhow::Result<()> {
    let logging = telemetry::init(&config).context("cannot set up logging")?;
    // Dropped after the runtime finishes: the PID file is removed on a clean exit.
    let _pid_file = config
        .pid_file
        .as_deref()
        .map(PidFile::create)
        .transpose()?;
    tracing::info!(target: telemetry::LIFECYCLE_TARGET, log = %logging, "logging started");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        if config.ignore_url_cert_errors {
            tracing::warn!("IgnoreURLCertErrors=1: the Zabbix API certificate is not verified");
        }
        let app = App::new(config).context("cannot set up the Zabbix client")?;
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
        let server = Server::start(app)
            .await
            .context("cannot start the server")?;
        server.run_until(shutdown_signal()).await;
        Ok(())
    })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
