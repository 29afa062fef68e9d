//! Read tools for problems, maintenance periods and history (part of `read::READ_TOOLS`).

use crate::catalog::read::{GROUPS, HISTORY_TYPES, LIMIT, TAGS, V6_0, ids};
use crate::catalog::{
    ArgDef, ArgRule, ArgType, Behaviour, Mapping, Query, Select, SelectParam, Sort, ToolDef,
    Variant, VariantValue,
};
use crate::zabbix::Method;

pub(super) const PROBLEM_GET: ToolDef = ToolDef {
    name: "problem_get",
    title: "Problems",
    description: "List current Zabbix problems, newest first (event ID descending), with their \
                  tags. Filter by event IDs, host group IDs, host IDs, severities (0 not \
                  classified .. 5 disaster), acknowledged or suppressed state; `recent: true` \
                  also returns problems resolved recently. Event IDs feed the problem_* tools.",
    method: Method::ProblemGet,
    since: V6_0,
    args: &[
        ids("eventids", "Return only these problem event IDs."),
        ids(
            "groupids",
            "Return only problems of hosts in these host groups.",
        ),
        ids("hostids", "Return only problems of these hosts."),
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
    behaviour: Behaviour::Read(Query {
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
};

pub(super) const MAINTENANCE_GET: ToolDef = ToolDef {
    name: "maintenance_get",
    title: "Maintenance periods",
    description: "List Zabbix maintenance periods, sorted by name, with their host groups, \
                  hosts, time periods and tags. Filter by maintenance IDs, host group IDs or host IDs.",
    method: Method::MaintenanceGet,
    since: V6_0,
    args: &[
        ids("maintenanceids", "Return only these maintenance IDs."),
        ids(
            "groupids",
            "Return only maintenances that cover these host groups.",
        ),
        ids(
            "hostids",
            "Return only maintenances that cover these hosts.",
        ),
        LIMIT,
    ],
    rules: &[],
    behaviour: Behaviour::Read(Query {
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
};

pub(super) const HISTORY_GET: ToolDef = ToolDef {
    name: "history_get",
    title: "Item history",
    description: "Read the collected values of items, newest first. `type` must match the items' \
                  value type (see item_get `value_type`); a wrong type returns no values. The \
                  window is at most 7 days wide and starts no earlier than 7 days ago (the \
                  policy may set other limits); without time_from/time_till it is the widest \
                  allowed window ending now. Binary items cannot be read.",
    method: Method::HistoryGet,
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
    behaviour: Behaviour::Read(Query {
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
};
