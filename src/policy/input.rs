//! The policy input document. Its JSON shape is a public interface (policies are written
//! against it), so it is versioned and the serialized form is pinned by a test.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The input document version; bump it on any incompatible change of the shape.
pub const INPUT_VERSION: u32 = 1;

/// What is being decided: the offer of a tool in `tools/list`, a tool call, a resource
/// read, or whether a person on the approval page may decide a pending call (`approve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    List,
    Call,
    Resource,
    Approve,
}

/// Whether a tool changes Zabbix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    Read,
    Write,
}

/// `input`: the document a policy sees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyInput {
    pub version: u32,
    pub phase: Phase,
    pub tool: ToolInfo,
    /// Validated, normalized arguments; empty for phases `list` and `resource`.
    pub arguments: Map<String, Value>,
    pub caller: CallerInfo,
    pub client: ClientInfo,
    pub zabbix: ZabbixInfo,
    /// Unix seconds; policies pass `input.now * 1000000000` to the `time.*` builtins.
    pub now: u64,
    /// Only for phase `resource`; `tool` is then the tool that owns the resource kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceInfo>,
    /// Only for write calls: what the call touches, resolved with the caller's token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Targets>,
    /// Only for phase `approve`: the person deciding on the approval page, resolved from
    /// their own sign-in; the rest of the document is the pending call's `call` input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<ApproverInfo>,
}

/// `input.approver`: the person's identity, as `input.caller` has it, and how they signed
/// in to the approval page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApproverInfo {
    #[serde(flatten)]
    pub person: CallerInfo,
    pub sign_in: SignIn,
}

/// How an approver signed in: a policy may take decisions only from a password sign-in
/// (an API token can sit in a file an agent reads; a password is the person's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignIn {
    /// Username and password, checked by Zabbix's `user.login`.
    Password,
    /// The person's own API token.
    Token,
}

impl SignIn {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SignIn::Password => "password",
            SignIn::Token => "token",
        }
    }
}

/// `input.tool`: always the plain (unprefixed) tool name, plus the exposed one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub exposed_name: String,
    pub kind: ToolKind,
    /// The Zabbix API method, e.g. `maintenance.create`.
    pub method: String,
    pub destructive: bool,
    pub idempotent: bool,
}

/// `input.caller`: the identity the API token resolves to. The token itself is never part
/// of the input; `token_id` is a hash prefix that only correlates calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallerInfo {
    pub userid: String,
    pub username: String,
    /// Zabbix user type: 1 user, 2 admin, 3 super admin.
    #[serde(rename = "type")]
    pub user_type: u32,
    pub roleid: String,
    /// User group names.
    pub usrgrps: Vec<String>,
    pub token_id: String,
}

/// `input.client`: the MCP peer. Unknown values are `null`, never absent, so a policy
/// can rely on the keys existing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo {
    pub address: String,
    pub name: Option<String>,
    pub version: Option<String>,
    pub protocol_version: Option<String>,
    /// Elicitation modes the client declared (`form`, `url`).
    pub elicitation: Vec<String>,
}

/// `input.zabbix`: the upstream as seen through `apiinfo.version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZabbixInfo {
    pub version: String,
}

/// `input.resource` for phase `resource`, from `zabbix://<kind>/<id>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceInfo {
    pub uri: String,
    pub kind: String,
    pub id: String,
}

