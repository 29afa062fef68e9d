//! Zabbix's read records kept as spans of its answer: each record's members are found
//! without building a value tree, shaped (select keys renamed per version, the resource
//! `uri` added) and written straight into the response text. Values keep Zabbix's text.
//!
//! Member order follows what the value-tree path did (serde_json's ordered map): a repeated
//! key keeps its first place with the last value; a renamed key moves to the end, the last
//! member taking its place (`swap_remove`); `uri` is replaced in place or appended.

use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ops::Range;

use crate::catalog::{ResourceKind, Select};
use crate::zabbix::ZabbixVersion;
use crate::zabbix::raw;

/// How many members a record may have before its names are indexed instead of searched.
const SEARCHED: usize = 64;

/// What a read does to each record: the version's select keys renamed to the tool's, the
/// record's resource `uri` added.
#[derive(Debug, Clone, Copy)]
pub struct Shaping<'s> {
    pub selects: &'s [Select],
    pub id_field: &'s str,
    pub resource: Option<ResourceKind>,
    pub version: ZabbixVersion,
}

/// Writes a read's records one after another, each shaped. The members of the record being
/// written are kept in one buffer that serves every record of the read: one allocation per
/// read instead of one per record (and another when its `uri` made it grow).
#[derive(Debug, Default)]
pub struct Records<'a> {
    members: Vec<Member<'a>>,
    /// The answer's text, which the members' spans index.
    body: &'a str,
}

#[derive(Debug)]
struct Member<'a> {
    key: Key,
    /// The name the key spells, as bytes ([`raw::Member::name`]).
    name: Cow<'a, [u8]>,
    value: MemberValue,
}

/// How a member's key is written.
#[derive(Debug)]
enum Key {
    /// As Zabbix wrote it, quotes included: its place in the body.
    Zabbix(Range<usize>),
    /// One of ours (a renamed select, `uri`): plain ASCII, written between quotes.
    Ours(&'static str),
}

/// How a member's value is written.
#[derive(Debug, Clone)]
enum MemberValue {
    /// As Zabbix wrote it: the place of its JSON text in the body.
    Zabbix(Range<usize>),
    /// The record's resource URI, written from the id's JSON text when the record is: no
    /// text of its own to allocate per record.
    Uri(ResourceKind, Range<usize>),
}

impl<'a> Records<'a> {
    /// Appends the JSON text of `element` (an element of Zabbix's result,
    /// [`raw::RawReply::elements`]), shaped if it is an object.
    pub fn write(&mut self, element: raw::Element<'a>, shaping: &Shaping<'_>, out: &mut String) {
        match element {
            raw::Element::Object(pairs) => {
                self.read_members(pairs);
                self.shape(shaping);
                self.write_members(out);
            }
            raw::Element::Other(text) => out.push_str(text),
        }
    }

    fn read_members(&mut self, pairs: raw::Members<'a>) {
        self.body = pairs.text();
        let members = &mut self.members;
        members.clear();
        // A bit per name seen: Zabbix does not repeat keys, so earlier members are searched
        // for a name only when its bit is already set (a repeat, or two names sharing it).
        // Past `SEARCHED` members every bit is set and each search would read them all, so
        // a record that wide (none of Zabbix's is) is indexed instead: one such record of
        // 160,000 members held the runtime's one thread for 17 s (the scan now refuses a
        // record past 256 members).
        let mut seen = 0u64;
        let mut index: Option<HashMap<Cow<'a, [u8]>, usize>> = None;
        for pair in pairs {
            let name = pair.name();
            let earlier = match &mut index {
                Some(index) => match index.entry(name.clone()) {
                    Entry::Occupied(at) => Some(*at.get()),
                    Entry::Vacant(slot) => {
                        slot.insert(members.len());
                        None
                    }
                },
                None => {
                    let bit = name_bit(&name);
                    let earlier = match seen & bit {
                        0 => None,
                        _ => members.iter().position(|m| m.name == name),
                    };
                    seen |= bit;
                    earlier
                }
            };
            match earlier.and_then(|at| members.get_mut(at)) {
                Some(member) => member.value = MemberValue::Zabbix(pair.value_span()),
                None => members.push(Member {
                    key: Key::Zabbix(pair.key_span()),
                    name,
                    value: MemberValue::Zabbix(pair.value_span()),
                }),
            }
            if index.is_none() && members.len() == SEARCHED {
                let names = members.iter().enumerate();
                index = Some(names.map(|(at, m)| (m.name.clone(), at)).collect());
            }
        }
    }

