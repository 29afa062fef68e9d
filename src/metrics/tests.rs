use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::json;

use super::{ApprovalOutcome, Metrics, PREFIX, RateScope, Revoked, Scrape, ToolOutcome};
use crate::metrics::process::Process;
use crate::policy::{Decision, Phase};
use crate::server::tls::TlsStatus;
use crate::zabbix::TrustStatus;
use crate::zabbix::{Method, ZabbixError};

/// One sample line: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Checks `text` against the Prometheus text format 0.0.4 strictly enough to catch what
/// a scraper rejects: names, label syntax and escapes, numbers, one `# TYPE` per family
/// before its samples, contiguous families, no duplicate series, and histograms whose
/// buckets are cumulative and end in `+Inf` equal to `_count`.
fn validate(text: &str) -> Result<Vec<Sample>, String> {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut finished: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<String> = None;
    let mut seen = BTreeSet::new();
    let mut samples = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let at = |m: &str| format!("line {}: {m}: {line}", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            if !valid_name(name) {
                return Err(at("bad metric name"));
            }
            if kind == "TYPE" {
                let ty = parts.next().unwrap_or("");
                if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&ty) {
                    return Err(at("bad type"));
                }
                if types.insert(name.to_owned(), ty.to_owned()).is_some() {
                    return Err(at("second TYPE for a family"));
                }
                if let Some(previous) = current.replace(name.to_owned()) {
                    finished.insert(previous);
                }
            } else if kind != "HELP" {
                return Err(at("unknown comment"));
            }
            continue;
        }
        let (name, labels, value) = sample(line).map_err(|m| at(&m))?;
        let family = current
            .clone()
            .ok_or_else(|| at("sample before any TYPE"))?;
        let suffixes: &[&str] = match types.get(&family).map(String::as_str) {
            Some("histogram") => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        if !suffixes.iter().any(|s| name == format!("{family}{s}")) {
            return Err(at(
                "sample outside its family (families must be contiguous)",
            ));
        }
        if finished.contains(&family) {
            return Err(at("family split"));
        }
        if !seen.insert(format!("{name}{labels:?}")) {
            return Err(at("duplicate series"));
        }
        samples.push((name, labels, value));
    }
    check_histograms(&types, &samples)?;
    Ok(samples)
}

fn check_histograms(types: &BTreeMap<String, String>, samples: &[Sample]) -> Result<(), String> {
    for family in types
        .iter()
        .filter(|(_, t)| *t == "histogram")
        .map(|(f, _)| f)
    {
        let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for (name, labels, value) in samples {
            if *name != format!("{family}_bucket") {
                continue;
            }
            let mut rest = labels.clone();
            let le = rest
                .remove("le")
                .ok_or(format!("{family}: bucket without le"))?;
            let bound: f64 = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().map_err(|_| format!("{family}: le {le}"))?
            };
            series
                .entry(format!("{rest:?}"))
                .or_default()
                .push((bound, *value));
        }
        for (labels, buckets) in series {
            let counts: Vec<f64> = buckets.iter().map(|b| b.1).collect();
            if buckets
                .windows(2)
                .any(|w| w[0].0 >= w[1].0 || w[0].1 > w[1].1)
            {
                return Err(format!(
                    "{family}{labels}: buckets not cumulative: {counts:?}"
                ));
            }
            let count = samples
                .iter()
                .find(|(n, l, _)| *n == format!("{family}_count") && format!("{l:?}") == labels)
                .map(|s| s.2);
            let last = buckets.last().copied();
            if last.map(|b| b.0) != Some(f64::INFINITY) || last.map(|b| b.1) != count {
                return Err(format!("{family}{labels}: +Inf bucket differs from _count"));
            }
        }
    }
    Ok(())
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn sample(line: &str) -> Result<(String, BTreeMap<String, String>, f64), String> {
    let name_end = line.find(['{', ' ']).ok_or("no value after the name")?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err("bad metric name".into());
    }
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices().peekable();
        loop {
            let start = chars.peek().map(|c| c.0).ok_or("unterminated labels")?;
            if inner[start..].starts_with('}') {
                rest = &inner[start + 1..];
                break;
            }
            let eq = inner[start..].find("=\"").ok_or("label without =\"")? + start;
            let key = &inner[start..eq];
            if !valid_name(key) || key.contains(':') {
                return Err(format!("bad label name {key:?}"));
            }
            while chars.peek().is_some_and(|c| c.0 <= eq + 1) {
                chars.next();
            }
            let mut value = String::new();
            loop {
                match chars.next().ok_or("unterminated label value")?.1 {
                    '"' => break,
                    '\\' => match chars.next().ok_or("dangling escape")?.1 {
                        '\\' => value.push('\\'),
                        '"' => value.push('"'),
                        'n' => value.push('\n'),
                        other => return Err(format!("bad escape \\{other}")),
                    },
                    '\n' => return Err("raw newline in a label value".into()),
                    c => value.push(c),
                }
            }
            if labels.insert(key.to_owned(), value).is_some() {
                return Err(format!("label {key} twice"));
            }
            if chars.peek().is_some_and(|c| c.1 == ',') {
                chars.next();
            }
        }
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().map_err(|_| format!("bad value {v:?}"))?,
    };
    Ok((name.to_owned(), labels, value))
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && l.len() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.2)
}

