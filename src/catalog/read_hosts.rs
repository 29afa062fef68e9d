//! Read tools for host groups, template groups, hosts and templates (part of `read::READ_TOOLS`).

use crate::catalog::read::{
    GROUPS, HOST_OUTPUT, LIMIT, NAME_MAX_LEN, PARENT_TEMPLATES, TAGS, TEMPLATE_GROUPS,
    TEMPLATE_OUTPUT, TRIGGERS, V6_0, V6_2, ids, search,
};
use crate::catalog::{
    ArgDef, ArgType, Behaviour, Mapping, Query, ResourceDef, ResourceKind, Sort, ToolDef,
};
use crate::zabbix::Method;

pub(super) const HOSTGROUP_GET: ToolDef = ToolDef {
    name: "hostgroup_get",
    title: "Host groups",
    description: "List Zabbix host groups, sorted by name. Filter by group IDs, exact names, \
                  or a search string matched anywhere in the name.",
    method: Method::HostGroupGet,
    since: V6_0,
    args: &[
        ids("groupids", "Return only these host group IDs."),
        ArgDef {
            name: "names",
            ty: ArgType::Strings {
                max_len: NAME_MAX_LEN,
            },
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
    behaviour: Behaviour::Read(Query {
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
};

pub(super) const TEMPLATEGROUP_GET: ToolDef = ToolDef {
    name: "templategroup_get",
    title: "Template groups",
    description: "List Zabbix template groups (Zabbix 6.2 and later), sorted by name. Filter by \
                  group IDs, exact names, or a search string matched anywhere in the name.",
    method: Method::TemplateGroupGet,
    since: V6_2,
    args: &[
        ids("groupids", "Return only these template group IDs."),
        ArgDef {
            name: "names",
            ty: ArgType::Strings {
                max_len: NAME_MAX_LEN,
            },
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
    behaviour: Behaviour::Read(Query {
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
};

pub(super) const HOST_GET: ToolDef = ToolDef {
    name: "host_get",
    title: "Hosts",
    description: "List Zabbix hosts, sorted by visible name, with their host groups, tags, \
                  linked templates and triggers (limited fields; at most 200 triggers per \
                  host, and no sign when more exist). Filter by host IDs, host \
                  group IDs, or a search string matched in the technical or visible name. \
                  Items, interfaces and macros come from item_get, interface_get, macro_get.",
    method: Method::HostGet,
    since: V6_0,
    args: &[
        ids("hostids", "Return only these host IDs."),
        ids("groupids", "Return only hosts in these host groups."),
        search(
            &["host", "name"],
            "Case-insensitive text to find in the technical or visible host name; with `*` the pattern must match the whole name (e.g. `web*`).",
        ),
        LIMIT,
    ],
    rules: &[],
    behaviour: Behaviour::Read(Query {
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
};

pub(super) const TEMPLATE_GET: ToolDef = ToolDef {
    name: "template_get",
    title: "Templates",
    description: "List Zabbix templates, sorted by visible name, with their template groups, \
                  tags, linked templates and triggers (limited fields; at most 200 triggers \
                  per template, and no sign when more exist). Filter by template \
                  IDs, group IDs, or a search string matched in the technical or visible name.",
    method: Method::TemplateGet,
    since: V6_0,
    args: &[
        ids("templateids", "Return only these template IDs."),
        ids(
            "groupids",
            "Return only templates in these template groups (host groups on Zabbix 6.0).",
        ),
        search(
            &["host", "name"],
            "Case-insensitive text to find in the technical or visible template name; with `*` the pattern must match the whole name (e.g. `web*`).",
        ),
        LIMIT,
    ],
    rules: &[],
    behaviour: Behaviour::Read(Query {
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
};
