# Change window: maintenance writes (maintenance_create, _update, _delete) only Monday to
# Friday, 08:00 to 18:00 UTC, only for the host groups in data.change_window.groupids,
# and always with a human approval (approval "required"). Everything else gets the
# default behaviour.
#
# - The window is checked on calls; tools/list still offers the tools, so clients do not
#   see tools appear and vanish with the clock.
# - maintenance_create must name groupids, all of them allowed, and no hostids (hosts
#   cannot be checked against the groups). maintenance_update may only set allowed
#   groupids and no hostids.
# - maintenance_update and maintenance_delete address an existing maintenance by ID; the
#   input does not show its current hosts and groups. Zabbix only lets a user change a
#   maintenance whose hosts it can write to, so give the callers' user groups read-write
#   access to the same host groups; the required approval shows the human the payload.
package zabbix.mcp

import rego.v1

seven_days := 604800

# data.change_window as a path: the regorus VM does not compile access to `data` as a whole.
# Without its data (no data.json, or one without groupids) the policy denies every call
# instead of running with its restrictions lifted.
# The default keeps the derived values defined; the rule below denies.
default config := {}

config := data.change_window

deny contains "policy data missing: data.change_window.groupids must be a list of host group IDs" if {
	not is_array(data.change_window.groupids)
}

window_groupids := {g | some g in object.get(config, "groupids", [])}

window_day_list := object.get(config, "days", ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"])

window_days := {d | some d in window_day_list}

start_hour := object.get(config, "start_hour", 8)

end_hour := object.get(config, "end_hour", 18)

maintenance_write if {
	startswith(input.tool.name, "maintenance_")
	input.tool.kind == "write"
}

now_ns := input.now * 1000000000

in_window if {
	time.weekday(now_ns) in window_days
	[hour, _, _] := time.clock(now_ns)
	hour >= start_hour
	hour < end_hour
}

groupids := object.get(input.arguments, "groupids", [])

hostids := object.get(input.arguments, "hostids", [])

deny contains msg if {
	input.version != 1
	msg := sprintf("unsupported policy input version %v", [input.version])
}

deny contains "policy input has no version" if not input.version

deny contains msg if {
	input.phase == "call"
	maintenance_write
	not in_window
	msg := sprintf("%s is only allowed %s, %02d:00-%02d:00 UTC", [
		input.tool.name,
		concat(", ", window_day_list),
		start_hour,
		end_hour,
	])
}

deny contains "maintenance_create must name groupids from the change window scope" if {
	input.phase == "call"
	input.tool.name == "maintenance_create"
	count(groupids) == 0
}

deny contains msg if {
	input.phase == "call"
	input.tool.name in {"maintenance_create", "maintenance_update"}
	some g in groupids
	not g in window_groupids
	msg := sprintf("host group %v is outside the change window scope", [g])
}

deny contains msg if {
	input.phase == "call"
	input.tool.name in {"maintenance_create", "maintenance_update"}
	count(hostids) > 0
	msg := sprintf("%s may not name hostids under the change window policy; use groupids", [input.tool.name])
}

default allow := false

allow if count(deny) == 0

approval := "required" if maintenance_write
else := "if_supported" if input.tool.kind == "write"
else := "none"

decision := {
	"allow": allow,
	"reasons": deny,
	"approval": approval,
	"history": {"max_window_seconds": seven_days, "max_age_seconds": seven_days},
	"max_limit": 1000,
}
