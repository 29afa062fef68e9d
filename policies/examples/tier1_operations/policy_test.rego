package zabbix.mcp_test

import rego.v1

import data.zabbix.mcp

tier1_caller := {
	"userid": "7", "username": "night-shift", "type": 1, "roleid": "1",
	"usrgrps": ["Tier 1 operators", "Guests"], "token_id": "0f0f0f0f0f0f0f0f",
}

other_caller := object.union(tier1_caller, {"username": "sre", "usrgrps": ["SRE"]})

tool(name, kind, method) := {
	"name": name, "exposed_name": name, "kind": kind,
	"method": method, "destructive": false, "idempotent": true,
}

problem_get := tool("problem_get", "read", "problem.get")

problem_ack := tool("problem_acknowledge", "write", "event.acknowledge")

host_get := tool("host_get", "read", "host.get")

call(t, args, caller) := {
	"version": 1, "phase": "call", "tool": t, "arguments": args, "caller": caller,
	"client": {
		"address": "10.0.0.7", "name": "claude-code", "version": "2.1",
		"protocol_version": "2025-11-25", "elicitation": ["form"],
	},
	"zabbix": {"version": "7.0.22"}, "now": 1767225600,
}

test_tier1_problem_get_in_scope_allowed if {
	d := mcp.decision with input as call(problem_get, {"groupids": ["2", "4"], "severities": [5]}, tier1_caller)
	d.allow == true
	d.approval == "none"
	d.history == {"max_window_seconds": 0, "max_age_seconds": 0}
}

test_tier1_callers_share_one_tight_budget if {
	get := mcp.decision with input as call(problem_get, {"groupids": ["2"]}, tier1_caller)
	get.rate == {"calls": 60, "per_seconds": 60, "concurrent": 2}
	ack := mcp.decision with input as call(problem_ack, {"eventids": ["1"]}, tier1_caller)
	ack.rate == get.rate
	other := mcp.decision with input as call(host_get, {}, other_caller)
	other.rate == {"calls": 10000, "per_seconds": 1, "concurrent": 1000}
}

test_tier1_problem_get_out_of_scope_denied if {
	d := mcp.decision with input as call(problem_get, {"groupids": ["2", "9"]}, tier1_caller)
	d.allow == false
	d.reasons == {"tier 1: host group 9 is outside the tier 1 scope"}
}

test_tier1_problem_get_unscoped_denied if {
	d := mcp.decision with input as call(problem_get, {"eventids": ["100"]}, tier1_caller)
	d.allow == false
}

test_tier1_other_tool_denied_and_not_listed if {
	d := mcp.decision with input as call(host_get, {"groupids": ["2"]}, tier1_caller)
	d.allow == false
	d.reasons == {"tier 1 operators may only use problem_acknowledge, problem_annotate, problem_get"}
	listed := mcp.decision with input as object.union(call(host_get, {}, tier1_caller), {"phase": "list"})
	listed.allow == false
}

test_tier1_problem_get_listed if {
	d := mcp.decision with input as object.union(call(problem_get, {}, tier1_caller), {"phase": "list"})
	d.allow == true
}

# Targets as the sidecar resolves them for eventids: the events' hosts with their groups.
targets_on(groupids) := {"hosts": [{
	"hostid": "10084", "host": "web-01",
	"groups": [{"groupid": g, "name": sprintf("group %v", [g])} | some g in groupids],
}], "groups": []}

ack(args, caller, targets) := object.union(call(problem_ack, args, caller), {"targets": targets})

test_tier1_acknowledge_in_scope_allowed if {
	d := mcp.decision with input as ack({"eventids": ["100"]}, tier1_caller, targets_on(["9", "4"]))
	d.allow == true
	d.approval == "if_supported"
}

test_tier1_acknowledge_out_of_scope_denied if {
	d := mcp.decision with input as ack({"eventids": ["100"]}, tier1_caller, targets_on(["9"]))
	d.allow == false
	d.reasons == {"tier 1: host web-01 is outside the tier 1 scope"}
}

test_tier1_acknowledge_one_host_out_of_scope_denied if {
	two := {"hosts": [
		{"hostid": "1", "host": "in", "groups": [{"groupid": "2", "name": "a"}]},
		{"hostid": "2", "host": "out", "groups": [{"groupid": "9", "name": "b"}]},
	], "groups": []}
	d := mcp.decision with input as ack({"eventids": ["100", "101"]}, tier1_caller, two)
	d.reasons == {"tier 1: host out is outside the tier 1 scope"}
}

test_tier1_acknowledge_without_targets_denied if {
	d := mcp.decision with input as call(problem_ack, {"eventids": ["100"]}, tier1_caller)
	d.allow == false
	d.reasons == {"tier 1: problem_acknowledge needs the targets of the call to check the scope"}
}

test_others_get_default_behaviour if {
	d := mcp.decision with input as call(host_get, {}, other_caller)
	d.allow == true
	d.history.max_window_seconds == 604800
	w := mcp.decision with input as ack({"eventids": ["100"]}, other_caller, targets_on(["9"]))
	w.allow == true
	w.approval == "if_supported"
}

# Without its data the policy must not lift the tier 1 restrictions: it denies all.
test_missing_data_denies_everybody if {
	d := mcp.decision with input as call(host_get, {}, tier1_caller) with data.tier1 as {}
	d.allow == false
	d.reasons == {
		"policy data missing: data.tier1.usrgrps must be a list of user group names",
		"policy data missing: data.tier1.groupids must be a list of host group IDs",
	}
	other := mcp.decision with input as call(host_get, {}, other_caller) with data.tier1 as {}
	other.allow == false
}
