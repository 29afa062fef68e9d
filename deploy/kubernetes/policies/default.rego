# The default policy: the official Zabbix MCP server's behaviour, as a starting point to
# tighten. Every tool the configuration exposes (ToolPrefix, AllowTool, DenyTool...) is
# allowed, in every phase (list, call, resource); writes are approved by a human when the
# client can elicit ("if_supported"), reads need no approval; history_get is limited to a
# 7-day window (604800 s) starting at most 7 days ago; at most 1000 results per call.
#
# Per-caller limits (rate), generous so they stop only a runaway agent: reads share one
# budget of 10000 calls per second and 1000 in flight per Zabbix user; writes another of
# 600 per minute and 16 in flight. A budget is per caller and per value: tools given the
# same rate share it. RateLimit and MaxConcurrent (configuration) cap both.
#
# Input and decision shapes: see DESIGN.md, "Policy". Only a well-formed decision object
# with allow == true allows.
#
# The decision is written as literal objects chosen by an else chain: the compiled VM
# loads a literal as one constant, while objects assembled from other rules are rebuilt
# on every evaluation (about 3x slower for this policy).
package zabbix.mcp

import rego.v1

# Reads: no approval.
decision := {
	"allow": true,
	"reasons": [],
	"approval": "none",
	"history": {"max_window_seconds": 604800, "max_age_seconds": 604800},
	"max_limit": 1000,
	"rate": {"calls": 10000, "per_seconds": 1, "concurrent": 1000},
} if {
	input.version == 1
	input.tool.kind == "read"
}

# Writes: a human approves when the client can elicit.
else := {
	"allow": true,
	"reasons": [],
	"approval": "if_supported",
	"history": {"max_window_seconds": 604800, "max_age_seconds": 604800},
	"max_limit": 1000,
	"rate": {"calls": 600, "per_seconds": 60, "concurrent": 16},
} if {
	input.version == 1
	input.tool.kind == "write"
}

# An input this policy was not written for (another version, an unknown tool kind) is
# denied, not guessed at.
else := {
	"allow": false,
	"reasons": [sprintf(
		"unsupported policy input (version %v, tool kind %v)",
		[object.get(input, "version", null), object.get(input, ["tool", "kind"], null)],
	)],
}
