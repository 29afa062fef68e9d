//! The tool catalog: every tool described once, as data (name, Zabbix method, arguments,
//! fixed output fields, sort order, resource kind). Handlers read this table; nothing
//! is repeated per tool.

pub mod args;
pub mod maintenance;
pub mod params;
pub mod problem;
pub mod read;
mod read_events;
mod read_hosts;
mod read_items;
mod rules;
pub mod schema;
mod structured;
pub mod time;

#[cfg(test)]
mod tests_hidden_text;
#[cfg(test)]
mod tests_structured;
#[cfg(test)]
mod tests_validation;
#[cfg(test)]
mod tests_write;

use crate::zabbix::{Method, ZabbixVersion};

pub use args::{ArgError, Arguments};
pub use params::write_params;

/// Whether a tool reads or changes Zabbix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    Read,
    Write,
}

/// One tool, as the agent sees it and as the sidecar sends it to Zabbix.
#[derive(Debug)]
pub struct ToolDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub method: Method,
    /// The oldest Zabbix version that serves this tool.
    pub since: ZabbixVersion,
    pub args: &'static [ArgDef],
    /// Constraints that involve more than one argument.
    pub rules: &'static [ArgRule],
    pub behaviour: Behaviour,
}

/// What a tool does: a read has a query (and is read-only, non-destructive, idempotent);
/// a write has a request shape and an effect. Nothing else can be written down.
#[derive(Debug)]
pub enum Behaviour {
    Read(Query),
    Write(WriteSpec),
}

/// How a write tool builds its request, and what it does to Zabbix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteSpec {
    pub request: WriteRequest,
    pub effect: Effect,
}

/// The shape of a write tool's request parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteRequest {
    /// An object built from the argument mappings.
    Object,
    /// `event.acknowledge`: an object with `action` = this flag, plus the flag of every
    /// `Mapping::ActionParam` argument that was given.
    Acknowledge { action: i64 },
}

/// What a write does, as the MCP annotations (`destructiveHint`, `idempotentHint`) and the
/// policy input (`tool.destructive`, `tool.idempotent`) tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effect {
    /// It cannot be undone (a deletion, a manual close).
    pub destructive: bool,
    /// Calling it again with the same arguments changes nothing more.
    pub idempotent: bool,
}

/// One argument of a tool.
#[derive(Debug)]
pub struct ArgDef {
    pub name: &'static str,
    pub ty: ArgType,
    pub description: &'static str,
    pub required: bool,
    pub maps_to: Mapping,
}

