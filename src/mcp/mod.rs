//! The MCP surface: an rmcp `ServerHandler` whose tools and resources come from the
//! catalog. The caller (resolved by the server layer) arrives in the HTTP request parts.

pub mod approval;
pub mod errors;
pub mod gate;
pub mod limit;
pub mod listing;
pub mod page_approval;
pub mod resources;
pub mod splice;
pub mod tools;
pub mod write;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::ErrorData as McpError;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, CustomRequest,
    CustomResult, GetPromptRequestParams, GetPromptResponse, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use tracing::Instrument;

use crate::app::App;
use crate::mcp::errors::{ToolError, unknown_tool};
use crate::mcp::gate::Subject;
use crate::metrics::Revoked;
use crate::zabbix::{ApiToken, Caller};

/// The caller, the version's tool list, and the caller as the policy input describes it.
struct Asked {
    caller: Caller,
    tools: Arc<tools::ToolList>,
    subject: Subject,
}

/// One handler per MCP session (or per request when stateless); all share the app.
#[derive(Clone)]
pub struct GuardHandler {
    app: Arc<App>,
    /// Whether this session is on the list that hears `notifications/tools/list_changed`.
    /// A client may send `notifications/initialized` again and again; listed once, its
    /// session is told once, and the list stays as long as the open sessions.
    listed: Arc<AtomicBool>,
}

impl GuardHandler {
    pub fn new(app: Arc<App>) -> Self {
        Self {
            app,
            listed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Appends the `tools/list` result as JSON text to `out`, for a stateless request on a
    /// protocol version before 2026-07-28 (what rmcp would write for
    /// [`ServerHandler::list_tools`]'s result there); false when only the typed result can
    /// be given.
    pub(crate) async fn list_tools_json(
        &self,
        context: &RequestContext<RoleServer>,
        out: &mut String,
    ) -> Result<bool, McpError> {
        let asked = self.asked(context).await?;
        Ok(tools::offered_json(
            &self.app,
            &asked.tools,
            &asked.subject,
            out,
        ))
    }

    /// Serves a listen stream of `token` until its client ends it, the server shuts down,
    /// or Zabbix no longer accepts the token (`CallerResolver::until_rejected`): a revoked
    /// token keeps nothing open. The last ends it with the error a request with that token
    /// gets.
    pub(crate) async fn listen_as(
        &self,
        subscription: &SubscriptionContext,
        token: &ApiToken,
    ) -> Result<(), McpError> {
        tokio::select! {
            () = self.app.list_changed.listen(subscription) => Ok(()),
            refused = self.app.callers.until_rejected(&self.app.zabbix, token) => {
                self.app.metrics.revocation_closed(Revoked::ListenStream, 1);
                tracing::info!(token_id = %token.id(), reason = %refused, "listen stream ended: the token no longer resolves");
                Err(errors::caller_rpc(&refused))
            }
        }
    }

    /// Who asks and the tool list of the Zabbix version: what every request starts from.
    async fn asked(&self, context: &RequestContext<RoleServer>) -> Result<Asked, McpError> {
        let caller = caller(context)?;
        let tools = self
            .app
            .tool_list()
            .await
            .map_err(|e| ToolError::from(e).into_rpc())?;
        let subject = Subject::new(&self.app, context, &caller, tools.version);
        Ok(Asked {
            caller,
            tools,
            subject,
        })
    }
}

fn caller(context: &RequestContext<RoleServer>) -> Result<Caller, McpError> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| ToolError::NoCaller.into_rpc())
}

const INSTRUCTIONS: &str = "Zabbix monitoring data through a policy-enforcing gateway. Read tools \
return {results, count, truncated, truncated_by, limit, note}; when truncated, narrow the query \
(there is no paging). Results of hosts, host groups, templates, template groups, items and \
triggers carry a `uri` readable as a resource. Denied calls return a decision_id.";

impl ServerHandler for GuardHandler {
    /// `tools.listChanged`: listen streams (2026-07-28) hear the change in every mode;
    /// `initialize` takes it back where sessions do not (stateless).
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        if let Some(tools) = capabilities.tools.as_mut() {
            tools.list_changed = Some(true);
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "zabbix-mcp-guard",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    /// A client of the protocols before 2026-07-28: told `tools.listChanged` only where it
    /// keeps a session to hear it on.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if !self.app.list_changed.sessions()
            && let Some(tools) = result.capabilities.tools.as_mut()
        {
            tools.list_changed = None;
        }
        Ok(result)
    }

    /// `subscriptions/listen` (2026-07-28): the tool list's changes are all there is to hear.
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    /// A listen stream (its count is bounded before rmcp sees the request:
    /// `server::listeners`).
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        let caller = caller(subscription.request_context())?;
        self.listen_as(&subscription, &caller.token).await
    }

    /// A session that can hear `notifications/tools/list_changed` from now on.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if !self.listed.swap(true, Ordering::AcqRel) {
            self.app.list_changed.register(context.peer);
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let asked = self.asked(&context).await?;
        Ok(ListToolsResult::with_all_items(tools::offered(
            &self.app,
            &asked.tools,
            &asked.subject,
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let _in_flight = self.app.in_flight.enter();
        let Asked {
            caller,
            tools,
            subject,
        } = self.asked(&context).await?;
        let Some(def) = tools.find(&request.name) else {
            return Err(unknown_tool(&request.name));
        };
        let span = tracing::info_span!(
            "tool_call",
            mcp.method.name = "tools/call",
            gen_ai.tool.name = def.name,
            zabbix.method = def.method.as_str(),
            user.id = %caller.identity.userid,
            token_id = %caller.token_id,
        );
        // Hidden means unknown: the list phase decides before the arguments are looked at.
        if !gate::visible(&self.app, &tools, &subject, &request.name) {
            return Err(unknown_tool(&request.name));
        }
        let call = tools::Call {
            context: &context,
            request: &request,
            caller: &caller,
            subject: &subject,
            def,
            version: tools.version,
            tools: &tools,
        };
        // Boxed: the handler future rmcp builds is copied whole when the request task is
        // spawned (`server::direct`); it then holds a pointer, not the call (kBs).
        let response = Box::pin(tools::call(&self.app, call).instrument(span)).await?;
        // Clients that declare URL elicitation get the approval link as -32042.
        match page_approval::url_elicitation(&self.app, &subject, &response) {
            Some(error) => Err(error),
            None => Ok(response),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(resources::list())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let asked = self.asked(&context).await?;
        Ok(resources::templates(
            &self.app,
            &asked.tools,
            &asked.subject,
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let _in_flight = self.app.in_flight.enter();
        let asked = self.asked(&context).await?;
        let span = tracing::info_span!("resource_read", mcp.method.name = "resources/read");
        // Boxed as `call_tool`'s is: rmcp's handler future holds the largest of its
        // requests' futures, and every tool call's request task copies that future whole.
        Box::pin(
            resources::read(
                &self.app,
                &asked.caller,
                &asked.subject,
                &asked.tools,
                &request.uri,
            )
            .instrument(span),
        )
        .await
        .map(Into::into)
    }

    // Methods rmcp knows and this server does not answer: rmcp's own error would be the
    // bare method name.
    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        Err(errors::method_not_found("completion/complete"))
    }

    async fn get_prompt(
        &self,
        _request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        Err(errors::method_not_found("prompts/get"))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Err(errors::method_not_found("prompts/list"))
    }

    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Err(errors::method_not_found("resources/subscribe"))
    }

    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Err(errors::method_not_found("resources/unsubscribe"))
    }

    /// rmcp hands over as custom a request it could not read as the method it names.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(errors::unreadable_request(&request))
    }
}
