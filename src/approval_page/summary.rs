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
    // The arguments a row below explains; every other one gets a row as it is sent.
    let mut shown: Vec<&str> = Vec::new();
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
        shown.push("eventids");
        let found = get(
            Method::EventGet,
            json!({"eventids": ids, "output": ["eventid", "name", "severity"],
                   "selectHosts": ["hostid", "host", "name"]}),
        )
        .await;
        for id in &ids {
            let label = format!("Problem (event {id})");
            match &found {
                Ok(Value::Array(events)) => {
                    match events.iter().find(|e| e["eventid"].as_str() == Some(id)) {
                        Some(event) => rows.extend(describe_event(id, event)),
                        None => rows.push((label, "not visible to you".to_owned())),
                    }
                }
                Ok(_) => rows.push((label, "not visible to you".to_owned())),
                Err(error) => rows.push((label, format!("could not be read: {error}"))),
            }
        }
    }
    // One row per object, its id beside its name: a name cannot pass for another object's,
    // nor (holding ", ") for several.
    for object in &OBJECTS {
        let Some(ids) = ids(args.get(object.arg)) else {
            continue;
        };
        shown.push(object.arg);
        let found = get(
            object.method,
            json!({(object.param): ids, "output": object.output}),
        )
        .await;
        for id in &ids {
            let value = match &found {
                Ok(Value::Array(items)) => items
                    .iter()
                    .find(|i| i[object.id].as_str() == Some(id))
                    .map_or_else(|| "not visible to you".to_owned(), describe_object),
                Ok(_) => "not visible to you".to_owned(),
                Err(error) => format!("could not be read: {error}"),
            };
            rows.push((format!("{} {id}", object.label), value));
        }
    }
    if let Some(name) = args.get("name").and_then(Value::as_str) {
        // In an update, `name` is what the maintenance above is renamed to.
        let label = if args.get("maintenanceid").is_some() {
            "New name"
        } else {
            "Name"
        };
        rows.push((label.into(), name.to_owned()));
        shown.push("name");
    }
    if let Some(message) = args.get("message").and_then(Value::as_str) {
        rows.push(("Message".into(), message.to_owned()));
        shown.push("message");
    }
    if let Some(severity) = args.get("severity").and_then(Value::as_u64) {
        let name = usize::try_from(severity)
            .ok()
            .and_then(|s| SEVERITIES.get(s))
            .unwrap_or(&"unknown");
        rows.push(("New severity".into(), (*name).to_owned()));
        shown.push("severity");
    }
    if let Some(kind) = args.get("maintenance_type").and_then(Value::as_u64) {
        let collection = if kind == 1 { "without" } else { "with" };
        rows.push((
            "Maintenance type".into(),
            format!("{collection} data collection"),
        ));
        shown.push("maintenance_type");
    }
    if let Some(until) = args.get("suppress_until").and_then(Value::as_u64) {
        let until = if until == 0 {
            "indefinitely".to_owned()
        } else {
            rfc3339(until)
        };
        rows.push(("Suppressed until".into(), until));
        shown.push("suppress_until");
    }
    let time = |key: &str| args.get(key).and_then(Value::as_u64).map(rfc3339);
    match (time("active_since"), time("active_till")) {
        (Some(since), Some(till)) => {
            rows.push(("Time window".into(), format!("{since} to {till}")));
            shown.extend(["active_since", "active_till"]);
        }
        // An update may move one end only.
        (Some(since), None) => {
            rows.push(("Active since".into(), since));
            shown.push("active_since");
        }
        (None, Some(till)) => {
            rows.push(("Active till".into(), till));
            shown.push("active_till");
        }
        (None, None) => {}
    }
    // Nothing the call sends goes unmentioned: an update's `tags: []` (every problem of the
    // hosts suppressed from then on) or `groupids: []` is a change too.
    for (key, value) in args {
        if !shown.contains(&key.as_str()) {
            rows.push((format!("Argument {key}"), cut(&value.to_string())));
        }
    }
    if rows.is_empty() {
        rows.push(("Summary".into(), "see the exact request below".into()));
    }
    rows
}

/// At most `ARGUMENT_SHOWN` characters of an argument's JSON; the exact request has it all.
fn cut(text: &str) -> String {
    let total = text.chars().count();
    if total <= ARGUMENT_SHOWN {
        return text.to_owned();
    }
    let start: String = text.chars().take(ARGUMENT_SHOWN).collect();
    format!(
        "{start}... ({} more characters: see the exact request)",
        total - ARGUMENT_SHOWN
    )
}

/// How much of an argument the summary shows.
const ARGUMENT_SHOWN: usize = 400;

/// An object a call names by id, as the summary resolves it.
struct Object {
    /// The argument holding the id or ids.
    arg: &'static str,
    /// The row label, before the id.
    label: &'static str,
    method: Method,
    /// The `get` parameter taking ids, and the id field of what it returns.
    param: &'static str,
    id: &'static str,
    output: &'static [&'static str],
}

/// `maintenanceid` is the one maintenance an update changes.
const OBJECTS: [Object; 4] = [
    Object {
        arg: "maintenanceid",
        label: "Changes maintenance",
        method: Method::MaintenanceGet,
        param: "maintenanceids",
        id: "maintenanceid",
        output: &["maintenanceid", "name"],
    },
    Object {
        arg: "groupids",
        label: "Host group",
        method: Method::HostGroupGet,
        param: "groupids",
        id: "groupid",
        output: &["groupid", "name"],
    },
    Object {
        arg: "hostids",
        label: "Host",
        method: Method::HostGet,
        param: "hostids",
        id: "hostid",
        output: &["hostid", "host", "name"],
    },
    Object {
        arg: "maintenanceids",
        label: "Maintenance",
        method: Method::MaintenanceGet,
        param: "maintenanceids",
        id: "maintenanceid",
        output: &["maintenanceid", "name"],
    },
];

/// The ids of an argument: a list of ids, or one id.
fn ids(value: Option<&Value>) -> Option<Vec<String>> {
    let value = value?;
    if let Some(one) = value.as_str() {
        return Some(vec![one.to_owned()]);
    }
    let items = value.as_array()?;
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

/// A host as `host (visible name)`, anything else by its name.
fn describe_object(object: &Value) -> String {
    let name = object["name"].as_str().unwrap_or("?");
    match object["host"].as_str() {
        Some(host) if host != name => format!("{host} ({name})"),
        Some(host) => host.to_owned(),
        None => name.to_owned(),
    }
}

/// An event's name, severity and each of its hosts, on rows of their own: the name can hold
/// text from monitored data ({ITEM.VALUE} in a trigger name), and inline it could read as
/// another severity and host ("x | severity information | host test-01"); a visible name
/// with ", " in it could read as more hosts on one row.
fn describe_event(id: &str, event: &Value) -> Vec<(String, String)> {
    let name = event["name"].as_str().unwrap_or("?");
    let severity = event["severity"]
        .as_str()
        .and_then(|s| s.parse::<usize>().ok())
        .and_then(|s| SEVERITIES.get(s))
        .unwrap_or(&"unknown severity");
    let mut rows = vec![
        (format!("Problem (event {id})"), name.to_owned()),
        (format!("Severity (event {id})"), (*severity).to_owned()),
    ];
    let hosts = event["hosts"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if hosts.is_empty() {
        rows.push((
            format!("Hosts (event {id})"),
            "none visible to you".to_owned(),
        ));
    }
    for host in hosts {
        let hostid = host["hostid"].as_str().unwrap_or("?");
        rows.push((format!("Host {hostid} (event {id})"), describe_object(host)));
    }
    rows
}
