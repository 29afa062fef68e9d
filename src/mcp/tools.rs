//! tools/list and tools/call: the tool list a caller sees, and the read-tool call path
//! (validate → limits → build request → Zabbix → envelope).

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};

use crate::app::App;
use crate::catalog::{self, Arguments, Behaviour, Query, ToolDef, args, params, schema};
use crate::exposure::Exposure;
use crate::hashing::FastMap;
use crate::mcp::errors::ToolError;
use crate::mcp::gate::{self, Ended, Outcome, Subject};
use crate::mcp::splice::Splice;
use crate::mcp::write::{self, WriteCall, Written};
use crate::metrics::ToolOutcome;
use crate::response::{self, ResponseError, Shaping};
use crate::zabbix::raw::Element;
use crate::zabbix::{ApiToken, Caller, ZabbixError, ZabbixVersion};

/// The tools offered on one Zabbix version under the configured exposure, built once.
pub struct ToolList {
    pub version: ZabbixVersion,
    /// The exposure the list was built under, and its generation (`App::exposure`).
    pub exposure: Arc<Exposure>,
    pub exposure_generation: u64,
    pub tools: Vec<Tool>,
    /// Each tool of `tools` as JSON, written once: most of a list's cost was writing the
    /// same 22 definitions (their schemas above all) again for every `tools/list`.
    /// `None` if one could not be written (lists are then serialized as before).
    json: Option<Vec<Box<str>>>,
    by_exposed_name: FastMap<String, &'static ToolDef>,
}

impl ToolList {
    pub fn build(exposure: &Arc<Exposure>, generation: u64, version: ZabbixVersion) -> ToolList {
        let output_schema = Arc::new(schema::read_output_schema());
        let mut tools = Vec::new();
        let mut by_exposed_name = FastMap::default();
        for def in catalog::all_tools() {
            if !def.available_on(version) || !exposure.allows(def.name) {
                continue;
            }
            let exposed = exposure.exposed_name(def.name);
            let effect = def.effect();
            let annotations = ToolAnnotations::with_title(def.title)
                .read_only(def.is_read())
                .destructive(effect.destructive)
                .idempotent(effect.idempotent)
                .open_world(false);
            let mut tool = Tool::new(
                exposed.clone(),
                def.description,
                Arc::new(schema::input_schema(def, version)),
            )
            .with_title(def.title)
            .with_annotations(annotations);
            if def.is_read() {
                tool = tool.with_raw_output_schema(output_schema.clone());
            }
            tools.push(tool);
            by_exposed_name.insert(exposed, def);
        }
        let json = tools
            .iter()
            .map(|tool| serde_json::to_string(tool).map(String::into_boxed_str))
            .collect::<Result<_, _>>()
            .ok();
        ToolList {
            version,
            exposure: exposure.clone(),
            exposure_generation: generation,
            tools,
            json,
            by_exposed_name,
        }
    }

    /// The definition behind an exposed tool name, if this caller is offered it.
    pub fn find(&self, exposed_name: &str) -> Option<&'static ToolDef> {
        self.by_exposed_name.get(exposed_name).copied()
    }

    /// Whether the tool with this plain name is offered.
    pub fn offers(&self, plain_name: &str) -> bool {
        self.by_exposed_name.values().any(|d| d.name == plain_name)
    }

    pub fn exposed_names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.to_string()).collect()
    }
}

/// What the tools offered to one caller are: the version's list, filtered by the policy's
/// `list` phase (decided per tool, logged as one line, reused briefly: see
/// [`crate::mcp::listing`]).
pub fn offered(app: &App, tools: &ToolList, subject: &Subject) -> Vec<Tool> {
    let set = app.list_decisions.decide(app, tools, subject);
    tools
        .tools
        .iter()
        .enumerate()
        .filter(|(index, _)| set.offers_at(*index))
        .map(|(_, tool)| tool.clone())
        .collect()
}

/// The same list as [`offered`], appended to `out` as the JSON text of a `tools/list`
/// result for protocol versions before 2026-07-28 (`{"tools":[…]}`), put together from the
/// kept definitions; false (and nothing appended) if the list has no kept definitions.
pub fn offered_json(app: &App, tools: &ToolList, subject: &Subject, out: &mut String) -> bool {
    let Some(json) = tools.json.as_ref() else {
        return false;
    };
    let set = app.list_decisions.decide(app, tools, subject);
    let size: usize = json.iter().map(|t| t.len() + 1).sum();
    out.reserve(size + 16);
    out.push_str("{\"tools\":[");
    let offered = json
        .iter()
        .enumerate()
        .filter(|(index, _)| set.offers_at(*index));
    for (n, (_, tool)) in offered.enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(tool);
    }
    out.push_str("]}");
    true
}

