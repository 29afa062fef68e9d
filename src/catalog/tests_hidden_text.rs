//! Text arguments with bidirectional controls or invisible format characters are refused,
//! naming the argument (and the field inside it), the character and its position.

use serde_json::json;

use crate::catalog::tests_validation::{V70, create, fail};
use crate::catalog::{args, find};

const WHY: &str = "bidirectional and invisible format characters are not accepted";

#[test]
fn hidden_format_characters_are_refused_where_they_are() {
    let cases = [
        (
            "maintenance_create",
            create(json!({"name": "night \u{202E}tnemecalper"})),
            "name contains U+202E at character 6 (counting from 0)",
        ),
        (
            "maintenance_create",
            create(json!({"description": "\u{200B}"})),
            "description contains U+200B at character 0",
        ),
        (
            "maintenance_create",
            create(json!({"tags": [{"tag": "env"}, {"tag": "x", "value": "a\u{2067}b"}]})),
            "tags[1].value contains U+2067 at character 1",
        ),
        (
            "problem_acknowledge",
            json!({"eventids": ["1"], "message": "ok\u{FEFF}"}),
            "message contains U+FEFF at character 2",
        ),
        (
            "host_get",
            json!({"search": "web\u{2066}"}),
            "search contains U+2066 at character 3",
        ),
    ];
    for (tool, raw, expected) in cases {
        let message = fail(tool, raw);
        assert!(message.starts_with(expected), "{tool}: {message}");
        assert!(message.contains(WHY), "{tool}: {message}");
    }
}

#[test]
fn visible_non_ascii_text_is_accepted() {
    let def = find("maintenance_create").unwrap();
    let raw = create(json!({"name": "café 🚀 Wartung", "description": "née\nzweite Zeile"}));
    assert!(args::validate(def, raw.as_object(), V70, super::tests_validation::NOW).is_ok());
}

/// Zabbix on PostgreSQL escapes text with libpq, which stops at a NUL: a name, search or
/// filter would be looked up, and a message stored, as the text before it, not the text
/// the policy was shown. Refused in every string, naming where.
#[test]
fn a_nul_is_refused_where_it_is() {
    let cases = [
        (
            "hostgroup_get",
            json!({"names": ["MCP/Linux servers", "MCP/Databases\u{0}x"]}),
            "names[1] contains U+0000 at character 13 (counting from 0)",
        ),
        (
            "macro_get",
            json!({"global": true, "macro_names": ["{$SECRET}\u{0}"]}),
            "macro_names[0] contains U+0000 at character 9",
        ),
        (
            "host_get",
            json!({"search": "\u{0}"}),
            "search contains U+0000 at character 0",
        ),
        (
            "problem_annotate",
            json!({"eventids": ["1"], "message": "ok\u{0} CHG-1234"}),
            "message contains U+0000 at character 2",
        ),
        (
            "maintenance_create",
            create(json!({"tags": [{"tag": "env", "value": "\u{0}prod"}]})),
            "tags[0].value contains U+0000 at character 0",
        ),
        (
            "maintenance_create",
            create(json!({"name": "a\u{0}b\u{202E}"})),
            "name contains U+0000 at character 1",
        ),
    ];
    for (tool, raw, expected) in cases {
        let message = fail(tool, raw);
        assert!(message.starts_with(expected), "{tool}: {message}");
        assert!(
            message.contains("Zabbix cuts text at a NUL"),
            "{tool}: {message}"
        );
    }
    // Other control characters mean what they are to Zabbix: a tab or a newline stays.
    let def = find("problem_annotate").unwrap();
    let raw = json!({"eventids": ["1"], "message": "line 1\nline\t2\u{1b}"});
    assert!(args::validate(def, raw.as_object(), V70, super::tests_validation::NOW).is_ok());
}
