#!/usr/bin/env bash
# The released sidecar against an instant stub Zabbix in a process of its own (the load
# client's `stub`: answers at once, one host), so what a call adds is the sidecar's own
# cost, with the sidecar run as shipped (its own process, one runtime thread). Runs
# scripts/perf/wrk.sh against the stub: the same host.get posted straight to the stub vs
# tools/call host_get through the sidecar, at 1 and MANY connections (default 64); prints
# the added latency (p50 at 1 connection, p99 at MANY) and the sidecar's CPU per call.
#
#   scripts/perf/stub.sh                        # ROUNDS=3 DURATION=5 MANY=64
#   BIN=/tmp/other ROUNDS=5 scripts/perf/stub.sh
# Needs wrk, python3, the release binary and the load client (cargo bench --bench load
# --no-run, then scripts/pgo/build.sh: a bench build puts the plain binary back).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/perf/common.sh
scratch
start_load_stub
printf 'ZBX_URL=%s\nZBX_TOKEN=stub-bench-token-0123456789abcdef\nZBX_API_VERSION=7.0.22\n' "$stub_url" >"$work/stub.env"
ENV=$work/stub.env ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-5} MANY=${MANY:-64} \
    bash scripts/perf/wrk.sh
