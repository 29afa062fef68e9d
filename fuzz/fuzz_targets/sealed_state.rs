//! The sealed request state decoder (2026-07-28 input-required round trip): arbitrary
//! state strings must be refused with an error, never panic and never open; a state we
//! sealed opens only for the token it was sealed for.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zabbix_mcp_guard::mcp::approval::{Approver, Sealed};

const KEY: &[u8] = b"fuzz-seal-key-of-at-least-32-bytes!!";

fuzz_target!(|data: &[u8]| {
    let Ok(approver) = Approver::new(Some(KEY)) else {
        return;
    };
    let text = String::from_utf8_lossy(data);
    assert!(
        approver.open(&text, "token-a").is_err(),
        "an arbitrary state opened: {text:?}"
    );
    let sealed = Sealed {
        nonce: "n".into(),
        tool: "problem_acknowledge".into(),
        decision_id: "d".into(),
        sha256: "s".into(),
        body: text.into_owned(),
    };
    if let Ok(state) = approver.seal(&sealed, "token-a") {
        let opened = approver.open(&state, "token-a").expect("own state opens");
        assert_eq!(opened.body, sealed.body);
        assert!(
            approver.open(&state, "token-b").is_err(),
            "opened for another token"
        );
    }
});
