//! The page says what a write changes and who asks, in words the agent cannot forge: the
//! summary names the maintenance an update changes by its current name (the agent chooses
//! the new one) and each object by its id; the client's own name for itself never reads as
//! the address the sidecar saw.

use serde_json::json;

use crate::common::trapper::fresh_problem;
use crate::common::{self, Lab, zapi};
use crate::support::{HOST, PageClient, Setup, between, pending, sidecar};

#[tokio::test]
async fn the_summary_names_the_maintenance_an_update_changes() {
    for lab in common::labs() {
        let now = crate::common_now();
        let frozen = zapi::unique("zmg production freeze");
        let hostid = common::seed_id(&lab, "hosts", HOST);
        let created = zapi::admin(
            &lab,
            "maintenance.create",
            json!({"name": frozen, "active_since": now, "active_till": now + 86_400,
                   "hosts": [{"hostid": hostid}],
                   "timeperiods": [{"timeperiod_type": 0, "start_date": now, "period": 3600}]}),
        )
        .await;
        let id = created["maintenanceids"][0].as_str().unwrap().to_owned();
        let checked = tokio::spawn(shown(lab.clone(), id.clone(), frozen, hostid)).await;
        zapi::admin(&lab, "maintenance.delete", json!([id])).await;
        if let Err(error) = checked {
            std::panic::resume_unwind(error.into_panic());
        }
    }
}

async fn shown(lab: Lab, id: String, frozen: String, hostid: String) {
    let car = sidecar(Setup::page(&lab.url)).await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    // Renamed into something harmless-looking and switched to no data collection.
    let args = json!({"maintenanceid": id, "name": "agent scratch window",
                      "hostids": [hostid], "groupids": [], "maintenance_type": 1,
                      "description": "routine"});
    let asked = common::tool_error(&agent, "maintenance_update", args).await;
    let (approval, _) = pending(&asked);
    let admin = PageClient::new(&car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    let page = admin.get(&format!("/approvals/{approval}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let summary = between(&page.body, "<table id=\"summary\">", "</table>");
    let row = |label: &str, value: &str| format!("<tr><th>{label}</th><td>{value}</td></tr>");
    for expected in [
        row(&format!("Changes maintenance {id}"), &frozen),
        row("New name", "agent scratch window"),
        row("Maintenance type", "without data collection"),
        row(&format!("Host {hostid}"), &format!("{HOST} (MCP Web 01)")),
        // What no row explains is shown as sent: `[]` clears the stored set.
        row("Argument groupids", "[]"),
        row("Argument description", "&quot;routine&quot;"),
    ] {
        assert!(
            summary.contains(&expected),
            "Zabbix {}: {expected} in {summary}",
            lab.major
        );
    }
    car.guard.stop().await;
}

/// The client names itself: a name that reads like the page's own "from <address>" has a
/// row of its own, and the address the sidecar saw has another.
#[tokio::test]
async fn a_client_name_cannot_pass_for_the_address() {
    use rmcp::ServiceExt;
    use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let lab = common::lab(7);
    let car = sidecar(Setup {
        stateful: true,
        ..Setup::page(&lab.url)
    })
    .await;
    let event = crate::support::open_event(&lab, &car.guard).await;
    let forged = "claude-code from 10.20.0.5 (Admin's workstation)";
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(car.guard.url.as_str())
            .auth_header(lab.token_operator.clone()),
    );
    let agent = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(forged, "1.0"),
    )
    .serve(transport)
    .await
    .expect("MCP client connects");
    let asked = common::tool_error(
        &agent,
        crate::support::TOOL,
        crate::support::ack_args(&event, "from where?"),
    )
    .await;
    let (approval, _) = pending(&asked);
    let admin = PageClient::new(&car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    let page = admin.get(&format!("/approvals/{approval}")).await;
    let client = between(&page.body, "<td id=\"client\">", "</td>");
    assert_eq!(
        client, "claude-code from 10.20.0.5 (Admin&#39;s workstation)",
        "{}",
        page.body
    );
    let address = between(&page.body, "<td id=\"address\">", "</td>");
    assert_eq!(address, "127.0.0.1");
    let _ = agent.cancel().await;
    car.guard.stop().await;
}

/// A problem's name can hold monitored data (`{ITEM.VALUE}` in its trigger's name): it has a
/// row of its own, so that a value reading "| severity information | host …" cannot pass
/// for the problem's own severity and host, which have rows of theirs.
#[tokio::test]
async fn an_event_name_cannot_pass_for_its_severity_or_host() {
    let lab = common::lab(7);
    let marker = zapi::unique("zmgfake");
    let created = zapi::admin(
        &lab,
        "trigger.create",
        json!({"description": "zmg log line: {ITEM.VALUE}", "priority": 5,
               "expression": format!("find(/{HOST}/mcp.char,,\"like\",\"{marker}\")=1")}),
    )
    .await;
    let triggerid = created["triggerids"][0].as_str().unwrap().to_owned();
    let checked = tokio::spawn(event_rows(lab.clone(), marker)).await;
    zapi::admin(&lab, "trigger.delete", json!([triggerid])).await;
    if let Err(error) = checked {
        std::panic::resume_unwind(error.into_panic());
    }
}

async fn event_rows(lab: Lab, marker: String) {
    let value = format!("{marker} | severity information | host mcp-scratch-test");
    let name = format!("zmg log line: {value}");
    let car = sidecar(Setup::page(&lab.url)).await;
    let reader = common::client(&car.guard, &lab.token).await;
    let agent = common::client(&car.guard, &lab.token_operator).await;
    let event = fresh_problem(&reader, &lab, HOST, "mcp.char", &name, "zmg-low", &value).await;
    let asked = common::tool_error(&agent, "problem_close", json!({"eventids": [event]})).await;
    let (approval, _) = pending(&asked);
    let admin = PageClient::new(&car.page);
    assert_eq!(admin.sign_in("Admin", "zabbix").await.status, 303);
    let page = admin.get(&format!("/approvals/{approval}")).await;
    let summary = between(&page.body, "<table id=\"summary\">", "</table>");
    let row = |label: &str, value: &str| {
        format!("<tr><th>{label} (event {event})</th><td>{value}</td></tr>")
    };
    for expected in [
        row("Problem", &name),
        row("Severity", "disaster"),
        row(
            &format!("Host {}", common::seed_id(&lab, "hosts", HOST)),
            &format!("{HOST} (MCP Web 01)"),
        ),
    ] {
        assert!(summary.contains(&expected), "{expected} in {summary}");
    }
    car.guard.stop().await;
}
