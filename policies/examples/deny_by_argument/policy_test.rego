package zabbix.mcp_test

import rego.v1

import data.zabbix.mcp

host_get(args) := {
	"version": 1, "phase": "call",
	"tool": {
		"name": "host_get", "exposed_name": "host_get", "kind": "read",
		"method": "host.get", "destructive": false, "idempotent": true,
	},
	"arguments": args,
	"caller": {
		"userid": "1", "username": "Admin", "type": 3, "roleid": "3",
		"usrgrps": ["Zabbix administrators"], "token_id": "0f0f0f0f0f0f0f0f",
	},
	"client": {
		"address": "10.0.0.7", "name": "claude-code", "version": "2.1",
		"protocol_version": "2025-11-25", "elicitation": ["form"],
	},
	"zabbix": {"version": "7.0.22"}, "now": 1767225600,
}

ids(n) := [sprintf("%d", [i]) | some i in numbers.range(10001, 10000 + n)]

test_plain_search_allowed if {
	d := mcp.decision with input as host_get({"search": "web", "limit": 10})
	d.allow == true
	d.approval == "none"
}

test_wildcard_search_denied if {
	d := mcp.decision with input as host_get({"search": "web*"})
	d.allow == false
	d.reasons == {"search must not contain the wildcard *"}
}

test_twenty_hostids_allowed if {
	d := mcp.decision with input as host_get({"hostids": ids(20)})
	d.allow == true
}

test_too_many_hostids_denied if {
	d := mcp.decision with input as host_get({"hostids": ids(21)})
	d.allow == false
	d.reasons == {"at most 20 hostids per call (got 21)"}
}

test_limit_comes_from_data if {
	d := mcp.decision with input as host_get({"hostids": ids(5)})
		with data.deny_by_argument.max_hostids as 3
	d.allow == false
}

test_both_reasons_reported if {
	d := mcp.decision with input as host_get({"search": "*", "hostids": ids(25)})
	count(d.reasons) == 2
}

# Without its data the policy denies every call instead of guessing a limit.
test_missing_data_denies_everything if {
	d := mcp.decision with input as host_get({"hostids": ids(1)})
		with data.deny_by_argument as {}
	d.allow == false
	d.reasons == {"policy data missing: data.deny_by_argument.max_hostids must be a number"}
}