fn decision(allow: bool, dry_run_would_deny: bool, eval_ns: u64) -> Decision {
    let mut d = if allow {
        let mut d = Decision::deny("x");
        d.allow = true;
        d.reasons.clear();
        d
    } else {
        Decision::deny("denied")
    };
    d.dry_run_would_deny = dry_run_would_deny;
    d.eval_ns = eval_ns;
    d
}

/// Every family, fed once, renders as valid exposition text with the values fed.
#[test]
fn every_family_renders_as_valid_exposition() {
    let m = Metrics::new();
    m.tool_call("host_get", ToolOutcome::Ok, "none");
    m.tool_call("host_get", ToolOutcome::Error, "invalid_arguments");
    m.tool_call("host_get", ToolOutcome::Error, "invalid_arguments");
    m.policy_decision(Phase::Call, &decision(true, false, 3_000));
    m.policy_decision(Phase::Call, &decision(false, false, 20_000_000));
    m.policy_decision(Phase::List, &decision(true, true, 1_000));
    m.approval(ApprovalOutcome::PageApproved);
    m.zabbix_request(Method::HostGet, &Ok(json!([])), Duration::from_millis(7));
    let api = ZabbixError::Api {
        code: -32602,
        message: "x".into(),
        data: json!("y"),
    };
    m.zabbix_request(Method::HostGet, &Err::<(), _>(api), Duration::from_secs(40));
    m.rate_limited(RateScope::MaxConcurrent);
    m.revocation_closed(Revoked::Session, 2);
    m.revocation_closed(Revoked::ListenStream, 1);
    let text = m.render(Scrape {
        in_flight: 2,
        connections_open: 3,
        connections_refused: 4,
        sessions_open: 5,
        listen_streams_open: 6,
        mcp_requests_in_progress: 11,
        request_body_bytes: 4_096,
        decision_log_written: 6,
        decision_log_dropped: 7,
        decision_log_failed: 8,
        identity_cache_hits: 9,
        identity_cache_misses: 10,
        identity_lookups_refused: 3,
        policy_reloads_ok: 11,
        policy_reloads_failed: 12,
        policy_revision: Some("rev\"1\\\n".into()),
        list_sets_evaluated: 13,
        list_sets_reused: 14,
        tls: Some(TlsStatus {
            reloads_ok: 15,
            reloads_failed: 16,
            not_after: 1_803_859_200,
        }),
        zabbix_trust: Some(TrustStatus {
            reloads_ok: 17,
            reloads_failed: 18,
        }),
        process: Some(Process {
            cpu_seconds: 1.25,
            resident_bytes: 13_414_400,
            virtual_bytes: 987_654_321,
            open_fds: 19,
            max_fds: Some(1024),
            start_time_seconds: 1_796_400_123.45,
        }),
        zabbix_up: Some(true),
        shared_store_up: Some(false),
    });
    let samples = validate(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    // Ours are prefixed; the process's keep the names every client library gives them.
    assert!(
        samples
            .iter()
            .all(|s| s.0.starts_with(&format!("{PREFIX}_")) || s.0.starts_with("process_"))
    );
    let process = |name: &str| value(&samples, name, &[]).unwrap_or_else(|| panic!("{name}"));
    assert_eq!(process("process_cpu_seconds_total"), 1.25);
    assert_eq!(process("process_resident_memory_bytes"), 13_414_400.0);
    assert_eq!(process("process_virtual_memory_bytes"), 987_654_321.0);
    assert_eq!(process("process_open_fds"), 19.0);
    assert_eq!(process("process_max_fds"), 1024.0);
    assert_eq!(process("process_start_time_seconds"), 1_796_400_123.45);
    let v = |name: &str, labels: &[(&str, &str)]| {
        value(&samples, &format!("{PREFIX}_{name}"), labels)
            .unwrap_or_else(|| panic!("{name} {labels:?} missing:\n{text}"))
    };
    let ok = [("tool", "host_get"), ("outcome", "ok"), ("code", "none")];
    assert_eq!(v("tool_calls_total", &ok), 1.0);
    let bad = [
        ("tool", "host_get"),
        ("outcome", "error"),
        ("code", "invalid_arguments"),
    ];
    assert_eq!(v("tool_calls_total", &bad), 2.0);
    let call = |result| [("phase", "call"), ("result", result)];
    assert_eq!(v("policy_decisions_total", &call("allow")), 1.0);
    assert_eq!(v("policy_decisions_total", &call("deny")), 1.0);
    assert_eq!(v("policy_decisions_total", &call("dry_run_deny")), 0.0);
    let list = [("phase", "list"), ("result", "dry_run_deny")];
    assert_eq!(v("policy_decisions_total", &list), 1.0);
    let phase = [("phase", "call")];
    assert_eq!(v("policy_evaluation_seconds_count", &phase), 2.0);
    assert!((v("policy_evaluation_seconds_sum", &phase) - 0.020_003).abs() < 1e-9);
    let le = |b| [("phase", "call"), ("le", b)];
    assert_eq!(v("policy_evaluation_seconds_bucket", &le("5e-06")), 1.0);
    assert_eq!(v("policy_evaluation_seconds_bucket", &le("0.01")), 1.0);
    assert_eq!(v("policy_evaluation_seconds_bucket", &le("0.05")), 2.0);
    let approved = [("outcome", "page_approved")];
    assert_eq!(v("approvals_total", &approved), 1.0);
    assert_eq!(v("approvals_total", &[("outcome", "declined")]), 0.0);
    let host_get = |result| [("method", "host.get"), ("result", result)];
    assert_eq!(v("zabbix_requests_total", &host_get("ok")), 1.0);
    assert_eq!(v("zabbix_requests_total", &host_get("api_error")), 1.0);
    let method = [("method", "host.get")];
    assert_eq!(v("zabbix_request_duration_seconds_count", &method), 2.0);
    let bucket = |le| [("method", "host.get"), ("le", le)];
    assert_eq!(
        v("zabbix_request_duration_seconds_bucket", &bucket("0.01")),
        1.0
    );
    // 40 s is past the last finite bucket.
    assert_eq!(
        v("zabbix_request_duration_seconds_bucket", &bucket("+Inf")),
        2.0
    );
    assert_eq!(v("rate_limited_total", &[("scope", "max_concurrent")]), 1.0);
    assert_eq!(v("revocation_closures_total", &[("kind", "session")]), 2.0);
    assert_eq!(
        v("revocation_closures_total", &[("kind", "listen_stream")]),
        1.0
    );
    assert_eq!(v("rate_limited_total", &[("scope", "policy_rate")]), 0.0);
    assert_eq!(v("zabbix_up", &[]), 1.0);
    assert_eq!(v("shared_store_up", &[]), 0.0);
    assert_eq!(v("calls_in_flight", &[]), 2.0);
    assert_eq!(v("connections_open", &[]), 3.0);
    assert_eq!(v("connections_refused_total", &[]), 4.0);
    assert_eq!(v("sessions_open", &[]), 5.0);
    assert_eq!(v("listen_streams_open", &[]), 6.0);
    assert_eq!(v("mcp_requests_in_progress", &[]), 11.0);
    assert_eq!(v("request_body_bytes", &[]), 4_096.0);
    let lines = |result| [("result", result)];
    assert_eq!(v("decision_log_lines_total", &lines("written")), 6.0);
    assert_eq!(v("decision_log_lines_total", &lines("dropped")), 7.0);
    assert_eq!(v("decision_log_lines_total", &lines("failed")), 8.0);
    assert_eq!(v("identity_cache_lookups_total", &lines("hit")), 9.0);
    assert_eq!(v("identity_cache_lookups_total", &lines("miss")), 10.0);
    assert_eq!(v("identity_cache_lookups_total", &lines("refused")), 3.0);
    assert_eq!(v("policy_reloads_total", &lines("ok")), 11.0);
    assert_eq!(v("policy_reloads_total", &lines("failed")), 12.0);
    assert_eq!(v("list_decision_sets_total", &lines("evaluated")), 13.0);
    assert_eq!(v("list_decision_sets_total", &lines("reused")), 14.0);
    assert_eq!(v("tls_certificate_reloads_total", &lines("ok")), 15.0);
    assert_eq!(v("tls_certificate_reloads_total", &lines("failed")), 16.0);
    let expiry = v("tls_certificate_expiry_timestamp_seconds", &[]);
    assert_eq!(expiry, 1_803_859_200.0);
    assert_eq!(v("zabbix_tls_ca_reloads_total", &lines("ok")), 17.0);
    assert_eq!(v("zabbix_tls_ca_reloads_total", &lines("failed")), 18.0);
    // The revision is escaped, so even a hostile one cannot break the format.
    assert_eq!(v("policy_info", &[("revision", "rev\"1\\\n")]), 1.0);
}

#[test]
fn a_fresh_registry_is_valid_and_shows_the_fixed_series_at_zero() {
    let text = Metrics::new().render(Scrape::default());
    let samples = validate(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let name = format!("{PREFIX}_policy_decisions_total");
    // 4 phases x 3 results, registered up front.
    assert_eq!(samples.iter().filter(|s| s.0 == name).count(), 12);
    let name = format!("{PREFIX}_approvals_total");
    assert_eq!(samples.iter().filter(|s| s.0 == name).count(), 12);
    // No policy loaded: the info family has no series.
    assert!(!samples.iter().any(|s| s.0.ends_with("policy_info")));
    // No TLS: no certificate or CA series; no process figures read: none of theirs.
    assert!(!samples.iter().any(|s| s.0.contains("tls_")));
    assert!(!samples.iter().any(|s| s.0.starts_with("process_")));
    let build = [("version", env!("CARGO_PKG_VERSION"))];
    assert_eq!(
        value(&samples, &format!("{PREFIX}_build_info"), &build),
        Some(1.0)
    );
}

#[test]
fn the_validator_rejects_broken_text() {
    for bad in [
        "x_total 1\n",
        "# TYPE a counter\na 1\n# TYPE a counter\n",
        "# TYPE a counter\na{l=\"1} 1\n",
        "# TYPE a counter\na{l=\"1\"} one\n",
        "# TYPE a counter\na 1\na 2\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 0\n",
    ] {
        assert!(validate(bad).is_err(), "{bad}");
    }
}

/// The arrays of pre-registered series are indexed by the enums: their orders must agree.
#[test]
fn series_arrays_follow_their_enums() {
    for (index, outcome) in super::APPROVAL_OUTCOMES.iter().enumerate() {
        assert_eq!(*outcome as usize, index, "{outcome:?}");
    }
    for (index, scope) in super::RATE_SCOPES.iter().enumerate() {
        assert_eq!(*scope as usize, index, "{scope:?}");
    }
    for phase in [Phase::List, Phase::Call, Phase::Resource, Phase::Approve] {
        let name = serde_json::to_value(phase).unwrap();
        assert_eq!(json!(super::PHASES[super::phase_index(phase)]), name);
    }
}
