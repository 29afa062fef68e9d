//! The method a request body names, read the way that fails closed: the limits that apply
//! to one method (`sessions`: only `initialize` creates a session; `listeners`: only
//! `subscriptions/listen` stays open) must apply to every body rmcp could read as it.

use std::borrow::Cow;

use serde::Deserialize;

/// The one member that decides: the rest of the body is skipped, not kept.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
}

/// Whether rmcp could read `body` as a request of `method`: false only for a well-formed
/// JSON object whose one `method` member (escapes decoded) names another, or that has none.
pub(crate) fn may_be(body: &[u8], method: &str) -> bool {
    !matches!(
        serde_json::from_slice::<Head<'_>>(body),
        Ok(Head { method: named }) if named.as_deref() != Some(method)
    )
}

#[cfg(test)]
mod tests {
    use super::may_be;

    #[test]
    fn only_a_well_formed_object_naming_another_method_is_another_method() {
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        assert!(may_be(init, "initialize"));
        assert!(!may_be(init, "subscriptions/listen"));
        assert!(may_be(br#"{"method":"initi\u0061lize"}"#, "initialize"));
        // A method given twice, a batch, or no JSON at all: it may be.
        assert!(may_be(
            br#"{"method":"ping","method":"initialize"}"#,
            "initialize"
        ));
        assert!(may_be(br#"[{"method":"initialize"}]"#, "initialize"));
        assert!(may_be(b"", "initialize"));
        // A response or an object without a method is none.
        assert!(!may_be(
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            "initialize"
        ));
        // Only the top level counts.
        assert!(!may_be(
            br#"{"method":"tools/call","params":{"method":"initialize"}}"#,
            "initialize"
        ));
    }
}
