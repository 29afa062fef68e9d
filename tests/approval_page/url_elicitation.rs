//! URL-mode elicitation of page approvals, with real rmcp clients that declare it:
//! stateless (-32042) and stateful (`elicitation/create` in url mode, then
//! `notifications/elicitation/complete`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, CustomNotification,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability, Implementation,
    ProtocolVersion, UrlElicitationCapability,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RequestContext, ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::Value;

use crate::common;
use crate::support::{self, PageClient, Setup, TOOL, ack_args, eventually, pending, sidecar};

#[tokio::test]
async fn stateless_url_elicitation_clients_get_32042() {
    let lab = common::lab(7);
    let car = sidecar(Setup::page(&lab.url)).await;
    common::init();
    // Stateless: only 2026-07-28 clients send their capabilities with each request.
    let client = UrlClient::default()
        .serve_with_lifecycle(
            transport(&car, &lab.token_operator),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("client connects (discover)");
    let event = support::open_event(&lab, &car.guard).await;
    let params = ack_params(&event, "url elicitation");
    let error = match client.call_tool(params.clone()).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected -32042, got {other:?}"),
    };
    assert_eq!(error.code.0, -32042);
    let data = error.data.expect("data");
    let elicitation = &data["elicitations"][0];
    assert_eq!(elicitation["mode"], "url");
    let id = elicitation["elicitationId"]
        .as_str()
        .expect("elicitationId");
    assert_eq!(elicitation["url"], format!("{}/approvals/{id}", car.page));
    // The retry before a decision: the same elicitation again.
    let again = match client.call_tool(params).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected -32042, got {other:?}"),
    };
    assert_eq!(
        again.data.expect("data")["elicitations"][0]["elicitationId"],
        id
    );
    car.guard.stop().await;
}

#[tokio::test]
async fn stateful_url_elicitation_then_complete_notification() {
    let lab = common::lab(7);
    let car = sidecar(Setup {
        stateful: true,
        ..Setup::page(&lab.url)
    })
    .await;
    common::init();
    let handler = UrlClient::default();
    let client = handler
        .clone()
        .serve(transport(&car, &lab.token_operator))
        .await
        .expect("client connects");
    let event = support::open_event(&lab, &car.guard).await;
    let params = ack_params(&event, "stateful url elicitation");
    let result = client.call_tool(params.clone()).await.expect("tool result");
    let body = common::error_body(&result);
    let (id, url) = pending(&body);
    let asked = handler.asked.lock().unwrap().clone();
    match asked.as_slice() {
        [
            ElicitRequestParams::UrlElicitationParams {
                url: shown,
                elicitation_id,
                ..
            },
        ] => {
            assert_eq!((shown, elicitation_id), (&url, &id));
        }
        other => panic!("expected one url elicitation, got {other:?}"),
    }
    assert!(handler.completed.lock().unwrap().is_empty());
    let admin = PageClient::new(&car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    assert_eq!(admin.decide(&id, "decline").await.status, 200);
    let completed = handler.completed.clone();
    eventually(
        "notifications/elicitation/complete",
        Duration::from_secs(15),
        || {
            let done = completed.lock().unwrap().clone();
            async move { (!done.is_empty()).then_some(done) }
        },
    )
    .await
    .iter()
    .for_each(|params| assert_eq!(params["elicitationId"], id));
    let answer = client.call_tool(params).await.expect("tool result");
    assert_eq!(common::error_body(&answer)["code"], "approval_declined");
    car.guard.stop().await;
}

/// A client that declares URL elicitation, accepts every URL elicitation and keeps what it
/// was asked and which elicitations were completed.
#[derive(Clone, Default)]
struct UrlClient {
    asked: Arc<Mutex<Vec<ElicitRequestParams>>>,
    completed: Arc<Mutex<Vec<Value>>>,
}

impl ClientHandler for UrlClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder()
            .enable_elicitation_with(
                ElicitationCapability::new().with_url(UrlElicitationCapability::new()),
            )
            .build();
        ClientConfig::new(
            capabilities,
            Implementation::new("url-elicitation-test", "1.0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.lock().unwrap().push(request);
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method == "notifications/elicitation/complete" {
            let params = notification.params.unwrap_or_default();
            self.completed.lock().unwrap().push(params);
        }
    }
}

fn transport(
    car: &support::Sidecar,
    token: &str,
) -> StreamableHttpClientTransport<reqwest::Client> {
    StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(car.guard.url.as_str()).auth_header(token),
    )
}

fn ack_params(event: &str, message: &str) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(TOOL);
    if let Value::Object(map) = ack_args(event, message) {
        params = params.with_arguments(map);
    }
    params
}
