//! A JSON value built from Zabbix's answer with a bound on how many values it holds. The
//! answers that are not read through the scan (identity, targets, writes, resources, the
//! approval page's sign-in) are built as a value tree, and a tree costs 50 to 150 bytes a
//! value where the text may spend two (`[{},{},…]`, `[0,0,…]`): a 15 MB answer to a
//! target lookup took a sidecar from 45 to 858 MB. The bound stops the tree where it goes
//! beyond, before it grows with the body.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// How many values (every array, object, member and scalar counts one) an answer read as a
/// tree may hold: some 30 MB of tree at most. A target lookup's answer holds 8 an event, 12
/// a host in one group (5 more a further group), 5 a host group; a write's one an ID; an
/// identity fewer than twenty.
pub(crate) const MAX_VALUES: usize = 200_000;

/// Why a text is not read as a value.
#[derive(Debug, thiserror::Error)]
pub enum BoundedError {
    #[error("the answer holds more than {0} values, more than any such call needs")]
    TooMany(usize),
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
}

/// `text` (one JSON value) as a value, if it holds at most `max` values.
pub(crate) fn value(text: &str, max: usize) -> Result<Value, BoundedError> {
    let (left, over) = (Cell::new(max), Cell::new(false));
    let mut reader = serde_json::Deserializer::from_str(text);
    let budget = Budget {
        left: &left,
        over: &over,
    };
    let read = budget
        .deserialize(&mut reader)
        .and_then(|value| reader.end().map(|()| value));
    match read {
        Ok(value) => Ok(value),
        // Said as the bound, not as the error of serde's it travelled in.
        Err(_) if over.get() => Err(BoundedError::TooMany(max)),
        Err(error) => Err(BoundedError::NotJson(error)),
    }
}

/// Builds a value as serde_json's own visitor does, taking one from `left` for each, and
/// setting `over` where none is left.
#[derive(Clone, Copy)]
struct Budget<'a> {
    left: &'a Cell<usize>,
    over: &'a Cell<bool>,
}

impl Budget<'_> {
    fn take<E: serde::de::Error>(self) -> Result<(), E> {
        match self.left.get().checked_sub(1) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.over.set(true);
                Err(E::custom("too many values"))
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for Budget<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Budget<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.take()?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.take()?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.take()?;
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.take()?;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.take()?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.take()?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.take()?;
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.take()?;
        let mut list = Vec::new();
        while let Some(element) = seq.next_element_seed(self)? {
            list.push(element);
        }
        Ok(Value::Array(list))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.take()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // The member's key and slot count, apart from its value.
            self.take()?;
            let value = map.next_value_seed(self)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{BoundedError, value};

    /// Within the bound, the value serde_json reads; past it, refused as too many.
    #[test]
    fn values_are_read_as_serde_json_reads_them_up_to_the_bound() {
        for text in [
            r#"{"eventids":["1","2"],"n":-3,"f":1.5,"t":true,"z":null}"#,
            r#"[{"hostid":"1","hostgroups":[{"groupid":"2","name":"A\u00e9\"/"}]}]"#,
            r#"{"a":1,"a":2}"#,
            "\"text\"",
            "[]",
        ] {
            let expected: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(value(text, 1000).unwrap(), expected, "{text}");
        }
        // Five values: the object, the member, the array and its two strings.
        let five = r#"{"eventids":["1","2"]}"#;
        assert_eq!(value(five, 5).unwrap(), json!({"eventids": ["1", "2"]}));
        assert!(matches!(value(five, 4), Err(BoundedError::TooMany(4))));
        let many = format!("[{}]", vec!["{}"; 1000].join(","));
        assert!(matches!(
            value(&many, 1000),
            Err(BoundedError::TooMany(1000))
        ));
        assert!(value(&many, 1001).is_ok());
    }

    #[test]
    fn what_is_not_json_is_said_so() {
        for text in ["[1,", "{\"a\":}", "[1] 2", ""] {
            assert!(
                matches!(value(text, 1000), Err(BoundedError::NotJson(_))),
                "{text}"
            );
        }
    }
}
