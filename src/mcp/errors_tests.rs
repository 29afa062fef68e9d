//! The error codes, bodies and JSON-RPC errors every client reads.

use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};

use super::{ToolError, refusal, refusal_message};
use crate::server::guard::GuardError;
use crate::zabbix::{CallerError, Method, ZabbixError};

fn text_body(error: ToolError, id: Option<&str>) -> Value {
    let result = error.into_result(id);
    assert_eq!(result.is_error, Some(true));
    assert!(result.structured_content.is_none(), "no structured content");
    let text = &result.content[0].as_text().expect("a text block").text;
    serde_json::from_str(text).expect("the text block is JSON")
}

#[test]
fn tool_errors_are_text_bodies_without_structured_content() {
    let denied = ToolError::Denied {
        reasons: vec!["no".into()],
    };
    assert_eq!(
        text_body(denied, Some("d-1")),
        json!({"code": "denied", "message": "denied by policy: no",
               "data": {"reasons": ["no"]}, "decision_id": "d-1"})
    );
    let api = ToolError::Zabbix(ZabbixError::Api {
        code: -32602,
        message: "Invalid params.".into(),
        data: json!("x"),
    });
    let body = text_body(api, None);
    assert_eq!(body["code"], "zabbix_error");
    assert_eq!(
        body["data"],
        json!({"code": -32602, "message": "Invalid params.", "data": "x"})
    );
    assert!(body.get("decision_id").is_none());
}

#[test]
fn our_own_failures_are_internal_errors() {
    let ours = [
        ToolError::Zabbix(ZabbixError::Request(
            "the token is not a valid header value".into(),
        )),
        ToolError::NotAList {
            method: Method::HostGet,
        },
        ToolError::NoCaller,
        ToolError::TaskFailed,
    ];
    for error in ours {
        assert_eq!(error.code(), "internal_error", "{error}");
    }
    let theirs = [
        (
            ZabbixError::BadResponse("not JSON-RPC".into()),
            "upstream_unavailable",
        ),
        (ZabbixError::HttpStatus(502), "upstream_unavailable"),
        (
            ZabbixError::Timeout(Duration::from_secs(3)),
            "upstream_timeout",
        ),
    ];
    for (error, code) in theirs {
        assert_eq!(ToolError::from(error).code(), code);
    }
}

#[test]
fn a_write_sent_without_a_verdict_says_it_may_have_been_applied() {
    let unknown = [
        ZabbixError::Timeout(Duration::from_secs(3)),
        ZabbixError::AnswerLost("reading the response".into()),
        ZabbixError::HttpStatus(502),
        ZabbixError::BadResponse("not JSON-RPC".into()),
        ZabbixError::ResponseTooLarge(1024),
    ];
    for error in unknown {
        let code = ToolError::from(error.clone()).code();
        let written = ToolError::of_write(error);
        assert_eq!(written.code(), code, "the code stays Zabbix's");
        assert!(
            written.to_string().contains("may have been applied"),
            "{written}"
        );
        let body = written.body(Some("d1"));
        assert_eq!(body["data"], json!({"sent": true, "outcome": "unknown"}));
    }
    let known = [
        ZabbixError::Unavailable("connecting to zabbix:80".into()),
        ZabbixError::Api {
            code: -32602,
            message: "Invalid params.".into(),
            data: json!("x"),
        },
        ZabbixError::Overloaded {
            limit: 2,
            waited: Duration::from_secs(1),
        },
    ];
    for error in known {
        let written = ToolError::of_write(error);
        assert!(
            !written.to_string().contains("may have been applied"),
            "{written}"
        );
        assert_ne!(
            written.body(None)["data"]["outcome"],
            "unknown",
            "{written}"
        );
    }
}

#[test]
fn rpc_errors_carry_the_code() {
    let error = ToolError::from(ZabbixError::Timeout(Duration::from_secs(3))).into_rpc();
    assert_eq!(error.data, Some(json!({"code": "upstream_timeout"})));
    let error = ToolError::NoCaller.into_rpc();
    assert_eq!(error.data, Some(json!({"code": "internal_error"})));
}

#[test]
fn rate_limited_carries_the_retry_time() {
    use crate::ratelimit::{RateLimitError, Scope};
    let limited = || {
        ToolError::RateLimited(RateLimitError::Limited {
            scope: Scope::PolicyRate,
            retry_after: Duration::from_millis(2500),
        })
    };
    let body = text_body(limited(), Some("d-2"));
    assert_eq!(body["code"], "rate_limited");
    assert_eq!(
        body["data"],
        json!({"retry_after_seconds": 3, "scope": "policy_rate"})
    );
    assert_eq!(body["decision_id"], "d-2");
    let rpc = limited().into_rpc();
    assert_eq!(
        rpc.data,
        Some(json!({"code": "rate_limited", "retry_after_seconds": 3, "scope": "policy_rate"}))
    );
    let unchecked = ToolError::RateLimited(RateLimitError::Store(
        crate::store::StoreError::Timeout(Duration::from_secs(3)),
    ));
    assert_eq!(unchecked.code(), "internal_error");
}

