//! Direct Zabbix API calls with the lab's Admin token, for test setup that the sidecar
//! must not do itself (roles, users, tokens of one test). Names are unique per run.

use serde_json::{Value, json};

use super::Lab;

/// One JSON-RPC call as Admin; panics on a Zabbix error (setup must not half succeed).
pub async fn admin(lab: &Lab, method: &str, params: Value) -> Value {
    super::init();
    let mut body = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 1});
    let mut request = reqwest::Client::new().post(&lab.url);
    // 6.0 takes the token in the body; 6.4+ in the header (7.2+ only there).
    if lab.major == 6 {
        body["auth"] = json!(lab.token);
    } else {
        request = request.bearer_auth(&lab.token);
    }
    let answer: Value = request
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"));
    assert!(answer["error"].is_null(), "{method} {params}: {answer}");
    answer["result"].clone()
}

/// A one-time maintenance named `name` on the host group `groupid`, active for the next
/// hour; its id.
#[allow(dead_code)] // not every test binary makes maintenances
pub async fn maintenance_on_group(lab: &Lab, name: &str, groupid: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let created = admin(
        lab,
        "maintenance.create",
        json!({"name": name, "active_since": now, "active_till": now + 3600,
               "groups": [{"groupid": groupid}],
               "timeperiods": [{"timeperiod_type": 0, "start_date": now, "period": 3600}]}),
    )
    .await;
    created["maintenanceids"][0]
        .as_str()
        .unwrap_or_else(|| panic!("maintenance.create: {created}"))
        .to_owned()
}

/// Asserts the maintenance `id` is still there (a write refused left it).
#[allow(dead_code)]
pub async fn assert_maintenance_kept(lab: &Lab, id: &str) {
    let kept = admin(
        lab,
        "maintenance.get",
        json!({"maintenanceids": [id], "output": ["maintenanceid"]}),
    )
    .await;
    assert_eq!(
        kept.as_array().map(Vec::len),
        Some(1),
        "Zabbix {}: not deleted: {kept}",
        lab.major
    );
}

/// A name no other test run uses.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// The password of every [`TestUser`].
pub const TEST_PASSWORD: &str = "McpTest-2026!x";

/// A user of its own (in `usrgrpid`, with a role denying `denied_methods`) and its API
/// token. `delete` removes the user (its token goes with it) and the role.
#[derive(Clone)]
pub struct TestUser {
    pub userid: String,
    /// Signs in with [`TEST_PASSWORD`].
    pub username: String,
    pub roleid: String,
    pub token: String,
}

impl TestUser {
    /// Runs `test` in a task of its own and deletes this user whatever it did (an assertion
    /// that fails included), then gives back the test's result or goes on with its panic.
    pub async fn run<T: Send + 'static>(
        &self,
        lab: &Lab,
        test: impl Future<Output = T> + Send + 'static,
    ) -> T {
        let checked = tokio::spawn(test).await;
        self.clone().delete(lab).await;
        checked.unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()))
    }

    pub async fn create(lab: &Lab, usrgrpid: &str, denied_methods: &[&str]) -> TestUser {
        let name = unique("mcp-test");
        let role = admin(
            lab,
            "role.create",
            json!({"name": name, "type": 1,
                   "rules": {"api.access": 1, "api.mode": 0, "api": denied_methods}}),
        )
        .await;
        let roleid = role["roleids"][0].as_str().expect("roleid").to_owned();
        let user = admin(
            lab,
            "user.create",
            json!({"username": name, "passwd": TEST_PASSWORD, "roleid": roleid,
                   "usrgrps": [{"usrgrpid": usrgrpid}]}),
        )
        .await;
        let userid = user["userids"][0].as_str().expect("userid").to_owned();
        let token = admin(lab, "token.create", json!({"name": name, "userid": userid})).await;
        let tokenid = token["tokenids"][0].as_str().expect("tokenid").to_owned();
        let generated = admin(lab, "token.generate", json!([tokenid])).await;
        let token = generated[0]["token"].as_str().expect("token").to_owned();
        TestUser {
            userid,
            username: name,
            roleid,
            token,
        }
    }

    /// Deletes the user's API token in Zabbix, the user staying: the token is revoked.
    pub async fn revoke_token(&self, lab: &Lab) {
        let tokens = admin(
            lab,
            "token.get",
            json!({"userids": [self.userid], "output": ["tokenid"]}),
        )
        .await;
        let ids: Vec<Value> = tokens
            .as_array()
            .expect("tokens")
            .iter()
            .map(|t| t["tokenid"].clone())
            .collect();
        assert_eq!(ids.len(), 1, "{tokens}");
        admin(lab, "token.delete", Value::Array(ids)).await;
    }

    pub async fn delete(self, lab: &Lab) {
        admin(lab, "user.delete", json!([self.userid])).await;
        admin(lab, "role.delete", json!([self.roleid])).await;
    }
}

/// The messages of the acknowledgements of `event` as Zabbix keeps them (one JSON text):
/// to tell whether an annotation reached Zabbix.
pub async fn acknowledgements(lab: &Lab, event: &str) -> String {
    admin(
        lab,
        "event.get",
        json!({"eventids": [event], "output": ["eventid"], "selectAcknowledges": ["message"]}),
    )
    .await
    .to_string()
}
