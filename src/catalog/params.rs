//! Builds the Zabbix request of a read tool or resource from validated arguments, and
//! shapes what Zabbix returns (version-neutral keys, `uri` fields).

use serde_json::{Map, Value, json};

use crate::catalog::{
    ArgError, Arguments, Mapping, Query, ResourceDef, ResourceKind, Select, ToolDef, VariantValue,
    WriteRequest,
};
use crate::zabbix::ZabbixVersion;
use crate::zabbix::params_text::{ObjectWriter, ParamsText};

/// The output fields and ID field in effect for these arguments.
pub struct Shape {
    pub id_field: &'static str,
    pub output: &'static [&'static str],
}

pub fn shape(query: &Query, args: &Arguments) -> Shape {
    for variant in query.variants {
        let matches = match (variant.equals, args.get(variant.arg)) {
            (VariantValue::Bool(b), Some(Value::Bool(v))) => b == *v,
            (VariantValue::Str(s), Some(Value::String(v))) => s == v,
            _ => false,
        };
        if matches {
            return Shape {
                id_field: variant.id_field,
                output: variant.output,
            };
        }
    }
    Shape {
        id_field: query.id_field,
        output: query.output,
    }
}

/// The request parameters of a read tool call, as JSON text (they are sent once and never
/// read again). `limit` is one more than asked, so that a full page tells us that more
/// results exist. Members are written in a fixed order; a tool's keys never repeat
/// (`read_keys_are_distinct`).
pub fn read_params(
    tool: &ToolDef,
    query: &Query,
    args: &Arguments,
    version: ZabbixVersion,
) -> Result<ParamsText, serde_json::Error> {
    let mut params = ObjectWriter::new();
    params.member("output", shape(query, args).output)?;
    let mut filter = ObjectWriter::new();
    let mut search = ObjectWriter::new();
    // Without a `*` Zabbix matches anywhere in the field; with one, the pattern must
    // match the whole field, so wildcards are switched on only when used.
    let mut wildcard = false;
    for def in tool.args {
        let Some(value) = args.get(def.name) else {
            continue;
        };
        match def.maps_to {
            Mapping::Param(name) => match enum_number(def, value) {
                Some(number) => params.member(name, &number)?,
                None => params.member(name, value)?,
            },
            Mapping::Filter(field) => filter.member(field, value)?,
            Mapping::Search(fields) => {
                wildcard |= value.as_str().is_some_and(|s| s.contains('*'));
                for field in fields {
                    search.member(field, value)?;
                }
            }
            Mapping::Limit => params.member("limit", &(args.limit() + 1))?,
            // Write-tool mappings; no read tool uses them.
            Mapping::Objects { .. } | Mapping::ActionParam { .. } | Mapping::Whole => {}
        }
    }
    if !filter.is_empty() {
        params.object("filter", filter.finish())?;
    }
    if !search.is_empty() {
        params.member("searchByAny", &true)?;
        if wildcard {
            params.member("searchWildcardsEnabled", &true)?;
        }
        params.object("search", search.finish())?;
    }
    for select in query.selects {
        params.member(select.param.param_name(version), select.fields)?;
    }
    if limits_selects(query.selects) {
        params.member("limitSelects", &LIMIT_SELECTS)?;
    }
    for flag in query.flags {
        params.member(flag, &true)?;
    }
    params.member("sortfield", query.sort.fields)?;
    if query.sort.descending {
        params.member("sortorder", "DESC")?;
    }
    Ok(params.finish())
}

/// The request parameters of a write tool call, from arguments that `args::validate`
/// accepted: Zabbix gets exactly what the policy saw, reshaped (`groups: [{groupid}]`,
/// the `event.acknowledge` action bitmask, a plain ID array for maintenance.delete).
pub fn write_params(
    tool: &ToolDef,
    args: &Arguments,
    version: ZabbixVersion,
) -> Result<Value, ArgError> {
    let Some(spec) = tool.write_spec() else {
        return Err(ArgError(format!("{} is not a write tool", tool.name)));
    };
    if !tool.available_on(version) {
        return Err(ArgError(format!(
            "{} needs Zabbix {}.{} or later; this Zabbix is {version}",
            tool.name, tool.since.major, tool.since.minor
        )));
    }
    let mut params = Map::new();
    let mut action = match spec.request {
        WriteRequest::Acknowledge { action } => Some(action),
        WriteRequest::Object => None,
    };
    for def in tool.args {
        let Some(value) = args.get(def.name) else {
            continue;
        };
        match def.maps_to {
            Mapping::Param(name) => {
                params.insert(name.into(), value.clone());
            }
            Mapping::Objects { param, field } => {
                let objects: Vec<Value> = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|id| json!({ field: id }))
                    .collect();
                params.insert(param.into(), Value::Array(objects));
            }
            Mapping::ActionParam { param, flag } => {
                params.insert(param.into(), value.clone());
                action = Some(action.unwrap_or(0) | flag);
            }
            Mapping::Whole => return Ok(value.clone()),
            Mapping::Filter(_) | Mapping::Search(_) | Mapping::Limit => {
                return Err(ArgError(format!(
                    "{}: argument {} has a read-only mapping",
                    tool.name, def.name
                )));
            }
        }
    }
    if let Some(action) = action {
        params.insert("action".into(), Value::from(action));
    }
    Ok(Value::Object(params))
}

