//! The configuration parser with an arbitrary file: it must load or fail with a named
//! error, never panic. `Include` lines are dropped: they would read arbitrary host paths.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use zabbix_mcp_guard::config::{Config, EnvContract, Sources};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("Include"))
        .map(|l| format!("{l}\n"))
        .collect();
    let path = std::env::temp_dir().join(format!("zmg-fuzz-config-{}.conf", std::process::id()));
    if std::fs::write(&path, text).is_err() {
        return;
    }
    let mut env = BTreeMap::new();
    env.insert("ZMG_FUZZ".to_owned(), "value".to_owned());
    for contract in [EnvContract::Guard, EnvContract::ZabbixImage] {
        let _ = Config::load(&Sources {
            config_file: Some(path.clone()),
            env: env.clone(),
            flags: Vec::new(),
            env_contract: contract,
        })
        .map(|c| c.render_effective());
    }
});
