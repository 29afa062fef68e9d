//! Building the regorus value of an input document directly from the Rust structs. This
//! is the hot half of a decision besides the VM run: going through `serde_json::Value`
//! and regorus' deserializer costs several times more than the evaluation of the
//! default policy. The parts that repeat from call to call (tool, caller, client,
//! Zabbix) are memoized per thread: an equality check is far cheaper than the ~30
//! allocations of rebuilding them, and regorus values are immutable and shareable.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use regorus::Value;
use regorus::value::Object;

use super::input::{
    ApproverInfo, CallerInfo, ClientInfo, Phase, PolicyInput, TargetGroup, Targets, ToolInfo,
    ToolKind, ZabbixInfo,
};

/// Key and enum strings of the input shape, allocated once; cloning one is a
/// reference-count increment.
struct Strings {
    keys: [Value; KEY_COUNT],
    phase: [Value; 4],
    kind: [Value; 2],
}

/// Indexes into `Strings::keys`, in the order of `KEY_NAMES`.
#[derive(Clone, Copy)]
enum Key {
    Version,
    Phase,
    Tool,
    Arguments,
    Caller,
    Client,
    Zabbix,
    Now,
    Resource,
    Name,
    ExposedName,
    Kind,
    Method,
    Destructive,
    Idempotent,
    Userid,
    Username,
    Type,
    Roleid,
    Usrgrps,
    TokenId,
    Address,
    ClientVersion,
    ProtocolVersion,
    Elicitation,
    Uri,
    Id,
    Targets,
    Hosts,
    Groups,
    Hostid,
    Host,
    Groupid,
    Approver,
    SignIn,
}

const KEY_NAMES: [&str; KEY_COUNT] = [
    "version",
    "phase",
    "tool",
    "arguments",
    "caller",
    "client",
    "zabbix",
    "now",
    "resource",
    "name",
    "exposed_name",
    "kind",
    "method",
    "destructive",
    "idempotent",
    "userid",
    "username",
    "type",
    "roleid",
    "usrgrps",
    "token_id",
    "address",
    "version",
    "protocol_version",
    "elicitation",
    "uri",
    "id",
    "targets",
    "hosts",
    "groups",
    "hostid",
    "host",
    "groupid",
    "approver",
    "sign_in",
];
const KEY_COUNT: usize = 35;

/// The last converted value of each repeating part, per thread.
#[derive(Default)]
struct Parts {
    tool: Option<(ToolInfo, Value)>,
    caller: Option<(CallerInfo, Value)>,
    client: Option<(ClientInfo, Value)>,
    zabbix: Option<(ZabbixInfo, Value)>,
}

thread_local! {
    static PARTS: RefCell<Parts> = RefCell::new(Parts::default());
}

static STRINGS: LazyLock<Strings> = LazyLock::new(|| Strings {
    keys: KEY_NAMES.map(Value::from),
    phase: ["list", "call", "resource", "approve"].map(Value::from),
    kind: ["read", "write"].map(Value::from),
});

/// An object under construction with the shared key strings.
struct Builder<'s> {
    strings: &'s Strings,
    map: BTreeMap<Value, Value>,
}

impl<'s> Builder<'s> {
    fn new(strings: &'s Strings) -> Self {
        Self {
            strings,
            map: BTreeMap::new(),
        }
    }

    fn set(mut self, key: Key, value: Value) -> Self {
        self.map
            .insert(self.strings.keys[key as usize].clone(), value);
        self
    }

    fn build(self) -> Value {
        wrap(self.map)
    }
}