/// The request parameters that read one entity for a resource.
pub fn resource_params(
    query: &Query,
    resource: &ResourceDef,
    id: &str,
    version: ZabbixVersion,
) -> Value {
    let mut params = Map::new();
    params.insert("output".into(), json!(resource.output));
    params.insert(resource.id_param.into(), json!([id]));
    add_selects(&mut params, resource.selects, version);
    for flag in query.flags {
        params.insert((*flag).into(), Value::Bool(true));
    }
    Value::Object(params)
}

/// `limitSelects` for queries with a nested list that grows without bound (a host's or
/// template's triggers): Zabbix returns at most this many records per subselect.
pub const LIMIT_SELECTS: u32 = 200;

fn add_selects(params: &mut Map<String, Value>, selects: &[Select], version: ZabbixVersion) {
    for select in selects {
        params.insert(
            select.param.param_name(version).into(),
            json!(select.fields),
        );
    }
    if limits_selects(selects) {
        params.insert("limitSelects".into(), json!(LIMIT_SELECTS));
    }
}

/// Zabbix refuses `limitSelects` where it does not apply: only with `selectTriggers`.
fn limits_selects(selects: &[Select]) -> bool {
    selects
        .iter()
        .any(|s| s.param == crate::catalog::SelectParam::Fixed("selectTriggers"))
}

/// Enum arguments travel to Zabbix as numbers (history type names, for one).
fn enum_number(def: &crate::catalog::ArgDef, value: &Value) -> Option<i64> {
    let (crate::catalog::ArgType::Enum(values), Some(name)) = (&def.ty, value.as_str()) else {
        return None;
    };
    values.iter().find(|e| e.name == name).map(|e| e.number)
}

/// Renames version-specific keys to the agent-facing ones and adds `uri`.
pub fn shape_record(
    record: &mut Value,
    selects: &[Select],
    id_field: &str,
    resource: Option<ResourceKind>,
    version: ZabbixVersion,
) {
    let Some(object) = record.as_object_mut() else {
        return;
    };
    for select in selects {
        if let Some((from, to)) = select.param.result_keys(version)
            && let Some(value) = object.remove(from)
        {
            object.insert(to.into(), value);
        }
    }
    if let Some(kind) = resource
        && let Some(id) = object.get(id_field).and_then(Value::as_str)
    {
        let uri = kind.uri(id);
        object.insert("uri".into(), Value::String(uri));
    }
}

#[cfg(test)]
mod tests {
    use super::{read_params, resource_params};
    use crate::catalog::{Mapping, args, find};
    use crate::zabbix::ZabbixVersion;
    use serde_json::json;

    const V60: ZabbixVersion = ZabbixVersion::new(6, 0, 14);
    const V70: ZabbixVersion = ZabbixVersion::new(7, 0, 22);

    fn params(tool: &str, raw: serde_json::Value, version: ZabbixVersion) -> serde_json::Value {
        let tool = find(tool).unwrap();
        let args = args::validate(tool, raw.as_object(), version, 1_000_000).unwrap();
        let text = read_params(tool, tool.query().unwrap(), &args, version).unwrap();
        serde_json::from_slice(text.as_bytes()).unwrap()
    }

