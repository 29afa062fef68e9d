//! resources/list, resources/templates/list and resources/read: `zabbix://about` and the
//! `zabbix://<kind>/<id>` entity records. A missing entity, one the caller cannot see, and
//! one whose tool is not exposed all read as "resource not found".

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use serde_json::{Map, Value, json};

use crate::app::App;
use crate::catalog::{self, ResourceKind, ToolDef, ToolKind, args, params};
use crate::mcp::errors::{ToolError, resource_not_found, resource_not_found_unquoted};
use crate::mcp::gate::{self, Ended, Outcome, Subject};
use crate::mcp::tools::{ToolList, offered};
use crate::policy::{Phase, ResourceInfo};
use crate::zabbix::{Caller, ZabbixError, ZabbixVersion};

pub const ABOUT_URI: &str = "zabbix://about";
const JSON: &str = "application/json";

pub fn list() -> ListResourcesResult {
    let about = Resource::new(ABOUT_URI, "about")
        .with_title("About this Zabbix MCP server")
        .with_description(
            "Zabbix API URL and version, the identity your token resolves to, and the tools \
             exposed to you.",
        )
        .with_mime_type(JSON);
    ListResourcesResult::with_all_items(vec![about])
}

/// The entity kinds whose tool this caller is offered (exposure and the policy's list phase).
pub fn templates(app: &App, tools: &ToolList, subject: &Subject) -> ListResourceTemplatesResult {
    let offered = offered_names(app, tools, subject);
    let mut out = Vec::new();
    for kind in ResourceKind::ALL {
        let Some(def) = catalog::for_resource(kind) else {
            continue;
        };
        let Some(resource) = def.resource() else {
            continue;
        };
        if !offered.contains(&def.name) {
            continue;
        }
        out.push(
            ResourceTemplate::new(kind.uri("{id}"), kind.as_str())
                .with_description(resource.description)
                .with_mime_type(JSON),
        );
    }
    ListResourceTemplatesResult::with_all_items(out)
}

fn offered_names(app: &App, tools: &ToolList, subject: &Subject) -> Vec<&'static str> {
    offered(app, tools, subject)
        .iter()
        .filter_map(|tool| tools.find(&tool.name).map(|def| def.name))
        .collect()
}

pub async fn read(
    app: &App,
    caller: &Caller,
    subject: &Subject,
    tools: &ToolList,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    if uri == ABOUT_URI {
        return text(uri, &about(app, caller, subject, tools));
    }
    // Quoted back and logged otherwise, as an argument would be (tools::call).
    if caller.token.is_in(uri) {
        return Err(resource_not_found_unquoted());
    }
    let Some((kind, id)) = parse(uri) else {
        return Err(resource_not_found(uri));
    };
    let Some(def) = catalog::for_resource(kind).filter(|d| tools.offers(d.name)) else {
        return Err(resource_not_found(uri));
    };
    // A resource the policy denies does not exist for this caller, nor does one whose tool
    // the list phase hides from them.
    let exposed = tools.exposure.exposed_name(def.name);
    if !gate::visible(app, tools, subject, &exposed) {
        return Err(resource_not_found(uri));
    }
    let resource = ResourceInfo {
        uri: uri.to_owned(),
        kind: kind.as_str().to_owned(),
        id: id.to_owned(),
    };
    let Some(arguments) = equivalent_arguments(def, id, tools.version) else {
        return Err(resource_not_found(uri));
    };
    let decision = gate::decide(
        app,
        subject,
        Phase::Resource,
        def,
        &exposed,
        arguments,
        Some(resource),
    );
    if !decision.allow {
        return Err(resource_not_found(uri));
    }
    let _admission = crate::mcp::limit::admit(app, caller, &decision, false)
        .await
        .map_err(ToolError::into_rpc)?;
    let (Some(query), Some(resource)) = (def.query(), def.resource()) else {
        return Err(resource_not_found(uri));
    };
    // What Zabbix answered goes to the log under the read's decision, as a tool call's
    // does: before, an allowed read that timed out or failed left only its "allow".
    let outcome = Outcome::new(&app.decisions, &decision.decision_id, ToolKind::Read);
    let request = params::resource_params(query, resource, id, tools.version);
    let result = app
        .zabbix
        .call(def.method, &request, Some((&caller.token, tools.version)))
        .await;
    let mut record = match result {
        Ok(Value::Array(mut list)) if !list.is_empty() => list.swap_remove(0),
        Ok(_) => {
            outcome.finish(Ended::Read { count: 0 });
            return Err(resource_not_found(uri));
        }
        // Zabbix rejects some IDs outright (out of range): still "not found" to the agent.
        Err(error @ ZabbixError::Api { .. }) => {
            let error = ToolError::from(error);
            outcome.finish(Ended::failed(&error));
            return Err(resource_not_found(uri));
        }
        Err(other) => {
            let error = ToolError::from(other);
            outcome.finish(Ended::failed(&error));
            return Err(error.into_rpc());
        }
    };
    outcome.finish(Ended::Read { count: 1 });
    params::shape_record(
        &mut record,
        resource.selects,
        query.id_field,
        Some(kind),
        tools.version,
    );
    text(uri, &record)
}

