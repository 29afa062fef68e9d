package zabbix.mcp_test

import rego.v1

import data.zabbix.mcp

base := {
	"version": 1,
	"phase": "call",
	"tool": {
		"name": "problem_get", "exposed_name": "problem_get", "kind": "read",
		"method": "problem.get", "destructive": false, "idempotent": true,
	},
	"arguments": {"severities": [4, 5]},
	"caller": {
		"userid": "1", "username": "Admin", "type": 3, "roleid": "3",
		"usrgrps": ["Zabbix administrators"], "token_id": "0f0f0f0f0f0f0f0f",
	},
	"client": {
		"address": "10.0.0.7", "name": "claude-code", "version": "2.1",
		"protocol_version": "2025-11-25", "elicitation": ["form"],
	},
	"zabbix": {"version": "7.0.22"},
	"now": 1767225600,
}

ack := {
	"name": "problem_acknowledge", "exposed_name": "problem_acknowledge", "kind": "write",
	"method": "event.acknowledge", "destructive": false, "idempotent": true,
}

test_read_allowed if {
	d := mcp.decision with input as base
	d.allow == true
	d.approval == "none"
	d.history.max_window_seconds == 604800
}

test_write_call_denied_even_for_super_admin if {
	d := mcp.decision with input as object.union(base, {"tool": ack})
	d.allow == false
	d.reasons == {"read-only policy: problem_acknowledge is a write tool"}
}

test_write_not_listed if {
	d := mcp.decision with input as object.union(base, {"phase": "list", "tool": ack})
	d.allow == false
}

test_resource_read_allowed if {
	d := mcp.decision with input as object.union(base, {"phase": "resource"})
	d.allow == true
}

test_unknown_version_denied if {
	d := mcp.decision with input as object.union(base, {"version": 7})
	d.allow == false
}
