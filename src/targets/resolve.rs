//! The Zabbix calls behind one ask, with the caller's token. Round one asks what events and
//! maintenances touch (`event.get`, `maintenance.get`); round two names every host with its
//! groups (`host.get`) and every group (`hostgroup.get`); round three, when there are groups,
//! finds their nested subgroups (`hostgroup.get` by name), whose hosts a maintenance covers
//! too. Calls of one round run together, and a kind with no IDs costs no call.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{Ask, TargetError, TargetKind};
use crate::catalog::SelectParam;
use crate::policy::{TargetGroup, TargetHost, Targets};
use crate::zabbix::{ApiToken, Method, ZabbixClient, ZabbixVersion};

/// What round one found: more hosts and groups to name.
#[derive(Default)]
struct Touched {
    hostids: BTreeSet<String>,
    groupids: BTreeSet<String>,
}

struct Upstream<'a> {
    client: &'a ZabbixClient,
    token: &'a ApiToken,
    version: ZabbixVersion,
}

pub(super) async fn lookup(
    client: &ZabbixClient,
    token: &ApiToken,
    version: ZabbixVersion,
    ask: &Ask,
) -> Result<Targets, TargetError> {
    let up = Upstream {
        client,
        token,
        version,
    };
    let (events, maintenances) = tokio::try_join!(
        up.events(&ask.eventids),
        up.maintenances(&ask.maintenanceids)
    )?;
    let mut hostids = ask.hostids.clone();
    let mut groupids = ask.groupids.clone();
    for touched in [events, maintenances] {
        hostids.extend(touched.hostids);
        groupids.extend(touched.groupids);
    }
    let (hosts, groups) = tokio::try_join!(up.hosts(&hostids), up.groups(&groupids))?;
    Ok(Targets { hosts, groups })
}

impl Upstream<'_> {
    async fn get(&self, method: Method, params: Value) -> Result<Vec<Value>, TargetError> {
        match self
            .client
            .call(method, &params, Some((self.token, self.version)))
            .await
        {
            Ok(Value::Array(list)) => Ok(list),
            Ok(_) => Err(TargetError::Malformed {
                method,
                field: "a list",
            }),
            Err(error) => Err(TargetError::Zabbix(error)),
        }
    }

    /// The request key and the answer key of host groups on this version.
    fn group_keys(&self) -> (&'static str, &'static str) {
        let param = SelectParam::HostGroups.param_name(self.version);
        let key = SelectParam::HostGroups
            .result_keys(self.version)
            .map_or("hostgroups", |(zabbix, _)| zabbix);
        (param, key)
    }

    async fn events(&self, eventids: &BTreeSet<String>) -> Result<Touched, TargetError> {
        if eventids.is_empty() {
            return Ok(Touched::default());
        }
        let method = Method::EventGet;
        let list = self
            .get(
                method,
                json!({"eventids": eventids, "output": ["eventid"], "selectHosts": ["hostid"]}),
            )
            .await?;
        let mut touched = Touched::default();
        let mut found = BTreeSet::new();
        for event in &list {
            let id = field(event, "eventid", method)?;
            let hosts = ids(&event["hosts"], "hostid", method)?;
            // A problem event always has a host; one without is not a target we can scope.
            if !hosts.is_empty() {
                found.insert(id);
                touched.hostids.extend(hosts);
            }
        }
        missing(TargetKind::Event, eventids, &found)?;
        Ok(touched)
    }

    async fn maintenances(&self, ids_asked: &BTreeSet<String>) -> Result<Touched, TargetError> {
        if ids_asked.is_empty() {
            return Ok(Touched::default());
        }
        let method = Method::MaintenanceGet;
        let (groups_param, groups_key) = self.group_keys();
        let list = self
            .get(
                method,
                json!({"maintenanceids": ids_asked, "output": ["maintenanceid"],
                       "selectHosts": ["hostid"], groups_param: ["groupid"]}),
            )
            .await?;
        let mut touched = Touched::default();
        let mut found = BTreeSet::new();
        for maintenance in &list {
            found.insert(field(maintenance, "maintenanceid", method)?);
            touched
                .hostids
                .extend(ids(&maintenance["hosts"], "hostid", method)?);
            touched
                .groupids
                .extend(ids(&maintenance[groups_key], "groupid", method)?);
        }
        missing(TargetKind::Maintenance, ids_asked, &found)?;
        Ok(touched)
    }

    async fn hosts(&self, hostids: &BTreeSet<String>) -> Result<Vec<TargetHost>, TargetError> {
        if hostids.is_empty() {
            return Ok(Vec::new());
        }
        let method = Method::HostGet;
        let (groups_param, groups_key) = self.group_keys();
        let list = self
            .get(
                method,
                json!({"hostids": hostids, "output": ["hostid", "host"],
                       groups_param: ["groupid", "name"]}),
            )
            .await?;
        let mut hosts = Vec::with_capacity(list.len());
        for host in &list {
            let Value::Array(groups) = &host[groups_key] else {
                return Err(TargetError::Malformed {
                    method,
                    field: "host groups",
                });
            };
            hosts.push(TargetHost {
                hostid: field(host, "hostid", method)?,
                host: field(host, "host", method)?,
                groups: groups
                    .iter()
                    .map(|g| group(g, method))
                    .collect::<Result<_, _>>()?,
            });
        }
        let found = hosts.iter().map(|h| h.hostid.clone()).collect();
        missing(TargetKind::Host, hostids, &found)?;
        hosts.sort_by(|a, b| by_id(&a.hostid, &b.hostid));
        for host in &mut hosts {
            host.groups.sort_by(|a, b| by_id(&a.groupid, &b.groupid));
        }
        Ok(hosts)
    }

    async fn groups(&self, groupids: &BTreeSet<String>) -> Result<Vec<TargetGroup>, TargetError> {
        if groupids.is_empty() {
            return Ok(Vec::new());
        }
        let method = Method::HostGroupGet;
        let list = self
            .get(
                method,
                json!({"groupids": groupids, "output": ["groupid", "name"]}),
            )
            .await?;
        let mut groups = list
            .iter()
            .map(|g| group(g, method))
            .collect::<Result<Vec<_>, _>>()?;
        let found: BTreeSet<String> = groups.iter().map(|g| g.groupid.clone()).collect();
        missing(TargetKind::HostGroup, groupids, &found)?;
        let nested = self.subgroups(&groups).await?;
        groups.extend(nested.into_iter().filter(|g| !found.contains(&g.groupid)));
        groups.sort_by(|a, b| by_id(&a.groupid, &b.groupid));
        groups.dedup_by(|a, b| a.groupid == b.groupid);
        Ok(groups)
    }

    /// The nested subgroups of `parents` the caller can read. Zabbix's server puts the hosts
    /// of `A/B` (and `A/B/C`) in a maintenance of `A`, so they are touched too. Zabbix searches
    /// without regard to case; the server nests by exact name, so the answer is filtered.
    async fn subgroups(&self, parents: &[TargetGroup]) -> Result<Vec<TargetGroup>, TargetError> {
        let prefixes: Vec<String> = parents.iter().map(|g| format!("{}/", g.name)).collect();
        let method = Method::HostGroupGet;
        let list = self
            .get(
                method,
                json!({"output": ["groupid", "name"], "search": {"name": prefixes},
                       "startSearch": true, "searchByAny": true}),
            )
            .await?;
        let mut nested = Vec::new();
        for g in &list {
            let g = group(g, method)?;
            if nested_in(&g.name, &prefixes) {
                nested.push(g);
            }
        }
        Ok(nested)
    }
}

