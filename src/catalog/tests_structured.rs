//! Validation of the structured maintenance arguments (time periods, tags) and the input
//! schemas of the write tools.

use serde_json::{Value, json};

use crate::catalog::tests_validation::{NOW, V70, create, fail};
use crate::catalog::{find, schema};

fn period_error(period: Value) -> String {
    fail(
        "maintenance_create",
        create(
            json!({"timeperiods": [{"timeperiod_type": 0, "start_date": NOW, "period": 300}, period]}),
        ),
    )
}

#[test]
fn timeperiod_errors_name_the_path() {
    let cases = [
        (
            json!("daily"),
            "timeperiods[1] must be an object with timeperiod_type, period and the fields of its type, got \"daily\"",
        ),
        (
            json!({"period": 300}),
            "timeperiods[1].timeperiod_type is required: 0 one time, 2 daily, 3 weekly, 4 monthly",
        ),
        (
            json!({"timeperiod_type": 1, "period": 300}),
            "timeperiods[1].timeperiod_type must be 0 (one time), 2 (daily), 3 (weekly) or 4 (monthly), got 1",
        ),
        (
            json!({"timeperiod_type": 0, "start_date": NOW}),
            "timeperiods[1].period is required for timeperiod_type 0 (one time)",
        ),
        (
            json!({"timeperiod_type": 0, "period": 300}),
            "timeperiods[1].start_date is required for timeperiod_type 0 (one time)",
        ),
        (
            json!({"timeperiod_type": 0, "start_date": NOW, "period": 299}),
            "timeperiods[1].period must be an integer between 300 and 86399940 seconds, got 299",
        ),
        (
            json!({"timeperiod_type": 0, "start_date": NOW, "period": 86_400_000}),
            "timeperiods[1].period must be an integer between 300 and 86399940 seconds, got 86400000",
        ),
        (
            json!({"timeperiod_type": 0, "start_date": "2027-01-15 10:00", "period": 300}),
            "timeperiods[1].start_date \"2027-01-15 10:00\" has no time zone; add Z (UTC) or an offset such as +02:00",
        ),
        (
            json!({"timeperiod_type": 0, "start_date": NOW, "period": 300, "every": 1, "day": 2}),
            "timeperiods[1]: day, every are not allowed for timeperiod_type 0 (one time); it takes: timeperiod_type, start_date, period",
        ),
        (
            json!({"timeperiod_type": 2, "every": 1, "start_time": 0, "period": 300, "start_date": NOW}),
            "timeperiods[1]: start_date is not allowed for timeperiod_type 2 (daily); it takes: timeperiod_type, every, start_time, period",
        ),
        (
            json!({"timeperiod_type": 2, "start_time": 0, "period": 300}),
            "timeperiods[1].every is required for timeperiod_type 2 (daily)",
        ),
        (
            json!({"timeperiod_type": 2, "every": 0, "start_time": 0, "period": 300}),
            "timeperiods[1].every must be an integer between 1 and 999 days, got 0",
        ),
        (
            json!({"timeperiod_type": 2, "every": 1000, "start_time": 0, "period": 300}),
            "timeperiods[1].every must be an integer between 1 and 999 days, got 1000",
        ),
        (
            json!({"timeperiod_type": 3, "every": 100, "dayofweek": 1, "start_time": 0, "period": 300}),
            "timeperiods[1].every must be an integer between 1 and 99 weeks, got 100",
        ),
        (
            json!({"timeperiod_type": 2, "every": 1, "start_time": 86_399, "period": 300}),
            "timeperiods[1].start_time must be the time of day as seconds since midnight (0-86340) or \"HH:MM\" (00:00-23:59), got 86399",
        ),
        (
            json!({"timeperiod_type": 2, "every": 1, "start_time": "24:00", "period": 300}),
            "timeperiods[1].start_time must be the time of day as seconds since midnight (0-86340) or \"HH:MM\" (00:00-23:59), got \"24:00\"",
        ),
        (
            json!({"timeperiod_type": 3, "every": 1, "start_time": 0, "period": 300}),
            "timeperiods[1].dayofweek is required for timeperiod_type 3 (weekly)",
        ),
        (
            json!({"timeperiod_type": 3, "every": 1, "dayofweek": 128, "start_time": 0, "period": 300}),
            "timeperiods[1].dayofweek must be an integer between 1 and 127 (bitmask: 1 Monday .. 64 Sunday), got 128",
        ),
        (
            json!({"timeperiod_type": 3, "every": 1, "dayofweek": 1, "day": 1, "start_time": 0, "period": 300}),
            "timeperiods[1]: day is not allowed for timeperiod_type 3 (weekly); it takes: timeperiod_type, every, dayofweek, start_time, period",
        ),
        (
            json!({"timeperiod_type": 4, "day": 1, "start_time": 0, "period": 300}),
            "timeperiods[1].month is required for timeperiod_type 4 (monthly)",
        ),
        (
            json!({"timeperiod_type": 4, "month": 4096, "day": 1, "start_time": 0, "period": 300}),
            "timeperiods[1].month must be an integer between 1 and 4095 (bitmask: 1 January .. 2048 December), got 4096",
        ),
        (
            json!({"timeperiod_type": 4, "month": 1, "day": 32, "start_time": 0, "period": 300}),
            "timeperiods[1].day must be an integer between 1 and 31, got 32",
        ),
        (
            json!({"timeperiod_type": 4, "month": 1, "start_time": 0, "period": 300}),
            "timeperiods[1]: a monthly period needs either day (day of the month) or dayofweek (with every: which week)",
        ),
        (
            json!({"timeperiod_type": 4, "month": 1, "day": 1, "dayofweek": 1, "start_time": 0, "period": 300}),
            "timeperiods[1]: day and dayofweek cannot both be given; use day for a day of the month, or dayofweek with every for a weekday of a week",
        ),
        (
            json!({"timeperiod_type": 4, "month": 1, "day": 1, "every": 2, "start_time": 0, "period": 300}),
            "timeperiods[1].every is only allowed with dayofweek in a monthly period (it picks the week)",
        ),
        (
            json!({"timeperiod_type": 4, "month": 1, "dayofweek": 1, "every": 6, "start_time": 0, "period": 300}),
            "timeperiods[1].every must be an integer between 1 and 5 (1st-4th week, 5 = last), got 6",
        ),
    ];
    for (period, message) in cases {
        assert_eq!(period_error(period), message);
    }
}

