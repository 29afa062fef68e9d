//! The official Zabbix MCP server image's environment contract (`--env-contract
//! zabbix-image`): its `ZBX_*` variables as parameters, the defaults its entrypoint
//! fills in, and its indexed tool rules, so a container of this binary takes the
//! official image's variables unchanged.
//!
//! The indexed rules `ZBX_ALLOWTOOL_<n>`, `ZBX_DENYTOOL_<n>`, `ZBX_ALLOWTOOL_REGEXP_<n>`
//! and `ZBX_DENYTOOL_REGEXP_<n>` share one index sequence from 0 without gaps, as in the
//! image's entrypoint; when any is set they replace the image's default deny list.

use std::collections::BTreeMap;
use std::path::Path;

use super::error::{At, ConfigError, Origin};
use super::file::Entry;
use super::params::Param;

/// How the environment is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EnvContract {
    /// `ZABBIX_MCP_GUARD_*` variables only.
    #[default]
    Guard,
    /// The official image's `ZBX_*` variables as well (see the module docs).
    ZabbixImage,
}

/// What the image contract contributes: parameter entries and, when indexed rule
/// variables are set, the rules that replace every file rule.
#[derive(Debug, Default)]
pub struct ImageEnv {
    pub entries: Vec<Entry>,
    /// `Some`: indexed rules were given. `None`: the file's rules stand, or, when the
    /// file has none, [`DEFAULT_DENY`].
    pub rules: Option<Vec<Entry>>,
}

/// The single-valued variables and their parameters.
const VARIABLES: [(&str, Param); 12] = [
    ("ZBX_FRONTEND_URL", Param::FrontendUrl),
    ("ZBX_ALLOWEDIP", Param::AllowedIp),
    ("ZBX_LISTENIP", Param::ListenIp),
    ("ZBX_LISTENPORT", Param::ListenPort),
    ("ZBX_TIMEOUT", Param::Timeout),
    ("ZBX_DEBUGLEVEL", Param::DebugLevel),
    ("ZBX_IGNOREURLCERTERRORS", Param::IgnoreUrlCertErrors),
    ("ZBX_MAX_RESPONSE_SIZE", Param::MaxResponseSize),
    ("ZBX_TOOL_PREFIX", Param::ToolPrefix),
    ("ZBX_TLSACCEPT", Param::TlsAccept),
    ("ZBX_TLSCERTFILE", Param::TlsCertFile),
    ("ZBX_TLSKEYFILE", Param::TlsKeyFile),
];

/// Rule variable prefixes, longest first so `ZBX_ALLOWTOOL_REGEXP_0` is not read as
/// `ZBX_ALLOWTOOL_` with index `REGEXP_0`.
const RULE_PREFIXES: [(&str, Param); 4] = [
    ("ZBX_ALLOWTOOL_REGEXP", Param::AllowToolRegexp),
    ("ZBX_DENYTOOL_REGEXP", Param::DenyToolRegexp),
    ("ZBX_ALLOWTOOL", Param::AllowTool),
    ("ZBX_DENYTOOL", Param::DenyTool),
];

/// The image entrypoint's `ZBX_ALLOWEDIP` when it is unset or empty.
pub const DEFAULT_ALLOWED_IP: &str = "127.0.0.1,::1";

/// The image's default tool rules (its `zabbix_mcp_server_tool_access.conf`).
pub const DEFAULT_DENY: [&str; 5] = [
    "item_get",
    "lld_get",
    "interface_get",
    "macro_get",
    "history_get",
];

/// Where the image resolves relative `ZBX_TLSCERTFILE`/`ZBX_TLSKEYFILE` names.
pub const ENC_DIR: &str = "/var/lib/zabbix/enc";

/// Variables of the image this sidecar does not take; refused rather than ignored.
const UNSUPPORTED: [(&str, Param, &str); 2] = [
    (
        "ZBX_TLSCERT",
        Param::TlsCertFile,
        "mount the certificate and set ZBX_TLSCERTFILE",
    ),
    (
        "ZBX_TLSKEY",
        Param::TlsKeyFile,
        "mount the key and set ZBX_TLSKEYFILE",
    ),
];

