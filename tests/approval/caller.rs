//! A decision holds for the caller it saw: a write that waited for its in-client approval
//! looks the caller up again before it is sent, as it does its targets.

use rmcp::model::{CallToolRequestParams, ClientConfig, ElicitRequestParams, ElicitResult};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::json;
use zabbix_mcp_guard::config::{DecisionLogSink, SessionMode};

use crate::common::zapi::{TestUser, admin, unique};
use crate::common::{self, Lab, config_for, seed_id, start_with, temp_path};
use crate::support::{Reply, elicit_result, log_lines};

/// Writes only for members of `data.writers.usrgrp`, each approved in the client.
const POLICY: &str = r#"package zabbix.mcp
import rego.v1
default writer := false
writer if data.writers.usrgrp in input.caller.usrgrps
decision := {"allow": true, "reasons": [], "approval": "none"} if input.tool.kind == "read"
decision := {"allow": writer, "reasons": ["writes only for the writers' group"], "approval": "required"} if input.tool.kind == "write"
"#;

/// While its write waits for the yes, the user is taken out of the writers' group (by an
/// administrator, here at the moment the question comes); then the yes comes.
#[derive(Clone)]
struct Approver {
    lab: Lab,
    userid: String,
    operators: String,
}

impl ClientHandler for Approver {
    fn get_info(&self) -> ClientConfig {
        common::form_elicitation_client("approval-tests")
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let only = json!([{"usrgrpid": self.operators}]);
        admin(
            &self.lab,
            "user.update",
            json!({"userid": self.userid, "usrgrps": only}),
        )
        .await;
        Ok(elicit_result(Reply::Approve))
    }
}

#[tokio::test]
async fn an_approved_write_is_refused_when_its_caller_left_the_trusted_group_meanwhile() {
    for lab in common::labs() {
        let operators = seed_id(&lab, "user_groups", "MCP Operators");
        let name = unique("mcp-writers");
        let created = admin(&lab, "usergroup.create", json!({"name": name})).await;
        let writers = created["usrgrpids"][0].as_str().unwrap().to_owned();
        let user = TestUser::create(&lab, &operators, &[]).await;
        let both = json!([{"usrgrpid": operators}, {"usrgrpid": writers}]);
        admin(
            &lab,
            "user.update",
            json!({"userid": user.userid, "usrgrps": both}),
        )
        .await;
        let checked = tokio::spawn(refused_after_the_yes(lab.clone(), user.clone(), name)).await;
        user.delete(&lab).await;
        admin(&lab, "usergroup.delete", json!([writers])).await;
        if let Err(error) = checked {
            std::panic::resume_unwind(error.into_panic());
        }
    }
}

async fn refused_after_the_yes(lab: Lab, user: TestUser, writers: String) {
    let dir = temp_path("policy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.rego"), POLICY).unwrap();
    let data = json!({"writers": {"usrgrp": writers}});
    std::fs::write(dir.join("data.json"), data.to_string()).unwrap();
    let mut config = config_for(&lab.url);
    config.policy_dir = Some(dir);
    config.session_mode = SessionMode::Stateful;
    let log = temp_path("decisions.log");
    config.decision_log = DecisionLogSink::File(log.clone());
    let guard = start_with(config).await;

    let approver = Approver {
        lab: lab.clone(),
        userid: user.userid.clone(),
        operators: seed_id(&lab, "user_groups", "MCP Operators"),
    };
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            guard.url.as_str(),
        )
        .auth_header(user.token.clone()),
    );
    let client = approver.serve(transport).await.expect("client connects");
    let event = seed_id(&lab, "problems", "MCP uint too high");
    let message = unique("mcp-never-sent");
    let args = json!({"eventids": [event], "message": message});
    let result = client
        .call_tool(
            CallToolRequestParams::new("problem_annotate")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .expect("tools/call answers");
    assert_eq!(result.is_error, Some(true), "Zabbix {}: sent", lab.major);
    let err = common::error_body(&result);
    assert_eq!(err["code"], "invalid_arguments", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("changed while the call waited for approval"),
        "{err}"
    );
    let lines = log_lines(&log);
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "caller" && l["data"]["outcome"] == "changed"),
        "a caller event in the decision log"
    );
    assert!(
        !common::zapi::acknowledgements(&lab, &event)
            .await
            .contains(&message),
        "Zabbix {}: the annotation reached Zabbix",
        lab.major
    );
    let _ = client.cancel().await;
    guard.stop().await;
}
