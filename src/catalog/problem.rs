//! The seven problem tools of the contract (spec "Problem tools"), as one table. Each
//! calls `event.acknowledge` with its action flag; a `message` adds flag 4 and is recorded
//! in the same call.

use crate::catalog::{
    ArgDef, ArgRule, ArgType, Behaviour, Effect, Mapping, ToolDef, WriteRequest, WriteSpec,
};
use crate::zabbix::{Method, ZabbixVersion};

const V6_0: ZabbixVersion = ZabbixVersion::new(6, 0, 0);
const V6_2: ZabbixVersion = ZabbixVersion::new(6, 2, 0);

/// event.acknowledge action flags.
pub const CLOSE: i64 = 1;
pub const ACKNOWLEDGE: i64 = 2;
pub const ADD_MESSAGE: i64 = 4;
pub const CHANGE_SEVERITY: i64 = 8;
pub const UNACKNOWLEDGE: i64 = 16;
pub const SUPPRESS: i64 = 32;
pub const UNSUPPRESS: i64 = 64;

/// The acknowledges.message column (Zabbix 7.0 checks it; 6.0 fails in the database).
pub const MESSAGE_MAX_LEN: usize = 2048;

const EVENTIDS: ArgDef = ArgDef {
    name: "eventids",
    ty: ArgType::IdSet { allow_empty: false },
    description: "IDs of the problem events to update (the `eventid` of problem_get results).",
    required: true,
    maps_to: Mapping::Param("eventids"),
};

const fn message(required: bool, description: &'static str) -> ArgDef {
    ArgDef {
        name: "message",
        ty: ArgType::Text {
            max_len: MESSAGE_MAX_LEN,
        },
        description,
        required,
        maps_to: Mapping::ActionParam {
            param: "message",
            flag: ADD_MESSAGE,
        },
    }
}

const MESSAGE: ArgDef = message(
    false,
    "Optional comment (at most 2048 characters), recorded on the problems in the same call.",
);

/// `event.acknowledge` with this action flag.
const fn ack(action: i64, effect: Effect) -> WriteSpec {
    WriteSpec {
        request: WriteRequest::Acknowledge { action },
        effect,
    }
}

const fn tool(
    name: &'static str,
    title: &'static str,
    description: &'static str,
    write: WriteSpec,
    since: ZabbixVersion,
    args: &'static [ArgDef],
    rules: &'static [ArgRule],
) -> ToolDef {
    ToolDef {
        name,
        title,
        description,
        method: Method::EventAcknowledge,
        since,
        args,
        rules,
        behaviour: Behaviour::Write(write),
    }
}

pub static PROBLEM_TOOLS: [ToolDef; 7] = [
    tool(
        "problem_acknowledge",
        "Acknowledge problems",
        "Acknowledge Zabbix problems (event IDs from problem_get), optionally with a message. \
         Already acknowledged problems are left as they are.",
        ack(ACKNOWLEDGE, Effect::SETS),
        V6_0,
        &[EVENTIDS, MESSAGE],
        &[],
    ),
    tool(
        "problem_unacknowledge",
        "Unacknowledge problems",
        "Remove the acknowledgement of Zabbix problems (event IDs from problem_get), optionally \
         with a message.",
        ack(UNACKNOWLEDGE, Effect::SETS),
        V6_0,
        &[EVENTIDS, MESSAGE],
        &[],
    ),
    tool(
        "problem_close",
        "Close problems",
        "Close Zabbix problems manually (event IDs from problem_get), optionally with a message. \
         Zabbix refuses it unless the problem's trigger allows manual close (trigger_get \
         `manual_close` = 1) and the caller may edit the trigger.",
        ack(CLOSE, Effect::DESTROYS),
        V6_0,
        &[EVENTIDS, MESSAGE],
        &[],
    ),
    tool(
        "problem_annotate",
        "Comment on problems",
        "Record a message (comment) on Zabbix problems (event IDs from problem_get) without \
         changing their state.",
        ack(0, Effect::ADDS),
        V6_0,
        &[
            EVENTIDS,
            message(true, "The comment to record (1-2048 characters)."),
        ],
        &[],
    ),
    tool(
        "problem_change_severity",
        "Change problem severity",
        "Change the severity of Zabbix problems (event IDs from problem_get), optionally with a \
         message. The caller needs write access to the triggers.",
        ack(CHANGE_SEVERITY, Effect::SETS),
        V6_0,
        &[
            EVENTIDS,
            ArgDef {
                name: "severity",
                ty: ArgType::Int { min: 0, max: 5 },
                description: "The new severity: 0 not classified, 1 information, 2 warning, \
                              3 average, 4 high, 5 disaster.",
                required: true,
                maps_to: Mapping::Param("severity"),
            },
            MESSAGE,
        ],
        &[],
    ),
    tool(
        "problem_suppress",
        "Suppress problems",
        "Suppress Zabbix problems (event IDs from problem_get) until a given time or \
         indefinitely, optionally with a message. Zabbix 6.2 and later.",
        ack(SUPPRESS, Effect::SETS),
        V6_2,
        &[
            EVENTIDS,
            ArgDef {
                name: "suppress_until",
                ty: ArgType::Timestamp,
                description: "When the suppression ends: Unix seconds or an RFC 3339 date-time \
                              with a zone (e.g. 2026-10-15T22:00:00+02:00); must be in the \
                              future. Omit (or 0) to suppress indefinitely.",
                required: false,
                maps_to: Mapping::Param("suppress_until"),
            },
            MESSAGE,
        ],
        &[ArgRule::FutureOrIndefinite("suppress_until")],
    ),
    tool(
        "problem_unsuppress",
        "Unsuppress problems",
        "Remove the manual suppression of Zabbix problems (event IDs from problem_get), \
         optionally with a message. Zabbix 6.2 and later.",
        ack(UNSUPPRESS, Effect::SETS),
        V6_2,
        &[EVENTIDS, MESSAGE],
        &[],
    ),
];
