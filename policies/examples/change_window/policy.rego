# Change window: maintenance writes (maintenance_create, _update, _delete) only Monday to
# Friday, 08:00 to 18:00 UTC, only for the host groups in data.change_window.groupids,
# and always with a human approval (approval "required"). Everything else gets the
# default behaviour.
#
# - The window is checked on calls; tools/list still offers the tools, so clients do not
#   see tools appear and vanish with the clock.
# - The scope is checked on what the call touches (input.targets, resolved by the sidecar
#   with the caller's token): the host groups it names and those of the maintenance it
#   changes or deletes, with their nested subgroups (a maintenance of A covers the hosts of
#   A/B too), must all be in scope, and every host (named, or already in the
#   maintenance) must be in at least one host group of the scope. For maintenance_update the
#   targets are the maintenance as it is plus what the update names, so a maintenance
#   outside the scope cannot be taken over, nor one inside it moved out.
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

# A host is in scope when one of its host groups is in the scope.
in_scope(host) if {
	some g in host.groups
	g.groupid in window_groupids
}

deny contains msg if {
	input.phase == "call"
	maintenance_write
	some g in input.targets.groups
	not g.groupid in window_groupids
	msg := sprintf("host group %v (%v) is outside the change window scope", [g.name, g.groupid])
}

deny contains msg if {
	input.phase == "call"
	maintenance_write
	some host in input.targets.hosts
	not in_scope(host)
	msg := sprintf("host %v is in no host group of the change window scope", [host.host])
}

deny contains msg if {
	input.phase == "call"
	maintenance_write
	not input.targets
	msg := sprintf("%s needs the targets of the call to check the scope", [input.tool.name])
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
