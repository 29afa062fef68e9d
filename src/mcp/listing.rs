//! The `tools/list` decision set: the policy's `list` phase evaluated for every tool the
//! exposure offers (policies still decide per tool), written to the decision log as ONE
//! line, and reused for a short time.
//!
//! A set is cached per everything its input holds except the clock: the caller's identity
//! (user, type, role, groups, token id), the client (address, name, version, protocol,
//! elicitation modes), the Zabbix version, and the policy revision. A reload changes the
//! revision, so a set decided under an earlier policy is never served again; a set whose
//! decisions came from two revisions (a reload during the list) is not cached at all.
//! A reused set writes no line (its one line, with its `decision_id`, was written when it
//! was decided, and says for how long it is reused); reuses are counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moka::sync::Cache;

use crate::app::App;
use crate::mcp::gate::{self, Subject};
use crate::mcp::tools::ToolList;
use crate::policy::{HiddenTool, ListRecord, Phase, PolicyInput};

/// Distinct callers × clients whose sets are kept.
const CAPACITY: u64 = 10_000;
/// How long a set is reused. Short: a list-phase rule that reads `input.now` sees a
/// clock up to this old.
pub const LIST_DECISION_TTL: Duration = Duration::from_secs(10);

/// The decided sets, and how often one was decided or reused.
pub struct ListDecisions {
    cache: Cache<ListKey, Arc<ListDecision>>,
    evaluated: AtomicU64,
    reused: AtomicU64,
    evaluations: AtomicU64,
}

/// The tools one caller with one client is offered.
#[derive(Debug)]
pub struct ListDecision {
    /// The `decision_id` of the set's decision log line.
    pub decision_id: String,
    /// The policy revision every decision of the set came from.
    pub revision: String,
    /// Per tool of the version's `ToolList`, in its order: offered or not. A flag each,
    /// not names: many sets can be cached in little memory.
    offered: Box<[bool]>,
}

/// Everything a `list` input holds except the tool and the clock.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ListKey {
    userid: String,
    username: String,
    user_type: u32,
    roleid: String,
    usrgrps: Vec<String>,
    token_id: String,
    address: String,
    client_name: Option<String>,
    client_version: Option<String>,
    protocol_version: Option<String>,
    elicitation: Vec<String>,
    zabbix: String,
    revision: String,
}

impl Default for ListDecisions {
    fn default() -> Self {
        Self::new(CAPACITY, LIST_DECISION_TTL)
    }
}

impl ListDecisions {
    pub fn new(capacity: u64, ttl: Duration) -> Self {
        Self {
            cache: Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build(),
            evaluated: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            evaluations: AtomicU64::new(0),
        }
    }

    /// The set for `subject` on `tools`: reused if one was decided for the same key in the
    /// last [`LIST_DECISION_TTL`], else decided now (one evaluation per tool, one line).
    pub fn decide(&self, app: &App, tools: &ToolList, subject: &Subject) -> Arc<ListDecision> {
        let revision = app
            .policy
            .revision()
            .map(|r| r.to_string())
            .unwrap_or_default();
        let key = ListKey::new(subject, &revision);
        let mut fresh = None;
        // Concurrent identical lists wait for one evaluation instead of each running one.
        let cached = self.cache.optionally_get_with(key, || {
            let (set, uniform) = self.evaluate(app, tools, subject, &revision);
            fresh = Some(Arc::clone(&set));
            uniform.then_some(set)
        });
        match (fresh, cached) {
            (Some(set), _) => set,
            (None, Some(set)) => {
                self.reused.fetch_add(1, Ordering::Relaxed);
                set
            }
            // optionally_get_with ran no closure yet returned nothing: cannot happen,
            // but deciding again is always correct.
            (None, None) => self.evaluate(app, tools, subject, &revision).0,
        }
    }

    /// Sets decided (each wrote one line).
    pub fn evaluated(&self) -> u64 {
        self.evaluated.load(Ordering::Relaxed)
    }

