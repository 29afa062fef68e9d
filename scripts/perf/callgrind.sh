#!/usr/bin/env bash
# Instructions the sidecar executes per MCP call against an instant stub Zabbix, counted by
# valgrind's callgrind: a figure that does not depend on machine load.
#
# The released binary runs under callgrind with instrumentation off, with the default policy
# set and a decision log file, behind scripts/perf/stub_zabbix.py. N warm-up calls, then
# instrumentation on (callgrind_control) for K calls on one keep-alive connection
# (scripts/perf/mcp_calls.py), then a dump: its total / K is the cost of one call. Start-up
# (a clock calibration there varies by millions of instructions between runs), warm-up and
# shutdown are never counted.
#
#   scripts/perf/callgrind.sh                # tools/call host_get {"search":"mcp-","limit":10}
#   CALL=list scripts/perf/callgrind.sh      # tools/list
#   N=20 K=100 BIN=target/release/zabbix-mcp-guard KEEP=/tmp/cg scripts/perf/callgrind.sh
#   LAB=/var/lib/zbx-test/zabbix7.env ARGS='{"limit":100}' K=50 scripts/perf/callgrind.sh
#
# LAB=ENV_FILE runs against that lab's Zabbix (its ZBX_URL and ZBX_TOKEN) instead of the
# stub: its answers are real ones (the 7.0 lab's host_get {"limit":100} is 12 kB). ARGS are
# host_get's arguments (default {"search":"mcp-","limit":10}).
#
# FOOTPRINT=1 also records each instruction's address (--dump-instr=yes), dumps the
# profile after each of the K calls and prints the code every one of them executed, in
# 64-byte cache lines, in all and by crate (scripts/perf/footprint.py): what a call after a
# pause has to fetch again. Code that runs now and then (cache housekeeping, timers) is
# counted apart, as run by some calls only.
#
# TARGET=nginx counts the reference proxy of scripts/perf/wrk.sh instead: nginx as one
# process under callgrind, forwarding the host.get that the sidecar sends for host_get ARGS
# (recorded first through a throw-away sidecar) to the same Zabbix, posted as a Zabbix API
# client posts it; with FOOTPRINT, the code nginx runs per call (Needs nginx-light.)
#
# KEEP=DIR keeps the callgrind.out files there (callgrind_annotate DIR/callgrind.out.1 is
# the K measured calls). Needs valgrind and python3; build first: scripts/pgo/build.sh
# (the released, profile-guided build; PGO=off for a plain one).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/zabbix-mcp-guard}
N=${N:-20}
K=${K:-100}
CALL=${CALL:-host_get}
TARGET=${TARGET:-sidecar}
ARGS=${ARGS:-'{"search":"mcp-","limit":10}'}
TOKEN=callgrind-bench-token-0123456789abcdef
[ -x "$BIN" ] || { echo "no binary at $BIN: scripts/pgo/build.sh" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
work=$(mktemp -d)
stub_pid=
pids=() # what common.sh's functions start
cleanup() {
    [ -n "$stub_pid" ] && kill "$stub_pid" 2>/dev/null || true
    for started in "${pids[@]}"; do kill "$started" 2>/dev/null || true; done
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/callgrind.out.* "$KEEP"/ 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
. scripts/perf/common.sh

if [ -n "${LAB:-}" ]; then
    # shellcheck disable=SC1090
    . "$LAB"
    frontend=$ZBX_URL
    TOKEN=$ZBX_TOKEN
    against="the lab at $ZBX_URL"
else
    start_stub_zabbix "$work"
    frontend=$stub_url
    against="the stub"
fi

client_args=(--args "$ARGS")
[ "$CALL" = list ] && client_args=(--list)

out="$work/callgrind.out"
dump_instr=()
[ -n "${FOOTPRINT:-}" ] && dump_instr=(--dump-instr=yes)
callgrind=(valgrind --tool=callgrind "${dump_instr[@]}" --instr-atstart=no --callgrind-out-file="$out")
if [ "$TARGET" = nginx ]; then
    # The host.get the sidecar sends, posted through nginx as a Zabbix API client posts it.
    record_host_get "$BIN" "$frontend" "$ARGS" "$work/host_get.json"
    start_nginx_proxy "$frontend" "${callgrind[@]}"
    pid=$nginx_worker
    address=${proxy_url#http://}
    client_args=(--raw "$work/host_get.json" --path "/${address#*/}")
    address=${address%%/*}
    what="nginx forwarding the host.get of host_get $ARGS"
else
    port=$(free_port)
    address=127.0.0.1:$port
    "${callgrind[@]}" "$BIN" --frontend-url "$frontend" \
        --allowed-ip 127.0.0.1 --listen-ip 127.0.0.1 --listen-port "$port" --policy-dir policies \
        --decision-log "$work/decisions.log" --debug-level 3 \
        >"$work/sidecar.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do
        python3 - "$port" <<'PY' 2>/dev/null && break
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/readyz", timeout=5)
PY
        kill -0 "$pid" 2>/dev/null || { cat "$work/sidecar.log" >&2; exit 1; }
        sleep 0.5
    done
    what=$CALL
fi
python3 scripts/perf/mcp_calls.py "$address" "$TOKEN" "$N" "${client_args[@]}"
callgrind_control --instr=on "$pid" >/dev/null 2>&1
[ -n "${FOOTPRINT:-}" ] && client_args+=(--after-each "callgrind_control --dump=call $pid >/dev/null 2>&1")
python3 scripts/perf/mcp_calls.py "$address" "$TOKEN" "$K" "${client_args[@]}"
callgrind_control --dump=measured "$pid" >/dev/null 2>&1
kill -TERM "$pid"
wait "$pid" || true
measured=$(grep -l '^desc: Trigger: .*measured' "$out".* 2>/dev/null | head -n 1)
[ -n "$measured" ] || { echo "callgrind wrote no dump of the measured calls" >&2; exit 1; }
calls=()
if [ -n "${FOOTPRINT:-}" ]; then
    mapfile -t calls < <(grep -l '^desc: Trigger: .*call' "$out".*)
fi
# With FOOTPRINT the K calls are in their own dumps, and the last one holds what is left.
total=$(awk 'FNR == 1 { seen = 0 } !seen && /^(summary|totals):/ { sum += $2; seen = 1 } END { print sum }' \
    "$measured" "${calls[@]}")
echo "callgrind: $what against $against: $total instructions for $K calls after $N warm-up calls"
echo "instructions per call: $(( total / K ))"
if [ -n "${FOOTPRINT:-}" ]; then python3 scripts/perf/footprint.py "${calls[@]}"; fi
