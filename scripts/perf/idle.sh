#!/usr/bin/env bash
# What a pause between calls costs: the CPU per request of the released sidecar, and of
# nginx serving a static file as a reference, when each request follows the previous
# answer at once and when it comes PAUSE ms later (wrk.lua's PAUSE_MS). Beside Zabbix the
# sidecar always waits for PHP (about 40 ms per host.get on the lab), so its CPU per call
# there is this column, not the back-to-back one (see docs/performance-log.md, "What a
# pause costs").
#
# The sidecar runs as shipped (its own process, one runtime thread, default policy set,
# decision log file) in front of the load client's instant stub Zabbix; `perf stat`
# counts each server's own task clock while wrk drives one connection at it.
#
#   scripts/perf/idle.sh                       # PAUSES="0 2 10 40" SECS=6
#   BIN=/tmp/other PAUSES="0 40" scripts/perf/idle.sh
# Needs perf (Debian's linux-perf), wrk, python3, the release binary and the load client
# (cargo bench --bench load --no-run, then scripts/pgo/build.sh: a bench build puts the
# plain binary back); nginx (Debian's nginx-light) for the reference rows, which are left
# out without it.
set -euo pipefail
shopt -s inherit_errexit # a failed phase inside $(…) stops the script too
cd "$(dirname "$0")/../.."
target=${CARGO_TARGET_DIR:-target}
BIN=${BIN:-$target/release/zabbix-mcp-guard}
PAUSES=${PAUSES:-0 2 10 40}
SECS=${SECS:-6}
[ -x "$BIN" ] || { echo "no binary at $BIN: scripts/pgo/build.sh" >&2; exit 1; }
command -v perf >/dev/null || { echo "perf is not installed (linux-perf)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is not installed" >&2; exit 1; }
. scripts/perf/common.sh

scratch
start_load_stub
export TOKEN=stub-bench-token-0123456789abcdef
port=$(free_port)
start_sidecar "$BIN" "$stub_url" "$port" idle
printf '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"host_get","arguments":{"limit":100}}}' >"$work/call.json"
printf '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}' >"$work/list.json"

# measure NAME PID URL BODY OK_MARKER: one line per pause.
measure() {
    local line pause result
    line=$(printf '%-30s' "$1")
    for pause in $PAUSES; do
        result=$(PAUSE_MS=$pause OK_MARKER=$5 wrk_phase mcp "$4" 1 1 "$SECS" "$3" "$2")
        line+=$(printf '%10s' "$(field "$result" cpu_us_per_call)")
    done
    echo "$line"
}

snapshot=$(cpu_ticks_now)
header=$(printf '%-30s' "µs CPU per request, pause ms:")
for pause in $PAUSES; do header+=$(printf '%10s' "$pause"); done
echo "one connection, ${SECS}s per cell, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$header"
# Warm-up: connection, caller cache, list decisions.
KIND=mcp BODY_FILE=$work/call.json wrk -t1 -c1 -d1s -s scripts/perf/wrk.lua "http://127.0.0.1:$port/mcp" >/dev/null
measure "sidecar tools/call host_get" "$sidecar_pid" "http://127.0.0.1:$port/mcp" "$work/call.json" '"structuredContent"'
measure "sidecar tools/list" "$sidecar_pid" "http://127.0.0.1:$port/mcp" "$work/list.json" '"tools"'

if command -v nginx >/dev/null; then
    # The reference: a C server answering a POST of the same body with a 26 kB static
    # file (the size of a host_get {limit:100} answer from the 7.0 lab).
    mkdir -p "$work/www"
    head -c 26000 /dev/zero | tr '\0' 'x' >"$work/www/doc.json"
    nginx_port=$(free_port)
    start_nginx static "    server {
        listen 127.0.0.1:$nginx_port;
        root $work/www;
        error_page 405 =200 \$uri;
    }"
    measure "nginx, a static 26 kB file" "$nginx_worker" "http://127.0.0.1:$nginx_port/doc.json" "$work/list.json" 'xxxx'
fi
echo "the hypervisor took $(steal_since "$snapshot") % of the machine's CPU time meanwhile (steal)"
