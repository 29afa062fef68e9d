//! Merging the three sources of parameters: the file, then `ZABBIX_MCP_GUARD_*`
//! variables, then flags, each later source winning over the earlier ones.
//!
//! Single-valued parameters take the value of the highest source that sets them.
//! `AllowedHost` takes the whole list of the highest source that sets it. Exposure
//! rules from every source are kept, the higher source's rules first: rules are
//! first-match, so that is what "winning" means for them.

use std::collections::{BTreeMap, BTreeSet};

use super::error::{At, ConfigError, Origin};
use super::file::{self, Entry};
use super::image::{EnvContract, ImageEnv};
use super::params::{Arity, ENV_PREFIX, PROCESS_VARIABLES, Param};
use super::{FlagValue, Sources};

/// The merged parameters, ready to be turned into a `Config`.
#[derive(Debug, Default)]
pub struct Resolved {
    singles: BTreeMap<Param, Entry>,
    rules: Vec<Entry>,
    allowed_hosts: Vec<Entry>,
}

impl Resolved {
    /// Reads the file (if any) and layers the environment and the flags over it. Under
    /// the zabbix-image contract the image's `ZBX_*` variables come between the file and
    /// the `ZABBIX_MCP_GUARD_*` variables, and its rules replace the file's (see
    /// [`image`](super::image)).
    pub fn from_sources(sources: &Sources) -> Result<Resolved, ConfigError> {
        let contract = sources.env_contract;
        let file = match &sources.config_file {
            Some(path) => file::read(path, &sources.env, contract)?,
            None => file::FileRead::default(),
        };
        reject_unknown_variables(&sources.env, &file.referenced)?;
        let mut resolved = Resolved::default();
        resolved.apply(file.entries);
        if contract == EnvContract::ZabbixImage {
            let image = ImageEnv::read(&sources.env)?;
            match image.rules {
                Some(rules) => resolved.rules = rules,
                None if resolved.rules.is_empty() => resolved.rules = ImageEnv::default_rules(),
                None => {}
            }
            resolved.apply(image.entries);
            if resolved.get(Param::AllowedIp).is_none() {
                resolved.apply(vec![ImageEnv::default_allowed_ip()]);
            }
        }
        resolved.apply(env_entries(&sources.env));
        resolved.apply(flag_entries(&sources.flags)?);
        Ok(resolved)
    }

    fn apply(&mut self, layer: Vec<Entry>) {
        let mut rules = Vec::new();
        let mut hosts = Vec::new();
        for entry in layer {
            match entry.param.arity() {
                Arity::Single => {
                    self.singles.insert(entry.param, entry);
                }
                Arity::Rule => rules.push(entry),
                Arity::List => hosts.push(entry),
                // Includes were expanded while reading the file.
                Arity::Include => {}
            }
        }
        rules.append(&mut self.rules);
        self.rules = rules;
        if !hosts.is_empty() {
            self.allowed_hosts = hosts;
        }
    }

    /// The effective entry of a single-valued parameter.
    pub fn get(&self, param: Param) -> Option<&Entry> {
        self.singles.get(&param)
    }

    /// Exposure rule entries in effective (first-match) order.
    pub fn rules(&self) -> &[Entry] {
        &self.rules
    }

    pub fn allowed_hosts(&self) -> &[Entry] {
        &self.allowed_hosts
    }
}

/// A `ZABBIX_MCP_GUARD_*` variable that is no parameter's, not read by the command line,
/// not named by the file in `${…}` and not one of Kubernetes' service variables is
/// refused: a misspelt one (`ZABBIX_MCP_GUARD_DENYTOOL=host_get`) was ignored and the tool
/// stayed exposed, while the same typo in the file stops the start.
fn reject_unknown_variables(
    env: &BTreeMap<String, String>,
    referenced: &BTreeSet<String>,
) -> Result<(), ConfigError> {
    let parameters = || Param::all().filter(|p| p.overridable()).map(Param::env_var);
    // The usual slip is a separator: DENYTOOL for DENY_TOOL.
    let squashed = |name: &str| name.replace('_', "");
    let meant = |var: &str| parameters().find(|p| squashed(p) == squashed(var));
    let known = |var: &str| {
        PROCESS_VARIABLES.contains(&var)
            || referenced.contains(var)
            || parameters().any(|p| p == var)
            || (meant(var).is_none() && service_variable(var))
    };
    match env
        .keys()
        .find(|var| var.starts_with(ENV_PREFIX) && !known(var))
    {
        Some(var) => Err(ConfigError::UnknownVariable {
            var: var.clone(),
            meant: meant(var),
        }),
        None => Ok(()),
    }
}