/// The arguments of the tool call that reads the same record (`host_get {"hostids": [id]}`
/// for `zabbix://host/<id>`), validated as that call would be: so a policy that scopes the
/// tool by its arguments scopes the resource the same way.
fn equivalent_arguments(
    def: &ToolDef,
    id: &str,
    version: ZabbixVersion,
) -> Option<Map<String, Value>> {
    let id_param = def.resource()?.id_param;
    let mut raw = Map::new();
    raw.insert(id_param.to_owned(), json!([id]));
    args::validate(def, Some(&raw), version, crate::mcp::tools::unix_now())
        .ok()
        .map(|a| a.0)
}

/// A URI naming one record by its id as Zabbix writes it. Another spelling of the id (a
/// leading zero, which Zabbix would read as the same record) names nothing: the URI is
/// what a policy's `resource` rules see.
fn parse(uri: &str) -> Option<(ResourceKind, &str)> {
    let (kind, id) = ResourceKind::of_uri(uri)?;
    let valid = !id.is_empty()
        && id.len() <= 20
        && id.bytes().all(|b| b.is_ascii_digit())
        && (id == "0" || !id.starts_with('0'));
    valid.then_some((kind, id))
}

fn about(app: &App, caller: &Caller, subject: &Subject, tools: &ToolList) -> Value {
    let status = app.policy.status();
    let offered: Vec<String> = offered(app, tools, subject)
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    json!({
        "server": {"name": "zabbix-mcp-guard", "version": env!("CARGO_PKG_VERSION")},
        "api_url": app.zabbix.api_url(),
        "frontend_url": app.config.frontend_url,
        "zabbix_version": tools.version.to_string(),
        "identity": {
            "userid": caller.identity.userid,
            "username": caller.identity.username,
            "type": caller.identity.user_type,
            "roleid": caller.identity.roleid,
            "usrgrps": caller.identity.usrgrps,
            "token_id": caller.token_id,
        },
        "tools": offered,
        // Which set decides, to match against the decision log; not where it lives, its
        // mode or why a reload failed (a compile error quotes the policy's own text): the
        // agent reading this is who the policy holds to, and /readyz tells operators.
        "policy": {
            "source": status.source.kind(),
            "revision": status.revision,
            "loaded": status.loaded,
        },
    })
}

fn text(uri: &str, value: &Value) -> Result<ReadResourceResult, McpError> {
    let body =
        serde_json::to_string(value).map_err(|e| ToolError::Response(e.into()).into_rpc())?;
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(body, uri).with_mime_type(JSON),
    ]))
}

#[cfg(test)]
mod tests {
    use super::parse;
    use crate::catalog::ResourceKind;

    #[test]
    fn parses_entity_uris() {
        assert_eq!(
            parse("zabbix://host/10084"),
            Some((ResourceKind::Host, "10084"))
        );
        assert_eq!(parse("zabbix://host/abc"), None);
        assert_eq!(parse("zabbix://host/010084"), None);
        assert!(parse("zabbix://host/0").is_some());
        assert_eq!(parse("zabbix://hosts/1"), None);
        assert_eq!(parse("zabbix://host/"), None);
        assert_eq!(parse("http://host/1"), None);
    }
}
