//! The official Zabbix MCP server image's configuration file and variables start the real
//! binary unchanged (`--env-contract zabbix-image`), from a directory that holds no
//! `policies/`: the built-in default policy decides.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const FILE: &str = "tests/data/zabbix_mcp_server.conf";

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The image's entrypoint writes the file the shipped configuration includes; do the
/// same (the image's template, no indexed rules) through a rename.
fn install_tool_access_file() {
    let target = Path::new("/tmp/zabbix_mcp_server_tool_access.conf");
    let text = std::fs::read(data("zabbix_mcp_server_tool_access.conf")).unwrap();
    if std::fs::read(target).is_ok_and(|current| current == text) {
        return;
    }
    let temp = common::temp_path("tool_access.conf");
    std::fs::write(&temp, &text).unwrap();
    std::fs::rename(&temp, target)
        .or_else(|_| std::fs::copy(&temp, target).map(|_| ()))
        .unwrap();
}

/// The binary with only the given variables (no ZABBIX_MCP_GUARD_* from the test run),
/// started in an empty directory.
fn binary(vars: &[(&str, String)]) -> Command {
    let cwd = common::temp_path("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_zabbix-mcp-guard"));
    command.env_clear().current_dir(cwd);
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command.envs(vars.iter().map(|(k, v)| (*k, v.as_str())));
    command
}

fn official_vars(lab: &common::Lab) -> Vec<(&'static str, String)> {
    vec![
        ("ZBX_FRONTEND_URL", lab.url.clone()),
        ("ZBX_ALLOWEDIP", "127.0.0.1,::1".into()),
        ("ZBX_LISTENIP", "127.0.0.1".into()),
        ("ZBX_TIMEOUT", "10".into()),
        ("ZBX_DEBUGLEVEL", "3".into()),
        ("ZBX_IGNOREURLCERTERRORS", "false".into()),
        ("ZBX_MAX_RESPONSE_SIZE", "64K".into()),
        ("ZBX_TOOL_PREFIX", "zabbix_".into()),
        ("ZBX_TLSACCEPT", "unencrypted".into()),
        ("ZBX_TLSCERTFILE", String::new()),
        ("ZBX_TLSKEYFILE", String::new()),
    ]
}

fn test_config(vars: &[(&str, String)], contract_flag: bool) -> Output {
    let mut command = binary(vars);
    command
        .arg("-c")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(FILE));
    if contract_flag {
        command.args(["--env-contract", "zabbix-image"]);
    }
    command.arg("-T").output().unwrap()
}

#[test]
fn the_official_file_passes_test_config_with_the_official_variables() {
    install_tool_access_file();
    let lab = common::lab(7);
    let vars = official_vars(&lab);
    let out = test_config(&vars, true);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "IgnoreURLCertErrors=false",
        "ToolPrefix=zabbix_",
        "ListenPort=8443",
        "# no PolicyDir: the built-in policies/default.rego decides",
        "DenyTool=item_get",
        "DenyTool=history_get",
        "configuration OK",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no {line:?} in\n{stdout}"
        );
    }
    // The switch also comes from its variable.
    let mut with_var = vars.clone();
    with_var.push(("ZABBIX_MCP_GUARD_ENV_CONTRACT", "zabbix-image".into()));
    assert!(test_config(&with_var, false).status.success());
    // Without the switch the file's unset ${ZBX_LISTENPORT} is an error, as before.
    let out = test_config(&vars, false);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ZBX_LISTENPORT is not defined"), "{stderr}");
    // A gap in the indexed rules names the variable.
    let mut gap = vars.clone();
    gap.push(("ZBX_DENYTOOL_0", "item_get".into()));
    gap.push(("ZBX_DENYTOOL_2", "*".into()));
    let out = test_config(&gap, true);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("environment variable ZBX_DENYTOOL_2: index 2 follows a gap"),
        "{stderr}"
    );
}

/// Stops the child on every exit path of the test.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = common::terminate(&mut self.0);
    }
}

/// Polls `/readyz` until it answers 200 (the policy is loaded and Zabbix answers).
async fn wait_ready(base: &str, child: &mut Child) -> Value {
    let http = reqwest::Client::new();
    let url = format!("{base}/readyz");
    common::eventually(
        "the sidecar to become ready",
        Duration::from_secs(30),
        || {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the sidecar exited: {status}");
            }
            let probe = http.get(&url).send();
            async move {
                match probe.await {
                    Ok(response) if response.status() == 200 => response.json().await.ok(),
                    _ => None,
                }
            }
        },
    )
    .await
}

#[tokio::test]
async fn the_official_file_and_variables_start_a_working_sidecar() {
    common::init();
    install_tool_access_file();
    let lab = common::lab(7);
    let port = common::free_port();
    let mut vars = official_vars(&lab);
    vars.push(("ZBX_LISTENPORT", port.to_string()));
    // The image README's triage example: indexed rules replace the default deny list.
    vars.push((
        "ZBX_ALLOWTOOL_REGEXP_0",
        "^(host|hostgroup|trigger|problem)_get$".into(),
    ));
    vars.push(("ZBX_DENYTOOL_1", "*".into()));
    let child = binary(&vars)
        .arg("-c")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(FILE))
        .args(["--env-contract", "zabbix-image"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    let base = format!("http://127.0.0.1:{port}");
    let ready = wait_ready(&base, &mut running.0).await;
    assert_eq!(ready["policy"]["source"], "built-in", "{ready}");
    assert_eq!(ready["policy"]["dir"], Value::Null);

    let guard = common::Guard::external(&base);
    let client = common::client(&guard, &lab.token).await;
    let mut tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            "zabbix_host_get",
            "zabbix_hostgroup_get",
            "zabbix_problem_get",
            "zabbix_trigger_get"
        ]
    );
    let env = common::read(&client, "zabbix_host_get", json!({"search": "mcp-web-01"})).await;
    assert_eq!(env["count"], 1, "{env}");
    let about = common::about(&client).await;
    assert_eq!(about["policy"]["source"], "built-in", "{about}");
    assert_eq!(about["policy"]["loaded"], true);
    drop(client);
}
