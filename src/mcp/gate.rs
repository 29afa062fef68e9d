//! The policy gate: builds the input document for a phase (list, call, resource), asks the
//! engine, and writes the decision log line. Later events of a call (the Zabbix outcome)
//! go to the log under the same `decision_id`, even when the client goes away.

use rmcp::service::{RequestContext, RoleServer};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::app::App;
use crate::catalog::args::{self, Arguments, Limits};
use crate::catalog::{
    DEFAULT_HISTORY_MAX_AGE_SECONDS, DEFAULT_HISTORY_MAX_WINDOW_SECONDS, MAX_LIMIT,
};
use crate::catalog::{ToolDef, ToolKind};
use crate::config::SessionMode;
use crate::mcp::tools::Call;
use crate::mcp::tools::ToolList;
use crate::policy::{
    CallerInfo, ClientInfo, Decision, DecisionLog, Logged, Phase, PolicyInput, ResourceInfo,
    ToolInfo, ZabbixInfo,
};
use crate::targets::Ask;
use crate::zabbix::{Caller, CallerError, ZabbixVersion};

/// Who asks, from where, with which client, against which Zabbix: the parts of the input
/// document that are the same for every decision of one request.
#[derive(Debug, Clone)]
pub struct Subject {
    pub caller: CallerInfo,
    pub client: ClientInfo,
    pub zabbix: ZabbixInfo,
}

/// Writes a final event for a call if it ends without one (its future was dropped: the
/// sidecar stopped with it in flight, or its transport ended it), so every decided call
/// has an outcome in the log.
pub struct Outcome {
    log: DecisionLog,
    decision_id: String,
    kind: ToolKind,
    written: bool,
}

/// How a call ended: the data of its `zabbix_result` event.
pub enum Ended {
    /// A read answered with `count` records.
    Read { count: usize },
    /// A write Zabbix carried out.
    Written,
    /// A write waiting for approval on the page: nothing sent yet.
    Pending,
    /// Refused or failed: the tool error's code and message, and whether it was a write
    /// sent without a verdict back (`"sent": true, "outcome": "unknown"`, as the agent is told).
    Failed {
        code: &'static str,
        message: String,
        outcome_unknown: bool,
    },
    /// Dropped before it finished; a write may have been sent by then.
    Dropped { kind: ToolKind },
}

impl Subject {
    pub fn new(
        app: &App,
        context: &RequestContext<RoleServer>,
        caller: &Caller,
        version: ZabbixVersion,
    ) -> Self {
        let identity = &caller.identity;
        // Per-request metadata (2026-07-28) first, then the session's initialize (older). A
        // stateless server has no session: rmcp stands in a default peer there, whose name
        // and capabilities are not the client's, so only per-request metadata counts.
        let stateless = app.config.session_mode == SessionMode::Stateless;
        let (client, capabilities) = if stateless {
            (
                context.meta.client_info(),
                context.meta.client_capabilities(),
            )
        } else {
            (context.client_info(), context.client_capabilities())
        };
        let mut elicitation = Vec::new();
        if let Some(capability) = capabilities.and_then(|c| c.elicitation) {
            // A bare `elicitation: {}` means form (MCP 2025-06-18 compatibility).
            if capability.form.is_some() || capability.url.is_none() {
                elicitation.push("form".to_owned());
            }
            if capability.url.is_some() {
                elicitation.push("url".to_owned());
            }
        }
        Subject {
            caller: CallerInfo {
                userid: identity.userid.clone(),
                username: identity.username.clone(),
                user_type: u32::try_from(identity.user_type).unwrap_or(0),
                roleid: identity.roleid.clone(),
                usrgrps: identity.usrgrps.clone(),
                token_id: caller.token_id.clone(),
            },
            client: ClientInfo {
                address: crate::decimal::address(caller.address),
                name: client.as_ref().map(|c| bounded(&c.name)),
                version: client.as_ref().map(|c| bounded(&c.version)),
                protocol_version: context.protocol_version().map(|v| v.to_string()),
                elicitation,
            },
            zabbix: ZabbixInfo {
                version: version.text(),
            },
        }
    }
}

/// The caller of a write and its subject, with the identity Zabbix gives the token now
/// ([`crate::zabbix::CallerResolver::current`]): the request's identity may be a cached one
/// up to 60 s old, and a write is judged on the user's groups and role as they are. Reads
/// keep the cached one (no lookup of their own).
pub async fn current(
    app: &App,
    context: &RequestContext<RoleServer>,
    caller: Caller,
    version: ZabbixVersion,
) -> Result<(Caller, Subject), CallerError> {
    let identity = app.callers.current(&app.zabbix, &caller.token).await?;
    let caller = Caller { identity, ..caller };
    let subject = Subject::new(app, context, &caller, version);
    Ok((caller, subject))
}

