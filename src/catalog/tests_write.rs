//! The exact request of every write tool on Zabbix 6.0 and 7.0, built from raw arguments
//! through `args::validate` and `write_params` (as the MCP layer does).

use serde_json::{Value, json};

use crate::catalog::{ArgError, all_tools, args, find, write_params};
use crate::zabbix::ZabbixVersion;

const V60: ZabbixVersion = ZabbixVersion::new(6, 0, 14);
const V70: ZabbixVersion = ZabbixVersion::new(7, 0, 22);
/// 2027-01-15T08:00:00Z
const NOW: i64 = 1_800_000_000;

fn build(tool: &str, raw: Value, version: ZabbixVersion) -> Result<Value, ArgError> {
    let def = find(tool).unwrap();
    let args = args::validate(def, raw.as_object(), version, NOW)?;
    write_params(def, &args, version)
}

fn both(tool: &str, raw: Value, expected: Value) {
    for v in [V60, V70] {
        assert_eq!(
            build(tool, raw.clone(), v).unwrap(),
            expected,
            "{tool} on {v}"
        );
    }
}

#[test]
fn the_ten_write_tools_and_their_annotations() {
    let writes: Vec<_> = all_tools().filter(|t| t.is_write()).collect();
    assert_eq!(writes.len(), 10);
    assert_eq!(all_tools().count(), 22);
    for t in &writes {
        assert!(
            t.query().is_none() && t.write_spec().is_some(),
            "{}",
            t.name
        );
        // Irreversible: a deleted maintenance and a manually closed problem stay so.
        let destructive = matches!(t.name, "maintenance_delete" | "problem_close");
        assert_eq!(t.effect().destructive, destructive, "{}", t.name);
        // Each call adds one more: a maintenance, a comment.
        let adds = matches!(t.name, "maintenance_create" | "problem_annotate");
        assert_eq!(t.effect().idempotent, !adds, "{}", t.name);
    }
    for t in all_tools().filter(|t| t.is_read()) {
        assert!(
            t.write_spec().is_none() && t.query().is_some(),
            "{}",
            t.name
        );
        assert!(
            !t.effect().destructive && t.effect().idempotent,
            "{}",
            t.name
        );
    }
}

#[test]
fn problem_tools_send_their_action_flags() {
    let ids = json!({"eventids": [21, "22"]});
    for (tool, action) in [
        ("problem_acknowledge", 2),
        ("problem_unacknowledge", 16),
        ("problem_close", 1),
    ] {
        both(
            tool,
            ids.clone(),
            json!({"eventids": ["21", "22"], "action": action}),
        );
        both(
            tool,
            json!({"eventids": ["21"], "message": "on it"}),
            json!({"eventids": ["21"], "message": "on it", "action": action | 4}),
        );
    }
    both(
        "problem_annotate",
        json!({"eventids": ["21"], "message": "disk replaced"}),
        json!({"eventids": ["21"], "message": "disk replaced", "action": 4}),
    );
    both(
        "problem_change_severity",
        json!({"eventids": ["21"], "severity": "5"}),
        json!({"eventids": ["21"], "severity": 5, "action": 8}),
    );
    both(
        "problem_change_severity",
        json!({"eventids": ["21"], "severity": 0, "message": "noise"}),
        json!({"eventids": ["21"], "severity": 0, "message": "noise", "action": 12}),
    );
}

#[test]
fn suppression_needs_zabbix_6_2() {
    assert_eq!(
        build("problem_suppress", json!({"eventids": ["26"]}), V70).unwrap(),
        json!({"eventids": ["26"], "suppress_until": 0, "action": 32})
    );
    assert_eq!(
        build(
            "problem_suppress",
            json!({"eventids": ["26"], "suppress_until": "2027-01-16T10:00:00+02:00", "message": "m"}),
            V70
        )
        .unwrap(),
        json!({"eventids": ["26"], "suppress_until": 1_800_086_400, "message": "m", "action": 36})
    );
    assert_eq!(
        build("problem_unsuppress", json!({"eventids": [26]}), V70).unwrap(),
        json!({"eventids": ["26"], "action": 64})
    );
    for tool in ["problem_suppress", "problem_unsuppress"] {
        assert!(!find(tool).unwrap().available_on(V60));
        assert!(
            find(tool)
                .unwrap()
                .available_on(ZabbixVersion::new(6, 2, 0))
        );
        let e = build(tool, json!({"eventids": ["21"]}), V60).unwrap_err();
        assert_eq!(
            e.0,
            format!("{tool} needs Zabbix 6.2 or later; this Zabbix is 6.0.14")
        );
    }
}

