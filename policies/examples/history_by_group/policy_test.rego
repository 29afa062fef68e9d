package zabbix.mcp_test

import rego.v1

import data.zabbix.mcp

history_call(usrgrps) := {
	"version": 1, "phase": "call",
	"tool": {
		"name": "history_get", "exposed_name": "history_get", "kind": "read",
		"method": "history.get", "destructive": false, "idempotent": true,
	},
	"arguments": {"itemids": ["23296"], "time_from": 1767139200, "time_till": 1767225600, "type": "float"},
	"caller": {
		"userid": "9", "username": "someone", "type": 1, "roleid": "1",
		"usrgrps": usrgrps, "token_id": "0f0f0f0f0f0f0f0f",
	},
	"client": {
		"address": "10.0.0.7", "name": null, "version": null,
		"protocol_version": "2025-11-25", "elicitation": [],
	},
	"zabbix": {"version": "7.0.22"}, "now": 1767225600,
}

test_administrators_keep_seven_days if {
	d := mcp.decision with input as history_call(["Guests", "Zabbix administrators"])
	d.allow == true
	d.history == {"max_window_seconds": 604800, "max_age_seconds": 604800}
}

test_others_get_one_day if {
	d := mcp.decision with input as history_call(["Operators"])
	d.allow == true
	d.history == {"max_window_seconds": 86400, "max_age_seconds": 86400}
}

test_no_groups_get_one_day if {
	d := mcp.decision with input as history_call([])
	d.history.max_age_seconds == 86400
}

test_groups_come_from_data if {
	d := mcp.decision with input as history_call(["Operators"])
		with data.history_by_group.full_usrgrps as ["Operators"]
	d.history.max_window_seconds == 604800
}

test_unknown_version_denied if {
	d := mcp.decision with input as object.union(history_call([]), {"version": 0})
	d.allow == false
}

# Without its data the policy denies every call instead of guessing who may read all.
test_missing_data_denies_everything if {
	d := mcp.decision with input as history_call(["Zabbix administrators"])
		with data.history_by_group as {"restricted_seconds": 60}
	d.allow == false
	d.reasons == {"policy data missing: data.history_by_group.full_usrgrps must be a list of user group names"}
}
