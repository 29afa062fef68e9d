//! JSON in which no object gives a key twice. serde_json and regorus keep the last of two
//! values under one key; in `data.json`, a file often merged or templated, the second copy
//! of a list could replace a restrictive first one without anybody seeing it.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Checks that no object in `text` (one JSON value) gives a key twice; the error names the
/// key and where (serde_json's line and column).
pub(crate) fn check(text: &str) -> Result<(), String> {
    let mut reader = serde_json::Deserializer::from_str(text);
    Unique::deserialize(&mut reader)
        .and_then(|Unique| reader.end())
        .map_err(|error| error.to_string())
}

/// Any JSON value, read only to check its objects' keys.
struct Unique;

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueVisitor)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Unique;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                return Err(de::Error::custom(format!(
                    "the key {key:?} is given twice in one object"
                )));
            }
            map.next_value::<Unique>()?;
            seen.insert(key);
        }
        Ok(Unique)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
        while seq.next_element::<Unique>()?.is_some() {}
        Ok(Unique)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_str<E>(self, _: &str) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_unit<E>(self) -> Result<Unique, E> {
        Ok(Unique)
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn a_key_given_twice_is_named() {
        assert!(check(r#"{"a": {"b": [1, {"c": 2}], "d": null}, "e": "x"}"#).is_ok());
        assert!(
            check(r#"{"a": 1, "b": {"a": 2}}"#).is_ok(),
            "one per object"
        );
        let nested = check(
            r#"{"four_eyes": {"approver_usrgrps": ["Admins"],
                                              "approver_usrgrps": []}}"#,
        );
        let error = nested.expect_err("twice");
        assert!(
            error.contains("\"approver_usrgrps\" is given twice") && error.contains("line 2"),
            "{error}"
        );
        // Escapes spell the same key.
        assert!(check(r#"{"ab": 1, "a\u0062": 2}"#).is_err());
        assert!(check(r#"[{"x": 1}, {"x": 1, "x": 1}]"#).is_err());
        assert!(check(r#"{"a": 1} trailing"#).is_err());
    }
}
