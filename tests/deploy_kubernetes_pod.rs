//! deploy/kubernetes as the kubelet runs it: the sidecar container's variables from the
//! manifest (and the image's own), its Secret files (the seal key, the Redis URL, which
//! names the lab's Redis) laid out as the kubelet does (owned by root, the pod's `fsGroup`
//! as group with group read added to `defaultMode`), the
//! binary run as the container's `runAsUser`:`runAsGroup` with `fsGroup` among its groups,
//! and both probes sent from an address outside `ZBX_ALLOWEDIP`, as the kubelet's node
//! address may be. Needs root (chown, setpriv) and the 7.0 lab.

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// What the manifest says of the sidecar container, read with python3-yaml.
fn manifest() -> Value {
    let script = r#"
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
guard = next(c for c in pod["containers"] if c["name"] == "zabbix-mcp-guard")
secrets = {v["name"]: v["secret"].get("defaultMode", 0o644) for v in pod["volumes"] if "secret" in v}
print(json.dumps({
    "env": {e["name"]: e.get("value") for e in guard["env"]},
    "ports": {p["name"]: p["containerPort"] for p in guard["ports"]},
    "probes": {k: guard[k]["httpGet"] for k in ("readinessProbe", "livenessProbe")},
    "user": guard["securityContext"]["runAsUser"],
    "group": guard["securityContext"]["runAsGroup"],
    "fs_group": pod.get("securityContext", {}).get("fsGroup"),
    "secret_modes": secrets,
}))
"#;
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/deployment.yaml");
    let out = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .arg(&file)
        .output()
        .expect("/usr/bin/python3 with python3-yaml");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// `GET path` on 127.0.0.1:port: the status code and the body, or `None` when the
/// connection is refused or closed without an answer.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let status = answer.split_whitespace().nth(1)?.parse().ok()?;
    let body = answer.split_once("\r\n\r\n")?.1.to_owned();
    Some((status, body))
}

#[test]
fn the_pod_as_the_kubelet_runs_it_answers_its_probes() {
    let lab = common::lab(7);
    let m = manifest();
    let num = |v: &Value| u32::try_from(v.as_u64().expect("a number")).expect("u32");
    let (user, group) = (num(&m["user"]), num(&m["group"]));
    let fs_group = m["fs_group"]
        .as_u64()
        .map(|g| u32::try_from(g).expect("gid"));

    // The Secret volumes' files as the kubelet writes them.
    let dir = common::scratch_dir("k8s-pod");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret_file = |volume: &str, text: &str| {
        let path = dir.join(volume);
        std::fs::write(&path, format!("{text}\n")).unwrap();
        let mode = num(&m["secret_modes"][volume]) | if fs_group.is_some() { 0o440 } else { 0 };
        std::os::unix::fs::chown(&path, Some(0), Some(fs_group.unwrap_or(0))).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.display().to_string()
    };
    let key = secret_file("seal-key", &"5a".repeat(32));
    let redis_url = secret_file("redis-url", &common::redis_url());

    // The container's ports, moved to free ones here, by name.
    let env = m["env"].as_object().expect("env");
    let ports = m["ports"].as_object().expect("ports");
    let mut moved = std::collections::HashMap::new();
    for (name, port) in ports {
        moved.insert(num(port).to_string(), (name.clone(), common::free_port()));
    }
    let port_of = |name: &str| {
        moved
            .values()
            .find(|(n, _)| n == name)
            .map(|(_, p)| *p)
            .unwrap_or_else(|| panic!("no port {name}"))
    };
    let groups = fs_group.map_or_else(|| group.to_string(), |g| format!("{group},{g}"));
    let mut command = Command::new("setpriv");
    command
        .args([&format!("--reuid={user}"), &format!("--regid={group}")])
        .arg(format!("--groups={groups}"))
        .arg(env!("CARGO_BIN_EXE_zabbix-mcp-guard"))
        .arg("serve")
        .env_clear()
        .env("ZABBIX_MCP_GUARD_ENV_CONTRACT", "zabbix-image")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (name, value) in env {
        let Some(value) = value.as_str() else {
            panic!("{name} has no value of its own: a secret belongs in a Secret file")
        };
        let value = match name.as_str() {
            "ZBX_FRONTEND_URL" => lab.url.clone(),
            "ZABBIX_MCP_GUARD_POLICY_DIR" => {
                concat!(env!("CARGO_MANIFEST_DIR"), "/policies").to_owned()
            }
            "ZABBIX_MCP_GUARD_APPROVAL_SEAL_KEY_FILE" => key.clone(),
            "ZABBIX_MCP_GUARD_SHARED_STORE_FILE" => redis_url.clone(),
            _ => moved
                .get(value)
                .map_or_else(|| value.to_owned(), |(_, p)| p.to_string()),
        };
        command.env(name, value);
    }
    let allowed = env["ZBX_ALLOWEDIP"].as_str().expect("ZBX_ALLOWEDIP");
    assert!(
        !allowed.split(',').any(|net| net
            .trim()
            .parse::<ipnet::IpNet>()
            .is_ok_and(|n| n.contains(&"127.0.0.1".parse::<std::net::IpAddr>().unwrap()))),
        "the probes must come from outside ZBX_ALLOWEDIP ({allowed})"
    );
    // Killed however the test ends, also when the wait below times out.
    let mut child = Sidecar(Some(command.spawn().expect("setpriv")));

    let mut answers: Vec<Option<u16>> = Vec::new();
    common::wait_until_blocking(
        "both probes to answer 200 (or the sidecar to exit)",
        Duration::from_secs(20),
        || {
            answers = ["readinessProbe", "livenessProbe"]
                .iter()
                .map(|probe| {
                    let http = &m["probes"][probe];
                    let port = http["port"]
                        .as_str()
                        .map_or_else(|| port_of_number(&moved, &http["port"]), port_of);
                    get(port, http["path"].as_str().expect("path")).map(|(status, _)| status)
                })
                .collect();
            answers.iter().all(|a| *a == Some(200)) || child.exited()
        },
    );
    // Ready with the Redis its URL file names (readiness asks Redis too).
    let ready = get(port_of("status"), "/readyz").map(|(_, body)| body);
    let out = child.stop();
    assert_eq!(
        answers,
        [Some(200), Some(200)],
        "the probes' answers; the sidecar said:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ready: Value = serde_json::from_str(&ready.unwrap_or_default()).expect("/readyz JSON");
    assert_eq!(
        ready["shared_store"],
        serde_json::json!({"backend": "redis", "reachable": true}),
        "{ready}"
    );
    // The Secret's root:<fsGroup> 0440 is the sidecar's own group: no warning to act on.
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!log.contains("is readable by"), "{log}");
}

/// A probe that names its port by number: the free port it was moved to.
fn port_of_number(moved: &std::collections::HashMap<String, (String, u16)>, port: &Value) -> u16 {
    let number = port.as_u64().expect("a port name or number").to_string();
    moved
        .get(&number)
        .map(|(_, p)| *p)
        .expect("a container port")
}

/// The sidecar under test, killed when dropped.
struct Sidecar(Option<std::process::Child>);

impl Sidecar {
    fn exited(&mut self) -> bool {
        self.0
            .as_mut()
            .is_some_and(|c| c.try_wait().expect("wait").is_some())
    }

    /// Stops it and returns what it wrote.
    fn stop(&mut self) -> std::process::Output {
        let mut child = self.0.take().expect("running");
        let _ = child.kill();
        child.wait_with_output().expect("output")
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
