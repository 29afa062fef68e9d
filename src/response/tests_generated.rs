//! The raw read path against a serde_json reference on generated answers: text Zabbix's
//! data can hold (escapes, surrogate pairs, `\"`, multi-byte characters, each at every
//! offset of a 16-byte block or an 8-byte word), repeated and escaped keys, nested values,
//! whitespace between tokens. Each answer is scanned, its records shaped and written into
//! the envelope under random limits, and the text must read as serde_json's value path
//! builds it, within `MaxResponseSize`.

use serde_json::Value;

use super::{Shaping, TruncatedBy, envelope};
use crate::catalog::{self, args, params};
use crate::mutate::Mutations;
use crate::zabbix::{ZabbixVersion, raw};

/// Pieces of string text, as JSON writes them: plain runs come from `plain`.
const PIECES: &[&str] = &[
    r#"\""#,
    r"\\",
    r"\/",
    r"\n",
    r"\t",
    r"\u0000",
    r"\u001f",
    r"\u00e9",
    r"\u202e",
    r"\ud83d\ude00",
    r"\uDBFF\uDFFF",
    "é",
    "😀",
    "\u{2028}",
    "€",
    r#"\"},{\"hostid\":\"1\""#,
];

/// Keys of a host_get record, others, and escaped spellings of some.
const KEYS: &[&str] = &[
    "hostid",
    "host",
    "name",
    "groups",
    "hostgroups",
    "uri",
    "tags",
    "x",
    r"host\u0069d",
    r"n\u0061me",
    r"\u0075ri",
    "é",
];

struct Gen(Mutations);

impl Gen {
    fn below(&mut self, n: usize) -> usize {
        self.0.below(n)
    }

    fn ws(&mut self, out: &mut String) {
        if self.below(6) == 0 {
            out.push_str([" ", "\n", "\t ", "\r\n"][self.below(4)]);
        }
    }

    fn string(&mut self, out: &mut String) {
        out.push('"');
        for _ in 0..self.below(6) {
            if self.below(2) == 0 {
                let run = self.below(40);
                out.extend((0..run).map(|i| char::from(b'a' + (i % 26) as u8)));
            } else {
                out.push_str(PIECES[self.below(PIECES.len())]);
            }
        }
        out.push('"');
    }

    fn value(&mut self, out: &mut String, depth: usize) {
        match self.below(if depth > 3 { 4 } else { 7 }) {
            0 | 1 => self.string(out),
            2 => out.push_str(
                ["0", "-0", "1.5e3", "-12.25E-2", "123456789012345678901234"][self.below(5)],
            ),
            3 => out.push_str(["true", "false", "null"][self.below(3)]),
            4 => {
                out.push('[');
                for i in 0..self.below(4) {
                    if i > 0 {
                        out.push(',');
                    }
                    self.ws(out);
                    self.value(out, depth + 1);
                }
                out.push(']');
            }
            _ => self.object(out, depth + 1),
        }
    }

    fn object(&mut self, out: &mut String, depth: usize) {
        out.push('{');
        for i in 0..self.below(7) {
            if i > 0 {
                out.push(',');
            }
            self.ws(out);
            out.push('"');
            out.push_str(KEYS[self.below(KEYS.len())]);
            out.push('"');
            self.ws(out);
            out.push(':');
            self.ws(out);
            self.value(out, depth);
        }
        out.push('}');
    }

    /// A result array of records, mostly objects.
    fn result(&mut self) -> String {
        let mut out = String::from("[");
        for i in 0..self.below(8) {
            if i > 0 {
                out.push(',');
            }
            self.ws(&mut out);
            if self.below(8) == 0 {
                self.value(&mut out, 1);
            } else {
                self.object(&mut out, 1);
            }
        }
        out.push(']');
        out
    }
}

#[test]
fn generated_answers_read_as_serde_json_reads_them() {
    let mut generate = Gen(Mutations::new());
    let tool = catalog::find("host_get").unwrap();
    let query = tool.query().unwrap();
    let resource = query.resource.as_ref().map(|r| r.kind);
    // How often each ending came: [none, count, size].
    let mut endings = [0; 3];
    for n in 0..3000 {
        let result = generate.result();
        let version = [ZabbixVersion::new(6, 0, 14), ZabbixVersion::new(7, 0, 22)][n % 2];
        let arguments = args::validate(tool, None, version, 1_000_000).unwrap();
        let shape = params::shape(query, &arguments);
        let shaping = Shaping {
            selects: query.selects,
            id_field: shape.id_field,
            resource,
            version,
        };
        let reply = raw::reply_of(&result);
        let mut expected: Vec<Value> = serde_json::from_str(&result).unwrap();
        for value in &mut expected {
            if value.is_object() {
                params::shape_record(value, query.selects, shape.id_field, resource, version);
            }
        }
        let limit = 1 + generate.below(8) as u32;
        let max_size = 300 + generate.below(3000);
        let e = envelope(reply.elements().unwrap(), &shaping, limit, max_size);
        assert!(
            e.text.len() <= max_size,
            "{} > {max_size}: {result}",
            e.text.len()
        );
        let got: Value = serde_json::from_str(&e.text).unwrap_or_else(|e| panic!("{e}: {result}"));
        let records = got["results"].as_array().unwrap();
        assert_eq!(records.len(), e.count, "{result}");
        for (record, expected) in records.iter().zip(&expected) {
            assert_eq!(record.to_string(), expected.to_string(), "{result}");
        }
        let fits_all = e.count == expected.len().min(limit as usize);
        let ending = match e.truncated_by {
            None => fits_all && expected.len() <= limit as usize,
            Some(TruncatedBy::Count) => fits_all && expected.len() > limit as usize,
            Some(TruncatedBy::Size) => e.count < expected.len().min(limit as usize),
        };
        assert!(ending, "{:?}: {result}", e.truncated_by);
        endings[e.truncated_by.map_or(0, |by| 1 + by as usize)] += 1;
    }
    assert!(endings.iter().all(|&n| n > 300), "{endings:?}");
}