impl ImageEnv {
    /// Reads the contract's variables from `env`. An empty variable counts as unset
    /// (the parameter keeps its default), as the image's entrypoint treats them; the
    /// `AllowedIP` default is [`default_allowed_ip`](Self::default_allowed_ip).
    pub fn read(env: &BTreeMap<String, String>) -> Result<ImageEnv, ConfigError> {
        for (var, param, hint) in UNSUPPORTED {
            if env.get(var).is_some_and(|v| !v.is_empty()) {
                return Err(ConfigError::conflict(
                    &at(var, param),
                    format!("certificate contents in a variable are not supported: {hint}"),
                ));
            }
        }
        let mut entries = Vec::new();
        for (var, param) in VARIABLES {
            let value = env.get(var).map(|v| v.trim()).unwrap_or_default();
            let value = match (value.is_empty(), param) {
                (true, _) => continue,
                (false, Param::TlsCertFile | Param::TlsKeyFile) => in_enc_dir(value),
                (false, _) => value.to_owned(),
            };
            entries.push(entry(var, param, value));
        }
        Ok(ImageEnv {
            entries,
            rules: indexed_rules(env)?,
        })
    }

    /// The image's `AllowedIP` when neither the file nor a variable gives one.
    pub fn default_allowed_ip() -> Entry {
        Entry {
            param: Param::AllowedIp,
            value: DEFAULT_ALLOWED_IP.to_owned(),
            origin: Origin::Default {
                what: "the zabbix-image default ZBX_ALLOWEDIP",
            },
        }
    }

    /// The image's default deny list, as entries that name where they come from.
    pub fn default_rules() -> Vec<Entry> {
        DEFAULT_DENY
            .iter()
            .map(|tool| Entry {
                param: Param::DenyTool,
                value: (*tool).to_owned(),
                origin: Origin::Default {
                    what: "the zabbix-image default rules",
                },
            })
            .collect()
    }
}

/// Whether a file value is exactly one `${NAME}` reference to a variable that is unset
/// or empty: under this contract the parameter then keeps its default, as the official
/// server documents for configuration files.
pub fn unset_reference(raw_value: &str, env: &BTreeMap<String, String>) -> bool {
    raw_value
        .trim()
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .filter(|name| !name.is_empty() && !name.contains(['$', '{', '}']))
        .is_some_and(|name| env.get(name).is_none_or(String::is_empty))
}

fn in_enc_dir(value: &str) -> String {
    if Path::new(value).is_absolute() {
        value.to_owned()
    } else {
        Path::new(ENC_DIR).join(value).display().to_string()
    }
}

fn at(var: &str, param: Param) -> At {
    At::new(
        Origin::Env {
            var: var.to_owned(),
        },
        param,
    )
}

fn entry(var: &str, param: Param, value: String) -> Entry {
    Entry {
        param,
        value,
        origin: Origin::Env {
            var: var.to_owned(),
        },
    }
}

/// The indexed rules in index order; `None` when no rule variable is set. Every
/// malformed variable is an error naming it.
fn indexed_rules(env: &BTreeMap<String, String>) -> Result<Option<Vec<Entry>>, ConfigError> {
    let mut found: BTreeMap<usize, Entry> = BTreeMap::new();
    for (name, value) in env {
        let Some((prefix, param, suffix)) = RULE_PREFIXES.iter().find_map(|(prefix, param)| {
            let rest = name.strip_prefix(prefix)?;
            Some((*prefix, *param, rest))
        }) else {
            continue;
        };
        let rule_at = at(name, param);
        let index = match suffix.strip_prefix('_') {
            None if suffix.is_empty() => {
                return Err(ConfigError::conflict(
                    &rule_at,
                    format!("not supported; use indexed variables such as {prefix}_0"),
                ));
            }
            // Another variable that merely starts like a prefix (e.g. ZBX_DENYTOOLS).
            None => continue,
            Some(digits) => parse_index(digits).ok_or_else(|| {
                ConfigError::conflict(
                    &rule_at,
                    "invalid index: expected a number from 0 without leading zeros",
                )
            })?,
        };
        if value.trim().is_empty() {
            return Err(ConfigError::bad_value(
                &rule_at,
                value,
                "a rule must not be empty",
            ));
        }
        let rule = entry(name, param, value.trim().to_owned());
        if let Some(other) = found.insert(index, rule) {
            return Err(ConfigError::conflict(
                &rule_at,
                format!("index {index} is also used by {}", other.origin),
            ));
        }
    }
    if found.is_empty() {
        return Ok(None);
    }
    for (expected, (index, rule)) in found.iter().enumerate() {
        if *index != expected {
            return Err(ConfigError::conflict(
                &rule.at(),
                format!("index {index} follows a gap: index {expected} is missing"),
            ));
        }
    }
    Ok(Some(found.into_values().collect()))
}

fn parse_index(digits: &str) -> Option<usize> {
    let canonical = digits == "0" || (!digits.starts_with('0') && !digits.is_empty());
    if !canonical || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}