/// The refusal of arguments that hold the caller's token; it names no argument, so that
/// nothing of the token is quoted.
const TOKEN_IN_ARGUMENTS: &str = "an argument holds the caller's own API token, which is \
                                  never sent to Zabbix or logged; nothing was sent";

/// Whether any key or string of `arguments`, at any depth, holds `token`.
fn holds_token(arguments: &serde_json::Map<String, serde_json::Value>, token: &ApiToken) -> bool {
    fn value_holds(value: &serde_json::Value, token: &ApiToken) -> bool {
        match value {
            serde_json::Value::String(text) => token.is_in(text),
            serde_json::Value::Array(items) => items.iter().any(|v| value_holds(v, token)),
            serde_json::Value::Object(map) => holds_token(map, token),
            _ => false,
        }
    }
    arguments
        .iter()
        .any(|(key, value)| token.is_in(key) || value_holds(value, token))
}

/// One tools/call request, resolved to a tool and a caller.
pub struct Call<'a> {
    pub context: &'a RequestContext<RoleServer>,
    pub request: &'a CallToolRequestParams,
    pub caller: &'a Caller,
    pub subject: &'a Subject,
    pub def: &'static ToolDef,
    pub version: ZabbixVersion,
    /// The tools of the version, for a write's list phase decided again.
    pub tools: &'a ToolList,
}

/// Runs one tool call: validate, decide, apply the caller's limits (reads) or get the
/// approval (writes), call Zabbix. Failures are tool results, with the `decision_id` once
/// there is one; every decided call gets its outcome in the decision log. A write is judged
/// on its caller as Zabbix has them now ([`gate::current`]): a tool its list phase then hides
/// is unknown, as it would have been before.
pub async fn call(app: &App, call: Call<'_>) -> Result<CallToolResponse, McpError> {
    let Call { def, version, .. } = call;
    let now = unix_now();
    let raw = call.request.arguments.as_ref();
    // Before validation, whose refusals quote the value: an agent's arguments go to the
    // decision log and the process log, and a write's text to Zabbix, where other users read
    // it. The caller's own token is never among them.
    if raw.is_some_and(|raw| holds_token(raw, &call.caller.token)) {
        let error = args::ArgError(TOKEN_IN_ARGUMENTS.to_owned());
        return Ok(failed(app, def, ToolError::from(error), None).into());
    }
    let mut arguments = match args::validate(def, raw, version, now) {
        Ok(arguments) => arguments,
        Err(error) => return Ok(failed(app, def, ToolError::from(error), None).into()),
    };
    // Held until the call ends: a write's configured concurrency slot, taken before its
    // targets are looked up in Zabbix.
    let configured = if def.is_write() {
        match crate::mcp::limit::admit_configured(app, &call, &arguments).await {
            Ok(admission) => Some(admission),
            Err((error, decision)) => {
                let id = decision.decision_id.as_str();
                crate::server::hangup::decided(call.context, id);
                return Ok(failed(app, def, error, Some(id)).into());
            }
        }
    } else {
        None
    };
    // After the configured limits, which spare Zabbix the lookup too.
    let current;
    let call = if def.is_write() {
        let looked_up = gate::current(app, call.context, call.caller.clone(), version);
        current = match Box::pin(looked_up).await {
            Ok(now) => now,
            Err(error) => {
                // Refused with nothing decided or sent, but in the decision log as every
                // refused call is (an auditor counts refusals there), on the identity the
                // request came with.
                let reason = format!("the caller could not be looked up again: {error}");
                let decision = gate::refused_before_decision(app, &call, &arguments, reason);
                let id = decision.decision_id.as_str();
                crate::server::hangup::decided(call.context, id);
                return Ok(failed(app, def, ToolError::Caller(error), Some(id)).into());
            }
        };
        let (caller, subject) = (&current.0, &current.1);
        if !gate::visible(app, call.tools, subject, &call.request.name) {
            return Err(crate::mcp::errors::unknown_tool(&call.request.name));
        }
        Call {
            caller,
            subject,
            ..call
        }
    } else {
        call
    };
    let gate::CallDecision {
        decision,
        input,
        logged,
    } = gate::decide_call(app, &call, &mut arguments, now).await;
    let id = decision.decision_id.as_str();
    crate::server::hangup::decided(call.context, id);
    if !decision.allow {
        let reasons = decision.reasons.clone();
        return Ok(failed(app, def, ToolError::Denied { reasons }, Some(id)).into());
    }
    // Fails closed: no change reaches Zabbix without its decision in the log, written by
    // its destination (a full queue, a pipe whose reader is gone, a full disk). Reads go
    // on, their lines counted as dropped or failed.
    if def.is_write() && !logged.written().await {
        tracing::warn!(decision_id = %id, gen_ai.tool.name = def.name, "write refused: its decision could not be logged");
        return Ok(failed(app, def, ToolError::Unlogged, Some(id)).into());
    }
    // Held until the call ends: its concurrency slot.
    let taken = configured.is_some();
    let _admission = match crate::mcp::limit::admit(app, call.caller, &decision, taken).await {
        Ok(admission) => admission,
        Err(error) => return Ok(failed(app, def, error, Some(id)).into()),
    };
    let outcome = Outcome::new(&app.decisions, id, def.kind());
    let result = if let Behaviour::Read(query) = &def.behaviour {
        match args::enforce_limits(def, &arguments, &gate::limits(&decision), now) {
            Ok(()) => call_read(app, &call, query, &arguments)
                .await
                .map(|(result, count)| (Written::Done(result), Ended::Read { count })),
            Err(error) => Err(ToolError::from(error)),
        }
    } else {
        let write = WriteCall {
            context: call.context,
            request: call.request,
            caller: call.caller,
            subject: call.subject,
            def,
            arguments: &arguments,
            decision: &decision,
            input: &input,
            version,
        };
        // Boxed, as a write's future (7 kB) would otherwise be room in every call's.
        Box::pin(write::call(app, write)).await.map(|written| {
            let summary = match &written {
                Written::Done(_) => Ended::Written,
                Written::Pending(_) => Ended::Pending,
            };
            (written, summary)
        })
    };
    Ok(match result {
        Ok((written, summary)) => {
            outcome.finish(summary);
            app.metrics.tool_call(def.name, written.outcome(), "none");
            match written {
                Written::Done(result) => result.into(),
                Written::Pending(response) => response,
            }
        }
        Err(error) => {
            outcome.finish(Ended::failed(&error));
            failed(app, def, error, Some(id)).into()
        }
    })
}

