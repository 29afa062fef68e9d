//! A request's `params` written as JSON text while they are built. A read's params are
//! sent once and never looked at again: building a `serde_json::Value` object for them
//! (a hashed, ordered map per object, values cloned into it) and serializing it afterwards
//! was a twentieth of a stub call's instructions.

use serde::Serialize;

/// A complete JSON object: the only way to one is [`ObjectWriter::finish`].
#[derive(Debug)]
pub struct ParamsText(Vec<u8>);

/// Writes one JSON object, member by member, in the order they are given. Keys are not
/// checked for repeats: the catalog's tests hold each tool's keys distinct.
pub struct ObjectWriter {
    /// `{` and the members so far.
    out: Vec<u8>,
}

impl ParamsText {
    /// UTF-8: serde_json's output and our own punctuation.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

impl ObjectWriter {
    pub fn new() -> Self {
        let mut out = Vec::with_capacity(256);
        out.push(b'{');
        Self { out }
    }

    /// No member written yet.
    pub fn is_empty(&self) -> bool {
        self.out.len() == 1
    }

    /// Appends `"key":value`.
    pub fn member<T: Serialize + ?Sized>(
        &mut self,
        key: &str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        self.key(key)?;
        serde_json::to_writer(&mut self.out, value)
    }

    /// Appends `"key":` and the object `value` wrote.
    pub fn object(&mut self, key: &str, value: ParamsText) -> Result<(), serde_json::Error> {
        self.key(key)?;
        self.out.extend_from_slice(&value.0);
        Ok(())
    }

    pub fn finish(mut self) -> ParamsText {
        self.out.push(b'}');
        ParamsText(self.out)
    }

    fn key(&mut self, key: &str) -> Result<(), serde_json::Error> {
        if !self.is_empty() {
            self.out.push(b',');
        }
        serde_json::to_writer(&mut self.out, key)?;
        self.out.push(b':');
        Ok(())
    }
}

impl Default for ObjectWriter {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};

    use super::ObjectWriter;

    /// The text is serde_json's own for the same object built as a map.
    #[test]
    fn text_is_serde_json_text() {
        let mut inner = ObjectWriter::new();
        inner.member("name", "we\"b\\1\u{1}").unwrap();
        let mut outer = ObjectWriter::new();
        outer.member("output", &["hostid", "name"]).unwrap();
        outer.member("limit", &11).unwrap();
        outer.object("search", inner.finish()).unwrap();
        outer.member("ids", &json!(["1", 2, null])).unwrap();
        outer.member("k\u{e9}y", &true).unwrap();
        let mut map = Map::new();
        map.insert("output".into(), json!(["hostid", "name"]));
        map.insert("limit".into(), json!(11));
        map.insert("search".into(), json!({"name": "we\"b\\1\u{1}"}));
        map.insert("ids".into(), json!(["1", 2, null]));
        map.insert("k\u{e9}y".into(), json!(true));
        let text = Value::Object(map).to_string();
        assert_eq!(outer.finish().as_bytes(), text.as_bytes());
        assert_eq!(ObjectWriter::new().finish().as_bytes(), b"{}");
    }
}
