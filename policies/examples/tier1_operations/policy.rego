# Tier 1 operations: callers in a tier 1 user group (data.tier1.usrgrps) may only look at
# and work on problems of their host groups (data.tier1.groupids); everybody else gets the
# default behaviour.
#
# For tier 1 callers:
# - only problem_get, problem_acknowledge and problem_annotate are offered and allowed,
#   also when the caller is in other groups too (the most restrictive rule wins); the other
#   tools do not exist for them (a call by name answers "unknown tool");
# - problem_get must be scoped with groupids, all of them tier 1 groups. Zabbix combines
#   groupids with the other filters (eventids, hostids...) by AND, so the result cannot
#   leave those groups;
# - problem_acknowledge and problem_annotate are scoped by what they touch: the sidecar
#   resolves the events' hosts and their host groups with the caller's token
#   (input.targets), and every host must be in at least one tier 1 host group. An event the
#   caller cannot see never gets here (unresolvable targets deny);
# - no history (history_get is not among the tools; the limits are zero besides);
# - per-caller limits (rate): 60 calls a minute, 2 at once, one budget for all three
#   tools (they get the same rate); others get the default policy's generous read limits.
package zabbix.mcp

import rego.v1

seven_days := 604800

tier1_tools := {"problem_get", "problem_acknowledge", "problem_annotate"}

event_tools := {"problem_acknowledge", "problem_annotate"}

# data.tier1 as a path: the regorus VM does not compile access to `data` as a whole.
# Without its data (no data.json, or one without these keys) the policy denies every
# call instead of running with its restrictions lifted.
# The default keeps the derived values defined; the rule below denies.
default config := {}

config := data.tier1

deny contains "policy data missing: data.tier1.usrgrps must be a list of user group names" if {
	not is_array(data.tier1.usrgrps)
}

deny contains "policy data missing: data.tier1.groupids must be a list of host group IDs" if {
	not is_array(data.tier1.groupids)
}

tier1_usrgrps := {g | some g in object.get(config, "usrgrps", [])}

tier1_groupids := {g | some g in object.get(config, "groupids", [])}

is_tier1 if {
	some g in input.caller.usrgrps
	g in tier1_usrgrps
}

groupids := object.get(input.arguments, "groupids", [])

deny contains msg if {
	input.version != 1
	msg := sprintf("unsupported policy input version %v", [input.version])
}

deny contains "policy input has no version" if not input.version

deny contains msg if {
	is_tier1
	not input.tool.name in tier1_tools
	msg := sprintf("tier 1 operators may only use %s", [concat(", ", sort(tier1_tools))])
}

deny contains "tier 1: problem_get must be limited with groupids (tier 1 host groups)" if {
	is_tier1
	input.phase == "call"
	input.tool.name == "problem_get"
	count(groupids) == 0
}

deny contains msg if {
	is_tier1
	input.phase == "call"
	input.tool.name in tier1_tools
	some g in groupids
	not g in tier1_groupids
	msg := sprintf("tier 1: host group %v is outside the tier 1 scope", [g])
}

# A host is in scope when one of its host groups is a tier 1 group.
in_scope(host) if {
	some g in host.groups
	g.groupid in tier1_groupids
}

deny contains msg if {
	is_tier1
	input.phase == "call"
	input.tool.name in event_tools
	some host in input.targets.hosts
	not in_scope(host)
	msg := sprintf("tier 1: host %v is outside the tier 1 scope", [host.host])
}

deny contains msg if {
	is_tier1
	input.phase == "call"
	input.tool.name in event_tools
	not input.targets
	msg := sprintf("tier 1: %s needs the targets of the call to check the scope", [input.tool.name])
}

default allow := false

allow if count(deny) == 0

approval := "if_supported" if {
	input.tool.kind == "write"
} else := "none"

history_seconds := 0 if is_tier1 else := seven_days

rate := {"calls": 60, "per_seconds": 60, "concurrent": 2} if is_tier1
else := {"calls": 10000, "per_seconds": 1, "concurrent": 1000}

decision := {
	"allow": allow,
	"reasons": deny,
	"approval": approval,
	"history": {"max_window_seconds": history_seconds, "max_age_seconds": history_seconds},
	"max_limit": 1000,
	"rate": rate,
}