/// How much of a client's self-reported name or version is kept. The client chooses them
/// freely, and they go into every policy input, decision log line and list-cache key: a
/// 900 kB name made each call log a 900 kB line.
const CLIENT_TEXT_MAX: usize = 256;

/// `text` cut to [`CLIENT_TEXT_MAX`] bytes at a character boundary, marked with `…` where
/// it was cut (so a cut name never equals a shorter one a policy names).
fn bounded(text: &str) -> String {
    if text.len() <= CLIENT_TEXT_MAX {
        return text.to_owned();
    }
    let mut end = CLIENT_TEXT_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = String::with_capacity(end + '…'.len_utf8());
    cut.push_str(text.get(..end).unwrap_or_default());
    cut.push('…');
    cut
}

pub(crate) fn tool_info(def: &ToolDef, exposed_name: &str) -> ToolInfo {
    ToolInfo {
        name: def.name.to_owned(),
        exposed_name: exposed_name.to_owned(),
        kind: match def.kind() {
            ToolKind::Read => crate::policy::ToolKind::Read,
            ToolKind::Write => crate::policy::ToolKind::Write,
        },
        method: def.method.as_str().to_owned(),
        destructive: def.effect().destructive,
        idempotent: def.effect().idempotent,
    }
}

/// Decides one phase for one tool and logs the decision.
pub fn decide(
    app: &App,
    subject: &Subject,
    phase: Phase,
    def: &ToolDef,
    exposed_name: &str,
    arguments: Map<String, Value>,
    resource: Option<ResourceInfo>,
) -> Decision {
    let (decision, input) = evaluate(app, subject, phase, def, exposed_name, arguments, resource);
    record(app, def, decision, &input).0
}

/// A call's decision, the input it was taken on, and whether its line is on its way to
/// the decision log (dropped when the log's queue is full: its destination is not keeping
/// up); an allowed write's is written at once and answers whether it landed.
pub struct CallDecision {
    pub decision: Decision,
    pub input: PolicyInput,
    pub logged: Logged,
}

/// Decides a tool call on the arguments that will be sent, and returns the input it was
/// decided on (a page approval keeps it for the `approve` phase). A write's targets are resolved
/// first (`input.targets`); one that cannot be resolved denies without asking the policy.
/// Defaults the catalog filled in are fitted to the decision's limits (a default `limit`
/// above `max_limit`, a default history window wider than allowed); if that changed them,
/// the policy decides again on the fitted arguments, and only that decision is applied and
/// logged.
pub async fn decide_call(
    app: &App,
    call: &Call<'_>,
    arguments: &mut Arguments,
    now: i64,
) -> CallDecision {
    let Call {
        def,
        subject,
        caller,
        version,
        ..
    } = *call;
    let exposed_name = call.request.name.as_ref();
    let targets = match Ask::of(def, &arguments.0) {
        None => None,
        // Boxed: only writes resolve targets, and the resolution's future (8 kB) would
        // otherwise be room in every call's future, reads' too, copied with it.
        Some(ask) => match Box::pin(
            app.targets
                .resolve(&app.zabbix, &caller.token, version, ask),
        )
        .await
        {
            Ok(targets) => Some(targets),
            Err(error) => {
                // Zabbix's messages echo agent text: escaped, so no line can be forged.
                let message = crate::display::escape_text(&error.to_string());
                tracing::info!(gen_ai.tool.name = def.name, error = %message, "targets not resolved");
                let input = input(subject, Phase::Call, def, exposed_name, arguments.0.clone());
                let (decision, logged) =
                    record(app, def, Decision::deny(error.to_string()), &input);
                return CallDecision {
                    decision,
                    input,
                    logged,
                };
            }
        },
    };
    let decide = |arguments: &Arguments| {
        let mut input = input(subject, Phase::Call, def, exposed_name, arguments.0.clone());
        input.targets = targets.clone();
        (app.policy.decide(&input), input)
    };
    let first = decide(arguments);
    let (decision, input) =
        if first.0.allow && args::fit_defaults(def, arguments, &limits(&first.0), now) {
            decide(arguments)
        } else {
            first
        };
    let (decision, logged) = record(app, def, decision, &input);
    CallDecision {
        decision,
        input,
        logged,
    }
}

