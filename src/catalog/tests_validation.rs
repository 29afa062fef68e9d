//! Every class of validation error of the write tools, with its message: each names the
//! constraint (and, inside lists, the path of the field) that was not met.

use serde_json::{Value, json};

use crate::catalog::{args, find};
use crate::zabbix::ZabbixVersion;

pub(super) const V70: ZabbixVersion = ZabbixVersion::new(7, 0, 22);
/// 2027-01-15T08:00:00Z
pub(super) const NOW: i64 = 1_800_000_000;

pub(super) fn fail(tool: &str, raw: Value) -> String {
    let def = find(tool).unwrap();
    match args::validate(def, raw.as_object(), V70, NOW) {
        Ok(a) => panic!("{tool} accepted {raw}: {:?}", a.0),
        Err(e) => e.0,
    }
}

fn ok(tool: &str, raw: Value) -> Value {
    let def = find(tool).unwrap();
    Value::Object(args::validate(def, raw.as_object(), V70, NOW).unwrap().0)
}

/// A valid maintenance_create with `extra` merged in.
pub(super) fn create(extra: Value) -> Value {
    let mut base = json!({"name": "m", "hostids": ["1"], "active_since": NOW,
                          "active_till": NOW + 3600});
    for (k, v) in extra.as_object().unwrap() {
        base[k] = v.clone();
    }
    base
}

#[test]
fn problem_tool_errors() {
    let cases = [
        (json!({}), "eventids is required"),
        (json!({"eventids": []}), "eventids must not be empty"),
        (
            json!({"eventids": "21"}),
            "eventids must be an array of IDs, got \"21\"",
        ),
        (
            json!({"eventids": ["x"]}),
            "eventids[0] must be an ID (a string of digits or a non-negative integer), got \"x\"",
        ),
        (
            json!({"eventids": [21, "21"]}),
            "eventids[1] repeats eventids[0] (\"21\")",
        ),
        (
            json!({"eventids": [1], "message": ""}),
            "message must not be empty",
        ),
        (
            json!({"eventids": [1], "message": "x".repeat(2049)}),
            "message must be at most 2048 characters long",
        ),
        (
            json!({"eventids": [1], "severity": 3}),
            "unknown argument \"severity\"; problem_acknowledge accepts: eventids, message",
        ),
    ];
    for (raw, message) in cases {
        assert_eq!(fail("problem_acknowledge", raw), message);
    }
    assert!(
        ok(
            "problem_acknowledge",
            json!({"eventids": [1], "message": "x".repeat(2048)})
        )
        .is_object()
    );
    assert_eq!(
        fail("problem_annotate", json!({"eventids": [1]})),
        "message is required"
    );
    assert_eq!(
        fail("problem_change_severity", json!({"eventids": [1]})),
        "severity is required"
    );
    assert_eq!(
        fail(
            "problem_change_severity",
            json!({"eventids": [1], "severity": 6})
        ),
        "severity must be an integer between 0 and 5, got 6"
    );
}

#[test]
fn suppress_until_errors() {
    let e = fail(
        "problem_suppress",
        json!({"eventids": [1], "suppress_until": NOW - 60}),
    );
    assert_eq!(
        e,
        format!(
            "suppress_until ({}) is not in the future (now is {NOW}); give a later time, or omit suppress_until to suppress indefinitely",
            NOW - 60
        )
    );
    let e = fail(
        "problem_suppress",
        json!({"eventids": [1], "suppress_until": "2027-01-16T10:00:00"}),
    );
    assert_eq!(
        e,
        "suppress_until \"2027-01-16T10:00:00\" has no time zone; add Z (UTC) or an offset such as +02:00"
    );
    let e = fail(
        "problem_suppress",
        json!({"eventids": [1], "suppress_until": "2027-02-30T10:00:00Z"}),
    );
    assert_eq!(
        e,
        "suppress_until \"2027-02-30T10:00:00Z\" is not a valid date (2027-02 has 28 days)"
    );
    let e = fail(
        "problem_suppress",
        json!({"eventids": [1], "suppress_until": "next week"}),
    );
    assert!(
        e.starts_with(
            "suppress_until must be a Unix time in seconds or an RFC 3339 date-time with a zone"
        ),
        "{e}"
    );
    assert_eq!(
        ok(
            "problem_suppress",
            json!({"eventids": [1], "suppress_until": 0})
        )["suppress_until"],
        0
    );
}

