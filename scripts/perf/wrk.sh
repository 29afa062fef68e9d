#!/usr/bin/env bash
# The released sidecar against the real Zabbix 7.0 lab, driven from outside by wrk, next to
# the same host.get posted straight to Zabbix, and through nginx as a reference proxy, in
# the same run (see README "Performance").
#
# 1. A throw-away sidecar behind scripts/perf/stub_zabbix.py --forward records the exact
#    host.get body the sidecar sends for tools/call host_get {"limit":100}.
# 2. The measured sidecar (default policy set, decision log file) talks to Zabbix directly.
#    Phases of DURATION seconds each: direct, sidecar and proxy at 1 connection, the same
#    at MANY connections (default 16), tools/list at 1 connection. The sidecar's CPU (all
#    its threads) and the nginx worker's are counted by `perf stat` during their phases and
#    divided by the answers. Added latency is a phase's p50 (p99) minus the direct one's.
# 3. The proxy phases: nginx (one worker, as the sidecar runs one thread) forwarding the
#    same host.get to Zabbix untouched, over keep-alive connections: what the leanest
#    proxy costs on this machine, in this run, doing none of the sidecar's work (no MCP, no
#    policy, no log, no reshaping). PROXY=0 leaves them out; without nginx they are too.
# 4. ROUNDS > 1 repeats the host_get phases that many times, interleaved, and reports the
#    median of the rounds' ratios: Zabbix's own p50 drifts over a minute by more than the
#    sidecar adds, so back-to-back pairs compare better than one long pair.
#
#   scripts/perf/wrk.sh                      # DURATION=10 ROUNDS=1 ENV=/var/lib/zbx-test/zabbix7.env
#   ROUNDS=6 DURATION=5 scripts/perf/wrk.sh  # six interleaved rounds of 5 s phases
#   MANY=64 scripts/perf/wrk.sh              # the throughput phases at 64 connections
# (scripts/perf/stub.sh runs this against an instant stub Zabbix instead of the lab.)
# Needs wrk, perf (Debian's linux-perf) and python3, nginx (nginx-light) for the proxy
# phases; build first: scripts/pgo/build.sh (the released, profile-guided build; PGO=off
# for a plain one).
set -euo pipefail
shopt -s inherit_errexit # a failed phase inside $(…) stops the script too
cd "$(dirname "$0")/../.."
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/zabbix-mcp-guard}
ENV=${ENV:-/var/lib/zbx-test/zabbix7.env}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-1}
MANY=${MANY:-16}
PROXY=${PROXY:-1}
[ -x "$BIN" ] || { echo "no binary at $BIN: scripts/pgo/build.sh" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is not installed" >&2; exit 1; }
command -v perf >/dev/null || { echo "perf is not installed (linux-perf)" >&2; exit 1; }
command -v nginx >/dev/null || PROXY=0
. scripts/perf/common.sh
against_lab
# The machine's busy CPU time so far (user, nice, system, irq, softirq; /proc/stat), ticks.
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
tck=$(getconf CLK_TCK)
# wrk_run KIND URL BODY CONNECTIONS [PID]: wrk_phase's RESULT line (with PID, the
# process's cpu_us_per_call) plus machine_us_per_call, the CPU time of the whole machine
# meanwhile per answer (Zabbix's PHP and PostgreSQL, the proxy if any, wrk itself, and
# whatever else runs). Any answer that is not a success stops the script (a figure over
# denials or errors is not the call's cost). wrk's socket errors are not checked: it counts
# every close of the lab's `php -S`, which closes each connection after its answer, as one.
wrk_run() {
    local result busy
    busy=$(busy_ticks)
    result=$(wrk_phase "$1" "$3" $(( $4 < 2 ? 1 : 2 )) "$4" "$DURATION" "$2" "${5:-}")
    busy=$(( $(busy_ticks) - busy ))
    result+=$(awk -v t="$busy" -v h="$tck" -v n="$(field "$result" requests)" \
        'BEGIN { printf " machine_us_per_call=%.0f", t / h * 1e6 / n }')
    echo "$result"
}

printf '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"host_get","arguments":{"limit":100}}}' >"$work/call.json"
printf '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}' >"$work/list.json"

# 1. Record the host.get the sidecar sends.
record_host_get "$BIN" "$ZBX_URL" '{"limit":100}' "$work/host_get.json"

# 2. The measured sidecar, straight to Zabbix.
port=$(free_port)
start_sidecar "$BIN" "$ZBX_URL" "$port" main
sidecar="http://127.0.0.1:$port/mcp"
echo "wrk against $ZBX_URL (Zabbix $ZBX_API_VERSION), ${DURATION}s per phase, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "host.get body: $(head -c 300 "$work/host_get.json")"
# Warm-up: connections, caller cache, list decisions.
KIND=mcp BODY_FILE=$work/call.json wrk -t1 -c"$MANY" -d2s -s scripts/perf/wrk.lua "$sidecar" >/dev/null

# 3. The reference proxy in front of the same Zabbix.
if [ "$PROXY" = 1 ]; then
    start_nginx_proxy "$ZBX_URL"
    echo "reference proxy: nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), one worker, at $proxy_url"
    KIND=direct BODY_FILE=$work/host_get.json wrk -t1 -c"$MANY" -d2s -s scripts/perf/wrk.lua "$proxy_url" >/dev/null
fi

sidecar_phase() { # CONNECTIONS BODY [OK_MARKER]
    OK_MARKER=${3:-'"structuredContent"'} wrk_run mcp "$sidecar" "$2" "$1" "$sidecar_pid"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Each round's figures, by "WHO MEASURE" (WHO: sidecar or proxy), as space-separated lists.
declare -A rounds
# compare WHO DIRECT_1 WHO_1 DIRECT_MANY WHO_MANY: one round's figures of WHO against the
# direct phases next to its own.
compare() {
    rounds[$1 p50]+=" $(ratio "$(field "$3" p50_us)" "$(field "$2" p50_us)")"
    rounds[$1 rps]+=" $(ratio "$(field "$5" rps)" "$(field "$4" rps)")"
    rounds[$1 cpu1]+=" $(field "$3" cpu_us_per_call)"
    rounds[$1 cpu_many]+=" $(field "$5" cpu_us_per_call)"
    rounds[$1 kernel_many]+=" $(field "$5" kernel_share)"
    rounds[$1 p50_added]+=" $(( $(field "$3" p50_us) - $(field "$2" p50_us) ))"
    rounds[$1 p99_added]+=" $(( $(field "$5" p99_us) - $(field "$4" p99_us) ))"
    rounds[$1 machine1]+=" $(field "$3" machine_us_per_call)"
    rounds[$1 machine_many]+=" $(field "$5" machine_us_per_call)"
}
# of WHO MEASURE [FORMAT]: the median of the rounds' figures.
of() {
    # shellcheck disable=SC2086 # the list splits into its figures
    printf "${3:-%s}" "$(median ${rounds[$1 $2]})"
}
for round in $(seq "$ROUNDS"); do
    [ "$ROUNDS" -gt 1 ] && echo "round $round of $ROUNDS:"
    d1=$(wrk_run direct "$ZBX_URL" "$work/host_get.json" 1)
    echo "direct  host.get  c=1:  $d1"
    s1=$(sidecar_phase 1 "$work/call.json")
    echo "sidecar host_get  c=1:  $s1"
    if [ "$PROXY" = 1 ]; then
        p1=$(wrk_run direct "$proxy_url" "$work/host_get.json" 1 "$nginx_worker")
        echo "proxy   host.get  c=1:  $p1"
    fi
    dmany=$(wrk_run direct "$ZBX_URL" "$work/host_get.json" "$MANY")
    echo "direct  host.get  c=$MANY: $dmany"
    smany=$(sidecar_phase "$MANY" "$work/call.json")
    echo "sidecar host_get  c=$MANY: $smany"
    compare sidecar "$d1" "$s1" "$dmany" "$smany"
    rounds[direct machine1]+=" $(field "$d1" machine_us_per_call)"
    rounds[direct machine_many]+=" $(field "$dmany" machine_us_per_call)"
    if [ "$PROXY" = 1 ]; then
        pmany=$(wrk_run direct "$proxy_url" "$work/host_get.json" "$MANY" "$nginx_worker")
        echo "proxy   host.get  c=$MANY: $pmany"
        compare proxy "$d1" "$p1" "$dmany" "$pmany"
        rounds[sidecar over_proxy]+=" $(ratio "$(field "$s1" cpu_us_per_call)" "$(field "$p1" cpu_us_per_call)")"
    fi
done
l1=$(sidecar_phase 1 "$work/list.json" '"tools"')
echo "sidecar tools/list c=1: $l1"
echo
if [ "$ROUNDS" -gt 1 ]; then
    echo "per round: p50 ratios${rounds[sidecar p50]}; calls/s ratios${rounds[sidecar rps]}; CPU at 1 connection${rounds[sidecar cpu1]} µs"
    echo "medians of $ROUNDS rounds:"
fi
echo "host_get p50 / host.get p50 at 1 connection: $(of sidecar p50)"
echo "host_get calls/s / host.get calls/s at $MANY connections: $(of sidecar rps)"
echo "added latency: p50 $(of sidecar p50_added %.0f) µs at 1 connection, p99 $(of sidecar p99_added %.0f) µs at $MANY"
echo "sidecar CPU per host_get {limit:100}: $(of sidecar cpu1 %.0f) µs at 1 connection, $(of sidecar cpu_many %.0f) µs at $MANY" \
    "(in the kernel: $(of sidecar kernel_many) of it at $MANY)"
echo "sidecar CPU per tools/list: $(field "$l1" cpu_us_per_call) µs"
echo "the machine's CPU per host.get straight to Zabbix: $(of direct machine1 %.0f) µs at 1 connection, $(of direct machine_many %.0f) µs at $MANY;" \
    "through the sidecar: $(of sidecar machine1 %.0f) µs, $(of sidecar machine_many %.0f) µs"
echo "the sidecar's CPU per call / the machine's per host.get straight to Zabbix:" \
    "$(ratio "$(of sidecar cpu1)" "$(of direct machine1)") at 1 connection, $(ratio "$(of sidecar cpu_many)" "$(of direct machine_many)") at $MANY"
if [ "$PROXY" = 1 ]; then
    echo "reference proxy (nginx), the same host.get: p50 ratio $(of proxy p50) at 1 connection, calls/s ratio $(of proxy rps) at $MANY;" \
        "added latency p50 $(of proxy p50_added %.0f) µs at 1, p99 $(of proxy p99_added %.0f) µs at $MANY;" \
        "CPU per host.get $(of proxy cpu1 %.0f) µs at 1 connection, $(of proxy cpu_many %.0f) µs at $MANY" \
        "(in the kernel: $(of proxy kernel_many) of it at $MANY);" \
        "the machine's CPU per call through it $(of proxy machine1 %.0f) µs, $(of proxy machine_many %.0f) µs"
    echo "sidecar CPU / proxy CPU per call at 1 connection: $(of sidecar over_proxy)"
fi