    /// Every key a read tool's params can hold, each object's apart: the writer never
    /// checks for repeats, so none may exist (a repeat would be sent twice).
    #[test]
    fn read_keys_are_distinct() {
        for tool in crate::catalog::all_tools() {
            let Some(query) = tool.query() else {
                continue;
            };
            for v in [V60, V70] {
                let mut top = vec!["output", "sortfield", "sortorder"];
                let (mut filter, mut search) = (Vec::new(), Vec::new());
                for def in tool.args {
                    match def.maps_to {
                        Mapping::Param(name) => top.push(name),
                        Mapping::Filter(field) => filter.push(field),
                        Mapping::Search(fields) => search.extend_from_slice(fields),
                        Mapping::Limit => top.push("limit"),
                        _ => {}
                    }
                }
                if !filter.is_empty() {
                    top.push("filter");
                }
                if !search.is_empty() {
                    top.extend(["search", "searchByAny", "searchWildcardsEnabled"]);
                }
                top.extend(query.selects.iter().map(|s| s.param.param_name(v)));
                top.push("limitSelects");
                top.extend_from_slice(query.flags);
                for keys in [top, filter, search] {
                    let mut sorted = keys.clone();
                    sorted.sort_unstable();
                    sorted.dedup();
                    assert_eq!(sorted.len(), keys.len(), "{} on {v}: {keys:?}", tool.name);
                }
            }
        }
    }

    #[test]
    fn host_get_is_version_aware() {
        let p6 = params("host_get", json!({"search": "web", "limit": 5}), V60);
        assert_eq!(p6["selectGroups"], json!(["groupid", "name"]));
        assert!(p6.get("selectHostGroups").is_none());
        assert_eq!(p6["limit"], 6);
        assert_eq!(p6["search"], json!({"host": "web", "name": "web"}));
        let p7 = params("host_get", json!({}), V70);
        assert_eq!(p7["selectHostGroups"], json!(["groupid", "name"]));
        assert_eq!(p7["limit"], 101);
        assert_eq!(p7["sortfield"], json!(["name"]));
    }

    #[test]
    fn growing_subselects_are_limited() {
        for tool in ["host_get", "template_get"] {
            let p = params(tool, json!({}), V70);
            assert!(p.get("selectTriggers").is_some(), "{tool}");
            assert_eq!(p["limitSelects"], super::LIMIT_SELECTS, "{tool}");
        }
        // Zabbix refuses limitSelects where it does not apply: only with selectTriggers.
        for tool in crate::catalog::all_tools() {
            if let Some(query) = tool.query() {
                let raw = match tool.name {
                    "history_get" => json!({"itemids": ["1"], "type": "float"}),
                    "macro_get" => json!({"global": true}),
                    _ => json!({}),
                };
                let a = args::validate(tool, raw.as_object(), V70, 1_000_000).unwrap();
                let text = read_params(tool, query, &a, V70).unwrap();
                let p: serde_json::Value = serde_json::from_slice(text.as_bytes()).unwrap();
                assert_eq!(
                    p.get("limitSelects").is_some(),
                    p.get("selectTriggers").is_some(),
                    "{}",
                    tool.name
                );
            }
        }
    }

    #[test]
    fn no_tool_ever_asks_for_extend() {
        for tool in crate::catalog::all_tools() {
            let Some(query) = tool.query() else {
                continue;
            };
            for v in [V60, V70] {
                let required = match tool.name {
                    "history_get" => json!({"itemids": ["1"], "type": "float"}),
                    "macro_get" => json!({"global": true}),
                    _ => json!({}),
                };
                let raw = required.as_object();
                let a = args::validate(tool, raw, v, 1_000_000).unwrap();
                let text = read_params(tool, query, &a, v).unwrap();
                let text = String::from_utf8(text.into_bytes()).unwrap();
                assert!(!text.contains("extend"), "{}: {text}", tool.name);
                if let Some(r) = query.resource.as_ref() {
                    let text = resource_params(query, r, "1", v).to_string();
                    assert!(!text.contains("extend"), "{}: {text}", tool.name);
                }
            }
        }
    }

    #[test]
    fn history_type_is_sent_as_number_and_log_has_more_fields() {
        let p = params("history_get", json!({"itemids": [42], "type": "log"}), V70);
        assert_eq!(p["history"], 2);
        assert_eq!(p["itemids"], json!(["42"]));
        assert!(
            p["output"]
                .as_array()
                .unwrap()
                .contains(&json!("logeventid"))
        );
        assert_eq!(p["sortorder"], "DESC");
    }

    #[test]
    fn global_macros_use_their_own_fields() {
        let p = params("macro_get", json!({"global": true}), V70);
        assert_eq!(p["globalmacro"], true);
        assert_eq!(p["output"][0], "globalmacroid");
    }
}
