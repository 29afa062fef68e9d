//! The `tools/list` decision set: the policy's `list` phase evaluated for every tool the
//! exposure offers (policies still decide per tool), written to the decision log as ONE
//! line, and reused for a short time.
//!
//! A set is cached per everything its input holds except the clock: the caller's identity
//! (user, type, role, groups, token id), the client (address, name, version, protocol,
//! elicitation modes), the Zabbix version, the policy revision and the exposure rules'
//! generation. A reload changes the
//! revision, so a set decided under an earlier policy is never served again; a set whose
//! decisions came from two revisions (a reload during the list) is not cached at all.
//! A reused set writes no line (its one line, with its `decision_id`, was written when it
//! was decided, and says for how long it is reused); reuses are counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moka::sync::Cache;

use crate::app::App;
use crate::hashing::FastState;
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
    cache: Cache<ListKey, Arc<ListDecision>, FastState>,
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

/// Everything a `list` input holds except the tool and the clock, written into one byte
/// string: each text after its length and each list after its count, so two inputs never
/// write the same bytes. One allocation to make, one pass of the cache's hasher and one
/// comparison to find; as thirteen fields, each call cloned every text and hashed each
/// apart (a tenth of the code a `tools/call` ran went to hashing this key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ListKey(Box<[u8]>);

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
                .build_with_hasher(FastState::default()),
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
        let key = ListKey::new(subject, &revision, tools.exposure_generation);
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
    fn new(subject: &Subject, revision: &str, exposure_generation: u64) -> Self {
        let caller = &subject.caller;
        let client = &subject.client;
        let mut key = KeyWriter(Vec::with_capacity(256));
        key.text(&caller.userid);
        key.text(&caller.username);
        key.0.extend_from_slice(&caller.user_type.to_le_bytes());
        key.text(&caller.roleid);
        key.texts(&caller.usrgrps);
        key.text(&caller.token_id);
        key.text(&client.address);
        key.maybe(client.name.as_deref());
        key.maybe(client.version.as_deref());
        key.maybe(client.protocol_version.as_deref());
        key.texts(&client.elicitation);
        key.text(&subject.zabbix.version);
        key.text(revision);
        // The set's flags follow the order of one tool list: another exposure, another list.
        key.0.extend_from_slice(&exposure_generation.to_le_bytes());
        Self(key.0.into_boxed_slice())
    }
}

/// Writes a key's parts so that no two sequences of parts give the same bytes.
struct KeyWriter(Vec<u8>);

impl KeyWriter {
    fn count(&mut self, n: usize) {
        self.0.extend_from_slice(&(n as u64).to_le_bytes());
    }

    fn text(&mut self, text: &str) {
        self.count(text.len());
        self.0.extend_from_slice(text.as_bytes());
    }

    fn maybe(&mut self, text: Option<&str>) {
        match text {
            None => self.0.push(0),
            Some(text) => {
                self.0.push(1);
                self.text(text);
            }
        }
    }

    fn texts(&mut self, texts: &[String]) {
        self.count(texts.len());
        for text in texts {
            self.text(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ListKey;
    use crate::mcp::gate::Subject;
    use crate::policy::{CallerInfo, ClientInfo, ZabbixInfo};

    fn subject() -> Subject {
        Subject {
            caller: CallerInfo {
                userid: "7".into(),
                username: "agent".into(),
                user_type: 1,
                roleid: "1".into(),
                usrgrps: vec!["ops".into(), "web".into()],
                token_id: "ab12".into(),
            },
            client: ClientInfo {
                address: "10.0.0.1".into(),
                name: Some("inspector".into()),
                version: None,
                protocol_version: Some("2025-11-25".into()),
                elicitation: vec!["form".into()],
            },
            zabbix: ZabbixInfo {
                version: "7.0.22".into(),
            },
        }
    }

    fn key(change: impl FnOnce(&mut Subject)) -> ListKey {
        let mut subject = subject();
        change(&mut subject);
        ListKey::new(&subject, "rev1", 0)
    }

    #[test]
    fn the_same_input_gives_the_same_key() {
        assert_eq!(key(|_| {}), key(|_| {}));
    }

    #[test]
    fn every_part_and_every_boundary_tells_keys_apart() {
        let base = key(|_| {});
        let changed: Vec<(&str, ListKey)> = vec![
            ("userid", key(|s| s.caller.userid = "8".into())),
            ("username", key(|s| s.caller.username = "agent2".into())),
            ("type", key(|s| s.caller.user_type = 3)),
            ("roleid", key(|s| s.caller.roleid = "2".into())),
            ("groups", key(|s| s.caller.usrgrps.truncate(1))),
            (
                "group split",
                key(|s| s.caller.usrgrps = vec!["opsweb".into()]),
            ),
            (
                "group moved",
                key(|s| s.caller.usrgrps = vec!["op".into(), "sweb".into()]),
            ),
            ("token", key(|s| s.caller.token_id = "ab13".into())),
            ("address", key(|s| s.client.address = "10.0.0.2".into())),
            ("name", key(|s| s.client.name = None)),
            ("empty name", key(|s| s.client.name = Some(String::new()))),
            ("version", key(|s| s.client.version = Some(String::new()))),
            ("protocol", key(|s| s.client.protocol_version = None)),
            (
                "elicitation",
                key(|s| s.client.elicitation.push("url".into())),
            ),
            ("zabbix", key(|s| s.zabbix.version = "6.0.40".into())),
            // A text moved across a boundary: username's end becomes roleid's start.
            (
                "boundary",
                key(|s| {
                    s.caller.username = "agen".into();
                    s.caller.roleid = "t1".into();
                }),
            ),
        ];
        for (what, other) in &changed {
            assert_ne!(&base, other, "{what}");
        }
        assert_ne!(base, ListKey::new(&subject(), "rev2", 0), "revision");
        assert_ne!(base, ListKey::new(&subject(), "rev1", 1), "exposure");
    }
}
