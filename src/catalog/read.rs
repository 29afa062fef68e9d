//! The twelve read tools of the contract (spec "Read tools"), as one table.

use crate::catalog::{
    ArgDef, ArgRule, ArgType, EnumValue, Mapping, Query, ResourceDef, ResourceKind, Select,
    SelectParam, Sort, ToolDef, ToolKind, Variant, VariantValue,
};
use crate::zabbix::{Method, ZabbixVersion};

const V6_0: ZabbixVersion = ZabbixVersion::new(6, 0, 0);
const V6_2: ZabbixVersion = ZabbixVersion::new(6, 2, 0);
const V8_0: ZabbixVersion = ZabbixVersion::new(8, 0, 0);

const fn ids(name: &'static str, what: &'static str, param: &'static str) -> ArgDef {
    ArgDef {
        name,
        ty: ArgType::Ids,
        description: what,
        required: false,
        maps_to: Mapping::Param(param),
    }
}

const fn search(fields: &'static [&'static str], what: &'static str) -> ArgDef {
    ArgDef {
        name: "search",
        ty: ArgType::Text { max_len: 255 },
        description: what,
        required: false,
        maps_to: Mapping::Search(fields),
    }
}

const LIMIT: ArgDef = ArgDef {
    name: "limit",
    ty: ArgType::Limit,
    description: "Maximum number of results (1-1000, default 100). A response is also cut \
                  when it would exceed the server's size limit; `truncated_by` says which.",
    required: false,
    maps_to: Mapping::Limit,
};

const GROUPS: Select = Select {
    param: SelectParam::HostGroups,
    fields: &["groupid", "name"],
};
const TEMPLATE_GROUPS: Select = Select {
    param: SelectParam::TemplateGroups,
    fields: &["groupid", "name"],
};
const TAGS: Select = Select {
    param: SelectParam::Fixed("selectTags"),
    fields: &["tag", "value"],
};
const PARENT_TEMPLATES: Select = Select {
    param: SelectParam::Fixed("selectParentTemplates"),
    fields: &["templateid", "name"],
};
const TRIGGERS: Select = Select {
    param: SelectParam::Fixed("selectTriggers"),
    fields: &["triggerid", "description", "priority", "status", "value"],
};

const HOST_OUTPUT: &[&str] = &[
    "hostid",
    "host",
    "name",
    "status",
    "description",
    "maintenance_status",
    "flags",
];
const TEMPLATE_OUTPUT: &[&str] = &["templateid", "host", "name", "description"];
const ITEM_DEFINITION: &[&str] = &[
    "itemid",
    "hostid",
    "name",
    "key_",
    "type",
    "value_type",
    "units",
    "delay",
    "history",
    "trends",
    "status",
    "state",
    "error",
    "description",
];
const ITEM_OUTPUT: &[&str] = &[
    "itemid",
    "hostid",
    "name",
    "key_",
    "type",
    "value_type",
    "units",
    "delay",
    "history",
    "trends",
    "status",
    "state",
    "error",
    "description",
    "lastclock",
    "lastvalue",
];
const TRIGGER_OUTPUT: &[&str] = &[
    "triggerid",
    "description",
    "expression",
    "recovery_mode",
    "recovery_expression",
    "priority",
    "status",
    "value",
    "state",
    "error",
    "manual_close",
    "comments",
    "lastchange",
    "event_name",
    "opdata",
];

/// History value types by name; binary (5) is deliberately absent.
pub const HISTORY_TYPES: &[EnumValue] = &[
    EnumValue {
        name: "float",
        number: 0,
        since: V6_0,
    },
    EnumValue {
        name: "character",
        number: 1,
        since: V6_0,
    },
    EnumValue {
        name: "log",
        number: 2,
        since: V6_0,
    },
    EnumValue {
        name: "unsigned",
        number: 3,
        since: V6_0,
    },
    EnumValue {
        name: "text",
        number: 4,
        since: V6_0,
    },
    EnumValue {
        name: "json",
        number: 6,
        since: V8_0,
    },
];