    /// Lists answered from an earlier set, without evaluating a policy.
    pub fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }

    /// Policy evaluations run for lists (one per tool of each decided set).
    pub fn evaluations(&self) -> u64 {
        self.evaluations.load(Ordering::Relaxed)
    }

    /// Decides every tool of `tools` and logs the set; true with it if every decision
    /// came from `revision` (only then may it be cached under that revision).
    fn evaluate(
        &self,
        app: &App,
        tools: &ToolList,
        subject: &Subject,
        revision: &str,
    ) -> (Arc<ListDecision>, bool) {
        let mut input: Option<PolicyInput> = None;
        let mut offered = Vec::with_capacity(tools.tools.len());
        let mut flags = vec![false; tools.tools.len()];
        let mut decisions = Vec::with_capacity(tools.tools.len());
        let mut eval_ns = 0_u64;
        let mut uniform = true;
        for (index, tool) in tools.tools.iter().enumerate() {
            let Some(def) = tools.find(&tool.name) else {
                continue;
            };
            let info = gate::tool_info(def, &tool.name);
            let input = match &mut input {
                Some(input) => {
                    input.tool = info;
                    input
                }
                None => input.insert(PolicyInput::new(
                    Phase::List,
                    info,
                    subject.caller.clone(),
                    subject.client.clone(),
                    subject.zabbix.clone(),
                )),
            };
            let decision = app.policy.decide(input);
            app.metrics.policy_decision(Phase::List, &decision);
            eval_ns = eval_ns.saturating_add(decision.eval_ns);
            uniform &= decision.revision == revision;
            if decision.allow {
                offered.push(tool.name.as_ref());
                flags[index] = true;
            }
            decisions.push((tool.name.as_ref(), decision));
        }
        self.evaluated.fetch_add(1, Ordering::Relaxed);
        self.evaluations
            .fetch_add(decisions.len() as u64, Ordering::Relaxed);
        let set = ListDecision {
            decision_id: crate::policy::new_decision_id(),
            revision: revision.to_owned(),
            offered: flags.into_boxed_slice(),
        };
        if let Some(input) = &input {
            let hidden = decisions
                .iter()
                .filter(|(_, d)| !d.allow)
                .map(|(name, d)| HiddenTool {
                    tool: name,
                    reasons: &d.reasons,
                })
                .collect();
            let dry_run_would_hide = decisions
                .iter()
                .filter(|(_, d)| d.dry_run_would_deny)
                .map(|(name, d)| HiddenTool {
                    tool: name,
                    reasons: &d.reasons,
                })
                .collect();
            app.decisions.record_list(&ListRecord {
                decision_id: &set.decision_id,
                input,
                offered,
                hidden,
                dry_run_would_hide,
                revision,
                eval_ns,
                evaluations: decisions.len(),
                reused_for_seconds: LIST_DECISION_TTL.as_secs(),
            });
        }
        (Arc::new(set), uniform)
    }
}

impl ListDecision {
    /// Whether the tool at `index` of the `ToolList` the set was decided on is offered.
    pub fn offers_at(&self, index: usize) -> bool {
        self.offered.get(index).copied().unwrap_or(false)
    }

    /// Whether the tool with this exposed name is offered (`tools`: the list the set was
    /// decided on, the one for the caller's Zabbix version).
    pub fn offers(&self, tools: &ToolList, exposed_name: &str) -> bool {
        tools
            .tools
            .iter()
            .position(|tool| tool.name == exposed_name)
            .is_some_and(|index| self.offers_at(index))
    }
}

impl ListKey {
    fn new(subject: &Subject, revision: &str) -> Self {
        let caller = &subject.caller;
        let client = &subject.client;
        Self {
            userid: caller.userid.clone(),
            username: caller.username.clone(),
            user_type: caller.user_type,
            roleid: caller.roleid.clone(),
            usrgrps: caller.usrgrps.clone(),
            token_id: caller.token_id.clone(),
            address: client.address.clone(),
            client_name: client.name.clone(),
            client_version: client.version.clone(),
            protocol_version: client.protocol_version.clone(),
            elicitation: client.elicitation.clone(),
            zabbix: subject.zabbix.version.clone(),
            revision: revision.to_owned(),
        }
    }
}
