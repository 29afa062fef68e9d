package zabbix.mcp_test

import rego.v1

import data.zabbix.mcp

# 2026-01-07 is a Wednesday, 2026-01-10 a Saturday.
wednesday_10h := 1767780000

saturday_10h := 1768039200

monday_07h59m59s := 1767599999

monday_08h := 1767600000

friday_17h59m59s := 1767981599

friday_18h := 1767981600

tool(name, kind, method) := {
	"name": name, "exposed_name": name, "kind": kind,
	"method": method, "destructive": name == "maintenance_delete", "idempotent": true,
}

create := tool("maintenance_create", "write", "maintenance.create")

update := tool("maintenance_update", "write", "maintenance.update")

delete := tool("maintenance_delete", "write", "maintenance.delete")

call(t, args, now) := {
	"version": 1, "phase": "call", "tool": t, "arguments": args,
	"caller": {
		"userid": "1", "username": "Admin", "type": 3, "roleid": "3",
		"usrgrps": ["Zabbix administrators"], "token_id": "0f0f0f0f0f0f0f0f",
	},
	"client": {
		"address": "10.0.0.7", "name": "claude-code", "version": "2.1",
		"protocol_version": "2025-11-25", "elicitation": ["form"],
	},
	"zabbix": {"version": "7.0.22"}, "now": now, "targets": targets_of(args),
}

group(id) := {"groupid": id, "name": sprintf("group %v", [id])}

# The targets the sidecar would resolve for these arguments: named groups, and hosts whose
# groups are given by host_groups (hostid -> groupids).
host_groups := {"10084": ["2"], "10085": ["9"]}

targets_of(args) := {
	"hosts": [{"hostid": h, "host": sprintf("host-%v", [h]), "groups": [group(g) | some g in host_groups[h]]} |
		some h in object.get(args, "hostids", [])],
	"groups": [group(g) | some g in object.get(args, "groupids", [])],
}

good_create := {"name": "patch", "groupids": ["2"], "active_since": 1767780000, "active_till": 1767783600}

test_create_in_window_allowed_with_required_approval if {
	d := mcp.decision with input as call(create, good_create, wednesday_10h)
	d.allow == true
	d.approval == "required"
}

test_window_edges if {
	first := mcp.decision with input as call(create, good_create, monday_08h)
	first.allow == true
	last := mcp.decision with input as call(create, good_create, friday_17h59m59s)
	last.allow == true
	early := mcp.decision with input as call(create, good_create, monday_07h59m59s)
	early.allow == false
	late := mcp.decision with input as call(create, good_create, friday_18h)
	late.allow == false
}

test_weekend_denied if {
	d := mcp.decision with input as call(delete, {"maintenanceids": ["5"]}, saturday_10h)
	d.allow == false
	d.reasons == {"maintenance_delete is only allowed Monday, Tuesday, Wednesday, Thursday, Friday, 08:00-18:00 UTC"}
}

test_foreign_group_denied if {
	d := mcp.decision with input as call(create, object.union(good_create, {"groupids": ["2", "9"]}), wednesday_10h)
	d.allow == false
	d.reasons == {"host group group 9 (9) is outside the change window scope"}
}

test_hosts_are_scoped_by_their_groups if {
	no_groups := object.remove(good_create, ["groupids"])
	inside := mcp.decision with input as call(create, object.union(no_groups, {"hostids": ["10084"]}), wednesday_10h)
	inside.allow == true
	outside := mcp.decision with input as call(create, object.union(good_create, {"hostids": ["10085"]}), wednesday_10h)
	outside.reasons == {"host host-10085 is in no host group of the change window scope"}
}

test_update_and_delete_are_scoped_by_the_maintenance if {
	# The maintenance as it is: its hosts and groups are in the targets too.
	existing := {"hosts": [{"hostid": "10085", "host": "db", "groups": [group("9")]}], "groups": []}
	args := {"maintenanceid": "5", "groupids": ["4"]}
	update_input := object.union(call(update, args, wednesday_10h), {"targets": existing})
	d := mcp.decision with input as update_input
	d.reasons == {"host db is in no host group of the change window scope"}
	delete_input := object.union(call(delete, {"maintenanceids": ["5"]}, wednesday_10h), {"targets": existing})
	gone := mcp.decision with input as delete_input
	gone.allow == false
	ok := mcp.decision with input as call(update, args, wednesday_10h)
	ok.allow == true
	ok.approval == "required"
}

test_without_targets_denied if {
	d := mcp.decision with input as object.remove(call(create, good_create, wednesday_10h), ["targets"])
	d.reasons == {"maintenance_create needs the targets of the call to check the scope"}
}

test_listed_outside_window if {
	d := mcp.decision with input as object.union(call(create, {}, saturday_10h), {"phase": "list"})
	d.allow == true
}

test_other_tools_unaffected if {
	d := mcp.decision with input as call(tool("maintenance_get", "read", "maintenance.get"), {}, saturday_10h)
	d.allow == true
	d.approval == "none"
	a := mcp.decision with input as call(tool("problem_acknowledge", "write", "event.acknowledge"), {"eventids": ["1"]}, saturday_10h)
	a.allow == true
	a.approval == "if_supported"
}

# Without its data the policy denies every call instead of dropping the group scope.
test_missing_data_denies_everything if {
	d := mcp.decision with input as call(create, good_create, wednesday_10h)
		with data.change_window as {"days": ["Wednesday"]}
	d.allow == false
	"policy data missing: data.change_window.groupids must be a list of host group IDs" in d.reasons
}