/// The regorus value of `input`; equal to deserializing its JSON (tested).
pub(crate) fn input_value(input: &PolicyInput) -> Value {
    let s = &*STRINGS;
    let phase = match input.phase {
        Phase::List => 0,
        Phase::Call => 1,
        Phase::Resource => 2,
        Phase::Approve => 3,
    };
    let (tool, caller, client, zabbix) = PARTS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut parts) => (
            memo(&mut parts.tool, &input.tool, |t| tool_value(s, t)),
            memo(&mut parts.caller, &input.caller, |c| caller_value(s, c)),
            memo(&mut parts.client, &input.client, |c| client_value(s, c)),
            memo(&mut parts.zabbix, &input.zabbix, |z| zabbix_value(s, z)),
        ),
        // Unreachable in practice (no re-entrance); correct without the cache anyway.
        Err(_) => (
            tool_value(s, &input.tool),
            caller_value(s, &input.caller),
            client_value(s, &input.client),
            zabbix_value(s, &input.zabbix),
        ),
    });
    let mut doc = Builder::new(s)
        .set(Key::Version, Value::from(u64::from(input.version)))
        .set(Key::Phase, s.phase[phase].clone())
        .set(Key::Tool, tool)
        .set(Key::Arguments, object(&input.arguments))
        .set(Key::Caller, caller)
        .set(Key::Client, client)
        .set(Key::Zabbix, zabbix)
        .set(Key::Now, Value::from(input.now));
    if let Some(resource) = &input.resource {
        doc = doc.set(
            Key::Resource,
            Builder::new(s)
                .set(Key::Uri, text(&resource.uri))
                .set(Key::Kind, text(&resource.kind))
                .set(Key::Id, text(&resource.id))
                .build(),
        );
    }
    if let Some(targets) = &input.targets {
        doc = doc.set(Key::Targets, targets_value(s, targets));
    }
    if let Some(approver) = &input.approver {
        doc = doc.set(Key::Approver, approver_value(s, approver));
    }
    doc.build()
}

fn targets_value(s: &Strings, targets: &Targets) -> Value {
    let group = |g: &TargetGroup| {
        Builder::new(s)
            .set(Key::Groupid, text(&g.groupid))
            .set(Key::Name, text(&g.name))
            .build()
    };
    let groups = |list: &[TargetGroup]| Value::from(list.iter().map(group).collect::<Vec<_>>());
    let hosts = targets
        .hosts
        .iter()
        .map(|h| {
            Builder::new(s)
                .set(Key::Hostid, text(&h.hostid))
                .set(Key::Host, text(&h.host))
                .set(Key::Groups, groups(&h.groups))
                .build()
        })
        .collect::<Vec<_>>();
    Builder::new(s)
        .set(Key::Hosts, Value::from(hosts))
        .set(Key::Groups, groups(&targets.groups))
        .build()
}

/// The cached value if `part` equals the one it was built from, else a fresh one.
fn memo<T: PartialEq + Clone>(
    slot: &mut Option<(T, Value)>,
    part: &T,
    build: impl FnOnce(&T) -> Value,
) -> Value {
    if let Some((seen, value)) = slot.as_ref()
        && seen == part
    {
        return value.clone();
    }
    let value = build(part);
    *slot = Some((part.clone(), value.clone()));
    value
}

fn tool_value(s: &Strings, tool: &ToolInfo) -> Value {
    let kind = match tool.kind {
        ToolKind::Read => 0,
        ToolKind::Write => 1,
    };
    Builder::new(s)
        .set(Key::Name, text(&tool.name))
        .set(Key::ExposedName, text(&tool.exposed_name))
        .set(Key::Kind, s.kind[kind].clone())
        .set(Key::Method, text(&tool.method))
        .set(Key::Destructive, Value::from(tool.destructive))
        .set(Key::Idempotent, Value::from(tool.idempotent))
        .build()
}

fn caller_value(s: &Strings, caller: &CallerInfo) -> Value {
    person(s, caller).build()
}

fn approver_value(s: &Strings, approver: &ApproverInfo) -> Value {
    person(s, &approver.person)
        .set(Key::SignIn, Value::from(approver.sign_in.as_str()))
        .build()
}

fn person<'s>(s: &'s Strings, caller: &CallerInfo) -> Builder<'s> {
    Builder::new(s)
        .set(Key::Userid, text(&caller.userid))
        .set(Key::Username, text(&caller.username))
        .set(Key::Type, Value::from(u64::from(caller.user_type)))
        .set(Key::Roleid, text(&caller.roleid))
        .set(Key::Usrgrps, texts(&caller.usrgrps))
        .set(Key::TokenId, text(&caller.token_id))
}

fn client_value(s: &Strings, client: &ClientInfo) -> Value {
    Builder::new(s)
        .set(Key::Address, text(&client.address))
        .set(Key::Name, optional(client.name.as_deref()))
        .set(Key::ClientVersion, optional(client.version.as_deref()))
        .set(
            Key::ProtocolVersion,
            optional(client.protocol_version.as_deref()),
        )
        .set(Key::Elicitation, texts(&client.elicitation))
        .build()
}