fn field(object: &Value, name: &'static str, method: Method) -> Result<String, TargetError> {
    object[name]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or(TargetError::Malformed {
            method,
            field: name,
        })
}

fn ids(list: &Value, name: &'static str, method: Method) -> Result<Vec<String>, TargetError> {
    let Value::Array(list) = list else {
        return Err(TargetError::Malformed {
            method,
            field: name,
        });
    };
    list.iter().map(|o| field(o, name, method)).collect()
}

fn group(object: &Value, method: Method) -> Result<TargetGroup, TargetError> {
    Ok(TargetGroup {
        groupid: field(object, "groupid", method)?,
        name: field(object, "name", method)?,
    })
}

/// Every asked ID must be in the answer: Zabbix leaves out what the token cannot see.
fn missing(
    kind: TargetKind,
    asked: &BTreeSet<String>,
    found: &BTreeSet<String>,
) -> Result<(), TargetError> {
    let absent: Vec<&str> = asked.difference(found).map(String::as_str).collect();
    if absent.is_empty() {
        Ok(())
    } else {
        Err(TargetError::NotVisible {
            kind,
            ids: absent.join(", "),
        })
    }
}

/// Whether a group name is below one of `prefixes` (parent names with their `/`), as
/// Zabbix's server nests groups: by exact, case-sensitive name.
fn nested_in(name: &str, prefixes: &[String]) -> bool {
    prefixes
        .iter()
        .any(|prefix| name.len() > prefix.len() && name.starts_with(prefix.as_str()))
}

/// Numeric order of Zabbix IDs (strings of digits).
fn by_id(a: &str, b: &str) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{TargetKind, by_id, missing, nested_in};

    #[test]
    fn every_asked_id_must_be_found() {
        let set = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert!(missing(TargetKind::Host, &set(&["1", "2"]), &set(&["2", "1"])).is_ok());
        let err = missing(TargetKind::Event, &set(&["1", "2", "3"]), &set(&["2"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "event 1, 3 cannot be resolved: unknown to Zabbix or not visible to the caller's token"
        );
        let mut ids = vec!["10", "9", "100"];
        ids.sort_by(|a, b| by_id(a, b));
        assert_eq!(ids, ["9", "10", "100"]);
    }

    #[test]
    fn subgroups_nest_by_exact_name() {
        let prefixes = ["Customers/".to_owned()];
        assert!(nested_in("Customers/Bank", &prefixes));
        assert!(nested_in("Customers/Bank/Vault", &prefixes));
        for other in [
            "Customers",
            "Customers/",
            "customers/Bank",
            "CustomersX/Bank",
        ] {
            assert!(!nested_in(other, &prefixes), "{other}");
        }
    }
}
