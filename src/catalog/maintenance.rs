//! The three maintenance write tools of the contract (spec "Maintenance tools"), as one
//! table. Group and host IDs travel as `groups: [{groupid}]` / `hosts: [{hostid}]`, which
//! Zabbix 6.0 to 8.0 accept (`groupids`/`hostids` are deprecated).
//!
//! Defaults: `maintenance_type` 0 (with data collection) on create; without `timeperiods`,
//! create makes one one-time period from `active_since` lasting until `active_till`.
//! In an update, list arguments replace the whole stored set and `[]` clears it (except
//! `timeperiods`: Zabbix needs at least one).

use crate::catalog::{
    ArgDef, ArgRule, ArgType, Behaviour, Effect, IntChoice, Mapping, ToolDef, WriteRequest,
    WriteSpec,
};
use crate::zabbix::{Method, ZabbixVersion};

const V6_0: ZabbixVersion = ZabbixVersion::new(6, 0, 0);

/// maintenances.name and maintenances.description column sizes.
pub const NAME_MAX_LEN: usize = 128;
pub const DESCRIPTION_MAX_LEN: usize = 65_535;

pub const MAINTENANCE_TYPES: &[IntChoice] = &[
    IntChoice {
        value: 0,
        meaning: "with data collection",
    },
    IntChoice {
        value: 1,
        meaning: "without data collection",
    },
];

pub const TAGS_EVALTYPES: &[IntChoice] = &[
    IntChoice {
        value: 0,
        meaning: "And/Or: tags with different names must all match, any value of one name",
    },
    IntChoice {
        value: 2,
        meaning: "Or: any tag matches",
    },
];

const fn arg(
    name: &'static str,
    ty: ArgType,
    required: bool,
    maps_to: Mapping,
    description: &'static str,
) -> ArgDef {
    ArgDef {
        name,
        ty,
        description,
        required,
        maps_to,
    }
}

/// The fields create and update share; in an update nothing is required and every list
/// but `timeperiods` may be `[]` (it clears the stored set).
const fn fields(update: bool) -> [ArgDef; 10] {
    [
        arg(
            "name",
            ArgType::Text {
                max_len: NAME_MAX_LEN,
            },
            !update,
            Mapping::Param("name"),
            "Unique name of the maintenance (1-128 characters).",
        ),
        arg(
            "groupids",
            ArgType::IdSet {
                allow_empty: update,
            },
            false,
            Mapping::Objects {
                param: "groups",
                field: "groupid",
            },
            if update {
                "Host groups whose hosts are in maintenance. Replaces the stored set; [] removes \
                 all (the maintenance must keep at least one host group or host, else Zabbix \
                 refuses the update)."
            } else {
                "Host groups whose hosts are in maintenance (give groupids, hostids or both)."
            },
        ),
        arg(
            "hostids",
            ArgType::IdSet {
                allow_empty: update,
            },
            false,
            Mapping::Objects {
                param: "hosts",
                field: "hostid",
            },
            if update {
                "Hosts in maintenance. Replaces the stored set; [] removes all (the maintenance \
                 must keep at least one host group or host, else Zabbix refuses the update)."
            } else {
                "Hosts in maintenance (give groupids, hostids or both)."
            },
        ),
        arg(
            "active_since",
            ArgType::Timestamp,
            !update,
            Mapping::Param("active_since"),
            "When the maintenance becomes active: Unix seconds or an RFC 3339 date-time with a \
             zone (e.g. 2026-10-15T22:00:00+02:00). Zabbix rounds it down to the minute.",
        ),
        arg(
            "active_till",
            ArgType::Timestamp,
            !update,
            Mapping::Param("active_till"),
            "When the maintenance stops being active, after active_since: Unix seconds or an \
             RFC 3339 date-time with a zone. Zabbix rounds it down to the minute.",
        ),
        arg(
            "timeperiods",
            ArgType::Timeperiods,
            false,
            Mapping::Param("timeperiods"),
            if update {
                "When, within active_since..active_till, the hosts are in maintenance. Replaces \
                 all stored periods; at least one."
            } else {
                "When, within active_since..active_till, the hosts are in maintenance. Default: \
                 one one-time period covering the whole active_since..active_till window."
            },
        ),
        arg(
            "maintenance_type",
            ArgType::IntChoice(MAINTENANCE_TYPES),
            false,
            Mapping::Param("maintenance_type"),
            if update {
                "0: with data collection; 1: without data collection (no tags or tags_evaltype \
                 then; Zabbix also refuses tags for a stored type 1)."
            } else {
                "0 (default): with data collection; 1: without data collection (no tags or \
                 tags_evaltype then)."
            },
        ),
        arg(
            "description",
            ArgType::FreeText {
                max_len: DESCRIPTION_MAX_LEN,
            },
            false,
            Mapping::Param("description"),
            "Free-text description (\"\" clears it).",
        ),
        arg(
            "tags",
            ArgType::Tags {
                allow_empty: update,
            },
            false,
            Mapping::Param("tags"),
            if update {
                "Problem tags: only problems with matching tags are suppressed (maintenance with \
                 data collection only). Replaces the stored tags; [] removes all (then all \
                 problems of the hosts are suppressed)."
            } else {
                "Problem tags: only problems with matching tags are suppressed (maintenance with \
                 data collection only). Without tags, all problems of the hosts are suppressed."
            },
        ),
        arg(
            "tags_evaltype",
            ArgType::IntChoice(TAGS_EVALTYPES),
            false,
            Mapping::Param("tags_evaltype"),
            "How tags combine: 0 And/Or (Zabbix default), 2 Or. With data collection only.",
        ),
    ]
}