/// A failed call: counted, logged, and answered as a tool error.
fn failed(app: &App, def: &ToolDef, error: ToolError, decision_id: Option<&str>) -> CallToolResult {
    app.metrics
        .tool_call(def.name, ToolOutcome::Error, error.code());
    // Zabbix messages echo agent text: escaped, so no line can be forged in a text log.
    let message = crate::display::escape_text(&error.to_string());
    if error.code() == "internal_error" {
        tracing::warn!(error.code = error.code(), error = %message, "tool call failed");
    } else {
        tracing::info!(error.code = error.code(), error = %message, "tool call failed");
    }
    error.into_result(decision_id)
}

/// Runs one read-tool call with validated, limited arguments.
async fn call_read(
    app: &App,
    call: &Call<'_>,
    query: &Query,
    arguments: &Arguments,
) -> Result<(CallToolResult, usize), ToolError> {
    let Call {
        caller,
        def,
        version,
        ..
    } = *call;
    let request = params::read_params(def, query, arguments, version)
        .map_err(|e| ZabbixError::Request(format!("serializing the params: {e}")))?;
    // The params ask for one more than `limit` (`params::read_params`).
    let asked = usize::try_from(arguments.limit()).map_or(usize::MAX, |l| l.saturating_add(1));
    let reply = app
        .zabbix
        .call_raw(def.method, request, asked, Some((&caller.token, version)))
        .await?;
    // The tool's output schema promises objects: clients that check it (the Python SDK,
    // the Inspector) failed the whole call on a list holding anything else.
    let records = reply
        .elements()
        .is_some_and(|mut all| all.all(|e| matches!(e, Element::Object(_))));
    let (true, Some(elements)) = (records, reply.elements()) else {
        return Err(ToolError::NotAList { method: def.method });
    };
    let shaping = Shaping {
        selects: query.selects,
        id_field: params::shape(query, arguments).id_field,
        resource: query.resource.as_ref().map(|r| r.kind),
        version,
    };
    let envelope = response::envelope(
        elements,
        &shaping,
        arguments.limit(),
        app.config.max_response_size,
    );
    tracing::debug!(
        gen_ai.tool.name = def.name,
        count = envelope.count,
        truncated_by = envelope.truncated_by.map(|t| t.as_str()),
        "read tool answered"
    );
    let count = envelope.count;
    // Over stateless HTTP the route writes the document into the response itself (see
    // `splice`); elsewhere rmcp serializes it, as text and from a value.
    let placed = match Splice::of(call.context) {
        Some(splice) => splice.fill(envelope.text),
        None => Err(envelope.text),
    };
    let (text, structured) = match placed {
        Ok(placeholders) => (placeholders.text, placeholders.structured),
        Err(document) => {
            let structured = serde_json::from_str(&document).map_err(ResponseError::from)?;
            (document, structured)
        }
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    Ok((result, count))
}

pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
