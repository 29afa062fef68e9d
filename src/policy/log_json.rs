//! A policy's result as the decision log writes it: the bytes regorus' own `Serialize`
//! writes, with integers written directly. regorus formats every number to a string and
//! parses that back into a `serde_json::Number` before writing it, and a result carries
//! several (`max_limit`, `rate`, `history`).

use regorus::Value;
use serde::ser::{Serialize, SerializeMap, Serializer};

/// `value` serialized as regorus serializes it.
pub(super) struct RegoJson<'a>(pub(super) &'a Value);

impl Serialize for RegoJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            // regorus writes -0.0 as a float: left to it, as any number not an integer.
            Value::Number(n) if !n.as_f64().is_some_and(|f| f == 0.0 && f.is_sign_negative()) => {
                match (n.as_u64(), n.as_i64()) {
                    (Some(u), _) => serializer.serialize_u64(u),
                    (None, Some(i)) => serializer.serialize_i64(i),
                    (None, None) => self.0.serialize(serializer),
                }
            }
            Value::Array(items) => serializer.collect_seq(items.iter().map(RegoJson)),
            Value::Set(items) => serializer.collect_seq(items.iter_sorted().map(RegoJson)),
            // regorus turns other keys into their JSON text: left to it.
            Value::Object(fields) if fields.keys().all(|k| matches!(k, Value::String(_))) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (key, value) in fields.iter_sorted() {
                    map.serialize_entry(key, &RegoJson(value))?;
                }
                map.end()
            }
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use regorus::Value;

    use super::RegoJson;

    fn same(value: &Value) -> String {
        let ours = serde_json::to_string(&RegoJson(value)).expect("ours");
        assert_eq!(ours, serde_json::to_string(value).expect("regorus"));
        ours
    }

    #[test]
    fn results_are_written_as_regorus_writes_them() {
        let json = r#"{"allow": true, "approval": "none", "max_limit": 1000, "reasons": ["a \"quoted\" reason", "ä"],
            "rate": {"calls": 10000, "per_seconds": 1}, "neg": -7, "float": 0.5, "whole_float": 2.0,
            "big": 18446744073709551615, "huge": 1e300, "tiny": -1e-300, "min": -9223372036854775808,
            "nested": [[], {}, [1, [2.5, null]], {"z": 1, "a": 2}], "null": null}"#;
        let value = Value::from_json_str(json).expect("json");
        let written = same(&value);
        assert!(written.contains(r#""max_limit":1000"#), "{written}");
        assert!(written.contains(r#""neg":-7"#), "{written}");
        for number in [
            Value::from(-0.0f64),
            Value::from(0.0f64),
            Value::from(f64::NAN),
            Value::from(f64::INFINITY),
            Value::from(1e19f64),
            Value::from(-1e19f64),
            Value::from(u128::MAX),
            Value::from(i128::MIN),
            Value::from(u64::MAX),
            Value::from(i64::MIN),
        ] {
            same(&number);
        }
    }

    #[test]
    fn sets_undefined_and_non_string_keys_are_written_as_regorus_writes_them() {
        let mut set = Value::new_set();
        let mut object = Value::new_object();
        {
            let items = set.as_set_mut().expect("set");
            items.insert(Value::from(3u64));
            items.insert(Value::from("b"));
            items.insert(Value::from(-1.5f64));
            let fields = object.as_object_mut().expect("object");
            fields.insert(Value::from(2u64), Value::from("two"));
            fields.insert(Value::from("k"), set.clone());
        }
        let mut outer = Value::new_object();
        {
            let fields = outer.as_object_mut().expect("object");
            fields.insert(Value::from("set"), set.clone());
            fields.insert(Value::from("keys"), object.clone());
            fields.insert(Value::from("undefined"), Value::Undefined);
        }
        same(&set);
        same(&object);
        let written = same(&outer);
        assert!(written.contains("<undefined>"), "{written}");
    }
}
