package zabbix.mcp_test

import rego.v1

import data.zabbix.mcp

base := {
	"version": 1,
	"phase": "call",
	"tool": {
		"name": "host_get", "exposed_name": "host_get", "kind": "read",
		"method": "host.get", "destructive": false, "idempotent": true,
	},
	"arguments": {},
	"caller": {
		"userid": "5", "username": "operator", "type": 1, "roleid": "1",
		"usrgrps": ["Operators"], "token_id": "0f0f0f0f0f0f0f0f",
	},
	"client": {
		"address": "10.0.0.7", "name": "claude-code", "version": "2.1",
		"protocol_version": "2025-11-25", "elicitation": ["form"],
	},
	"zabbix": {"version": "7.0.22"},
	"now": 1767225600,
}

write_tool := {
	"name": "maintenance_delete", "exposed_name": "zbx_maintenance_delete", "kind": "write",
	"method": "maintenance.delete", "destructive": true, "idempotent": true,
}

test_read_call_allowed_without_approval if {
	d := mcp.decision with input as base
	d.allow == true
	d.approval == "none"
	count(d.reasons) == 0
}

test_write_call_allowed_with_approval_if_supported if {
	d := mcp.decision with input as object.union(base, {"tool": write_tool})
	d.allow == true
	d.approval == "if_supported"
}

test_every_phase_allowed if {
	every phase in ["list", "call", "resource"] {
		d := mcp.decision with input as object.union(base, {"phase": phase, "tool": write_tool})
		d.allow == true
	}
}

test_resource_read_allowed if {
	inp := object.union(base, {
		"phase": "resource",
		"resource": {"uri": "zabbix://host/10084", "kind": "host", "id": "10084"},
	})
	d := mcp.decision with input as inp
	d.allow == true
}

test_history_limited_to_seven_days if {
	d := mcp.decision with input as base
	d.history == {"max_window_seconds": 604800, "max_age_seconds": 604800}
	d.max_limit == 1000
}

test_generous_per_caller_limits if {
	r := mcp.decision with input as base
	r.rate == {"calls": 10000, "per_seconds": 1, "concurrent": 1000}
	w := mcp.decision with input as object.union(base, {"tool": write_tool})
	w.rate == {"calls": 600, "per_seconds": 60, "concurrent": 16}
}

test_unknown_input_version_denied if {
	d := mcp.decision with input as object.union(base, {"version": 2})
	d.allow == false
	d.reasons == ["unsupported policy input (version 2, tool kind read)"]
}

test_missing_version_denied if {
	d := mcp.decision with input as object.remove(base, ["version"])
	d.allow == false
	d.reasons == ["unsupported policy input (version null, tool kind read)"]
}

test_unknown_tool_kind_denied if {
	d := mcp.decision with input as object.union(base, {"tool": {"kind": "admin"}})
	d.allow == false
}
