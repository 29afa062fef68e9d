//! Read tools for items, discovery rules, interfaces, macros and triggers (part of `read::READ_TOOLS`).

use crate::catalog::read::{
    ITEM_DEFINITION, ITEM_OUTPUT, LIMIT, NAME_MAX_LEN, TAGS, TRIGGER_OUTPUT, V6_0, ids, ids_as,
    search,
};
use crate::catalog::{
    ArgDef, ArgRule, ArgType, Behaviour, Mapping, Query, ResourceDef, ResourceKind, Select,
    SelectParam, Sort, ToolDef, Variant, VariantValue,
};
use crate::zabbix::Method;

pub(super) const ITEM_GET: ToolDef = ToolDef {
    name: "item_get",
    title: "Items",
    description: "List Zabbix items with their last value, sorted by name. Filter by host IDs, \
                  item IDs, or a search string matched in the item name or key. `value_type` \
                  tells which history type to ask history_get for (0 float, 1 character, \
                  2 log, 3 unsigned, 4 text).",
    method: Method::ItemGet,
    since: V6_0,
    args: &[
        ids("hostids", "Return only items of these hosts."),
        ids("itemids", "Return only these item IDs."),
        search(
            &["name", "key_"],
            "Case-insensitive text to find in the item name or key; with `*` the pattern must match the whole name (e.g. `web*`).",
        ),
        LIMIT,
    ],
    rules: &[],
    behaviour: Behaviour::Read(Query {
        id_field: "itemid",
        output: ITEM_OUTPUT,
        selects: &[TAGS],
        sort: Sort {
            fields: &["name", "itemid"],
            descending: false,
        },
        variants: &[],
        flags: &[],
        resource: Some(ResourceDef {
            kind: ResourceKind::Item,
            id_param: "itemids",
            output: ITEM_DEFINITION,
            selects: &[TAGS],
            description: "Item definition without its current value.",
        }),
    }),
};

pub(super) const LLD_GET: ToolDef = ToolDef {
    name: "lld_get",
    title: "Low-level discovery rules",
    description: "List Zabbix low-level discovery rules, sorted by name. Filter by host IDs or rule IDs.",
    method: Method::DiscoveryRuleGet,
    since: V6_0,
    args: &[
        ids("hostids", "Return only discovery rules of these hosts."),
        ids_as(
            "ruleids",
            "Return only these discovery rule IDs.",
            "itemids",
        ),
        LIMIT,
    ],
    rules: &[],
    behaviour: Behaviour::Read(Query {
        id_field: "itemid",
        output: &[
            "itemid",
            "hostid",
            "name",
            "key_",
            "type",
            "delay",
            "status",
            "state",
            "error",
            "lifetime",
            "description",
        ],
        selects: &[],
        sort: Sort {
            fields: &["name", "itemid"],
            descending: false,
        },
        variants: &[],
        flags: &[],
        resource: None,
    }),
};

pub(super) const INTERFACE_GET: ToolDef = ToolDef {
    name: "interface_get",
    title: "Host interfaces",
    description: "List Zabbix host interfaces (agent, SNMP, IPMI, JMX), sorted by interface ID. \
                  Filter by host IDs or interface IDs.",
    method: Method::HostInterfaceGet,
    since: V6_0,
    args: &[
        ids("hostids", "Return only interfaces of these hosts."),
        ids("interfaceids", "Return only these interface IDs."),
        LIMIT,
    ],
    rules: &[],
    behaviour: Behaviour::Read(Query {
        id_field: "interfaceid",
        output: &[
            "interfaceid",
            "hostid",
            "type",
            "main",
            "useip",
            "ip",
            "dns",
            "port",
            "available",
            "error",
        ],
        selects: &[],
        sort: Sort {
            fields: &["interfaceid"],
            descending: false,
        },
        variants: &[],
        flags: &[],
        resource: None,
    }),
};

pub(super) const MACRO_GET: ToolDef = ToolDef {
    name: "macro_get",
    title: "User macros",
    description: "List Zabbix user macros, sorted by macro name: either the macros of the given \
                  hosts or templates (`hostids`) or the global macros (`global: true`). Values \
                  of secret macros are not returned by Zabbix.",
    method: Method::UserMacroGet,
    since: V6_0,
    args: &[
        ids(
            "hostids",
            "Return the macros defined on these hosts or templates.",
        ),
        ArgDef {
            name: "global",
            ty: ArgType::Bool,
            description: "Return global macros instead of host macros.",
            required: false,
            maps_to: Mapping::Param("globalmacro"),
        },
        ArgDef {
            name: "macro_names",
            ty: ArgType::Strings {
                max_len: NAME_MAX_LEN,
            },
            description: "Return only these macros, e.g. \"{$SNMP_COMMUNITY}\".",
            required: false,
            maps_to: Mapping::Filter("macro"),
        },
        LIMIT,
    ],
    rules: &[ArgRule::ExactlyOne(&["hostids", "global"])],
    behaviour: Behaviour::Read(Query {
        id_field: "hostmacroid",
        output: &[
            "hostmacroid",
            "hostid",
            "macro",
            "value",
            "type",
            "description",
        ],
        selects: &[],
        sort: Sort {
            fields: &["macro"],
            descending: false,
        },
        variants: &[Variant {
            arg: "global",
            equals: VariantValue::Bool(true),
            id_field: "globalmacroid",
            output: &["globalmacroid", "macro", "value", "type", "description"],
        }],
        flags: &[],
        resource: None,
    }),
};

pub(super) const TRIGGER_GET: ToolDef = ToolDef {
    name: "trigger_get",
    title: "Triggers",
    description: "List Zabbix triggers, sorted by description, with expressions expanded to \
                  host/key form, their hosts and tags. Filter by trigger IDs, host IDs, or a \
                  search string matched in the description.",
    method: Method::TriggerGet,
    since: V6_0,
    args: &[
        ids("triggerids", "Return only these trigger IDs."),
        ids("hostids", "Return only triggers of these hosts."),
        search(
            &["description"],
            "Case-insensitive text to find in the trigger description; with `*` the pattern must match the whole name (e.g. `web*`).",
        ),
        LIMIT,
    ],
    rules: &[],
    behaviour: Behaviour::Read(Query {
        id_field: "triggerid",
        output: TRIGGER_OUTPUT,
        selects: &[
            Select {
                param: SelectParam::Fixed("selectHosts"),
                fields: &["hostid", "name"],
            },
            TAGS,
        ],
        sort: Sort {
            fields: &["description", "triggerid"],
            descending: false,
        },
        variants: &[],
        flags: &["expandExpression"],
        resource: Some(ResourceDef {
            kind: ResourceKind::Trigger,
            id_param: "triggerids",
            output: TRIGGER_OUTPUT,
            selects: &[],
            description: "Trigger definition without hosts, dependencies, functions and tags.",
        }),
    }),
};
