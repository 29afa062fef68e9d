#!/usr/bin/env bash
# Would threads that share nothing (one runtime per core, each accepting its own
# connections, as nginx runs its workers) bring the p99 at 64 connections against the
# instant stub within 1 ms? Two released sidecar processes stand in for two such threads:
# each takes 32 of the 64 connections (two wrk processes at once), against one sidecar
# taking all 64, and the same host.get straight to the stub, in ROUNDS interleaved rounds
# of SECS seconds (see README "Performance" and docs/performance-log.md).
#
#   scripts/perf/shared_nothing.sh            # ROUNDS=3 SECS=4
# Needs wrk, python3, the release binary and the load client (cargo bench --bench load
# --no-run, then scripts/pgo/build.sh: a bench build puts the plain binary back).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/zabbix-mcp-guard}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-4}
[ -x "$BIN" ] || { echo "no binary at $BIN: scripts/pgo/build.sh" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is not installed" >&2; exit 1; }
. scripts/perf/common.sh
scratch
start_load_stub
export TOKEN=stub-bench-token-0123456789abcdef
printf '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"host_get","arguments":{"limit":100}}}' >"$work/call.json"
record_host_get "$BIN" "$stub_url" '{"limit":100}' "$work/host_get.json"
one=$(free_port)
start_sidecar "$BIN" "$stub_url" "$one" one
two=$(free_port)
start_sidecar "$BIN" "$stub_url" "$two" two

# run KIND BODY THREADS CONNECTIONS URL: wrk_phase's RESULT line for SECS seconds.
run() { wrk_phase "$1" "$2" "$3" "$4" "$SECS" "$5"; }

echo "64 connections against the stub, ${SECS}s per phase, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
    echo "round $round of $ROUNDS:"
    echo "direct to the stub, 64:       $(run direct "$work/host_get.json" 2 64 "$stub_url")"
    echo "one sidecar, 64:              $(run mcp "$work/call.json" 2 64 "http://127.0.0.1:$one/mcp")"
    run mcp "$work/call.json" 1 32 "http://127.0.0.1:$one/mcp" >"$work/first" &
    first=$!
    run mcp "$work/call.json" 1 32 "http://127.0.0.1:$two/mcp" >"$work/second" &
    second=$!
    wait "$first" "$second"
    echo "two sidecars, 32 each, first: $(cat "$work/first")"
    echo "                      second: $(cat "$work/second")"
done
