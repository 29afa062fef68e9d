//! deploy/kubernetes: the manifests hold the sidecar pattern (checked by
//! tests/deploy/check_kubernetes.py), and a ConfigMap update as the kubelet makes it (a
//! new timestamped directory, then an atomic rename of the `..data` symlink) reaches the
//! running sidecar's policy.

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

#[test]
fn manifests_hold_the_sidecar_pattern() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/deploy/check_kubernetes.py");
    let out = std::process::Command::new("/usr/bin/python3")
        .arg(&script)
        .output()
        .expect("/usr/bin/python3 runs (python3-yaml: deploy/lab/start-zabbix.sh all)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("kubernetes manifests: OK"), "{stdout}");
}

const SHIPPED: &str = include_str!("../policies/default.rego");
const DENY_HOST_GET: &str = r#"package zabbix.mcp
import rego.v1
decision := {"allow": false, "reasons": ["host_get is off since ConfigMap v2"]} if {
    input.phase == "call"
    input.tool.name == "host_get"
} else := {"allow": true, "reasons": [], "approval": "none"}
"#;

/// A ConfigMap volume as the kubelet's atomic writer lays it out: the files in a
/// timestamped directory, `..data` pointing at it, and each key a symlink through `..data`.
struct ConfigMapVolume {
    dir: PathBuf,
    generation: u32,
}

impl ConfigMapVolume {
    fn new(files: &[(&str, &str)]) -> Self {
        let dir = common::temp_path("configmap");
        std::fs::create_dir_all(&dir).expect("volume dir");
        let mut volume = ConfigMapVolume { dir, generation: 0 };
        volume.update(files);
        for (name, _) in files {
            symlink(Path::new("..data").join(name), volume.dir.join(name)).expect("key link");
        }
        volume
    }

    /// The kubelet's update: write the new generation, point `..data_tmp` at it, rename
    /// it over `..data` (atomic), remove the old generation.
    fn update(&mut self, files: &[(&str, &str)]) {
        self.generation += 1;
        let generation = format!(
            "..2026_12_01_00_00_0{}.{}",
            self.generation,
            std::process::id()
        );
        let new = self.dir.join(&generation);
        std::fs::create_dir(&new).expect("generation dir");
        for (name, text) in files {
            std::fs::write(new.join(name), text).expect("write key");
        }
        let old = std::fs::read_link(self.dir.join("..data")).ok();
        let tmp = self.dir.join("..data_tmp");
        symlink(&generation, &tmp).expect("..data_tmp");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("swap ..data");
        if let Some(old) = old {
            std::fs::remove_dir_all(self.dir.join(old)).expect("remove old generation");
        }
    }
}

async fn wait_for<F: AsyncFnMut() -> bool>(done: F) {
    common::wait_until("the condition", Duration::from_secs(20), done).await;
}

#[tokio::test]
async fn a_configmap_update_swapping_data_reloads_the_policy() {
    let lab = common::lab(7);
    let mut volume = ConfigMapVolume::new(&[("default.rego", SHIPPED)]);
    let mut config = common::config_for(&lab.url);
    config.policy_dir = Some(volume.dir.clone());
    let guard = common::start_with(config).await;
    let client = common::client(&guard, &lab.token_viewer).await;
    let first = guard.app().policy.status().revision;
    common::read(&client, "host_get", json!({"limit": 1})).await;

    volume.update(&[("default.rego", DENY_HOST_GET)]);
    wait_for(async || {
        common::call(&client, "host_get", json!({"limit": 1}))
            .await
            .is_error
            == Some(true)
    })
    .await;
    let err = common::tool_error(&client, "host_get", json!({"limit": 1})).await;
    assert!(
        err["message"]
            .as_str()
            .unwrap_or_default()
            .contains("host_get is off since ConfigMap v2"),
        "{err}"
    );
    assert_ne!(guard.app().policy.status().revision, first);
    // Back to the shipped policy: a second swap works as well.
    volume.update(&[("default.rego", SHIPPED)]);
    wait_for(async || {
        common::call(&client, "host_get", json!({"limit": 1}))
            .await
            .is_error
            != Some(true)
    })
    .await;
    assert_eq!(guard.app().policy.status().revision, first);
    guard.stop().await;
}