#[test]
fn tag_errors_name_the_path() {
    let cases = [
        (
            json!([{"tag": "a"}, "b"]),
            "tags[1] must be an object {tag, operator, value}, got \"b\"",
        ),
        (json!([{"value": "x"}]), "tags[0].tag is required"),
        (json!([{"tag": ""}]), "tags[0].tag must not be empty"),
        (json!([{"tag": 5}]), "tags[0].tag must be a string, got 5"),
        (
            json!([{"tag": "t".repeat(256)}]),
            "tags[0].tag must be at most 255 characters long",
        ),
        (
            json!([{"tag": "a", "value": "v".repeat(256)}]),
            "tags[0].value must be at most 255 characters long",
        ),
        (
            json!([{"tag": "a", "operator": 1}]),
            "tags[0].operator must be 0 (equals) or 2 (contains), got 1",
        ),
        (
            json!([{"tag": "a", "op": 0}]),
            "tags[0].op is not allowed; a tag has: tag, operator, value",
        ),
        (
            json!([{"tag": "a"}, {"tag": "a", "operator": 2, "value": ""}]),
            "tags[1] repeats tags[0] (the same tag, operator and value)",
        ),
        (json!([]), "tags must not be empty"),
    ];
    for (tags, message) in cases {
        assert_eq!(
            fail("maintenance_create", create(json!({"tags": tags}))),
            message
        );
    }
}

#[test]
fn write_schemas_describe_every_property() {
    for def in crate::catalog::all_tools().filter(|t| t.is_write()) {
        let s = Value::Object(schema::input_schema(def, V70));
        assert_eq!(s["additionalProperties"], false, "{}", def.name);
        for (name, property) in s["properties"].as_object().unwrap() {
            let text = property["description"].as_str().unwrap_or("");
            assert!(text.len() > 10, "{}.{name} has no description", def.name);
        }
    }
    let s = Value::Object(schema::input_schema(
        find("maintenance_create").unwrap(),
        V70,
    ));
    assert_eq!(
        s["required"],
        json!(["name", "active_since", "active_till"])
    );
    assert_eq!(s["properties"]["maintenance_type"]["enum"], json!([0, 1]));
    assert!(
        s["properties"]["maintenance_type"]["description"]
            .as_str()
            .unwrap()
            .contains("1 = without data collection")
    );
    assert_eq!(s["properties"]["tags_evaltype"]["enum"], json!([0, 2]));
    assert_eq!(
        s["properties"]["active_since"]["anyOf"][1]["format"],
        "date-time"
    );
    let period = &s["properties"]["timeperiods"]["items"];
    assert_eq!(
        period["properties"]["timeperiod_type"]["enum"],
        json!([0, 2, 3, 4])
    );
    assert_eq!(period["required"], json!(["timeperiod_type", "period"]));
    assert_eq!(
        s["properties"]["tags"]["items"]["properties"]["operator"]["enum"],
        json!([0, 2])
    );
    assert_eq!(s["properties"]["hostids"]["minItems"], 1);
    let u = Value::Object(schema::input_schema(
        find("maintenance_update").unwrap(),
        V70,
    ));
    assert_eq!(u["required"], json!(["maintenanceid"]));
    assert_eq!(u["properties"]["hostids"]["minItems"], 0);
    assert_eq!(u["properties"]["tags"]["minItems"], 0);
    assert_eq!(u["properties"]["timeperiods"]["minItems"], 1);
    let p = Value::Object(schema::input_schema(
        find("problem_change_severity").unwrap(),
        V70,
    ));
    assert_eq!(p["required"], json!(["eventids", "severity"]));
    assert_eq!(p["properties"]["severity"]["maximum"], 5);
    let a = Value::Object(schema::input_schema(find("problem_annotate").unwrap(), V70));
    assert_eq!(a["required"], json!(["eventids", "message"]));
    assert_eq!(a["properties"]["message"]["maxLength"], 2048);
}
