package zabbix.mcp_test

import rego.v1

import data.zabbix.mcp

operator := {
	"userid": "7", "username": "mcp-operator", "type": 1, "roleid": "1",
	"usrgrps": ["Operators"], "token_id": "0f0f0f0f0f0f0f0f", "sign_in": "password",
}

admin := {
	"userid": "1", "username": "Admin", "type": 3, "roleid": "3",
	"usrgrps": ["Zabbix administrators"], "token_id": "", "sign_in": "password",
}

admin_by_token := object.union(admin, {"sign_in": "token", "token_id": "0a0a0a0a0a0a0a0a"})

problem_ack := {
	"name": "problem_acknowledge", "exposed_name": "problem_acknowledge", "kind": "write",
	"method": "event.acknowledge", "destructive": false, "idempotent": false,
}

host_get := {
	"name": "host_get", "exposed_name": "host_get", "kind": "read",
	"method": "host.get", "destructive": false, "idempotent": true,
}

call(t, caller) := {
	"version": 1, "phase": "call", "tool": t, "arguments": {"eventids": ["100"]},
	"caller": caller,
	"client": {
		"address": "10.0.0.7", "name": "claude-code", "version": "2.1",
		"protocol_version": "2025-11-25", "elicitation": ["form"],
	},
	"zabbix": {"version": "7.0.22"}, "now": 1767225600,
}

approve(caller, approver) := object.union(call(problem_ack, caller), {"phase": "approve", "approver": approver})

test_write_needs_page_approval_by_another_administrator if {
	d := mcp.decision with input as call(problem_ack, operator)
	d.allow == true
	d.approval == "page"
	d.approvers == {"usrgrps": ["Zabbix administrators"], "distinct_from_caller": true}
}

test_read_needs_no_approval if {
	d := mcp.decision with input as call(host_get, operator)
	d.allow == true
	d.approval == "none"
}

test_administrator_may_approve_someone_elses_call if {
	d := mcp.decision with input as approve(operator, admin)
	d.allow == true
}

test_caller_may_not_approve_own_call if {
	d := mcp.decision with input as approve(admin, admin)
	d.allow == false
	d.reasons == {"four eyes: the caller may not approve their own call"}
}

test_approver_outside_the_groups_refused if {
	d := mcp.decision with input as approve(admin, operator)
	d.allow == false
	d.reasons == {`four eyes: the approver is in none of ["Zabbix administrators"]`}
}

test_approve_phase_without_approver_refused if {
	d := mcp.decision with input as object.union(call(problem_ack, operator), {"phase": "approve"})
	d.allow == false
}

test_without_data_every_write_is_denied if {
	d := mcp.decision with input as call(problem_ack, operator) with data.four_eyes as {}
	d.allow == false
	d.reasons == {"policy data missing: data.four_eyes.approver_usrgrps must be a non-empty list of user group names"}
	not d.approval
}

test_malformed_data_denies_writes if {
	d := mcp.decision with input as call(problem_ack, operator) with data.four_eyes as {"approver_usrgrps": "Zabbix administrators"}
	d.allow == false
	e := mcp.decision with input as call(problem_ack, operator) with data.four_eyes as {"approver_usrgrps": []}
	e.allow == false
}

test_without_data_reads_are_denied_too if {
	d := mcp.decision with input as call(host_get, operator) with data.four_eyes as {}
	d.allow == false
}

test_unknown_input_version_denied if {
	d := mcp.decision with input as object.union(call(problem_ack, operator), {"version": 2})
	d.allow == false
}

test_a_token_sign_in_approves_by_default if {
	d := mcp.decision with input as approve(operator, admin_by_token)
	d.allow == true
}

test_password_only_refuses_a_token_sign_in if {
	only := {"approver_usrgrps": ["Zabbix administrators"], "approver_sign_in": ["password"]}
	d := mcp.decision with input as approve(operator, admin_by_token) with data.four_eyes as only
	d.allow == false
	d.reasons == {`four eyes: approvers sign in with password here, not with token`}
	e := mcp.decision with input as approve(operator, admin) with data.four_eyes as only
	e.allow == true
}

test_malformed_sign_in_denies_every_call if {
	every bad in [[], "password", ["password", "magic"], [1]] {
		d := mcp.decision with input as call(host_get, operator) with data.four_eyes as {"approver_usrgrps": ["Zabbix administrators"], "approver_sign_in": bad}
		d.allow == false
	}
}
