#!/usr/bin/env bash
# Two builds of the sidecar side by side against the real Zabbix 7.0 lab: the CPU time and
# context switches each spends per tools/call host_get, counted by `perf stat` on that
# sidecar's process alone (its threads summed; the decision log writer's share shown too)
# while wrk drives one connection at it (see README "Performance").
#
# Both sidecars run at once (default policy set, decision log file). PAIRS times, wrk posts
# for SECS seconds to A, then to B: interleaving puts both under the same machine load,
# which moves CPU per call more than most changes do.
#
#   A=/tmp/before-bin scripts/perf/pairs.sh                 # B = target/release build
#   A=/tmp/a B=/tmp/b PAIRS=3 SECS=6 ARGS='{"limit":100}' scripts/perf/pairs.sh
# Needs perf (Debian's linux-perf), wrk and python3; the lab running.
set -euo pipefail
cd "$(dirname "$0")/../.."
A=${A:?A=the first binary to compare}
B=${B:-${CARGO_TARGET_DIR:-target}/release/zabbix-mcp-guard}
ENV=${ENV:-/var/lib/zbx-test/zabbix7.env}
PAIRS=${PAIRS:-3}
SECS=${SECS:-6}
ARGS=${ARGS:-'{"limit":100}'}
for bin in "$A" "$B"; do [ -x "$bin" ] || { echo "no binary at $bin" >&2; exit 1; }; done
command -v perf >/dev/null || { echo "perf is not installed (linux-perf)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is not installed" >&2; exit 1; }
. scripts/perf/common.sh
against_lab

printf '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"host_get","arguments":%s}}' "$ARGS" >"$work/call.json"
declare -A pid_of url_of
for which in A B; do
    port=$(free_port)
    start_sidecar "${!which}" "$ZBX_URL" "$port" "$which"
    pid_of[$which]=$sidecar_pid
    url_of[$which]="http://127.0.0.1:$port/mcp"
    # Warm-up: connections, caller cache.
    KIND=mcp BODY_FILE=$work/call.json wrk -t1 -c1 -d2s -s scripts/perf/wrk.lua "${url_of[$which]}" >/dev/null
done
echo "A: $A"
echo "B: $B"
echo "tools/call host_get $ARGS against $ZBX_URL, 1 connection, ${SECS}s each, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for pair in $(seq "$PAIRS"); do
    line="pair $pair:"
    snapshot=$(cpu_ticks_now)
    for which in A B; do
        perf stat -x, --per-thread -e task-clock,context-switches -o "$work/perf" -p "${pid_of[$which]}" -- \
            env KIND=mcp BODY_FILE="$work/call.json" wrk -t1 -c1 -d"${SECS}s" --timeout 10s \
            -s scripts/perf/wrk.lua "${url_of[$which]}" >"$work/wrk"
        succeeded "$which" "$(grep '^RESULT' "$work/wrk")"
        calls=$(field "$(grep '^RESULT' "$work/wrk")" requests)
        # Per thread: the process's sum, and the decision log writer's own share.
        msec=$(awk -F, '$4 == "task-clock" && $2 + 0 == $2 { sum += $2 } END { print sum + 0 }' "$work/perf")
        log_msec=$(awk -F, '$4 == "task-clock" && $1 ~ /^decision-log-/ && $2 + 0 == $2 { sum += $2 } END { print sum + 0 }' "$work/perf")
        switches=$(awk -F, '$4 == "context-switches" && $2 + 0 == $2 { sum += $2 } END { print sum + 0 }' "$work/perf")
        line+=$(awk -v m="$msec" -v l="$log_msec" -v s="$switches" -v n="$calls" -v w="$which" \
            'BEGIN { printf "  %s %.0f µs CPU (log writer %.0f), %.1f context switches per call (%d calls)", w, m * 1000 / n, l * 1000 / n, s / n, n }')
    done
    echo "$line  (steal $(steal_since "$snapshot") %)"
done
