//! The sidecar pattern in network namespaces (tests/deploy/netns.sh, run on the binary
//! under test): the agent's namespace reaches /mcp and not the frontend's API.

#[test]
fn an_agent_namespace_reaches_mcp_and_not_the_frontend_api() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/deploy/netns.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .env("BIN", env!("CARGO_BIN_EXE_zabbix-mcp-guard"))
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("netns: OK"), "{stdout}{stderr}");
    for refused in ["refused: http://10.213.", "404: http://10.213."] {
        assert!(stdout.contains(refused), "{stdout}");
    }
}