fn zabbix_value(s: &Strings, zabbix: &ZabbixInfo) -> Value {
    Builder::new(s)
        .set(Key::Version, text(&zabbix.version))
        .build()
}

/// Any JSON value, by reference (arguments are free-form).
pub(crate) fn json_value(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::from(*b),
        serde_json::Value::Number(n) => number(n),
        serde_json::Value::String(s) => text(s),
        serde_json::Value::Array(items) => {
            Value::from(items.iter().map(json_value).collect::<Vec<_>>())
        }
        serde_json::Value::Object(map) => object(map),
    }
}

fn object(map: &serde_json::Map<String, serde_json::Value>) -> Value {
    wrap(map.iter().map(|(k, v)| (text(k), json_value(v))).collect())
}

/// Wraps a map without `Object::into_value`'s freeze into a sorted slice: that is one
/// more allocation and copy per object, and the VM reads either representation.
fn wrap(map: BTreeMap<Value, Value>) -> Value {
    Value::Object(regorus::Rc::new(Object::from(map)))
}

fn number(n: &serde_json::Number) -> Value {
    if let Some(u) = n.as_u64() {
        Value::from(u)
    } else if let Some(i) = n.as_i64() {
        Value::from(i)
    } else {
        // serde_json numbers are u64, i64 or finite f64.
        n.as_f64().map_or(Value::Null, Value::from)
    }
}

fn text(s: &str) -> Value {
    Value::from(s)
}

fn texts(items: &[String]) -> Value {
    Value::from(items.iter().map(|s| text(s)).collect::<Vec<_>>())
}

fn optional(s: Option<&str>) -> Value {
    s.map_or(Value::Null, text)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{input_value, json_value};
    use crate::policy::input::tests::sample_input;
    use crate::policy::input::{
        ApproverInfo, ResourceInfo, SignIn, TargetGroup, TargetHost, Targets, ToolKind,
    };

    #[test]
    fn direct_conversion_equals_deserialization() {
        let mut input = sample_input();
        input.arguments.insert(
            "mixed".into(),
            json!({"neg": -3, "big": u64::MAX, "f": 1.5, "n": null, "list": [true, "x", {"a": []}]}),
        );
        let via_serde = regorus::Value::from(serde_json::to_value(&input).expect("json"));
        assert_eq!(input_value(&input), via_serde);

        input.resource = Some(ResourceInfo {
            uri: "zabbix://item/1".into(),
            kind: "item".into(),
            id: "1".into(),
        });
        input.client.name = None;
        let via_serde = regorus::Value::from(serde_json::to_value(&input).expect("json"));
        assert_eq!(input_value(&input), via_serde);

        let group = |id: &str, name: &str| TargetGroup {
            groupid: id.into(),
            name: name.into(),
        };
        input.targets = Some(Targets {
            hosts: vec![TargetHost {
                hostid: "10084".into(),
                host: "web-01".into(),
                groups: vec![group("2", "Linux servers"), group("4", "Web")],
            }],
            groups: vec![group("2", "Linux servers")],
        });
        let via_serde = regorus::Value::from(serde_json::to_value(&input).expect("json"));
        assert_eq!(input_value(&input), via_serde);
        input.resource = None;
        input.phase = crate::policy::input::Phase::Approve;
        input.approver = Some(ApproverInfo {
            person: input.caller.clone(),
            sign_in: SignIn::Password,
        });
        let via_serde = regorus::Value::from(serde_json::to_value(&input).expect("json"));
        assert_eq!(input_value(&input), via_serde);
        input.approver = None;
        // The per-thread memo must never serve a stale part.
        for user in ["alice", "bob", "alice"] {
            input.caller.username = user.into();
            input.tool.kind = if user == "bob" {
                ToolKind::Read
            } else {
                ToolKind::Write
            };
            let via_serde = regorus::Value::from(serde_json::to_value(&input).expect("json"));
            assert_eq!(input_value(&input), via_serde, "{user}");
        }
        assert_eq!(json_value(&json!(2.0)), regorus::Value::from(2.0));
    }
}