/// Whether `var` is one of the variables the kubelet gives every container for each
/// Service of its namespace (`enableServiceLinks`, on by default): a Service named
/// `zabbix-mcp-guard`, as the shipped manifest's, or `zabbix-mcp-guard-…` brings
/// `ZABBIX_MCP_GUARD_SERVICE_HOST`, `…_SERVICE_PORT[_<name>]`, `…_PORT` and
/// `…_PORT_<port>_<TCP|UDP|SCTP>[_PROTO|_PORT|_ADDR]`.
fn service_variable(var: &str) -> bool {
    if var.ends_with("_SERVICE_HOST")
        || var.ends_with("_SERVICE_PORT")
        || var.contains("_SERVICE_PORT_")
        || var.ends_with("_PORT")
    {
        return true;
    }
    let Some((_, tail)) = var.rsplit_once("_PORT_") else {
        return false;
    };
    let mut parts = tail.split('_');
    let port = parts
        .next()
        .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let protocol = matches!(parts.next(), Some("TCP" | "UDP" | "SCTP"));
    let field = matches!(parts.next(), None | Some("PROTO" | "PORT" | "ADDR"));
    port && protocol && field && parts.next().is_none()
}

/// Entries from `ZABBIX_MCP_GUARD_*` variables. Rule variables may hold several
/// rules, one per line, because a regular expression may contain commas.
fn env_entries(env: &BTreeMap<String, String>) -> Vec<Entry> {
    let mut entries = Vec::new();
    for param in Param::all().filter(|p| p.overridable()) {
        let var = param.env_var();
        let Some(value) = env.get(&var) else {
            continue;
        };
        let origin = Origin::Env { var };
        if param.arity() == Arity::Rule {
            for line in value.lines().map(str::trim).filter(|l| !l.is_empty()) {
                entries.push(entry(param, line, origin.clone()));
            }
        } else {
            entries.push(entry(param, value.trim(), origin));
        }
    }
    entries
}

fn flag_entries(flags: &[FlagValue]) -> Result<Vec<Entry>, ConfigError> {
    flags
        .iter()
        .map(|flag| {
            let origin = Origin::Flag {
                flag: format!("--{}", flag.param.flag()),
            };
            if !flag.param.overridable() {
                let at = At::new(origin, flag.param);
                return Err(ConfigError::conflict(
                    &at,
                    "allowed only in a configuration file",
                ));
            }
            Ok(entry(flag.param, flag.value.trim(), origin))
        })
        .collect()
}

fn entry(param: Param, value: &str, origin: Origin) -> Entry {
    Entry {
        param,
        value: value.to_owned(),
        origin,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::Resolved;
    use crate::config::error::Origin;
    use crate::config::params::Param;
    use crate::config::{FlagValue, Sources};

    #[test]
    fn env_rules_split_on_lines_and_flags_come_first() {
        let env = BTreeMap::from([(
            Param::DenyTool.env_var(),
            "item_get\n\n history_get \n".to_owned(),
        )]);
        let sources = Sources {
            config_file: None,
            env,
            flags: vec![FlagValue::new(Param::AllowTool, "item_get")],
            ..Sources::default()
        };
        let resolved = Resolved::from_sources(&sources).unwrap();
        let rules: Vec<(&str, &str)> = resolved
            .rules()
            .iter()
            .map(|e| (e.param.name(), e.value.as_str()))
            .collect();
        assert_eq!(
            rules,
            [
                ("AllowTool", "item_get"),
                ("DenyTool", "item_get"),
                ("DenyTool", "history_get")
            ]
        );
        assert_eq!(
            resolved.rules()[0].origin,
            Origin::Flag {
                flag: "--allow-tool".into()
            }
        );
    }

    #[test]
    fn include_is_not_a_flag() {
        let sources = Sources {
            flags: vec![FlagValue::new(Param::Include, "/etc")],
            ..Sources::default()
        };
        let err = Resolved::from_sources(&sources).unwrap_err().to_string();
        assert_eq!(
            err,
            "option --include: allowed only in a configuration file"
        );
    }
}
