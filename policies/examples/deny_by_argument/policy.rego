# Deny by argument: refuse broad queries. A `search` containing the wildcard `*` is
# denied, and so is a call naming more than data.deny_by_argument.max_hostids hostids
# (required; without it every call is denied). Everything else is the default behaviour.
package zabbix.mcp

import rego.v1

seven_days := 604800

# data.deny_by_argument as a path: the regorus VM does not compile access to `data` as a whole.
# Without its data (no data.json, or one without max_hostids) the policy denies every
# call instead of guessing a limit.
# The default keeps the derived values defined; the rule below denies.
default config := {}

config := data.deny_by_argument

deny contains "policy data missing: data.deny_by_argument.max_hostids must be a number" if {
	not is_number(data.deny_by_argument.max_hostids)
}

max_hostids := object.get(config, "max_hostids", 20)

deny contains msg if {
	input.version != 1
	msg := sprintf("unsupported policy input version %v", [input.version])
}

deny contains "policy input has no version" if not input.version

deny contains "search must not contain the wildcard *" if {
	contains(input.arguments.search, "*")
}

deny contains msg if {
	n := count(input.arguments.hostids)
	n > max_hostids
	msg := sprintf("at most %d hostids per call (got %d)", [max_hostids, n])
}

default allow := false

allow if count(deny) == 0

approval := "if_supported" if input.tool.kind == "write" else := "none"

decision := {
	"allow": allow,
	"reasons": deny,
	"approval": approval,
	"history": {"max_window_seconds": seven_days, "max_age_seconds": seven_days},
	"max_limit": 1000,
}
