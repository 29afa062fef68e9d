//! Targets: what a write call touches. The IDs a call names (events, maintenances, hosts,
//! host groups) are resolved with the caller's own token into the hosts and host groups
//! behind them (`input.targets`) before the policy decides, so a policy can scope writes by
//! host group. Resolution takes at most three rounds of Zabbix calls, afresh for every call:
//! a cached answer would let a write be decided on what another write (the agent's own, on
//! this replica or another) has changed since. Only a complete answer counts: an ID that does
//! not resolve (unknown, not visible to the caller, or Zabbix failed) denies the call.

mod resolve;

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::catalog::ToolDef;
use crate::policy::Targets;
use crate::zabbix::{ApiToken, Method, ZabbixClient, ZabbixError, ZabbixVersion};

/// The IDs a call names, by kind, each set sorted and without repeats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ask {
    pub eventids: BTreeSet<String>,
    pub maintenanceids: BTreeSet<String>,
    pub hostids: BTreeSet<String>,
    pub groupids: BTreeSet<String>,
}

/// What a target ID names, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    Event,
    Maintenance,
    Host,
    HostGroup,
}

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(
        "{kind} {ids} cannot be resolved: unknown to Zabbix or not visible to the caller's token"
    )]
    NotVisible { kind: TargetKind, ids: String },
    #[error("the targets of the call could not be resolved: {0}")]
    Zabbix(ZabbixError),
    #[error("the targets of the call could not be resolved: {method} answered without {field}")]
    Malformed { method: Method, field: &'static str },
}

/// Resolves asks to targets. Nothing is kept between calls (see the module's comment).
pub struct TargetResolver;

impl Ask {
    /// The IDs a write call names; `None` for read tools (Zabbix scopes what they return,
    /// and policies scope them by their arguments).
    pub fn of(def: &ToolDef, arguments: &Map<String, Value>) -> Option<Ask> {
        if !def.is_write() {
            return None;
        }
        let ids = |names: &[&str]| -> BTreeSet<String> {
            names
                .iter()
                .filter_map(|name| arguments.get(*name))
                .flat_map(|v| match v {
                    Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
                    Value::String(id) => vec![id.as_str()],
                    _ => Vec::new(),
                })
                .map(str::to_owned)
                .collect()
        };
        Some(Ask {
            eventids: ids(&["eventids"]),
            maintenanceids: ids(&["maintenanceid", "maintenanceids"]),
            hostids: ids(&["hostids"]),
            groupids: ids(&["groupids"]),
        })
    }
}

impl std::fmt::Display for TargetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TargetKind::Event => "event",
            TargetKind::Maintenance => "maintenance",
            TargetKind::Host => "host",
            TargetKind::HostGroup => "host group",
        })
    }
}

impl TargetResolver {
    /// The targets of `ask` as `token` sees them now.
    pub async fn resolve(
        &self,
        client: &ZabbixClient,
        token: &ApiToken,
        version: ZabbixVersion,
        ask: Ask,
    ) -> Result<Targets, TargetError> {
        resolve::lookup(client, token, version, &ask).await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Ask;
    use crate::catalog::find;

    fn ask(tool: &str, args: serde_json::Value) -> Option<Ask> {
        Ask::of(find(tool).unwrap(), args.as_object().unwrap())
    }

    #[test]
    fn writes_ask_for_every_id_they_name_and_reads_for_none() {
        assert_eq!(ask("host_get", json!({"hostids": ["1"]})), None);
        let events = ask("problem_acknowledge", json!({"eventids": ["7", "5", "7"]})).unwrap();
        assert_eq!(events.eventids.into_iter().collect::<Vec<_>>(), ["5", "7"]);
        let update = ask(
            "maintenance_update",
            json!({"maintenanceid": "3", "groupids": ["2"], "hostids": []}),
        )
        .unwrap();
        assert_eq!(update.maintenanceids.len(), 1);
        assert_eq!(update.groupids.len(), 1);
        assert!(update.hostids.is_empty() && update.eventids.is_empty());
        let delete = ask("maintenance_delete", json!({"maintenanceids": ["3", "4"]})).unwrap();
        assert_eq!(delete.maintenanceids.len(), 2);
    }
}
