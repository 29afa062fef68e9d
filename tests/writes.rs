//! The problem and maintenance write tools against the real labs: real problems made by
//! trapper values, effects read back through problem_get / maintenance_get, Zabbix errors
//! (permission included) unchanged. The suite is in tests/common/write_suite.rs (also run
//! through the version front by tests/versions.rs).

mod common;

use common::write_suite::{Target, maintenance_tools, problem_tools};

#[tokio::test]
async fn problem_tools_change_real_problems() {
    for lab in common::labs() {
        problem_tools(&Target::direct(&lab)).await;
    }
}

#[tokio::test]
async fn maintenance_create_update_delete() {
    for lab in common::labs() {
        maintenance_tools(&Target::direct(&lab)).await;
    }
}
