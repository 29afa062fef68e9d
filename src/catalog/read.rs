//! The twelve read tools of the contract (spec "Read tools"), as one table: the shared
//! arguments, selections and output fields here, the definitions in `read_hosts`,
//! `read_items` and `read_events`.

use crate::catalog::{
    ArgDef, ArgType, EnumValue, Mapping, Select, SelectParam, ToolDef, read_events, read_hosts,
    read_items,
};
use crate::zabbix::ZabbixVersion;

pub(super) const V6_0: ZabbixVersion = ZabbixVersion::new(6, 0, 0);
pub(super) const V6_2: ZabbixVersion = ZabbixVersion::new(6, 2, 0);
pub(super) const V8_0: ZabbixVersion = ZabbixVersion::new(8, 0, 0);

/// The longest name an exact-name filter takes: host and template group names and macro
/// names are 255 characters in Zabbix (6.0 to 7.0), so a longer one names nothing, and
/// unbounded it put up to a whole request's text in front of the policy.
pub(super) const NAME_MAX_LEN: usize = 255;

pub(super) const fn ids(name: &'static str, what: &'static str) -> ArgDef {
    ids_as(name, what, name)
}

/// An ID list sent under another parameter name (`ruleids` → `itemids`).
pub(super) const fn ids_as(name: &'static str, what: &'static str, param: &'static str) -> ArgDef {
    ArgDef {
        name,
        ty: ArgType::Ids,
        description: what,
        required: false,
        maps_to: Mapping::Param(param),
    }
}

pub(super) const fn search(fields: &'static [&'static str], what: &'static str) -> ArgDef {
    ArgDef {
        name: "search",
        ty: ArgType::Text { max_len: 255 },
        description: what,
        required: false,
        maps_to: Mapping::Search(fields),
    }
}

pub(super) const LIMIT: ArgDef = ArgDef {
    name: "limit",
    ty: ArgType::Limit,
    description: "Maximum number of results (1-1000, default 100). A response is also cut \
                  when it would exceed the server's size limit; `truncated_by` says which.",
    required: false,
    maps_to: Mapping::Limit,
};

pub(super) const GROUPS: Select = Select {
    param: SelectParam::HostGroups,
    fields: &["groupid", "name"],
};
pub(super) const TEMPLATE_GROUPS: Select = Select {
    param: SelectParam::TemplateGroups,
    fields: &["groupid", "name"],
};
pub(super) const TAGS: Select = Select {
    param: SelectParam::Fixed("selectTags"),
    fields: &["tag", "value"],
};
pub(super) const PARENT_TEMPLATES: Select = Select {
    param: SelectParam::Fixed("selectParentTemplates"),
    fields: &["templateid", "name"],
};
pub(super) const TRIGGERS: Select = Select {
    param: SelectParam::Fixed("selectTriggers"),
    fields: &["triggerid", "description", "priority", "status", "value"],
};

pub(super) const HOST_OUTPUT: &[&str] = &[
    "hostid",
    "host",
    "name",
    "status",
    "description",
    "maintenance_status",
    "flags",
];
pub(super) const TEMPLATE_OUTPUT: &[&str] = &["templateid", "host", "name", "description"];
pub(super) const ITEM_DEFINITION: &[&str] = &[
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
pub(super) const ITEM_OUTPUT: &[&str] = &[
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
pub(super) const TRIGGER_OUTPUT: &[&str] = &[
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
    read_hosts::HOSTGROUP_GET,
    read_hosts::TEMPLATEGROUP_GET,
    read_hosts::HOST_GET,
    read_hosts::TEMPLATE_GET,
    read_items::ITEM_GET,
    read_items::LLD_GET,
    read_items::INTERFACE_GET,
    read_items::MACRO_GET,
    read_events::PROBLEM_GET,
    read_events::MAINTENANCE_GET,
    read_events::HISTORY_GET,
    read_items::TRIGGER_GET,
];
