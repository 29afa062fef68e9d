//! tools/list and tools/call: the tool list a caller sees, and the read-tool call path
//! (validate → limits → build request → Zabbix → envelope).

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use serde_json::{Map, Value};

use crate::app::App;
use crate::catalog::args::Limits;
use crate::catalog::{self, ToolDef, args, params, schema};
use crate::mcp::errors::ToolError;
use crate::response;
use crate::zabbix::{Caller, ZabbixVersion};

/// The tools offered on one Zabbix version under the configured exposure, built once.
pub struct ToolList {
    pub version: ZabbixVersion,
    pub tools: Vec<Tool>,
    by_exposed_name: HashMap<String, &'static ToolDef>,
}

impl ToolList {
    pub fn build(app: &App, version: ZabbixVersion) -> ToolList {
        let output_schema = Arc::new(schema::read_output_schema());
        let mut tools = Vec::new();
        let mut by_exposed_name = HashMap::new();
        for def in catalog::all_tools() {
            if !def.available_on(version) || !app.exposure.allows(def.name) {
                continue;
            }
            let exposed = app.exposure.exposed_name(def.name);
            let annotations = ToolAnnotations::with_title(def.title)
                .read_only(def.is_read())
                .destructive(def.destructive)
                .idempotent(def.idempotent)
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
        ToolList {
            version,
            tools,
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

/// Runs one read-tool call for `caller`.
pub async fn call_read(
    app: &App,
    caller: &Caller,
    def: &'static ToolDef,
    raw: Option<&Map<String, Value>>,
    version: ZabbixVersion,
) -> Result<CallToolResult, ToolError> {
    let Some(query) = def.query.as_ref() else {
        return Err(ToolError::Unsupported {
            message: format!("{} is not a read tool", def.name),
        });
    };
    let now = unix_now();
    let mut arguments = args::validate(def, raw, version, now)?;
    args::enforce_limits(def, &mut arguments, &Limits::default(), now)?;
    let request = params::read_params(def, query, &arguments, version);
    let result = app
        .zabbix
        .call(def.method, &request, Some((&caller.token, version)))
        .await?;
    let Value::Array(mut records) = result else {
        return Err(ToolError::Zabbix(crate::zabbix::ZabbixError::BadResponse(
            format!("{} did not return a list", def.method),
        )));
    };
    let shape = params::shape(query, &arguments);
    let resource = query.resource.as_ref().map(|r| r.kind);
    for record in &mut records {
        params::shape_record(record, query.selects, shape.id_field, resource, version);
    }
    let envelope = response::envelope(records, arguments.limit(), app.config.max_response_size)?;
    tracing::debug!(
        gen_ai.tool.name = def.name,
        count = envelope.count,
        truncated_by = envelope.truncated_by.map(|t| t.as_str()),
        "read tool answered"
    );
    let mut result = CallToolResult::success(vec![ContentBlock::text(envelope.text)]);
    result.structured_content = Some(envelope.value);
    Ok(result)
}

pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
