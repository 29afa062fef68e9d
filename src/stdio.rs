//! `zabbix-mcp-guard stdio`: the same tools, resources, policies and decision log for one
//! local agent over stdin/stdout. The caller is the token in `ZABBIX_API_TOKEN`, read once
//! at start; it is resolved per request through the same identity cache as over HTTP, so
//! a revoked token stops working. stdout carries MCP messages only: logs and decisions go
//! elsewhere (see `main.rs`).

use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::ServerHandler;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};

use crate::app::App;
use crate::list_changed::ListChanged;
use crate::mcp::GuardHandler;
use crate::mcp::errors::caller_rpc;
use crate::policy::DEFAULT_POLL_INTERVAL;
use crate::zabbix::{ApiToken, Caller, CallerError};

/// The one variable the stdio tool path reads: the caller's Zabbix API token.
pub const TOKEN_VAR: &str = "ZABBIX_API_TOKEN";

#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error("{TOKEN_VAR} is not set: stdio takes the caller's Zabbix API token from it")]
    NoToken,
    #[error("{TOKEN_VAR} is empty or not valid UTF-8")]
    BadToken,
    #[error(transparent)]
    Caller(#[from] CallerError),
    #[error("cannot use stdin/stdout: {0}")]
    Io(#[from] std::io::Error),
    #[error("MCP over stdio failed: {0}")]
    Serve(String),
}

/// Puts the stdio caller where the HTTP server puts a request's caller (the request
/// parts' extensions), then hands the request to the one MCP handler.
#[derive(Clone)]
struct StdioHandler {
    inner: GuardHandler,
    app: Arc<App>,
    token: ApiToken,
}

/// The token from [`TOKEN_VAR`]; nothing else of the environment.
pub fn token_from_env() -> Result<ApiToken, StdioError> {
    match std::env::var(TOKEN_VAR) {
        Ok(token) if !token.trim().is_empty() => Ok(ApiToken::new(token.trim().to_owned())),
        Ok(_) | Err(std::env::VarError::NotUnicode(_)) => Err(StdioError::BadToken),
        Err(std::env::VarError::NotPresent) => Err(StdioError::NoToken),
    }
}

/// Whether `path` names this process's stdout (`/dev/stdout`, `/proc/self/fd/1`, or the
/// pipe or file stdout is): a log written there would be interleaved with the MCP
/// messages stdio carries on stdout. A path that does not exist yet names a new file.
pub fn names_stdout(path: &Path) -> bool {
    let Ok(named) = std::fs::metadata(path) else {
        return false;
    };
    let Ok(ours) = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| std::fs::File::from(fd).metadata())
    else {
        return false;
    };
    (named.dev(), named.ino()) == (ours.dev(), ours.ino())
}

/// Serves MCP on stdin/stdout until the client closes stdin; the decision log is flushed
/// before returning. A token Zabbix rejects ends the start with an error.
pub async fn run(app: Arc<App>, token: ApiToken) -> Result<(), StdioError> {
    app.callers.resolve(&app.zabbix, &token).await?;
    // tokio's File runs the blocking reads and writes off the runtime, as tokio's Stdin
    // and Stdout do; duplicates of fd 0 and 1, so nothing else closes them.
    let stdin = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let transport = (
        tokio::fs::File::from_std(stdin),
        tokio::fs::File::from_std(stdout),
    );
    let watcher = app.policy.spawn_watcher(DEFAULT_POLL_INTERVAL);
    let trust_watcher = app.zabbix.spawn_trust_watcher(DEFAULT_POLL_INTERVAL);
    let announcer = ListChanged::spawn(&app);
    let handler = StdioHandler {
        inner: GuardHandler::new(app.clone()),
        app: app.clone(),
        token,
    };
    let served = match handler.serve(transport).await {
        Ok(service) => service
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| StdioError::Serve(e.to_string())),
        Err(error) => Err(StdioError::Serve(error.to_string())),
    };
    watcher.abort();
    announcer.abort();
    if let Some(task) = trust_watcher {
        task.abort();
    }
    let log = app.decisions.clone();
    if !matches!(
        tokio::task::spawn_blocking(move || log.flush()).await,
        Ok(true)
    ) {
        tracing::error!("decision log not flushed at exit; lines may be lost");
    }
    served
}

impl StdioHandler {
    async fn attach(&self, context: &mut RequestContext<RoleServer>) -> Result<(), McpError> {
        let identity = self
            .app
            .callers
            .resolve(&self.app.zabbix, &self.token)
            .await
            .map_err(|e| caller_rpc(&e))?;
        let caller = Caller {
            token_id: self.token.id(),
            token: self.token.clone(),
            identity,
            // No network peer: the agent is a local process.
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        };
        let (mut parts, ()) = http::Request::new(()).into_parts();
        parts.extensions.insert(caller);
        context.extensions.insert(parts);
        Ok(())
    }
}

impl ServerHandler for StdioHandler {
    fn get_info(&self) -> ServerConfig {
        self.inner.get_info()
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.inner.on_initialized(context).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.inner.accepted_subscription_filter(requested)
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        self.inner.listen_as(&subscription, &self.token).await
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        mut context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.attach(&mut context).await?;
        self.inner.list_tools(request, context).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.attach(&mut context).await?;
        self.inner.call_tool(request, context).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        mut context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.attach(&mut context).await?;
        self.inner.list_resources(request, context).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        mut context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.attach(&mut context).await?;
        self.inner.list_resource_templates(request, context).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.attach(&mut context).await?;
        self.inner.read_resource(request, context).await
    }

    /// Needs no caller: the answer is an error about the request itself.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        self.inner.on_custom_request(request, context).await
    }
}