#[test]
fn maintenance_argument_errors() {
    let cases = [
        (json!({"name": null}), "name is required"),
        (
            json!({"name": "n".repeat(129)}),
            "name must be at most 128 characters long",
        ),
        (json!({"active_till": null}), "active_till is required"),
        (
            json!({"active_till": NOW}),
            "active_since (1800000000) must be before active_till (1800000000)",
        ),
        (
            json!({"hostids": null}),
            "at least one of groupids, hostids must be given: a maintenance covers host groups, hosts or both",
        ),
        (json!({"hostids": []}), "hostids must not be empty"),
        (
            json!({"groupids": ["2", 2]}),
            "groupids[1] repeats groupids[0] (\"2\")",
        ),
        (
            json!({"maintenance_type": 2}),
            "maintenance_type must be 0 (with data collection) or 1 (without data collection), got 2",
        ),
        (
            json!({"tags_evaltype": 1}),
            "tags_evaltype must be 0 (And/Or: tags with different names must all match, any value of one name) or 2 (Or: any tag matches), got 1",
        ),
        (
            json!({"maintenance_type": 1, "tags": [{"tag": "a"}]}),
            "tags and tags_evaltype only apply to maintenance_type 0 (with data collection); a maintenance without data collection (maintenance_type 1) takes no problem tags: remove tags",
        ),
        (
            json!({"maintenance_type": 1, "tags_evaltype": 0}),
            "tags and tags_evaltype only apply to maintenance_type 0 (with data collection); a maintenance without data collection (maintenance_type 1) takes no problem tags: remove tags_evaltype",
        ),
        (
            json!({"active_till": NOW + 299}),
            "without timeperiods, the maintenance gets one one-time period from active_since to active_till, which must last between 300 seconds and 86399940 seconds (999 days 23:59); it lasts 299 seconds: give timeperiods explicitly or change the window",
        ),
        (
            json!({"description": "d".repeat(65_536)}),
            "description must be at most 65535 characters long",
        ),
        (
            json!({"timeperiods": []}),
            "timeperiods must not be empty (a maintenance needs at least one time period)",
        ),
        (
            json!({"timeperiods": {}}),
            "timeperiods must be an array of time period objects, got {}",
        ),
    ];
    for (extra, message) in cases {
        assert_eq!(fail("maintenance_create", create(extra)), message);
    }
    let cases = [
        (json!({}), "maintenanceid is required"),
        (
            json!({"maintenanceid": "a"}),
            "maintenanceid must be an ID (a string of digits or a non-negative integer), got \"a\"",
        ),
        (
            json!({"maintenanceid": 1, "groupids": [], "hostids": []}),
            "groupids and hostids cannot both be empty: a maintenance must keep at least one host group or host",
        ),
        (
            json!({"maintenanceid": 1, "timeperiods": []}),
            "timeperiods must not be empty (a maintenance needs at least one time period)",
        ),
        (
            json!({"maintenanceid": 1, "name": ""}),
            "name must not be empty",
        ),
        (
            json!({"maintenanceid": 1, "active_since": NOW, "active_till": NOW - 1}),
            "active_since (1800000000) must be before active_till (1799999999)",
        ),
    ];
    for (raw, message) in cases {
        assert_eq!(fail("maintenance_update", raw), message);
    }
    assert_eq!(
        fail("maintenance_delete", json!({"maintenanceids": []})),
        "maintenanceids must not be empty"
    );
    assert_eq!(
        fail("maintenance_delete", json!({})),
        "maintenanceids is required"
    );
}

#[test]
fn update_accepts_empty_lists_and_partial_windows() {
    let a = ok(
        "maintenance_update",
        json!({"maintenanceid": 1, "groupids": [], "tags": []}),
    );
    assert_eq!(a, json!({"maintenanceid": "1", "groupids": [], "tags": []}));
    // Only one end of the window: Zabbix compares it with the stored other end.
    assert!(
        ok(
            "maintenance_update",
            json!({"maintenanceid": 1, "active_till": 5})
        )
        .is_object()
    );
    // Without maintenance_type, tags go through: Zabbix refuses them for a stored type 1.
    assert!(
        ok(
            "maintenance_update",
            json!({"maintenanceid": 1, "tags": [{"tag": "a"}]})
        )
        .is_object()
    );
}