    /// Renames the version's select keys to the tool's and adds the record's `uri`.
    fn shape(&mut self, shaping: &Shaping<'_>) {
        let members = &mut self.members;
        for select in shaping.selects {
            if let Some((from, to)) = select.param.result_keys(shaping.version)
                && let Some(at) = members.iter().position(|m| *m.name == *from.as_bytes())
            {
                let moved = members.swap_remove(at);
                insert(members, to, moved.value);
            }
        }
        let body = self.body.as_bytes();
        if let Some(kind) = shaping.resource
            && let Some(id) = members.iter().find_map(|m| match &m.value {
                MemberValue::Zabbix(id)
                    if *m.name == *shaping.id_field.as_bytes()
                        && body.get(id.start) == Some(&b'"') =>
                {
                    Some(id.clone())
                }
                _ => None,
            })
        {
            insert(members, "uri", MemberValue::Uri(kind, id));
        }
    }

    /// Writes the members between braces. Members as Zabbix wrote them, one right after
    /// another in its text (one comma between), are copied as one piece of it: the same
    /// bytes as member by member, a copy per run instead of four per member.
    fn write_members(&self, out: &mut String) {
        out.push('{');
        let mut run: Option<Range<usize>> = None;
        let mut first = true;
        for member in &self.members {
            if let Some(span) = member.compact() {
                match &mut run {
                    Some(run) if run.end + 1 == span.start => run.end = span.end,
                    _ => self.flush(run.replace(span), &mut first, out),
                }
                continue;
            }
            self.flush(run.take(), &mut first, out);
            if !std::mem::take(&mut first) {
                out.push(',');
            }
            match &member.key {
                Key::Zabbix(quoted) => out.push_str(self.text(quoted)),
                Key::Ours(name) => {
                    out.push('"');
                    out.push_str(name);
                    out.push('"');
                }
            }
            out.push(':');
            match &member.value {
                MemberValue::Zabbix(text) => out.push_str(self.text(text)),
                MemberValue::Uri(kind, id) => push_uri_text(out, *kind, self.text(id)),
            }
        }
        self.flush(run, &mut first, out);
        out.push('}');
    }

    /// Writes a run of members as the body has them, after a comma unless it is `first`.
    fn flush(&self, run: Option<Range<usize>>, first: &mut bool, out: &mut String) {
        if let Some(run) = run {
            if !std::mem::take(first) {
                out.push(',');
            }
            out.push_str(self.text(&run));
        }
    }

    /// The body's text at `span`: JSON text the scan found there, so never empty.
    fn text(&self, span: &Range<usize>) -> &'a str {
        self.body.get(span.clone()).unwrap_or("null")
    }
}

