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
