#!/usr/bin/env python3
"""The training run of the profile-guided build (scripts/pgo/build.sh): the requests agents
send most, each ROUNDS times on one keep-alive connection, to the instrumented sidecar in
front of scripts/perf/stub_zabbix.py. Every answer is checked, so a build never trains on
failures it did not mean to send: the profile then says which code runs per call.

  train.py HOST:PORT TOKEN ROUNDS
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "perf"))
from mcp_calls import Client  # noqa: E402

CALL_OK = b'"structuredContent"'

# (method, params, what the answer must hold). Reads of several shapes, among them
# host_get with a 100-host answer (the scan and the escaping of a long document), the list,
# an argument error and an unknown tool (error paths run too, but rarely).
REQUESTS = [
    ("tools/list", {}, b'"tools"'),
    ("tools/call", {"name": "host_get", "arguments": {"limit": 100}}, CALL_OK),
    ("tools/call", {"name": "host_get", "arguments": {"search": "mcp-", "limit": 10}}, CALL_OK),
    ("tools/list", {}, b'"tools"'),
    ("tools/call", {"name": "hostgroup_get", "arguments": {}}, CALL_OK),
    ("tools/call", {"name": "problem_get", "arguments": {"limit": 20}}, CALL_OK),
    ("tools/call", {"name": "item_get", "arguments": {"limit": 20}}, CALL_OK),
    ("tools/call", {"name": "trigger_get", "arguments": {"limit": 20}}, CALL_OK),
    ("tools/call", {"name": "host_get", "arguments": {"limit": 100}}, CALL_OK),
    ("tools/call", {"name": "host_get", "arguments": {"limit": "many"}}, b'"isError":true'),
    ("tools/call", {"name": "no_such_tool", "arguments": {}}, b'"error"'),
]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    post = Client(sys.argv[1], sys.argv[2])
    rounds = int(sys.argv[3])
    for round_ in range(rounds):
        for i, (method, params, expect) in enumerate(REQUESTS):
            status, answer = post({"jsonrpc": "2.0", "id": round_ * len(REQUESTS) + i,
                                   "method": method, "params": params})
            if expect not in answer:
                name = params.get("name", "")
                sys.exit(f"training request {method} {name} answered {status}: "
                         f"{answer[:300]!r}")
    print(f"trained on {rounds * len(REQUESTS)} requests")


if __name__ == "__main__":
    main()
