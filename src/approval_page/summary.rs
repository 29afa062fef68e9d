//! The human-readable summary of a pending call, resolved with the APPROVER's own token:
//! what the person sees is what their own Zabbix permissions show (problem names, hosts
//! and severities of event ids; group and host names and the time window of a
//! maintenance). What cannot be resolved says so; the exact body is shown anyway.

use serde_json::{Value, json};

use crate::mcp::page_approval::rfc3339;
use crate::store::ApprovalRecord;
use crate::zabbix::{ApiToken, Method, ZabbixClient};

const SEVERITIES: [&str; 6] = [
    "not classified",
    "information",
    "warning",
    "average",
    "high",
    "disaster",
];

/// (label, value) rows; values are raw text, escaped when rendered.
pub(crate) async fn summary(
    zabbix: &ZabbixClient,
    token: &ApiToken,
    record: &ApprovalRecord,
) -> Vec<(String, String)> {
    let args = &record.input.arguments;
    let mut rows = Vec::new();
    let version = match zabbix.version().await {
        Ok(version) => version,
        Err(error) => {
            rows.push(("Summary".into(), format!("not available: {error}")));
            return rows;
        }
    };
    let get = |method: Method, params: Value| async move {
        zabbix
            .call(method, &params, Some((token, version)))
            .await
            .map_err(|e| e.to_string())
    };
    if let Some(ids) = ids(args.get("eventids")) {
        let found = get(
            Method::EventGet,
            json!({"eventids": ids, "output": ["eventid", "name", "severity"],
                   "selectHosts": ["host", "name"]}),
        )
        .await;
        for id in &ids {
            let row = match &found {
                Ok(Value::Array(events)) => events
                    .iter()
                    .find(|e| e["eventid"].as_str() == Some(id))
                    .map_or_else(|| "not visible to you".to_owned(), describe_event),
                Ok(_) => "not visible to you".to_owned(),
                Err(error) => format!("could not be read: {error}"),
            };
            rows.push((format!("Problem (event {id})"), row));
        }
    }
    for (key, label, method, id_key) in [
        ("groupids", "Host groups", Method::HostGroupGet, "groupids"),
        ("hostids", "Hosts", Method::HostGet, "hostids"),
        (
            "maintenanceids",
            "Maintenances",
            Method::MaintenanceGet,
            "maintenanceids",
        ),
    ] {
        let Some(ids) = ids(args.get(key)) else {
            continue;
        };
        let value = match get(method, json!({id_key: ids, "output": ["name"]})).await {
            Ok(Value::Array(items)) => {
                let names: Vec<String> = items
                    .iter()
                    .filter_map(|i| i["name"].as_str().map(str::to_owned))
                    .collect();
                let hidden = ids.len().saturating_sub(names.len());
                let mut text = names.join(", ");
                if hidden > 0 {
                    text.push_str(&format!(" ({hidden} not visible to you)"));
                }
                text
            }
            Ok(_) => "not visible to you".into(),
            Err(error) => format!("could not be read: {error}"),
        };
        rows.push((label.into(), value));
    }
    if let Some(name) = args.get("name").and_then(Value::as_str) {
        rows.push(("Name".into(), name.to_owned()));
    }
    if let Some(message) = args.get("message").and_then(Value::as_str) {
        rows.push(("Message".into(), message.to_owned()));
    }
    let time = |key: &str| args.get(key).and_then(Value::as_u64).map(rfc3339);
    if let (Some(since), Some(till)) = (time("active_since"), time("active_till")) {
        rows.push(("Time window".into(), format!("{since} to {till}")));
    }
    if rows.is_empty() {
        rows.push(("Summary".into(), "see the exact request below".into()));
    }
    rows
}

fn ids(value: Option<&Value>) -> Option<Vec<String>> {
    let items = value?.as_array()?;
    let ids: Vec<String> = items
        .iter()
        .filter_map(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .collect();
    (!ids.is_empty()).then_some(ids)
}

fn describe_event(event: &Value) -> String {
    let name = event["name"].as_str().unwrap_or("?");
    let severity = event["severity"]
        .as_str()
        .and_then(|s| s.parse::<usize>().ok())
        .and_then(|s| SEVERITIES.get(s))
        .unwrap_or(&"unknown severity");
    let hosts: Vec<String> = event["hosts"]
        .as_array()
        .map(|hosts| {
            hosts
                .iter()
                .map(|h| {
                    let host = h["host"].as_str().unwrap_or("?");
                    match h["name"].as_str() {
                        Some(name) if name != host => format!("{host} ({name})"),
                        _ => host.to_owned(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    format!("{name} | severity {severity} | host {}", hosts.join(", "))
}
