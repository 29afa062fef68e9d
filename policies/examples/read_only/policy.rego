# Read-only: the default behaviour, but write tools (problem_* and maintenance_create,
# _update, _delete) are denied in every phase, so they are not even offered in
# tools/list. History and result limits as in the default policy.
package zabbix.mcp

import rego.v1

seven_days := 604800

deny contains msg if {
	input.version != 1
	msg := sprintf("unsupported policy input version %v", [input.version])
}

deny contains "policy input has no version" if not input.version

deny contains msg if {
	input.tool.kind != "read"
	msg := sprintf("read-only policy: %s is a write tool", [input.tool.name])
}

default allow := false

allow if count(deny) == 0

decision := {
	"allow": allow,
	"reasons": deny,
	"approval": "none",
	"history": {"max_window_seconds": seven_days, "max_age_seconds": seven_days},
	"max_limit": 1000,
}
