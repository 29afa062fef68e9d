//! Argument validation of every tool with arbitrary JSON: the first byte picks the tool,
//! the rest is the `arguments` object. Validation must answer (Ok or a named error) and
//! never panic; what it accepts must build Zabbix parameters without panicking either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use zabbix_mcp_guard::catalog::{self, args};
use zabbix_mcp_guard::zabbix::ZabbixVersion;

const VERSIONS: [ZabbixVersion; 3] = [
    ZabbixVersion::new(6, 0, 14),
    ZabbixVersion::new(7, 0, 22),
    ZabbixVersion::new(8, 0, 0),
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, json)) = data.split_first() else {
        return;
    };
    let Ok(Value::Object(raw)) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let tools: Vec<_> = catalog::all_tools().collect();
    let tool = tools[usize::from(pick) % tools.len()];
    for version in VERSIONS {
        if let Ok(valid) = args::validate(tool, Some(&raw), version, 1_767_225_600)
            && let Some(query) = tool.query()
        {
            let _ = catalog::params::read_params(tool, query, &valid, version);
        }
    }
});