impl Member<'_> {
    /// Where `"key":value` lies in the body while the member is as Zabbix wrote it there,
    /// with only the colon between (Zabbix writes compact JSON). A renamed key, the `uri`
    /// or a repeat's later value (never right after the first key) is not.
    fn compact(&self) -> Option<Range<usize>> {
        match (&self.key, &self.value) {
            (Key::Zabbix(key), MemberValue::Zabbix(value)) if key.end + 1 == value.start => {
                Some(key.start..value.end)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
impl Shaping<'_> {
    /// No select renamed, no `uri` added: records written as Zabbix sent them.
    pub fn none() -> Shaping<'static> {
        Shaping {
            selects: &[],
            id_field: "",
            resource: None,
            version: ZabbixVersion::new(7, 0, 0),
        }
    }
}

/// One of 64 bits, by a name's length and last byte: the keys of one Zabbix object mostly
/// differ in one or the other.
fn name_bit(name: &[u8]) -> u64 {
    let last = name.last().copied().map_or(0, usize::from);
    1 << (name.len().wrapping_mul(7).wrapping_add(last) % 64)
}

/// Sets `name` to `value`: in place if present, else at the end.
fn insert(members: &mut Vec<Member<'_>>, name: &'static str, value: MemberValue) {
    match members.iter_mut().find(|m| *m.name == *name.as_bytes()) {
        Some(member) => member.value = value,
        None => members.push(Member {
            key: Key::Ours(name),
            name: Cow::Borrowed(name.as_bytes()),
            value,
        }),
    }
}

/// Appends the JSON text of the resource URI for `id` (a JSON string's text). An id without
/// escapes is copied as it is: serde_json would write it unchanged, as a JSON string
/// holds no raw quote or control character. One with escapes is decoded and written again.
fn push_uri_text(out: &mut String, kind: ResourceKind, id: &str) {
    match raw::unquote(id) {
        Cow::Borrowed(plain) => {
            out.push('"');
            kind.push_uri(out, plain);
            out.push('"');
        }
        // A String always serializes.
        Cow::Owned(decoded) => {
            out.push_str(&serde_json::to_string(&kind.uri(&decoded)).unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Records, Shaping, push_uri_text};
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
        let compact =
            serde_json::to_string(&serde_json::from_str::<Value>(answer).unwrap()).unwrap();
        same_text(&compact);
    }

    /// Runs of members copied whole read as member by member: whitespace at some joints
    /// (never inside a value, so serde_json's compact text is still the expected one),
    /// renamed selects, a `uri` replaced in place, repeated keys. (An escaped key is
    /// written as Zabbix wrote it, where serde_json writes it decoded: not here.)
    #[test]
    fn runs_of_members_read_as_member_by_member() {
        for answer in [
            r#"[{"hostid":"1","host":"a","name":"b"}]"#,
            r#"[{"hostid" :"1","host":"a", "name":"b","status":"0"},{"a":1 ,"b":2},{ "c":3 }]"#,
            r#"[{"hostid":"1","hostgroups":[],"host":"a","groups":[],"tags":[],"uri":"x","host":"c","z":0}]"#,
            r#"[{"a":1,"b":2},{"a": 1,"b" : 2,"c":3},{},{"xy":1,"w":3,"xy":2,"v":4}]"#,
            r#"[{"uri":1,"hostid":"5","groups":[],"hostgroups":[]},{"hostid":"6"}]"#,
        ] {
            same_text(answer);
        }
    }

    /// Writes each record of `answer` through one writer and compares it with the value
    /// path's text, for both API versions.
    fn same_text(answer: &str) {
        for version in [ZabbixVersion::new(6, 0, 14), ZabbixVersion::new(7, 0, 22)] {
            let tool = catalog::find("host_get").unwrap();
            let query = tool.query().unwrap();
            let arguments = args::validate(tool, None, version, 1_000_000).unwrap();
            let shape = params::shape(query, &arguments);
            let resource = query.resource.as_ref().map(|r| r.kind);

            let reply = raw::reply_of(answer);
            let shaping = Shaping {
                selects: query.selects,
                id_field: shape.id_field,
                resource,
                version,
            };
            // One writer for all: a record must not keep anything of the one before.
            let mut records = Records::default();
            let mut values: Vec<Value> = serde_json::from_str(answer).unwrap();
            for (element, value) in reply.elements().unwrap().zip(&mut values) {
                params::shape_record(value, query.selects, shape.id_field, resource, version);
                let mut text = String::new();
                records.write(element, &shaping, &mut text);
                assert_eq!(
                    text,
                    serde_json::to_string(value).unwrap(),
                    "{version} {answer}"
                );
            }
        }
    }

    /// Names sharing a filter bit stay apart; a repeat keeps its first place and its last
    /// value, also after a name with the same bit, as serde_json's ordered map does.
    #[test]
    fn repeated_keys_as_serde_json_reads_them() {
        assert_eq!(super::name_bit(b"ab"), super::name_bit(b"cb"));
        for answer in [
            r#"[{"ab":1,"cb":2,"ab":3}]"#,
            r#"[{"ab":1,"x":[1],"cb":2,"cb":{"a":4},"ab":3,"x":"y"}]"#,
        ] {
            let reply = raw::reply_of(answer);
            let element = reply.elements().unwrap().next().unwrap();
            let mut text = String::new();
            Records::default().write(element, &Shaping::none(), &mut text);
            let value: Vec<Value> = serde_json::from_str(answer).unwrap();
            assert_eq!(text, serde_json::to_string(&value[0]).unwrap(), "{answer}");
        }
    }

    /// Past `SEARCHED` members names are indexed, with the same outcome: repeats of names
    /// before and after the switch keep their first place and last value, through the
    /// host_get shaping too (renamed selects, `uri`).
    #[test]
    fn wide_records_as_serde_json_reads_them() {
        let mut members: Vec<String> = (0..240).map(|n| format!("\"k{n}\":{n}")).collect();
        for (at, repeat) in [
            (10, "\"k3\":-3"),
            (200, "\"k100\":-100"),
            (230, "\"k239\":-239"),
        ] {
            members.insert(at, repeat.to_owned());
        }
        members.push(r#""hostid":"7","groups":[],"hostgroups":[1],"k64":"last""#.to_owned());
        let answer = format!("[{{{}}}]", members.join(","));
        let reply = raw::reply_of(&answer);
        let element = reply.elements().unwrap().next().unwrap();
        let mut text = String::new();
        Records::default().write(element, &Shaping::none(), &mut text);
        let value: Vec<Value> = serde_json::from_str(&answer).unwrap();
        assert_eq!(text, serde_json::to_string(&value[0]).unwrap());
        same_text(&answer);
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
                let mut text = String::from("[");
                push_uri_text(&mut text, kind, id);
                assert_eq!(text[1..], expected, "{id}");
            }
        }
    }
}