pub static READ_TOOLS: [ToolDef; 12] = [
    ToolDef {
        name: "hostgroup_get",
        title: "Host groups",
        description: "List Zabbix host groups, sorted by name. Filter by group IDs, exact names, \
                      or a search string matched anywhere in the name.",
        method: Method::HostGroupGet,
        kind: ToolKind::Read,
        destructive: false,
        idempotent: true,
        since: V6_0,
        args: &[
            ids("groupids", "Return only these host group IDs.", "groupids"),
            ArgDef {
                name: "names",
                ty: ArgType::Strings,
                description: "Return only host groups with exactly these names.",
                required: false,
                maps_to: Mapping::Filter("name"),
            },
            search(
                &["name"],
                "Case-insensitive text to find in the group name; with `*` the pattern must match the whole name (e.g. `web*`).",
            ),
            LIMIT,
        ],
        rules: &[],
        query: Some(Query {
            id_field: "groupid",
            output: &["groupid", "name", "flags"],
            selects: &[],
            sort: Sort {
                fields: &["name"],
                descending: false,
            },
            variants: &[],
            flags: &[],
            resource: Some(ResourceDef {
                kind: ResourceKind::HostGroup,
                id_param: "groupids",
                output: &["groupid", "name", "flags"],
                selects: &[],
                description: "Host group record without the member list.",
            }),
        }),
    },
    ToolDef {
        name: "templategroup_get",
        title: "Template groups",
        description: "List Zabbix template groups (Zabbix 6.2 and later), sorted by name. Filter by \
                      group IDs, exact names, or a search string matched anywhere in the name.",
        method: Method::TemplateGroupGet,
        kind: ToolKind::Read,
        destructive: false,
        idempotent: true,
        since: V6_2,
        args: &[
            ids(
                "groupids",
                "Return only these template group IDs.",
                "groupids",
            ),
            ArgDef {
                name: "names",
                ty: ArgType::Strings,
                description: "Return only template groups with exactly these names.",
                required: false,
                maps_to: Mapping::Filter("name"),
            },
            search(
                &["name"],
                "Case-insensitive text to find in the group name; with `*` the pattern must match the whole name (e.g. `web*`).",
            ),
            LIMIT,
        ],
        rules: &[],
        query: Some(Query {
            id_field: "groupid",
            output: &["groupid", "name"],
            selects: &[],
            sort: Sort {
                fields: &["name"],
                descending: false,
            },
            variants: &[],
            flags: &[],
            resource: Some(ResourceDef {
                kind: ResourceKind::TemplateGroup,
                id_param: "groupids",
                output: &["groupid", "name"],
                selects: &[],
                description: "Template group record without the member list.",
            }),
        }),
    },
    ToolDef {
        name: "host_get",
        title: "Hosts",
        description: "List Zabbix hosts, sorted by visible name, with their host groups, tags, \
                      linked templates and triggers (limited fields). Filter by host IDs, host \
                      group IDs, or a search string matched in the technical or visible name. \
                      Items, interfaces and macros come from item_get, interface_get, macro_get.",
        method: Method::HostGet,
        kind: ToolKind::Read,
        destructive: false,
        idempotent: true,
        since: V6_0,
        args: &[
            ids("hostids", "Return only these host IDs.", "hostids"),
            ids(
                "groupids",
                "Return only hosts in these host groups.",
                "groupids",
            ),
            search(
                &["host", "name"],
                "Case-insensitive text to find in the technical or visible host name; with `*` the pattern must match the whole name (e.g. `web*`).",
            ),
            LIMIT,
        ],
        rules: &[],
        query: Some(Query {
            id_field: "hostid",
            output: HOST_OUTPUT,
            selects: &[GROUPS, TAGS, PARENT_TEMPLATES, TRIGGERS],
            sort: Sort {
                fields: &["name"],
                descending: false,
            },
            variants: &[],
            flags: &[],
            resource: Some(ResourceDef {
                kind: ResourceKind::Host,
                id_param: "hostids",
                output: HOST_OUTPUT,
                selects: &[GROUPS, TAGS, PARENT_TEMPLATES],
                description: "Host record without items, triggers, interfaces and macros.",
            }),
        }),
    },
    ToolDef {
        name: "template_get",
        title: "Templates",
        description: "List Zabbix templates, sorted by visible name, with their template groups, \
                      tags, linked templates and triggers (limited fields). Filter by template \
                      IDs, group IDs, or a search string matched in the technical or visible name.",
        method: Method::TemplateGet,
        kind: ToolKind::Read,
        destructive: false,
        idempotent: true,
        since: V6_0,
        args: &[
            ids(
                "templateids",
                "Return only these template IDs.",
                "templateids",
            ),
            ids(
                "groupids",
                "Return only templates in these template groups (host groups on Zabbix 6.0).",
                "groupids",
            ),
            search(
                &["host", "name"],
                "Case-insensitive text to find in the technical or visible template name; with `*` the pattern must match the whole name (e.g. `web*`).",
            ),
            LIMIT,
        ],
        rules: &[],
        query: Some(Query {
            id_field: "templateid",
            output: TEMPLATE_OUTPUT,
            selects: &[TEMPLATE_GROUPS, TAGS, PARENT_TEMPLATES, TRIGGERS],
            sort: Sort {
                fields: &["name"],
                descending: false,
            },
            variants: &[],
            flags: &[],
            resource: Some(ResourceDef {
                kind: ResourceKind::Template,
                id_param: "templateids",
                output: TEMPLATE_OUTPUT,
                selects: &[TEMPLATE_GROUPS, TAGS, PARENT_TEMPLATES],
                description: "Template record without items, triggers and discovery rules.",
            }),
        }),
    },
    ToolDef {
        name: "item_get",
        title: "Items",
        description: "List Zabbix items with their last value, sorted by name. Filter by host IDs, \
                      item IDs, or a search string matched in the item name or key. `value_type` \
                      tells which history type to ask history_get for (0 float, 1 character, \
                      2 log, 3 unsigned, 4 text).",
        method: Method::ItemGet,
        kind: ToolKind::Read,
        destructive: false,
        idempotent: true,
        since: V6_0,
        args: &[
            ids("hostids", "Return only items of these hosts.", "hostids"),
            ids("itemids", "Return only these item IDs.", "itemids"),
            search(
                &["name", "key_"],
                "Case-insensitive text to find in the item name or key; with `*` the pattern must match the whole name (e.g. `web*`).",
            ),
            LIMIT,
        ],
        rules: &[],
        query: Some(Query {
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
    },
    ToolDef {
        name: "lld_get",
        title: "Low-level discovery rules",
        description: "List Zabbix low-level discovery rules, sorted by name. Filter by host IDs or rule IDs.",
        method: Method::DiscoveryRuleGet,
        kind: ToolKind::Read,
        destructive: false,
        idempotent: true,
        since: V6_0,
        args: &[
            ids(
                "hostids",
                "Return only discovery rules of these hosts.",
                "hostids",
            ),
            ids(
                "ruleids",
                "Return only these discovery rule IDs.",
                "itemids",
            ),
            LIMIT,
        ],
        rules: &[],
        query: Some(Query {
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
    },
    ToolDef {
        name: "interface_get",
        title: "Host interfaces",
        description: "List Zabbix host interfaces (agent, SNMP, IPMI, JMX), sorted by interface ID. \
                      Filter by host IDs or interface IDs.",
        method: Method::HostInterfaceGet,
        kind: ToolKind::Read,
        destructive: false,
        idempotent: true,
        since: V6_0,
        args: &[
            ids(
                "hostids",
                "Return only interfaces of these hosts.",
                "hostids",
            ),
            ids(
                "interfaceids",
                "Return only these interface IDs.",
                "interfaceids",
            ),
            LIMIT,
        ],
        rules: &[],
        query: Some(Query {
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
    },
    ToolDef {
        name: "macro_get",
        title: "User macros",
        description: "List Zabbix user macros, sorted by macro name: either the macros of the given \
                      hosts or templates (`hostids`) or the global macros (`global: true`). Values \
                      of secret macros are not returned by Zabbix.",
        method: Method::UserMacroGet,
        kind: ToolKind::Read,
        destructive: false,
        idempotent: true,
        since: V6_0,
        args: &[
            ids(
                "hostids",
                "Return the macros defined on these hosts or templates.",
                "hostids",
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
                ty: ArgType::Strings,
                description: "Return only these macros, e.g. \"{$SNMP_COMMUNITY}\".",
                required: false,
                maps_to: Mapping::Filter("macro"),
            },
            LIMIT,
        ],
        rules: &[ArgRule::ExactlyOne(&["hostids", "global"])],
        query: Some(Query {
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
    },
    ToolDef {
        name: "problem_get",
        title: "Problems",
        description: "List current Zabbix problems, newest first (event ID descending), with their \
                      tags. Filter by event IDs, host group IDs, host IDs, severities (0 not \
                      classified .. 5 disaster), acknowledged or suppressed state; `recent: true` \
                      also returns problems resolved recently. Event IDs feed the problem_* tools.",
        method: Method::ProblemGet,
        kind: ToolKind::Read,
        destructive: false,
        idempotent: true,
        since: V6_0,
        args: &[
            ids(
                "eventids",
                "Return only these problem event IDs.",
                "eventids",
            ),
            ids(
                "groupids",
                "Return only problems of hosts in these host groups.",
                "groupids",
            ),
            ids("hostids", "Return only problems of these hosts.", "hostids"),
            ArgDef {
                name: "severities",
                ty: ArgType::IntList { min: 0, max: 5 },
                description: "Return only problems with these severities (0-5).",
                required: false,
                maps_to: Mapping::Param("severities"),
            },
            ArgDef {
                name: "acknowledged",
                ty: ArgType::Bool,
                description: "true: only acknowledged problems; false: only unacknowledged ones.",
                required: false,
                maps_to: Mapping::Param("acknowledged"),
            },
            ArgDef {
                name: "suppressed",
                ty: ArgType::Bool,
                description: "true: only suppressed problems; false: only unsuppressed ones.",
                required: false,
                maps_to: Mapping::Param("suppressed"),
            },
            ArgDef {
                name: "recent",
                ty: ArgType::Bool,
                description: "true: also return problems that were resolved recently.",
                required: false,
                maps_to: Mapping::Param("recent"),
            },
            LIMIT,
        ],
        rules: &[],
        query: Some(Query {
            id_field: "eventid",
            output: &[
                "eventid",
                "objectid",
                "clock",
                "name",
                "severity",
                "acknowledged",
                "suppressed",
                "r_eventid",
                "r_clock",
                "opdata",
            ],
            selects: &[TAGS],
            sort: Sort {
                fields: &["eventid"],
                descending: true,
            },
            variants: &[],
            flags: &[],
            resource: None,
        }),
    },
    ToolDef {
        name: "maintenance_get",
        title: "Maintenance periods",
        description: "List Zabbix maintenance periods, sorted by name, with their host groups, \
                      hosts, time periods and tags. Filter by maintenance IDs, host group IDs or host IDs.",
        method: Method::MaintenanceGet,
        kind: ToolKind::Read,
        destructive: false,
        idempotent: true,
        since: V6_0,
        args: &[
            ids(
                "maintenanceids",
                "Return only these maintenance IDs.",
                "maintenanceids",
            ),
            ids(
                "groupids",
                "Return only maintenances that cover these host groups.",
                "groupids",
            ),
            ids(
                "hostids",
                "Return only maintenances that cover these hosts.",
                "hostids",
            ),
            LIMIT,
        ],
        rules: &[],
        query: Some(Query {
            id_field: "maintenanceid",
            output: &[
                "maintenanceid",
                "name",
                "maintenance_type",
                "description",
                "active_since",
                "active_till",
                "tags_evaltype",
            ],
            selects: &[
                GROUPS,
                Select {
                    param: SelectParam::Fixed("selectHosts"),
                    fields: &["hostid", "name"],
                },
                Select {
                    param: SelectParam::Fixed("selectTimeperiods"),
                    fields: &[
                        "timeperiod_type",
                        "every",
                        "month",
                        "dayofweek",
                        "day",
                        "start_time",
                        "period",
                        "start_date",
                    ],
                },
                Select {
                    param: SelectParam::Fixed("selectTags"),
                    fields: &["tag", "operator", "value"],
                },
            ],
            sort: Sort {
                fields: &["name"],
                descending: false,
            },
            variants: &[],
            flags: &[],
            resource: None,
        }),
    },
    ToolDef {
        name: "history_get",
        title: "Item history",
        description: "Read the collected values of items, newest first. `type` must match the items' \
                      value type (see item_get `value_type`); a wrong type returns no values. The \
                      window is at most 7 days wide and starts no earlier than 7 days ago (the \
                      policy may set other limits); without time_from/time_till it is the widest \
                      allowed window ending now. Binary items cannot be read.",
        method: Method::HistoryGet,
        kind: ToolKind::Read,
        destructive: false,
        idempotent: true,
        since: V6_0,
        args: &[
            ArgDef {
                name: "itemids",
                ty: ArgType::Ids,
                description: "The items to read (required).",
                required: true,
                maps_to: Mapping::Param("itemids"),
            },
            ArgDef {
                name: "type",
                ty: ArgType::Enum(HISTORY_TYPES),
                description: "Value type of the items: float, unsigned, character, text, log (json on Zabbix 8.0).",
                required: true,
                maps_to: Mapping::Param("history"),
            },
            ArgDef {
                name: "time_from",
                ty: ArgType::UnixTime,
                description: "Start of the window, Unix time in seconds.",
                required: false,
                maps_to: Mapping::Param("time_from"),
            },
            ArgDef {
                name: "time_till",
                ty: ArgType::UnixTime,
                description: "End of the window, Unix time in seconds (default: now).",
                required: false,
                maps_to: Mapping::Param("time_till"),
            },
            LIMIT,
        ],
        rules: &[ArgRule::HistoryWindow {
            from: "time_from",
            till: "time_till",
        }],
        query: Some(Query {
            id_field: "itemid",
            output: &["itemid", "clock", "ns", "value"],
            selects: &[],
            sort: Sort {
                fields: &["clock", "itemid"],
                descending: true,
            },
            variants: &[Variant {
                arg: "type",
                equals: VariantValue::Str("log"),
                id_field: "itemid",
                output: &[
                    "itemid",
                    "clock",
                    "ns",
                    "value",
                    "timestamp",
                    "source",
                    "severity",
                    "logeventid",
                ],
            }],
            flags: &[],
            resource: None,
        }),
    },
    ToolDef {
        name: "trigger_get",
        title: "Triggers",
        description: "List Zabbix triggers, sorted by description, with expressions expanded to \
                      host/key form, their hosts and tags. Filter by trigger IDs, host IDs, or a \
                      search string matched in the description.",
        method: Method::TriggerGet,
        kind: ToolKind::Read,
        destructive: false,
        idempotent: true,
        since: V6_0,
        args: &[
            ids("triggerids", "Return only these trigger IDs.", "triggerids"),
            ids("hostids", "Return only triggers of these hosts.", "hostids"),
            search(
                &["description"],
                "Case-insensitive text to find in the trigger description; with `*` the pattern must match the whole name (e.g. `web*`).",
            ),
            LIMIT,
        ],
        rules: &[],
        query: Some(Query {
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
    },
];
