//! A decision holds for the targets it saw: a write that waited for its approval looks them
//! up again before it is sent. The agent answers its own in-client approvals, so it chooses
//! how long the wait is, and can change the targets meanwhile in another call.

use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, ClientConfig, ElicitRequestParams, ElicitResult};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};
use zabbix_mcp_guard::config::{DecisionLogSink, SessionMode};

use crate::common::{self, config_for, start_with, temp_path};
use crate::support::{Reply, elicit_result};

/// Deletes only maintenances wholly in data.scope.groupids, with an in-client approval;
/// anything else goes without one.
const POLICY: &str = r#"package zabbix.mcp
import rego.v1
deny contains sprintf("maintenance of %v may not be deleted", [g.name]) if {
    input.tool.name == "maintenance_delete"
    some g in input.targets.groups
    not g.groupid in data.scope.groupids
}
approval := "required" if input.tool.name == "maintenance_delete" else := "none"
decision := {"allow": count(deny) == 0, "reasons": deny, "approval": approval}
"#;

/// An agent that, asked to approve its delete, first moves the maintenance out of scope
/// with another call of its own, then says yes.
#[derive(Clone)]
struct Agent {
    other: Arc<Mutex<Option<common::Client>>>,
    update: Value,
}

impl ClientHandler for Agent {
    fn get_info(&self) -> ClientConfig {
        common::form_elicitation_client("approval-tests")
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let other = self.other.lock().unwrap().take().expect("asked once");
        let moved = common::call(&other, "maintenance_update", self.update.clone()).await;
        assert_ne!(moved.is_error, Some(true), "{:?}", moved.structured_content);
        Ok(elicit_result(Reply::Approve))
    }
}

#[tokio::test]
async fn an_approved_write_is_refused_when_its_targets_moved_meanwhile() {
    for lab in common::labs() {
        let names = [
            common::zapi::unique("mcp-keep"),
            common::zapi::unique("mcp-free"),
        ];
        let mut ids = Vec::new();
        for name in &names {
            let created =
                common::zapi::admin(&lab, "hostgroup.create", json!({"name": name})).await;
            ids.push(created["groupids"][0].as_str().unwrap().to_owned());
        }
        let (keep, free) = (&ids[0], &ids[1]);
        let maintenance = common::zapi::maintenance_on_group(&lab, &names[1], free).await;

        let dir = temp_path("policy");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("policy.rego"), POLICY).unwrap();
        let data = json!({"scope": {"groupids": [free]}});
        std::fs::write(dir.join("data.json"), data.to_string()).unwrap();
        let mut config = config_for(&lab.url);
        config.policy_dir = Some(dir);
        config.session_mode = SessionMode::Stateful;
        let log = temp_path("decisions.log");
        config.decision_log = DecisionLogSink::File(log.clone());
        let guard = start_with(config).await;

        let agent = Agent {
            other: Arc::new(Mutex::new(Some(common::client(&guard, &lab.token).await))),
            update: json!({"maintenanceid": maintenance, "groupids": [keep]}),
        };
        let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                guard.url.as_str(),
            )
            .auth_header(lab.token.clone()),
        );
        let client = agent.serve(transport).await.expect("client connects");
        let mut args = serde_json::Map::new();
        args.insert("maintenanceids".into(), json!([maintenance]));
        let result = client
            .call_tool(CallToolRequestParams::new("maintenance_delete").with_arguments(args))
            .await
            .expect("tools/call answers");
        assert_eq!(
            result.is_error,
            Some(true),
            "Zabbix {}: deleted {:?}",
            lab.major,
            result.structured_content
        );
        let err = common::error_body(&result);
        assert_eq!(err["code"], "invalid_arguments", "{err}");
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("changed while it waited for approval"),
            "{err}"
        );
        common::zapi::assert_maintenance_kept(&lab, &maintenance).await;
        let _ = client.cancel().await;
        guard.stop().await;
        common::zapi::admin(&lab, "maintenance.delete", json!([maintenance])).await;
        common::zapi::admin(&lab, "hostgroup.delete", json!(ids)).await;
    }
}