/// A replica that remembers as many redeemed approvals as it can is busy, not broken: the
/// agent may retry later, and is told nothing was sent.
#[test]
fn too_many_redeemed_approvals_are_overloaded() {
    let full = ToolError::Approval(crate::mcp::approval::ApprovalError::Store(
        crate::store::StoreError::UsedFull(100_000),
    ));
    assert_eq!(full.code(), "overloaded");
    let body = full.body(None);
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("nothing was sent to Zabbix")),
        "{body}"
    );
}

/// A caller not yet authenticated learns what failed, not where Zabbix is: the address in
/// a connection error, the URL, a library's findings stay in the log.
#[test]
fn refusals_before_authentication_keep_the_shared_stores_words_out() {
    let redis =
        "WRONGTYPE Operation against a key holding the wrong kind of value (redis 10.9.8.7:6379)";
    let guard = GuardError::Store(crate::store::StoreError::Backend(redis.into()));
    assert_eq!(
        refusal_message(&guard),
        "cannot check the rejected-token lockout: the shared store failed"
    );
    assert!(
        guard.to_string().contains("WRONGTYPE"),
        "the log keeps them"
    );
    let slow = GuardError::Store(crate::store::StoreError::Timeout(Duration::from_secs(3)));
    assert_eq!(
        refusal_message(&slow),
        "cannot check the rejected-token lockout: the shared store did not answer within 3s"
    );
}

#[test]
fn refusals_before_authentication_keep_zabbix_whereabouts_out() {
    let at = "connecting to 10.9.8.7:8080: Connection refused";
    let cases = [
        (
            ZabbixError::Unavailable(at.into()),
            "cannot reach the Zabbix API",
        ),
        (
            ZabbixError::AnswerLost(at.into()),
            "the request reached the Zabbix API, but its answer was lost",
        ),
        (
            ZabbixError::BadResponse(format!("<html>{at}")),
            "the Zabbix API sent an invalid response",
        ),
        (
            ZabbixError::Tls(format!("{at}: certificate")),
            "TLS setup for the Zabbix connection failed",
        ),
        (
            ZabbixError::BadUrl {
                url: "http://10.9.8.7:8080/".into(),
                reason: "no path".into(),
            },
            "invalid Zabbix API URL",
        ),
    ];
    for (error, told) in cases {
        let whole = error.to_string();
        let guard = GuardError::Caller(CallerError::Upstream(error.clone()));
        assert_eq!(refusal_message(&guard), told, "{whole}");
        assert!(guard.to_string().contains("10.9.8.7"), "the log keeps it");
        let groups = GuardError::Caller(CallerError::GroupsUnavailable(error));
        let message = refusal_message(&groups);
        assert!(
            message.contains(&format!("usergroup.get ({told})")) && !message.contains("10.9.8.7"),
            "{message}"
        );
    }
    // Zabbix's own words and limits are told as they are.
    let api = ZabbixError::Api {
        code: -32500,
        message: "Application error.".into(),
        data: json!("SQL statement execution has failed."),
    };
    let guard = GuardError::Caller(CallerError::Upstream(api));
    assert_eq!(refusal_message(&guard), guard.to_string());
    let timeout = GuardError::Caller(CallerError::Upstream(ZabbixError::Timeout(
        Duration::from_secs(3),
    )));
    assert_eq!(refusal_message(&timeout), timeout.to_string());
    assert_eq!(
        refusal_message(&GuardError::MissingToken),
        GuardError::MissingToken.to_string()
    );
}

#[test]
fn http_refusals() {
    let missing = refusal(&GuardError::MissingToken);
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
    assert!(missing.challenge.is_some());
    let down = refusal(&GuardError::Caller(CallerError::Upstream(
        ZabbixError::Unavailable("refused".into()),
    )));
    assert_eq!(
        (down.status, down.code),
        (StatusCode::SERVICE_UNAVAILABLE, "upstream_unavailable")
    );
    let ours = refusal(&GuardError::Caller(CallerError::Upstream(
        ZabbixError::Request("x".into()),
    )));
    assert_eq!(
        (ours.status, ours.code),
        (StatusCode::INTERNAL_SERVER_ERROR, "internal_error")
    );
    // Our own overload: neither Zabbix's timeout nor an internal error; retryable.
    let overloaded = ZabbixError::Overloaded {
        limit: 64,
        waited: Duration::from_secs(3),
    };
    let busy = refusal(&GuardError::Caller(CallerError::Upstream(
        overloaded.clone(),
    )));
    assert_eq!(
        (busy.status, busy.code),
        (StatusCode::SERVICE_UNAVAILABLE, "overloaded")
    );
    assert_eq!(ToolError::from(overloaded).code(), "overloaded");
    let guessing = GuardError::TooManyRejectedTokens {
        address: "10.0.0.1".parse().unwrap(),
        max: 20,
        retry_after_s: 42,
    };
    let waits = refusal(&guessing);
    assert_eq!(
        (waits.status, waits.code, waits.retry_after_s),
        (StatusCode::TOO_MANY_REQUESTS, "rate_limited", Some(42))
    );
    assert!(guessing.to_string().contains("for 42 s"), "{guessing}");
    let crowding = GuardError::TooManyTokenLookups {
        address: "10.0.0.1".parse().unwrap(),
        max: 20,
        retry_after_s: 1,
    };
    let waits = refusal(&crowding);
    assert_eq!(
        (waits.status, waits.code, waits.retry_after_s),
        (StatusCode::TOO_MANY_REQUESTS, "rate_limited", Some(1))
    );
    // The shared lockout unreadable: our failure, never dressed as Zabbix's.
    let unchecked = refusal(&GuardError::Store(crate::store::StoreError::Timeout(
        Duration::from_secs(3),
    )));
    assert_eq!(
        (unchecked.status, unchecked.code),
        (StatusCode::INTERNAL_SERVER_ERROR, "internal_error")
    );
    for malformed in [GuardError::DuplicateAuthorization, GuardError::TokenTooLong] {
        let refused = refusal(&malformed);
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
        assert!(
            refused
                .challenge
                .is_some_and(|c| c.contains("invalid_token"))
        );
    }
}

