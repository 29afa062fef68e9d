# Tier 1 operations: callers in a tier 1 user group (data.tier1.usrgrps) may only look at
# and work on problems of their host groups (data.tier1.groupids); everybody else gets the
# default behaviour.
#
# For tier 1 callers:
# - only problem_get, problem_acknowledge and problem_annotate are offered and allowed,
#   also when the caller is in other groups too (the most restrictive rule wins);
# - problem_get must be scoped with groupids, all of them tier 1 groups. Zabbix combines
#   groupids with the other filters (eventids, hostids...) by AND, so the result cannot
#   leave those groups;
# - problem_acknowledge and problem_annotate address events by eventids: the input does
#   not say which host groups those events belong to, so the policy cannot check them.
#   If the arguments carry groupids they must be tier 1 groups; otherwise the scope is
#   Zabbix's own permissions (give the tier 1 user group read-write access to exactly
#   these host groups; Zabbix refuses to acknowledge events the user cannot see) and a
#   human must approve every such write (approval "required"). Set
#   data.tier1.strict_event_scope to true to deny them instead unless groupids are given;
# - no history (history_get is not among the tools; the limits are zero besides).
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

deny contains msg if {
	is_tier1
	input.phase == "call"
	input.tool.name in event_tools
	count(groupids) == 0
	object.get(config, "strict_event_scope", false) == true
	msg := sprintf("tier 1: %s needs groupids to check the scope (strict_event_scope)", [input.tool.name])
}

default allow := false

allow if count(deny) == 0

approval := "required" if {
	is_tier1
	input.tool.kind == "write"
} else := "if_supported" if {
	input.tool.kind == "write"
} else := "none"

history_seconds := 0 if is_tier1 else := seven_days

decision := {
	"allow": allow,
	"reasons": deny,
	"approval": approval,
	"history": {"max_window_seconds": history_seconds, "max_age_seconds": history_seconds},
	"max_limit": 1000,
}