/// `input.targets`: the hosts and host groups a write call touches, as the caller's token
/// sees them in Zabbix. A call whose targets cannot all be resolved is denied before the
/// policy runs, so every ID the call names is here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Targets {
    /// Hosts: those named by `hostids`, those of the events in `eventids`, those of the
    /// maintenances in `maintenanceid(s)`; each with its host groups the caller can read
    /// (Zabbix leaves out the others: policies must allow by group, not deny by group).
    pub hosts: Vec<TargetHost>,
    /// Host groups named by `groupids` and those of the maintenances in `maintenanceid(s)`,
    /// with their nested subgroups the caller can read (a maintenance covers those hosts too).
    pub groups: Vec<TargetGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetHost {
    pub hostid: String,
    /// The technical host name.
    pub host: String,
    pub groups: Vec<TargetGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetGroup {
    pub groupid: String,
    pub name: String,
}

impl PolicyInput {
    /// A version-1 input for `phase` with no arguments, no resource and `now` = the
    /// current time; set `arguments` / `resource` on the result as needed.
    pub fn new(
        phase: Phase,
        tool: ToolInfo,
        caller: CallerInfo,
        client: ClientInfo,
        zabbix: ZabbixInfo,
    ) -> Self {
        Self {
            version: INPUT_VERSION,
            phase,
            tool,
            arguments: Map::new(),
            caller,
            client,
            zabbix,
            now: unix_now(),
            resource: None,
            targets: None,
            approver: None,
        }
    }

    /// The input as a regorus value, the way the VM receives it.
    pub(crate) fn to_rego(&self) -> regorus::Value {
        super::convert::input_value(self)
    }
}

/// Seconds since the Unix epoch; 0 if the clock is before it.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::{
        CallerInfo, ClientInfo, Phase, PolicyInput, ResourceInfo, TargetGroup, TargetHost, Targets,
        ToolInfo, ToolKind, ZabbixInfo,
    };

    /// The DESIGN.md example input, reused by other tests of the module.
    pub(crate) fn sample_input() -> PolicyInput {
        let mut input = PolicyInput::new(
            Phase::Call,
            ToolInfo {
                name: "maintenance_create".into(),
                exposed_name: "zbx_maintenance_create".into(),
                kind: ToolKind::Write,
                method: "maintenance.create".into(),
                destructive: false,
                idempotent: false,
            },
            CallerInfo {
                userid: "1".into(),
                username: "Admin".into(),
                user_type: 3,
                roleid: "3".into(),
                usrgrps: vec!["Zabbix administrators".into()],
                token_id: "5e8f0c1d2a3b4c5d".into(),
            },
            ClientInfo {
                address: "10.0.0.7".into(),
                name: Some("claude-code".into()),
                version: Some("2.1".into()),
                protocol_version: Some("2025-11-25".into()),
                elicitation: vec!["form".into()],
            },
            ZabbixInfo {
                version: "7.0.22".into(),
            },
        );
        input.now = 1_767_225_600;
        input.arguments.insert("name".into(), json!("patch window"));
        input.arguments.insert("groupids".into(), json!(["2"]));
        input
    }

    #[test]
    fn serialized_shape_is_the_documented_one() {
        let expected = json!({
            "version": 1,
            "phase": "call",
            "tool": {"name": "maintenance_create", "exposed_name": "zbx_maintenance_create",
                     "kind": "write", "method": "maintenance.create",
                     "destructive": false, "idempotent": false},
            "arguments": {"name": "patch window", "groupids": ["2"]},
            "caller": {"userid": "1", "username": "Admin", "type": 3, "roleid": "3",
                       "usrgrps": ["Zabbix administrators"], "token_id": "5e8f0c1d2a3b4c5d"},
            "client": {"address": "10.0.0.7", "name": "claude-code", "version": "2.1",
                       "protocol_version": "2025-11-25", "elicitation": ["form"]},
            "zabbix": {"version": "7.0.22"},
            "now": 1767225600
        });
        let actual = serde_json::to_value(sample_input()).expect("serializes");
        assert_eq!(actual, expected);
        // Key order is part of what people read in the decision log.
        assert_eq!(
            serde_json::to_string(&actual).expect("string"),
            serde_json::to_string(&expected).expect("string")
        );
    }

    #[test]
    fn resource_phase_adds_the_resource_and_unknown_client_fields_are_null() {
        let mut input = sample_input();
        input.phase = Phase::Resource;
        input.arguments.clear();
        input.resource = Some(ResourceInfo {
            uri: "zabbix://host/10084".into(),
            kind: "host".into(),
            id: "10084".into(),
        });
        input.client.name = None;
        let v = serde_json::to_value(&input).expect("serializes");
        assert_eq!(v["phase"], json!("resource"));
        assert_eq!(
            v["resource"],
            json!({"uri": "zabbix://host/10084", "kind": "host", "id": "10084"})
        );
        assert_eq!(v["client"]["name"], json!(null));
        assert_eq!(v["arguments"], json!({}));
        let back: PolicyInput = serde_json::from_value(v).expect("deserializes");
        assert_eq!(back, input);
    }

    #[test]
    fn targets_have_the_documented_shape() {
        let mut input = sample_input();
        let linux = TargetGroup {
            groupid: "2".into(),
            name: "Linux servers".into(),
        };
        input.targets = Some(Targets {
            hosts: vec![TargetHost {
                hostid: "10084".into(),
                host: "web-01".into(),
                groups: vec![linux.clone()],
            }],
            groups: vec![linux],
        });
        let v = serde_json::to_value(&input).expect("serializes");
        assert_eq!(
            v["targets"],
            json!({"hosts": [{"hostid": "10084", "host": "web-01",
                              "groups": [{"groupid": "2", "name": "Linux servers"}]}],
                   "groups": [{"groupid": "2", "name": "Linux servers"}]})
        );
        let back: PolicyInput = serde_json::from_value(v).expect("deserializes");
        assert_eq!(back, input);
        // Absent, not null, where there are none (reads, list, resource).
        let plain = serde_json::to_value(sample_input()).expect("serializes");
        assert!(plain.get("targets").is_none());
    }

    #[test]
    fn rego_value_matches_json() {
        let input = sample_input();
        let rego = input.to_rego();
        let json: serde_json::Value =
            serde_json::to_value(&rego).expect("regorus value serializes");
        assert_eq!(json, serde_json::to_value(&input).expect("serializes"));
    }
}
