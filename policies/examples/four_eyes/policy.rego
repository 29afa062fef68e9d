# Four eyes: every write needs a `page` approval by a person who signs in to the approval
# page with their own Zabbix credentials, is in one of the user groups listed in
# data.four_eyes.approver_usrgrps, and is not the caller (compared by userid). Reads get
# the default behaviour.
#
# - The sidecar checks `approvers` itself (group membership, distinct_from_caller); the
#   `approve` phase below checks the same again, so the rule is also visible to
#   `policy test` and can be tightened here (e.g. by approver role or by tool).
# - Without data.four_eyes.approver_usrgrps (no data.json, an empty or malformed list),
#   every call is denied with a reason, as in every shipped example: a half-installed
#   policy fails closed, and no approver is guessed.
# - data.four_eyes.approver_sign_in (optional; default ["password", "token"]) says how an
#   approver may have signed in to the page: ["password"] takes decisions only from a
#   password sign-in, since an API token can sit in a file an agent reads. Anything but a
#   non-empty list of "password" and "token" denies every call.
package zabbix.mcp

import rego.v1

seven_days := 604800

# data.four_eyes as a path: the regorus VM does not compile access to `data` as a whole.
default config := {}

config := data.four_eyes

configured_usrgrps := object.get(config, "approver_usrgrps", [])

approver_usrgrps := configured_usrgrps if {
	is_array(configured_usrgrps)
	count(configured_usrgrps) > 0
	every g in configured_usrgrps {
		is_string(g)
	}
}

configured_sign_in := object.get(config, "approver_sign_in", ["password", "token"])

approver_sign_in := configured_sign_in if {
	is_array(configured_sign_in)
	count(configured_sign_in) > 0
	every way in configured_sign_in {
		way in {"password", "token"}
	}
}

configured if {
	approver_usrgrps
	approver_sign_in
}

is_write := input.tool.kind == "write"

deny contains msg if {
	input.version != 1
	msg := sprintf("unsupported policy input version %v", [input.version])
}

deny contains "policy input has no version" if not input.version

deny contains "policy data missing: data.four_eyes.approver_usrgrps must be a non-empty list of user group names" if {
	not approver_usrgrps
}

deny contains `policy data malformed: data.four_eyes.approver_sign_in must be a non-empty list of "password" and "token"` if {
	not approver_sign_in
}

deny contains "four eyes: the approve phase needs an approver" if {
	input.phase == "approve"
	not input.approver
}

deny contains "four eyes: the caller may not approve their own call" if {
	input.phase == "approve"
	input.approver.userid == input.caller.userid
}

deny contains msg if {
	input.phase == "approve"
	input.approver
	not approver_in_group
	msg := sprintf("four eyes: the approver is in none of %v", [approver_usrgrps])
}

deny contains msg if {
	input.phase == "approve"
	input.approver
	not input.approver.sign_in in approver_sign_in
	msg := sprintf("four eyes: approvers sign in with %v here, not with %v", [concat(" or ", approver_sign_in), input.approver.sign_in])
}

approver_in_group if {
	some g in input.approver.usrgrps
	g in approver_usrgrps
}

default allow := false

allow if count(deny) == 0

history := {"max_window_seconds": seven_days, "max_age_seconds": seven_days}

decision := {
	"allow": allow,
	"reasons": deny,
	"approval": "page",
	"approvers": {"usrgrps": approver_usrgrps, "distinct_from_caller": true},
	"history": history,
	"max_limit": 1000,
} if {
	is_write
	configured
} else := {
	"allow": false,
	"reasons": deny,
} if {
	is_write
} else := {
	"allow": allow,
	"reasons": deny,
	"approval": "none",
	"history": history,
	"max_limit": 1000,
}