/// A write whose caller could not be looked up again carries the code a request refused
/// for it would, in the words the caller may read (no Zabbix address), and says nothing
/// was sent.
#[test]
fn a_write_whose_caller_is_not_confirmed_carries_the_refusal_codes() {
    let at = "connecting to 10.9.8.7:8080: Connection refused";
    let cases = [
        (
            CallerError::InvalidToken("Not authorized.".into()),
            "unauthorized",
        ),
        (
            CallerError::Upstream(ZabbixError::Unavailable(at.into())),
            "upstream_unavailable",
        ),
        (
            CallerError::Upstream(ZabbixError::Timeout(Duration::from_secs(3))),
            "upstream_timeout",
        ),
        (
            CallerError::GroupsUnavailable(ZabbixError::Unavailable(at.into())),
            "identity_incomplete",
        ),
        (
            CallerError::Incomplete {
                method: Method::UserGroupGet,
                field: "name",
            },
            "identity_incomplete",
        ),
    ];
    for (error, code) in cases {
        let body = text_body(ToolError::Caller(error), None);
        assert_eq!(body["code"], code, "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.ends_with("nothing was sent to Zabbix"), "{message}");
        assert!(!message.contains("10.9.8.7"), "{message}");
    }
}

#[test]
fn stdio_caller_failures_carry_the_refusal_codes() {
    let rejected = super::caller_rpc(&CallerError::InvalidToken("Not authorized.".into()));
    assert_eq!(rejected.code, rmcp::model::ErrorCode::INVALID_REQUEST);
    assert_eq!(rejected.data, Some(json!({"code": "unauthorized"})));
    let down = super::caller_rpc(&CallerError::Upstream(ZabbixError::Unavailable(
        "connection refused".into(),
    )));
    assert_eq!(down.code, rmcp::model::ErrorCode::INTERNAL_ERROR);
    assert_eq!(down.data, Some(json!({"code": "upstream_unavailable"})));
}

#[test]
fn unreadable_requests_of_answered_methods_are_invalid_params() {
    use rmcp::model::{CustomRequest, ErrorCode};

    use super::unreadable_request;

    let read = unreadable_request(&CustomRequest::new("resources/read", Some(json!({}))));
    assert_eq!(read.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        read.message,
        "invalid params for resources/read: missing field `uri`"
    );
    let init = unreadable_request(&CustomRequest::new("initialize", None));
    assert_eq!(init.code, ErrorCode::INVALID_PARAMS);
    assert!(
        init.message.starts_with("invalid params for initialize: "),
        "{}",
        init.message
    );
    // Methods this server does not answer: not found, saying so (rmcp's words were the
    // bare method name).
    let prompts = unreadable_request(&CustomRequest::new("prompts/get", Some(json!([]))));
    assert_eq!(prompts.code, ErrorCode::METHOD_NOT_FOUND);
    assert_eq!(prompts.message, "method not found: prompts/get");
}

/// An agent reads that the shared store failed, not Redis' words (a script's SHA, a key's
/// type, an address); the logs keep them.
#[test]
fn tool_errors_keep_the_shared_stores_words_out() {
    let redis = || {
        crate::store::StoreError::Backend(
            "WRONGTYPE Operation against a key holding the wrong kind of value: script f24a9c22"
                .into(),
        )
    };
    for error in [
        ToolError::Store(redis()),
        ToolError::RateLimited(crate::ratelimit::RateLimitError::Store(redis())),
    ] {
        assert!(error.to_string().contains("WRONGTYPE"), "the logs keep it");
        assert_eq!(error.code(), "internal_error");
        let body = error.body(Some("d-1"));
        let message = body["message"].as_str().unwrap();
        assert!(!message.contains("WRONGTYPE"), "{message}");
        assert!(message.contains("the shared store failed"), "{message}");
        let rpc = error.into_rpc();
        assert!(!rpc.message.contains("WRONGTYPE"), "{}", rpc.message);
    }
}
