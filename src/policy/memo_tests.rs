use std::sync::Arc;

use regorus::Value;
use serde_json::value::to_raw_value;

use super::{PARSES, text, verdict};
use crate::policy::decision::Verdict;
use crate::policy::input::ToolKind;
use crate::policy::input::tests::sample_input;
use crate::policy::source::PolicySource;
use crate::policy::{PolicyEngine, PolicyMode};

/// The premise: the default policy hands every read the same shared object, so the memo
/// is what its reads meet (the parse and the text are kept, not made again).
#[test]
fn default_policy_reads_share_one_result_and_meet_the_memo() {
    let engine = PolicyEngine::load_or_deny_all(PolicySource::BuiltIn, PolicyMode::Enforce);
    let mut input = sample_input();
    input.tool.kind = ToolKind::Read;
    input.tool.name = "host_get".into();
    let first = engine.decide(&input);
    let parses = PARSES.with(std::cell::Cell::get);
    let second = engine.decide(&input);
    assert_eq!(
        PARSES.with(std::cell::Cell::get),
        parses,
        "the second read is not parsed"
    );
    assert!(first.allow && second.allow, "{first:?}");
    let (Value::Object(a), Value::Object(b)) = (&first.raw, &second.raw) else {
        panic!("results are objects: {:?}", first.raw);
    };
    assert!(Arc::ptr_eq(a, b), "the VM's literal is shared");
    let once = text(&first.raw, write).expect("text");
    let again = text(&second.raw, |_| panic!("written again")).expect("text");
    assert!(Arc::ptr_eq(&once, &again));
    assert!(
        once.get().starts_with(r#"{"allow":true,"#),
        "{}",
        once.get()
    );
}

/// regorus' own text of a value (the log writes integers the same way).
fn write(value: &Value) -> Result<Box<serde_json::value::RawValue>, serde_json::Error> {
    to_raw_value(value)
}

/// A kept verdict is only given back for the object it was parsed from and the kind it was
/// parsed for: a missing `approval` defaults by kind, and an equal object built apart is
/// parsed on its own.
#[test]
fn a_kept_verdict_answers_only_its_own_object_and_kind() {
    let object = Value::from_json_str(r#"{"allow": true, "max_limit": 7}"#).expect("json");
    let read = verdict(&object, ToolKind::Read).expect("read");
    assert_eq!(
        read,
        Verdict::parse(&object, ToolKind::Read).expect("parse")
    );
    let write = verdict(&object, ToolKind::Write).expect("write");
    assert_eq!(
        write,
        Verdict::parse(&object, ToolKind::Write).expect("parse")
    );
    assert_ne!(read.approval, write.approval, "defaults by kind");
    let other = Value::from_json_str(r#"{"allow": true, "max_limit": 7}"#).expect("json");
    assert_eq!(verdict(&other, ToolKind::Read).expect("read"), read);
    // A malformed result is refused the same way the second time.
    let bad = Value::from_json_str(r#"{"allow": "yes"}"#).expect("json");
    let first = verdict(&bad, ToolKind::Read).expect_err("not a boolean");
    assert_eq!(verdict(&bad, ToolKind::Read).expect_err("again"), first);
    // Not objects: parsed every time, never kept.
    assert!(verdict(&Value::Undefined, ToolKind::Read).is_err());
    assert!(text(&Value::Bool(true), |_| panic!("not kept")).is_none());
}

/// Another object gets its own text, not the last one's.
#[test]
fn a_kept_text_answers_only_its_own_object() {
    let a = Value::from_json_str(r#"{"allow": true}"#).expect("json");
    let b = Value::from_json_str(r#"{"allow": false, "reasons": ["no"]}"#).expect("json");
    assert_eq!(text(&a, write).expect("a").get(), r#"{"allow":true}"#);
    assert_eq!(
        text(&b, write).expect("b").get(),
        r#"{"allow":false,"reasons":["no"]}"#
    );
    assert_eq!(text(&a, write).expect("a").get(), r#"{"allow":true}"#);
}
