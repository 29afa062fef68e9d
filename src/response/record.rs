//! Zabbix's read records kept as slices of its answer: each record's members are found
//! without building a value tree, shaped (select keys renamed per version, the resource
//! `uri` added) and written straight into the response text. Values keep Zabbix's text.
//!
//! Member order follows what the value-tree path did (serde_json's ordered map): a repeated
//! key keeps its first place with the last value; a renamed key moves to the end, the last
//! member taking its place (`swap_remove`); `uri` is replaced in place or appended.

use std::borrow::Cow;

use crate::catalog::{ResourceKind, Select};
use crate::zabbix::ZabbixVersion;
use crate::zabbix::raw;

/// One element of a read's result array.
#[derive(Debug)]
pub enum Record<'a> {
    /// An object's members, in order.
    Object(Vec<Member<'a>>),
    /// Anything else, kept as its text.
    Other(&'a str),
}

#[derive(Debug)]
pub struct Member<'a> {
    key: Key<'a>,
    name: Cow<'a, str>,
    /// The value's JSON text.
    value: Cow<'a, str>,
}

/// How a member's key is written.
#[derive(Debug)]
enum Key<'a> {
    /// As Zabbix wrote it, quotes included.
    Zabbix(&'a str),
    /// One of ours (a renamed select, `uri`): plain ASCII, written between quotes.
    Ours(&'static str),
}

impl<'a> Record<'a> {
    /// An element of Zabbix's result ([`raw::RawReply::elements`]).
    pub fn from_element(element: raw::Element<'a>) -> Record<'a> {
        match element {
            raw::Element::Object(pairs) => Record::from_members(pairs),
            raw::Element::Other(text) => Record::Other(text),
        }
    }

    fn from_members(pairs: raw::Members<'a>) -> Record<'a> {
        let mut members: Vec<Member<'a>> = Vec::with_capacity(pairs.len());
        // A bit per name seen: Zabbix does not repeat keys, so earlier members are searched
        // for a name only when its bit is already set (a repeat, or two names sharing it).
        let mut seen = 0u64;
        for (quoted, value) in pairs {
            let name = raw::unquote(quoted);
            let bit = name_bit(&name);
            let earlier = match seen & bit {
                0 => None,
                _ => members.iter_mut().find(|m| m.name == name),
            };
            seen |= bit;
            match earlier {
                Some(member) => member.value = Cow::Borrowed(value),
                None => members.push(Member {
                    key: Key::Zabbix(quoted),
                    name,
                    value: Cow::Borrowed(value),
                }),
            }
        }
        Record::Object(members)
    }

    /// Renames the version's select keys to the tool's and adds the record's `uri`.
    pub fn shape(
        &mut self,
        selects: &[Select],
        id_field: &str,
        resource: Option<ResourceKind>,
        version: ZabbixVersion,
    ) {
        let Record::Object(members) = self else {
            return;
        };
        for select in selects {
            if let Some((from, to)) = select.param.result_keys(version)
                && let Some(at) = members.iter().position(|m| m.name == from)
            {
                let moved = members.swap_remove(at);
                insert(members, to, moved.value);
            }
        }
        if let Some(kind) = resource
            && let Some(id) = members
                .iter()
                .find(|m| m.name == id_field && m.value.starts_with('"'))
                .map(|m| m.value.as_ref())
        {
            let uri = uri_text(kind, id);
            insert(members, "uri", Cow::Owned(uri));
        }
    }

    /// Appends the record's JSON text.
    pub fn write(&self, out: &mut String) {
        match self {
            Record::Other(text) => out.push_str(text),
            Record::Object(members) => {
                out.push('{');
                for (i, member) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    match member.key {
                        Key::Zabbix(quoted) => out.push_str(quoted),
                        Key::Ours(name) => {
                            out.push('"');
                            out.push_str(name);
                            out.push('"');
                        }
                    }
                    out.push(':');
                    out.push_str(&member.value);
                }
                out.push('}');
            }
        }
    }
}

/// One of 64 bits, by a name's length and last byte: the keys of one Zabbix object mostly
/// differ in one or the other.
fn name_bit(name: &str) -> u64 {
    let last = name.as_bytes().last().copied().map_or(0, usize::from);
    1 << (name.len().wrapping_mul(7).wrapping_add(last) % 64)
}

/// Sets `name` to `value`: in place if present, else at the end.
fn insert<'a>(members: &mut Vec<Member<'a>>, name: &'static str, value: Cow<'a, str>) {
    match members.iter_mut().find(|m| m.name == name) {
        Some(member) => member.value = value,
        None => members.push(Member {
            key: Key::Ours(name),
            name: Cow::Borrowed(name),
            value,
        }),
    }
}

/// The JSON text of the resource URI for `id` (a JSON string's text). An id without
/// escapes is copied as it is: serde_json would write it unchanged, as a JSON string
/// holds no raw quote or control character. One with escapes is decoded and written again.
fn uri_text(kind: ResourceKind, id: &str) -> String {
    match raw::unquote(id) {
        Cow::Borrowed(plain) => {
            let mut text = String::with_capacity(plain.len() + 32);
            text.push('"');
            kind.push_uri(&mut text, plain);
            text.push('"');
            text
        }
        // A String always serializes.
        Cow::Owned(decoded) => serde_json::to_string(&kind.uri(&decoded)).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Record, uri_text};
    use crate::catalog::ResourceKind;
    use crate::catalog::{self, args, params};
    use crate::zabbix::{ZabbixVersion, raw};
    use serde_json::Value;

    /// The raw path writes exactly what shaping a value tree and serializing it wrote.
    #[test]
    fn same_text_as_the_value_path() {
        let answer = r#"[{"hostid":"10084","host":"web-01","name":"Web 01","status":"0",
            "groups":[{"groupid":"2","name":"Linux servers"}],"hostgroups":[{"groupid":"4","name":"x\"y"}],
            "tags":[],"parentTemplates":[{"templateid":"10001","name":"Linux"}],"uri":"old",
            "status":"1","n":1.5,"é":"ü"},[1,2],"plain",{"hostid":7}]"#;
        for version in [ZabbixVersion::new(6, 0, 14), ZabbixVersion::new(7, 0, 22)] {
            let tool = catalog::find("host_get").unwrap();
            let query = tool.query().unwrap();
            let arguments = args::validate(tool, None, version, 1_000_000).unwrap();
            let shape = params::shape(query, &arguments);
            let resource = query.resource.as_ref().map(|r| r.kind);

            let compact =
                serde_json::to_string(&serde_json::from_str::<Value>(answer).unwrap()).unwrap();
            let reply = raw::reply_of(&compact);
            let mut records: Vec<Record> = reply
                .elements()
                .unwrap()
                .map(Record::from_element)
                .collect();
            let mut values: Vec<Value> = serde_json::from_str(answer).unwrap();
            for (record, value) in records.iter_mut().zip(&mut values) {
                record.shape(query.selects, shape.id_field, resource, version);
                params::shape_record(value, query.selects, shape.id_field, resource, version);
                let mut text = String::new();
                record.write(&mut text);
                assert_eq!(text, serde_json::to_string(value).unwrap(), "{version}");
            }
        }
    }

    /// Names sharing a filter bit stay apart; a repeat keeps its first place and its last
    /// value, also after a name with the same bit, as serde_json's ordered map does.
    #[test]
    fn repeated_keys_as_serde_json_reads_them() {
        assert_eq!(super::name_bit("ab"), super::name_bit("cb"));
        for answer in [
            r#"[{"ab":1,"cb":2,"ab":3}]"#,
            r#"[{"ab":1,"x":[1],"cb":2,"cb":{"a":4},"ab":3,"x":"y"}]"#,
        ] {
            let reply = raw::reply_of(answer);
            let record = reply.elements().unwrap().map(Record::from_element).next();
            let mut text = String::new();
            record.unwrap().write(&mut text);
            let value: Vec<Value> = serde_json::from_str(answer).unwrap();
            assert_eq!(text, serde_json::to_string(&value[0]).unwrap(), "{answer}");
        }
    }

    /// An id with or without escapes gives the URI text serde_json writes for it.
    #[test]
    fn uri_text_is_serde_json_text() {
        for id in [
            r#""10084""#,
            r#""10\u0030""#,
            r#""a\"b\\c""#,
            r#""é/ü""#,
            r#""""#,
        ] {
            let decoded: String = serde_json::from_str(id).unwrap();
            for kind in ResourceKind::ALL {
                let expected = serde_json::to_string(&kind.uri(&decoded)).unwrap();
                assert_eq!(uri_text(kind, id), expected, "{id}");
            }
        }
    }
}