/// IDs reach the policy, the decision log and Zabbix in the one spelling Zabbix writes:
/// leading zeros dropped (Zabbix reads "0010084" as 10084), integers as strings. One out of
/// Zabbix's range goes to Zabbix, whose error it is.
#[test]
fn ids_have_one_spelling() {
    let read = |hostids: Value| {
        let def = find("host_get").unwrap();
        let raw = json!({ "hostids": hostids });
        args::validate(def, raw.as_object(), V70, NOW).map(|a| a.0["hostids"].clone())
    };
    assert_eq!(
        read(json!([
            "0010084",
            10085,
            "0",
            "000",
            "99999999999999999999"
        ]))
        .unwrap(),
        json!(["10084", "10085", "0", "0", "99999999999999999999"])
    );
    for bad in [json!(["-1"]), json!(["1e3"]), json!([""])] {
        let error = read(bad.clone()).expect_err("refused").0;
        assert!(error.contains("hostids"), "{bad}: {error}");
    }
    assert_eq!(
        ok(
            "problem_acknowledge",
            json!({"eventids": ["00042"], "message": "m"})
        )["eventids"],
        json!(["42"])
    );
}

/// history.get takes 32-bit times and refuses a later one with its own error: such a time
/// (in milliseconds, most often) is refused here, naming the range and the likely slip.
#[test]
fn history_times_are_seconds_zabbix_takes() {
    let ms = NOW * 1000;
    let message = fail(
        "history_get",
        json!({"itemids": ["1"], "type": "float", "time_till": ms}),
    );
    assert_eq!(
        message,
        format!(
            "time_till must be a Unix time in seconds between 0 and 2147483647, got {ms} \
             (milliseconds? that is {NOW} in seconds)"
        )
    );
    let message = fail(
        "history_get",
        json!({"itemids": ["1"], "type": "float", "time_from": -1}),
    );
    assert_eq!(
        message,
        "time_from must be a Unix time in seconds between 0 and 2147483647, got -1"
    );
    let args = ok(
        "history_get",
        json!({"itemids": ["1"], "type": "float", "time_till": "2147483647"}),
    );
    assert_eq!(args["time_till"], 2_147_483_647);
}

/// A refused value is quoted, but never whole when it is long: quoted whole, every refused
/// call of a 500 kB value wrote 500 kB back to the agent and into the process log. The
/// message keeps what names the argument and the rule, and its end.
#[test]
fn a_long_refused_value_is_quoted_in_part() {
    let message = fail(
        "history_get",
        json!({"itemids": ["1"], "type": "x".repeat(500_000)}),
    );
    assert!(
        message.chars().count() < 460,
        "{} characters",
        message.len()
    );
    assert!(
        message.starts_with("type must be one of float, character, log, unsigned, text, got \"xxx"),
        "{message}"
    );
    assert!(
        message.contains("… (499665 characters left out) …"),
        "{message}"
    );
    assert!(message.ends_with("xxx\""), "{message}");
    // Cut between characters, never inside one.
    let name = "é".repeat(1000);
    let message = fail("host_get", json!({ name.clone(): 1 }));
    assert!(message.starts_with("unknown argument \"éé"), "{message}");
    assert!(message.contains("characters left out"), "{message}");
    // Short messages are as they were.
    assert_eq!(
        fail("history_get", json!({"itemids": ["1"], "type": "x"})),
        "type must be one of float, character, log, unsigned, text, got \"x\""
    );
}

/// An exact-name filter takes names as long as Zabbix's (255 characters: group and macro
/// names); unbounded, one name could be most of a 1 MB request, all of it in front of the
/// policy's builtins.
#[test]
fn exact_names_are_at_most_as_long_as_zabbix_names() {
    let longest = "é".repeat(255);
    for (tool, name, extra) in [
        ("hostgroup_get", "names", json!({})),
        ("templategroup_get", "names", json!({})),
        ("macro_get", "macro_names", json!({"hostids": ["1"]})),
    ] {
        let mut raw = extra.clone();
        raw[name] = json!(["web", longest]);
        assert_eq!(ok(tool, raw)[name][1], json!(longest), "{tool}");
        raw = extra;
        raw[name] = json!(["web", "x".repeat(256)]);
        assert_eq!(
            fail(tool, raw),
            format!("{name}[1] must be at most 255 characters long"),
            "{tool}"
        );
        let schema = Value::Object(crate::catalog::schema::input_schema(
            find(tool).unwrap(),
            V70,
        ));
        assert_eq!(
            schema["properties"][name]["items"]["maxLength"], 255,
            "{tool}"
        );
    }
}