/// The accepted shape of an argument value.
#[derive(Debug)]
pub enum ArgType {
    /// A list of Zabbix IDs; each may be a string of digits or a non-negative integer.
    Ids,
    /// A list of non-empty strings of at most `max_len` characters each.
    Strings {
        max_len: usize,
    },
    /// One non-empty string of at most `max_len` characters.
    Text {
        max_len: usize,
    },
    /// The result count limit (1..=MAX_LIMIT, default DEFAULT_LIMIT).
    Limit,
    Bool,
    /// A list of integers within a range.
    IntList {
        min: i64,
        max: i64,
    },
    /// One of a fixed set of names, each mapped to the number Zabbix wants.
    Enum(&'static [EnumValue]),
    /// Unix time in seconds, 0..=2147483647 (history.get takes a 32-bit integer).
    UnixTime,
    /// One Zabbix ID (string of digits or non-negative integer), normalized to a string.
    Id,
    /// A list of distinct Zabbix IDs; with `allow_empty`, `[]` is accepted (it clears a set).
    IdSet {
        allow_empty: bool,
    },
    /// One integer within a range.
    Int {
        min: i64,
        max: i64,
    },
    /// One integer from a fixed set, each with its meaning (for the schema description).
    IntChoice(&'static [IntChoice]),
    /// A point in time: Unix seconds, or an RFC 3339 date-time with `Z` or an offset.
    /// Normalized to Unix seconds (0..=2147483647, the range Zabbix stores).
    Timestamp,
    /// A string that may be empty (it clears a field), at most `max_len` characters.
    FreeText {
        max_len: usize,
    },
    /// Maintenance time periods (never empty: Zabbix needs at least one).
    Timeperiods,
    /// Maintenance problem tags `{tag, operator, value}`.
    Tags {
        allow_empty: bool,
    },
}

/// One allowed value of an `ArgType::IntChoice`.
#[derive(Debug)]
pub struct IntChoice {
    pub value: i64,
    pub meaning: &'static str,
}

/// One allowed value of an `ArgType::Enum`.
#[derive(Debug)]
pub struct EnumValue {
    pub name: &'static str,
    pub number: i64,
    pub since: ZabbixVersion,
}

/// Where a validated argument goes in the Zabbix request.
#[derive(Debug, Clone, Copy)]
pub enum Mapping {
    /// `params[name] = value`
    Param(&'static str),
    /// `params.filter[field] = value`
    Filter(&'static str),
    /// `params.search[field] = value` for each field (any may match; `*` is a wildcard).
    Search(&'static [&'static str]),
    /// `params.limit` (one more than asked, to know whether the result was cut).
    Limit,
    /// `params[param] = [{field: id}, ...]` (maintenance `groups` / `hosts`).
    Objects {
        param: &'static str,
        field: &'static str,
    },
    /// `params[param] = value`, and `flag` is added to `action` (event.acknowledge).
    ActionParam { param: &'static str, flag: i64 },
    /// The value is the whole `params` (maintenance.delete takes a plain ID array).
    Whole,
}

/// Constraints across arguments.
#[derive(Debug)]
pub enum ArgRule {
    /// Exactly one of these arguments must be given (a `false` boolean counts as absent).
    ExactlyOne(&'static [&'static str]),
    /// The history time window: defaults, order, width and age limits.
    HistoryWindow {
        from: &'static str,
        till: &'static str,
    },
    /// When absent, the argument is set to this integer.
    Default { arg: &'static str, value: i64 },
    /// When both are given, `earlier` must be before `later`.
    Before {
        earlier: &'static str,
        later: &'static str,
    },
    /// A maintenance must cover at least one host group or host. `required`: at least one
    /// of the two non-empty lists must be given (create); otherwise only giving both as
    /// empty lists is refused (update; Zabbix checks the rest against the stored sets).
    GroupsOrHosts {
        groups: &'static str,
        hosts: &'static str,
        required: bool,
    },
    /// Problem tags only apply to maintenances with data collection (`maintenance_type` 0):
    /// with `maintenance_type` 1, neither `tags` nor `tags_evaltype` may be given.
    TagsNeedDataCollection {
        maintenance_type: &'static str,
        tags: &'static str,
        tags_evaltype: &'static str,
    },
    /// A suppression end: absent or 0 means indefinitely (normalized to 0); otherwise it
    /// must be in the future.
    FutureOrIndefinite(&'static str),
    /// When `periods` is absent: one one-time period from `since` lasting until `till`.
    DefaultTimeperiod {
        periods: &'static str,
        since: &'static str,
        till: &'static str,
    },
}

/// How a read tool asks Zabbix.
#[derive(Debug)]
pub struct Query {
    /// The ID field of the returned objects.
    pub id_field: &'static str,
    pub output: &'static [&'static str],
    pub selects: &'static [Select],
    pub sort: Sort,
    /// Other outputs when an argument has a given value (global macros, log history).
    pub variants: &'static [Variant],
    /// Boolean request flags always sent as true (e.g. `expandExpression`).
    pub flags: &'static [&'static str],
    pub resource: Option<ResourceDef>,
}

/// A related-object selection (`selectTags`, `selectHostGroups`, ...).
#[derive(Debug)]
pub struct Select {
    pub param: SelectParam,
    pub fields: &'static [&'static str],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectParam {
    Fixed(&'static str),
    /// `selectHostGroups` from 6.2, `selectGroups` before; returned as `hostgroups`.
    HostGroups,
    /// `selectTemplateGroups` from 6.2, `selectGroups` before; returned as `templategroups`.
    TemplateGroups,
}

/// The fixed sort order. Fields after the first break ties, so that equal names come back
/// in the same order every time and a truncated response is the beginning of the full one.
#[derive(Debug, Clone, Copy)]
pub struct Sort {
    pub fields: &'static [&'static str],
    pub descending: bool,
}

#[derive(Debug)]
pub struct Variant {
    pub arg: &'static str,
    pub equals: VariantValue,
    pub id_field: &'static str,
    pub output: &'static [&'static str],
}

#[derive(Debug, Clone, Copy)]
pub enum VariantValue {
    Bool(bool),
    Str(&'static str),
}

/// A `zabbix://<kind>/<id>` resource served from a read tool's method.
#[derive(Debug)]
pub struct ResourceDef {
    pub kind: ResourceKind,
    /// The request parameter that takes the ID (`hostids`, `groupids`, ...).
    pub id_param: &'static str,
    pub output: &'static [&'static str],
    pub selects: &'static [Select],
    pub description: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    Host,
    HostGroup,
    Template,
    TemplateGroup,
    Item,
    Trigger,
}

pub const DEFAULT_LIMIT: u32 = 100;
pub const MAX_LIMIT: u32 = 1000;
/// The official server's history limits; the policy may set others per caller.
pub const DEFAULT_HISTORY_MAX_WINDOW_SECONDS: i64 = 7 * 24 * 3600;
pub const DEFAULT_HISTORY_MAX_AGE_SECONDS: i64 = 7 * 24 * 3600;

impl ResourceKind {
    pub const ALL: [ResourceKind; 6] = [
        ResourceKind::Host,
        ResourceKind::HostGroup,
        ResourceKind::Template,
        ResourceKind::TemplateGroup,
        ResourceKind::Item,
        ResourceKind::Trigger,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Host => "host",
            ResourceKind::HostGroup => "hostgroup",
            ResourceKind::Template => "template",
            ResourceKind::TemplateGroup => "templategroup",
            ResourceKind::Item => "item",
            ResourceKind::Trigger => "trigger",
        }
    }

    pub fn parse(kind: &str) -> Option<ResourceKind> {
        ResourceKind::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    pub fn uri(self, id: &str) -> String {
        let mut uri = String::with_capacity(32 + id.len());
        self.push_uri(&mut uri, id);
        uri
    }

    /// Appends the resource URI for `id` (`zabbix://<kind>/<id>`).
    pub fn push_uri(self, out: &mut String, id: &str) {
        out.push_str(URI_SCHEME);
        out.push_str(self.as_str());
        out.push('/');
        out.push_str(id);
    }

    /// The kind and the id text of a `zabbix://<kind>/<id>` URI ([`push_uri`](Self::push_uri)
    /// read back); the id is not checked.
    pub fn of_uri(uri: &str) -> Option<(ResourceKind, &str)> {
        let (kind, id) = uri.strip_prefix(URI_SCHEME)?.split_once('/')?;
        Some((ResourceKind::parse(kind)?, id))
    }
}

const URI_SCHEME: &str = "zabbix://";

impl Effect {
    /// Sets a state; setting it again changes nothing (acknowledge, update).
    pub const SETS: Effect = Effect {
        destructive: false,
        idempotent: true,
    };
    /// Adds a record on every call (a comment, a new maintenance).
    pub const ADDS: Effect = Effect {
        destructive: false,
        idempotent: false,
    };
    /// Cannot be undone (delete, manual close); repeating it changes nothing more.
    pub const DESTROYS: Effect = Effect {
        destructive: true,
        idempotent: true,
    };
}

impl ToolDef {
    pub fn kind(&self) -> ToolKind {
        match self.behaviour {
            Behaviour::Read(_) => ToolKind::Read,
            Behaviour::Write(_) => ToolKind::Write,
        }
    }

    pub fn is_read(&self) -> bool {
        self.kind() == ToolKind::Read
    }

    /// Write tools return Zabbix's result directly: no output schema, no envelope.
    pub fn is_write(&self) -> bool {
        self.kind() == ToolKind::Write
    }

    /// A read's effect: none.
    pub fn effect(&self) -> Effect {
        match &self.behaviour {
            Behaviour::Read(_) => Effect {
                destructive: false,
                idempotent: true,
            },
            Behaviour::Write(spec) => spec.effect,
        }
    }

    pub fn query(&self) -> Option<&Query> {
        match &self.behaviour {
            Behaviour::Read(query) => Some(query),
            Behaviour::Write(_) => None,
        }
    }

    pub fn write_spec(&self) -> Option<WriteSpec> {
        match &self.behaviour {
            Behaviour::Read(_) => None,
            Behaviour::Write(spec) => Some(*spec),
        }
    }

    pub fn available_on(&self, version: ZabbixVersion) -> bool {
        version >= self.since
    }

    pub fn resource(&self) -> Option<&ResourceDef> {
        self.query().and_then(|q| q.resource.as_ref())
    }
}

impl SelectParam {
    /// The request parameter for this Zabbix version.
    pub fn param_name(self, version: ZabbixVersion) -> &'static str {
        match self {
            SelectParam::Fixed(name) => name,
            SelectParam::HostGroups if version.has_template_groups() => "selectHostGroups",
            SelectParam::TemplateGroups if version.has_template_groups() => "selectTemplateGroups",
            SelectParam::HostGroups | SelectParam::TemplateGroups => "selectGroups",
        }
    }

    /// The key Zabbix returns (on this version) and the key the agent sees.
    pub fn result_keys(self, version: ZabbixVersion) -> Option<(&'static str, &'static str)> {
        match self {
            SelectParam::Fixed(_) => None,
            SelectParam::HostGroups if version.has_template_groups() => None,
            SelectParam::TemplateGroups if version.has_template_groups() => None,
            SelectParam::HostGroups => Some(("groups", "hostgroups")),
            SelectParam::TemplateGroups => Some(("groups", "templategroups")),
        }
    }
}

/// All tools, in the order `tools/list` shows them: reads, problem tools, maintenance tools.
pub fn all_tools() -> impl Iterator<Item = &'static ToolDef> {
    read::READ_TOOLS
        .iter()
        .chain(problem::PROBLEM_TOOLS.iter())
        .chain(maintenance::MAINTENANCE_TOOLS.iter())
}

/// The tool with this plain (unprefixed) name.
pub fn find(name: &str) -> Option<&'static ToolDef> {
    all_tools().find(|t| t.name == name)
}

/// The read tool that serves a resource kind.
pub fn for_resource(kind: ResourceKind) -> Option<&'static ToolDef> {
    all_tools().find(|t| t.resource().is_some_and(|r| r.kind == kind))
}