const CREATE_ARGS: [ArgDef; 10] = fields(false);

const UPDATE_ARGS: [ArgDef; 11] = {
    let [a, b, c, d, e, f, g, h, i, j] = fields(true);
    [
        arg(
            "maintenanceid",
            ArgType::Id,
            true,
            Mapping::Param("maintenanceid"),
            "ID of the maintenance to change (maintenance_get `maintenanceid`).",
        ),
        a,
        b,
        c,
        d,
        e,
        f,
        g,
        h,
        i,
        j,
    ]
};

const TAGS_RULE: ArgRule = ArgRule::TagsNeedDataCollection {
    maintenance_type: "maintenance_type",
    tags: "tags",
    tags_evaltype: "tags_evaltype",
};

const WINDOW_RULE: ArgRule = ArgRule::Before {
    earlier: "active_since",
    later: "active_till",
};

pub static MAINTENANCE_TOOLS: [ToolDef; 3] = [
    ToolDef {
        name: "maintenance_create",
        title: "Create a maintenance period",
        description: "Create a Zabbix maintenance period for host groups and/or hosts, active \
                      from active_since to active_till, with time periods (default: the whole \
                      window, once) and, with data collection, problem tags that limit which \
                      problems are suppressed. Not idempotent: each call creates one.",
        method: Method::MaintenanceCreate,
        since: V6_0,
        args: &CREATE_ARGS,
        rules: &[
            ArgRule::Default {
                arg: "maintenance_type",
                value: 0,
            },
            WINDOW_RULE,
            ArgRule::GroupsOrHosts {
                groups: "groupids",
                hosts: "hostids",
                required: true,
            },
            TAGS_RULE,
            ArgRule::DefaultTimeperiod {
                periods: "timeperiods",
                since: "active_since",
                till: "active_till",
            },
        ],
        behaviour: Behaviour::Write(WriteSpec {
            request: WriteRequest::Object,
            effect: Effect::ADDS,
        }),
    },
    ToolDef {
        name: "maintenance_update",
        title: "Update a maintenance period",
        description: "Change a Zabbix maintenance period: only the arguments given change. List \
                      arguments (groupids, hostids, timeperiods, tags) replace the whole stored \
                      set: a maintenance of hosts A and B updated with hostids [C] covers only \
                      C; [] clears a set (not timeperiods). Zabbix refuses an update that would \
                      leave no host group and no host.",
        method: Method::MaintenanceUpdate,
        since: V6_0,
        args: &UPDATE_ARGS,
        rules: &[
            WINDOW_RULE,
            ArgRule::GroupsOrHosts {
                groups: "groupids",
                hosts: "hostids",
                required: false,
            },
            TAGS_RULE,
        ],
        behaviour: Behaviour::Write(WriteSpec {
            request: WriteRequest::Object,
            effect: Effect::SETS,
        }),
    },
    ToolDef {
        name: "maintenance_delete",
        title: "Delete maintenance periods",
        description: "Delete Zabbix maintenance periods by ID (maintenance_get `maintenanceid`). \
                      Cannot be undone.",
        method: Method::MaintenanceDelete,
        since: V6_0,
        args: &[arg(
            "maintenanceids",
            ArgType::IdSet { allow_empty: false },
            true,
            Mapping::Whole,
            "IDs of the maintenance periods to delete.",
        )],
        rules: &[],
        behaviour: Behaviour::Write(WriteSpec {
            request: WriteRequest::Object,
            effect: Effect::DESTROYS,
        }),
    },
];
