//! The `tools/list` line: one line for the whole decision set of a list, the tools
//! offered and the tools hidden with their reasons.

use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{BundleRevision, Bundles, DecisionLog, Metrics, serialize};
use crate::policy::DECISION_PATH;
use crate::policy::input::PolicyInput;
use crate::policy::timestamp::rfc3339_nanos;

/// One `tools/list` decision set, as [`DecisionLog::record_list`] writes it.
pub struct ListRecord<'a> {
    pub decision_id: &'a str,
    /// The input every tool's `list` decision shared (its `tool` left out).
    pub input: &'a PolicyInput,
    /// Exposed names of the tools offered, in list order.
    pub offered: Vec<&'a str>,
    /// The tools the policy hid, and why.
    pub hidden: Vec<HiddenTool<'a>>,
    /// Dry-run only: offered although the policy would hide them.
    pub dry_run_would_hide: Vec<HiddenTool<'a>>,
    pub revision: &'a str,
    pub eval_ns: u64,
    pub evaluations: usize,
    /// How long the set is reused for the same caller and client without a new line.
    pub reused_for_seconds: u64,
}

/// A tool a `list` decision did not offer.
#[derive(Serialize)]
pub struct HiddenTool<'a> {
    pub tool: &'a str,
    pub reasons: &'a [String],
}

#[derive(Serialize)]
struct ListLine<'a> {
    decision_id: &'a str,
    timestamp: String,
    path: &'static str,
    input: Value,
    result: ListResult<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    erased: Vec<String>,
    bundles: Bundles<'a>,
    metrics: Metrics,
    labels: &'a RawValue,
}

#[derive(Serialize)]
struct ListResult<'a> {
    offered: &'a [&'a str],
    hidden: &'a [HiddenTool<'a>],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    dry_run_would_hide: &'a [HiddenTool<'a>],
    reused_for_seconds: u64,
}

impl DecisionLog {
    /// Logs one `tools/list` decision set as one line: `result.offered`, `result.hidden`
    /// (with the reasons) and the input the tools' decisions shared.
    pub fn record_list(&self, record: &ListRecord<'_>) {
        let Some(writer) = &self.inner.writer else {
            return;
        };
        let (mut input, erased) = self.erase(record.input);
        if let Value::Object(map) = &mut input {
            // Per tool; the tools are in `result`.
            map.shift_remove("tool");
            map.shift_remove("arguments");
        }
        let line = serialize(&ListLine {
            decision_id: record.decision_id,
            timestamp: rfc3339_nanos(SystemTime::now()),
            path: DECISION_PATH,
            input,
            result: ListResult {
                offered: &record.offered,
                hidden: &record.hidden,
                dry_run_would_hide: &record.dry_run_would_hide,
                reused_for_seconds: record.reused_for_seconds,
            },
            erased,
            bundles: Bundles {
                policies: BundleRevision {
                    revision: record.revision,
                },
            },
            metrics: Metrics {
                timer_eval_ns: record.eval_ns,
                evaluations: Some(record.evaluations),
            },
            labels: &self.inner.labels,
        });
        self.send(writer, line);
    }
}