#[test]
fn maintenance_create_full() {
    both(
        "maintenance_create",
        json!({
            "name": "DB patching",
            "groupids": [2, "20"],
            "hostids": ["10712"],
            "active_since": "2027-01-20T22:00:00+01:00",
            "active_till": 1_800_800_000,
            "timeperiods": [
                {"timeperiod_type": 0, "start_date": "2027-01-20T21:00:00Z", "period": 7200},
                {"timeperiod_type": 2, "every": 1, "start_time": "22:30", "period": "3600"},
                {"timeperiod_type": 3, "every": 2, "dayofweek": 65, "start_time": 0, "period": 600},
                {"timeperiod_type": 4, "month": 4095, "day": 31, "start_time": 86_340, "period": 300},
                {"timeperiod_type": 4, "month": 1, "dayofweek": 1, "start_time": 60, "period": 300}
            ],
            "maintenance_type": 0,
            "description": "",
            "tags": [{"tag": "svc", "operator": 0, "value": "db"}, {"tag": "env"}],
            "tags_evaltype": 2
        }),
        json!({
            "name": "DB patching",
            "groups": [{"groupid": "2"}, {"groupid": "20"}],
            "hosts": [{"hostid": "10712"}],
            "active_since": 1_800_478_800,
            "active_till": 1_800_800_000,
            "timeperiods": [
                {"timeperiod_type": 0, "start_date": 1_800_478_800, "period": 7200},
                {"timeperiod_type": 2, "every": 1, "start_time": 81_000, "period": 3600},
                {"timeperiod_type": 3, "every": 2, "dayofweek": 65, "start_time": 0, "period": 600},
                {"timeperiod_type": 4, "month": 4095, "day": 31, "start_time": 86_340, "period": 300},
                {"timeperiod_type": 4, "month": 1, "dayofweek": 1, "every": 1, "start_time": 60, "period": 300}
            ],
            "maintenance_type": 0,
            "description": "",
            "tags": [
                {"tag": "svc", "operator": 0, "value": "db"},
                {"tag": "env", "operator": 2, "value": ""}
            ],
            "tags_evaltype": 2
        }),
    );
}

#[test]
fn maintenance_create_defaults() {
    // maintenance_type 0 and one one-time period over the whole window.
    both(
        "maintenance_create",
        json!({"name": "m", "hostids": [10712], "active_since": 1_800_000_000,
               "active_till": "2027-01-16T08:00:00Z"}),
        json!({
            "name": "m",
            "hosts": [{"hostid": "10712"}],
            "active_since": 1_800_000_000,
            "active_till": 1_800_086_400,
            "timeperiods": [{"timeperiod_type": 0, "start_date": 1_800_000_000, "period": 86_400}],
            "maintenance_type": 0
        }),
    );
    both(
        "maintenance_create",
        json!({"name": "m", "groupids": ["4"], "active_since": 1_800_000_000,
               "active_till": 1_800_000_300, "maintenance_type": 1}),
        json!({
            "name": "m",
            "groups": [{"groupid": "4"}],
            "active_since": 1_800_000_000,
            "active_till": 1_800_000_300,
            "timeperiods": [{"timeperiod_type": 0, "start_date": 1_800_000_000, "period": 300}],
            "maintenance_type": 1
        }),
    );
}

#[test]
fn maintenance_update_replaces_lists() {
    // A maintenance of hosts A and B updated with hostids [C] covers only C.
    both(
        "maintenance_update",
        json!({"maintenanceid": 5, "hostids": ["10713"]}),
        json!({"maintenanceid": "5", "hosts": [{"hostid": "10713"}]}),
    );
    both(
        "maintenance_update",
        json!({"maintenanceid": "5", "groupids": [], "tags": [], "hostids": ["10713"]}),
        json!({"maintenanceid": "5", "groups": [], "hosts": [{"hostid": "10713"}], "tags": []}),
    );
    both(
        "maintenance_update",
        json!({"maintenanceid": "5", "name": "renamed", "description": "",
               "active_till": "2027-02-01T00:00:00Z", "maintenance_type": 1,
               "timeperiods": [{"timeperiod_type": 2, "every": 3, "start_time": 0, "period": 300}]}),
        json!({"maintenanceid": "5", "name": "renamed", "active_till": 1_801_440_000,
               "timeperiods": [{"timeperiod_type": 2, "every": 3, "start_time": 0, "period": 300}],
               "maintenance_type": 1, "description": ""}),
    );
    // An update does not fill defaults.
    both(
        "maintenance_update",
        json!({"maintenanceid": "5", "active_since": 1_800_000_000, "active_till": 1_800_000_060}),
        json!({"maintenanceid": "5", "active_since": 1_800_000_000, "active_till": 1_800_000_060}),
    );
}

#[test]
fn maintenance_delete_sends_a_plain_id_array() {
    both(
        "maintenance_delete",
        json!({"maintenanceids": [5, "6"]}),
        json!(["5", "6"]),
    );
}

#[test]
fn validated_arguments_are_what_the_policy_sees() {
    let def = find("maintenance_create").unwrap();
    let raw = json!({"name": "m", "hostids": [7], "active_since": "2027-01-15T09:00:00+01:00",
                     "active_till": "2027-01-15T10:00:00+01:00"});
    let a = args::validate(def, raw.as_object(), V70, NOW).unwrap();
    assert_eq!(
        Value::Object(a.0),
        json!({"name": "m", "hostids": ["7"], "active_since": 1_800_000_000,
               "active_till": 1_800_003_600,
               "timeperiods": [{"timeperiod_type": 0, "start_date": 1_800_000_000, "period": 3600}],
               "maintenance_type": 0})
    );
    let def = find("problem_suppress").unwrap();
    let a = args::validate(def, json!({"eventids": [1]}).as_object(), V70, NOW).unwrap();
    assert_eq!(
        Value::Object(a.0),
        json!({"eventids": ["1"], "suppress_until": 0})
    );
}

#[test]
fn read_tools_are_not_write_tools() {
    let def = find("host_get").unwrap();
    let a = args::validate(def, None, V70, NOW).unwrap();
    assert_eq!(
        write_params(def, &a, V70).unwrap_err().0,
        "host_get is not a write tool"
    );
}
