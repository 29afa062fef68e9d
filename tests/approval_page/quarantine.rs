//! A caller put in a quarantine group while their write waits on the page: the policy
//! (`QUARANTINE`) refuses such a caller in the `approve` phase, and the tests look at what
//! the pending approval and its retry do once the caller changed.

use std::future::Future;

use serde_json::{Value, json};

use crate::common::{self, Client, Lab, zapi};
use crate::support::{Setup, Sidecar, pending, sidecar_with};

/// Writes go to the page; calls of a caller in the quarantine group are not approved there
/// (the `approve` phase reads `input.caller`).
pub(crate) const QUARANTINE: &str = r#"package zabbix.mcp
import rego.v1
quarantined if data.quarantine.usrgrp in input.caller.usrgrps
default allow := true
allow := false if {
    input.phase == "approve"
    quarantined
}
decision := {"allow": true} if input.phase == "list"
decision := {"allow": true} if {
    input.phase != "list"
    input.tool.kind == "read"
}
decision := {"allow": allow, "reasons": ["the caller is quarantined"], "approval": "page",
             "approvers": {"usrgrps": ["Zabbix administrators"], "distinct_from_caller": true}} if {
    input.phase != "list"
    input.tool.kind == "write"
}
"#;

/// The quarantine group, new and empty: its name (what the policy's data names) and id.
pub(crate) struct Group {
    pub name: String,
    pub usrgrpid: String,
}

/// A write of `user`'s asked for on the page, then `user` put in the quarantine group.
pub(crate) struct Asked {
    pub car: Sidecar,
    pub agent: Client,
    pub event: String,
    pub message: String,
    pub args: Value,
    /// The first call's error: `approval_pending`.
    pub first: Value,
    /// The approval that first call waits on.
    pub id: String,
}

/// Runs `test` with a new member of MCP Operators and a new quarantine group, and deletes
/// both whatever the test did (an assertion that fails included), going on with its panic.
pub(crate) async fn run<F, Fut>(lab: &Lab, test: F)
where
    F: FnOnce(Lab, zapi::TestUser, Group) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let operators = common::seed_id(lab, "user_groups", "MCP Operators");
    let name = zapi::unique("mcp-quarantine");
    let created = zapi::admin(lab, "usergroup.create", json!({"name": name})).await;
    let usrgrpid = created["usrgrpids"][0].as_str().unwrap().to_owned();
    let user = zapi::TestUser::create(lab, &operators, &[]).await;
    let group = Group {
        name,
        usrgrpid: usrgrpid.clone(),
    };
    let checked = tokio::spawn(test(lab.clone(), user.clone(), group)).await;
    user.delete(lab).await;
    zapi::admin(lab, "usergroup.delete", json!([usrgrpid])).await;
    if let Err(error) = checked {
        std::panic::resume_unwind(error.into_panic());
    }
}

impl Asked {
    /// A page sidecar with the quarantine policy, `user`'s agent asking to annotate the
    /// seeded problem (a message starting `prefix`), then `user` added to `group`.
    pub(crate) async fn then_quarantined(
        lab: &Lab,
        user: &zapi::TestUser,
        group: &Group,
        prefix: &str,
    ) -> Asked {
        let dir = common::temp_path("policy");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("policy.rego"), QUARANTINE).unwrap();
        let data = json!({"quarantine": {"usrgrp": group.name}});
        std::fs::write(dir.join("data.json"), data.to_string()).unwrap();
        let car = sidecar_with(Setup::page(&lab.url), |c| c.policy_dir = Some(dir)).await;
        let agent = common::client(&car.guard, &user.token).await;
        let event = common::seed_id(lab, "problems", "MCP uint too high");
        let message = zapi::unique(prefix);
        let args = json!({"eventids": [event], "message": message});
        let first = common::tool_error(&agent, "problem_annotate", args.clone()).await;
        let (id, _) = pending(&first);
        let operators = common::seed_id(lab, "user_groups", "MCP Operators");
        let both = json!([{"usrgrpid": operators}, {"usrgrpid": group.usrgrpid}]);
        zapi::admin(
            lab,
            "user.update",
            json!({"userid": user.userid, "usrgrps": both}),
        )
        .await;
        Asked {
            car,
            agent,
            event,
            message,
            args,
            first,
            id,
        }
    }
}