/// A call the sidecar refused before asking the policy (a write over its configured
/// limits, before its targets were looked up; a write whose caller Zabbix no longer gives
/// as a whole): logged as a denial with the reason, on the request's subject.
pub fn refused_before_decision(
    app: &App,
    call: &Call<'_>,
    arguments: &Arguments,
    reason: String,
) -> Decision {
    let exposed_name = call.request.name.as_ref();
    let input = input(
        call.subject,
        Phase::Call,
        call.def,
        exposed_name,
        arguments.0.clone(),
    );
    let decision = Decision::deny(reason);
    // In the decision log like any call, but neither a policy decision in the metrics nor
    // "policy denied" in the process log: the policy was not asked.
    app.decisions.record(&decision, &input);
    decision
}

/// Whether the `list` phase offers this tool to the caller. A tool it hides does not exist
/// for the caller in any phase: a call by name answers as for an unknown tool. The answer
/// comes from the caller's list decision set (cached, logged once per set), so a call costs
/// no extra evaluation or log line.
pub fn visible(app: &App, tools: &ToolList, subject: &Subject, exposed_name: &str) -> bool {
    app.list_decisions
        .decide(app, tools, subject)
        .offers(tools, exposed_name)
}

fn evaluate(
    app: &App,
    subject: &Subject,
    phase: Phase,
    def: &ToolDef,
    exposed_name: &str,
    arguments: Map<String, Value>,
    resource: Option<ResourceInfo>,
) -> (Decision, PolicyInput) {
    let mut input = input(subject, phase, def, exposed_name, arguments);
    input.resource = resource;
    (app.policy.decide(&input), input)
}

fn input(
    subject: &Subject,
    phase: Phase,
    def: &ToolDef,
    exposed_name: &str,
    arguments: Map<String, Value>,
) -> PolicyInput {
    let mut input = PolicyInput::new(
        phase,
        tool_info(def, exposed_name),
        subject.caller.clone(),
        subject.client.clone(),
        subject.zabbix.clone(),
    );
    input.arguments = arguments;
    input
}

fn record(app: &App, def: &ToolDef, decision: Decision, input: &PolicyInput) -> (Decision, Logged) {
    // A write that may be sent waits until its line is written (tools::call).
    let logged = if def.is_write() && decision.allow {
        app.decisions.record_written(&decision, input)
    } else {
        Logged::from(app.decisions.record(&decision, input))
    };
    app.metrics.policy_decision(input.phase, &decision);
    if !decision.allow || decision.dry_run_would_deny {
        tracing::info!(
            decision_id = %decision.decision_id,
            gen_ai.tool.name = def.name,
            allow = decision.allow,
            reasons = ?decision.reasons,
            "policy denied"
        );
    }
    (decision, logged)
}

/// The caller's limits as the decision sets them; what it leaves out keeps the defaults.
pub fn limits(decision: &Decision) -> Limits {
    let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    Limits {
        max_limit: decision.max_limit.unwrap_or(MAX_LIMIT).min(MAX_LIMIT),
        history_max_window_seconds: decision
            .history
            .as_ref()
            .map_or(DEFAULT_HISTORY_MAX_WINDOW_SECONDS, |h| {
                clamp(h.max_window_seconds)
            }),
        history_max_age_seconds: decision
            .history
            .as_ref()
            .map_or(DEFAULT_HISTORY_MAX_AGE_SECONDS, |h| {
                clamp(h.max_age_seconds)
            }),
    }
}

impl Ended {
    /// How a call that failed with `error` ended.
    pub fn failed(error: &crate::mcp::errors::ToolError) -> Self {
        Ended::Failed {
            code: error.code(),
            message: error.to_string(),
            outcome_unknown: matches!(error, crate::mcp::errors::ToolError::WriteOutcomeUnknown(_)),
        }
    }
}

impl Outcome {
    pub fn new(log: &DecisionLog, decision_id: &str, kind: ToolKind) -> Self {
        Outcome {
            log: log.clone(),
            decision_id: decision_id.to_owned(),
            kind,
            written: false,
        }
    }

    /// Records how the call ended (`{"ok": true, ...}` or an error code).
    pub fn finish(mut self, ended: Ended) {
        self.log.event(&self.decision_id, "zabbix_result", ended);
        self.written = true;
    }
}

impl Drop for Outcome {
    fn drop(&mut self) {
        if !self.written {
            let ended = Ended::Dropped { kind: self.kind };
            self.log.event(&self.decision_id, "zabbix_result", ended);
        }
    }
}

