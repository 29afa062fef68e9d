# History by user group: callers in a full-history group (data.history_by_group.
# full_usrgrps, by default "Zabbix administrators") keep the default 7-day history limits;
# everybody else may only read the last 24 hours (window and age). Everything else is the
# default behaviour.
package zabbix.mcp

import rego.v1

# data.history_by_group as a path: the regorus VM does not compile access to `data` as a whole.
# Without its data (no data.json, or one without full_usrgrps) the policy denies every
# call instead of guessing who may read the full history.
# The default keeps the derived values defined; the rule below denies.
default config := {}

config := data.history_by_group

deny contains "policy data missing: data.history_by_group.full_usrgrps must be a list of user group names" if {
	not is_array(data.history_by_group.full_usrgrps)
}

full_usrgrps := {g | some g in object.get(config, "full_usrgrps", ["Zabbix administrators"])}

full_seconds := object.get(config, "full_seconds", 604800)

restricted_seconds := object.get(config, "restricted_seconds", 86400)

full_history if {
	some g in input.caller.usrgrps
	g in full_usrgrps
}

history_seconds := full_seconds if full_history else := restricted_seconds

deny contains msg if {
	input.version != 1
	msg := sprintf("unsupported policy input version %v", [input.version])
}

deny contains "policy input has no version" if not input.version

default allow := false

allow if count(deny) == 0

approval := "if_supported" if input.tool.kind == "write" else := "none"

decision := {
	"allow": allow,
	"reasons": deny,
	"approval": approval,
	"history": {"max_window_seconds": history_seconds, "max_age_seconds": history_seconds},
	"max_limit": 1000,
}