/// Written member by member, as `{"ok": …, …}`: a struct per shape, without a map built
/// for every call.
impl Serialize for Ended {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            Ended::Read { count } => {
                map.serialize_entry("ok", &true)?;
                map.serialize_entry("count", count)?;
            }
            Ended::Written => map.serialize_entry("ok", &true)?,
            Ended::Pending => {
                map.serialize_entry("ok", &false)?;
                map.serialize_entry("sent", &false)?;
                map.serialize_entry("pending", "approval")?;
            }
            Ended::Failed {
                code,
                message,
                outcome_unknown,
            } => {
                map.serialize_entry("ok", &false)?;
                map.serialize_entry("code", code)?;
                map.serialize_entry("message", message)?;
                if *outcome_unknown {
                    map.serialize_entry("sent", &true)?;
                    map.serialize_entry("outcome", "unknown")?;
                }
            }
            // Not "the client went away": a call whose client leaves runs to its end, so a
            // dropped one was most likely stopped with the sidecar.
            Ended::Dropped { kind } => {
                map.serialize_entry("ok", &false)?;
                map.serialize_entry("code", "cancelled")?;
                match kind {
                    ToolKind::Read => map.serialize_entry(
                        "message",
                        "the call was stopped before it finished (the sidecar shut down, or its transport ended it)",
                    )?,
                    ToolKind::Write => {
                        map.serialize_entry(
                            "message",
                            "the call was stopped before it finished (the sidecar shut down, or its transport ended it); the write may have been sent: check its state in Zabbix",
                        )?;
                        map.serialize_entry("sent", "unknown")?;
                    }
                }
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::{CLIENT_TEXT_MAX, Ended, bounded};

    #[test]
    fn client_names_are_bounded() {
        assert_eq!(bounded("claude-code"), "claude-code");
        let exact = "a".repeat(CLIENT_TEXT_MAX);
        assert_eq!(bounded(&exact), exact);
        let long = "x".repeat(900_000);
        assert_eq!(bounded(&long), format!("{}…", "x".repeat(CLIENT_TEXT_MAX)));
        // Cut at a character boundary: 255 ASCII bytes, then a two-byte character.
        let multibyte = format!("{}é{}", "a".repeat(CLIENT_TEXT_MAX - 1), "b".repeat(10));
        assert_eq!(
            bounded(&multibyte),
            format!("{}…", "a".repeat(CLIENT_TEXT_MAX - 1))
        );
    }

    #[test]
    fn ended_is_written_as_the_log_has_always_read() {
        let text = |ended: Ended| serde_json::to_string(&ended).unwrap();
        assert_eq!(text(Ended::Read { count: 3 }), r#"{"ok":true,"count":3}"#);
        assert_eq!(text(Ended::Written), r#"{"ok":true}"#);
        assert_eq!(
            text(Ended::Pending),
            r#"{"ok":false,"sent":false,"pending":"approval"}"#
        );
        let failed = Ended::Failed {
            code: "zabbix_error",
            message: "say \"why\"".into(),
            outcome_unknown: false,
        };
        assert_eq!(
            text(failed),
            r#"{"ok":false,"code":"zabbix_error","message":"say \"why\""}"#
        );
        // A write sent without a verdict back says so, as the agent is told.
        let lost = crate::mcp::errors::ToolError::WriteOutcomeUnknown(
            crate::zabbix::ZabbixError::Timeout(std::time::Duration::from_secs(3)),
        );
        let logged: serde_json::Value = serde_json::from_str(&text(Ended::failed(&lost))).unwrap();
        assert_eq!(logged["code"], "upstream_timeout", "{logged}");
        assert_eq!(
            (&logged["sent"], &logged["outcome"]),
            (&serde_json::json!(true), &serde_json::json!("unknown"))
        );
    }
}

#[cfg(test)]
mod outcome_tests {
    use super::{Outcome, ToolKind};
    use crate::policy::{DecisionLog, DecisionLogSink};

    /// A call stopped with the sidecar: its line says so, and for a write that it may have
    /// been sent (before: "the client went away", which was not so, for a write applied).
    #[test]
    fn a_dropped_call_is_logged_as_stopped_and_a_write_as_maybe_sent() {
        let path = crate::scratch::dir("outcome").join("decisions.log");
        let log = DecisionLog::open(DecisionLogSink::File(path.clone())).expect("log");
        drop(Outcome::new(&log, "read-1", ToolKind::Read));
        drop(Outcome::new(&log, "write-1", ToolKind::Write));
        assert!(log.flush());
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
            .expect("log file")
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect();
        let data = |id: &str| {
            lines
                .iter()
                .find(|l| l["decision_id"] == id)
                .map(|l| l["data"].clone())
                .expect("a line")
        };
        let read = data("read-1");
        assert_eq!(read["code"], "cancelled");
        assert!(
            read["message"]
                .as_str()
                .unwrap()
                .contains("sidecar shut down")
        );
        assert!(read.get("sent").is_none(), "{read}");
        let write = data("write-1");
        assert_eq!(write["sent"], "unknown", "{write}");
        assert!(
            write["message"]
                .as_str()
                .unwrap()
                .contains("may have been sent"),
            "{write}"
        );
    }
}
