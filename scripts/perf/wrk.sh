#!/usr/bin/env bash
# The released sidecar against the real Zabbix 7.0 lab, driven from outside by wrk, next to
# the same host.get posted straight to Zabbix in the same run (see README "Performance").
#
# 1. A throw-away sidecar behind scripts/perf/stub_zabbix.py --forward records the exact
#    host.get body the sidecar sends for tools/call host_get {"limit":100}.
# 2. The measured sidecar (default policy set, decision log file) talks to Zabbix directly.
#    Phases of DURATION seconds each: direct and sidecar at 1 connection, direct and
#    sidecar at MANY connections (default 16), tools/list at 1 connection. The sidecar's
#    CPU is read from /proc/<pid>/stat (utime+stime) around each sidecar phase and divided
#    by its calls. Added latency is the sidecar phase's p50 (p99) minus the direct one's.
# 3. ROUNDS > 1 repeats the four host_get phases that many times, direct and sidecar
#    alternating, and reports the median of the rounds' ratios: Zabbix's own p50 drifts
#    over a minute by more than the sidecar adds, so back-to-back pairs compare better
#    than one long pair.
#
#   scripts/perf/wrk.sh                      # DURATION=10 ROUNDS=1 ENV=/var/lib/zbx-test/zabbix7.env
#   ROUNDS=6 DURATION=5 scripts/perf/wrk.sh  # six interleaved rounds of 5 s phases
#   MANY=64 scripts/perf/wrk.sh              # the throughput phases at 64 connections
# (scripts/perf/stub.sh runs this against an instant stub Zabbix instead of the lab.)
# Needs wrk and python3; build first: scripts/pgo/build.sh
# (the released, profile-guided build; PGO=off for a plain one).
set -euo pipefail
shopt -s inherit_errexit # a failed phase inside $(…) stops the script too
cd "$(dirname "$0")/../.."
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/zabbix-mcp-guard}
ENV=${ENV:-/var/lib/zbx-test/zabbix7.env}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-1}
MANY=${MANY:-16}
[ -x "$BIN" ] || { echo "no binary at $BIN: scripts/pgo/build.sh" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is not installed" >&2; exit 1; }
. scripts/perf/common.sh
against_lab
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
# wrk_run KIND URL BODY CONNECTIONS: prints wrk's RESULT line; stops the script when any
# answer was not a success (a figure over denials or errors is not the call's cost).
# wrk's socket errors are not checked: it counts every close of the lab's `php -S`, which
# closes each connection after its answer, as one.
wrk_run() {
    local threads=$(( $4 < 2 ? 1 : 2 )) result
    result=$(KIND=$1 BODY_FILE=$3 wrk -t"$threads" -c"$4" -d"${DURATION}s" --timeout 10s \
        -s scripts/perf/wrk.lua "$2" | grep '^RESULT')
    succeeded "$1 at $4 connections" "$result"
    echo "$result"
}

printf '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"host_get","arguments":{"limit":100}}}' >"$work/call.json"
printf '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}' >"$work/list.json"

# 1. Record the host.get the sidecar sends.
proxy_port=$(free_port)
python3 scripts/perf/stub_zabbix.py --port "$proxy_port" --forward "$ZBX_URL" --record "$work/host_get.json" 2>/dev/null &
pids+=($!)
port=$(free_port)
start_sidecar "$BIN" "http://127.0.0.1:$proxy_port/api_jsonrpc.php" "$port" main
KIND=mcp BODY_FILE=$work/call.json wrk -t1 -c1 -d1s -s scripts/perf/wrk.lua "http://127.0.0.1:$port/mcp" >/dev/null
kill "$sidecar_pid"; wait "$sidecar_pid" 2>/dev/null || true
[ -s "$work/host_get.json" ] || { echo "no host.get recorded" >&2; exit 1; }

# 2. The measured sidecar, straight to Zabbix.
port=$(free_port)
start_sidecar "$BIN" "$ZBX_URL" "$port" main
sidecar="http://127.0.0.1:$port/mcp"
tck=$(getconf CLK_TCK)
echo "wrk against $ZBX_URL (Zabbix $ZBX_API_VERSION), ${DURATION}s per phase, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "host.get body: $(head -c 300 "$work/host_get.json")"
# Warm-up: connections, caller cache, list decisions.
KIND=mcp BODY_FILE=$work/call.json wrk -t1 -c"$MANY" -d2s -s scripts/perf/wrk.lua "$sidecar" >/dev/null

sidecar_phase() { # CONNECTIONS BODY [OK_MARKER]: RESULT line plus cpu_us per call
    local before after result
    before=$(cpu_ticks "$sidecar_pid")
    result=$(OK_MARKER=${3:-'"structuredContent"'} wrk_run mcp "$sidecar" "$2" "$1")
    after=$(cpu_ticks "$sidecar_pid")
    local requests; requests=$(field "$result" requests)
    echo "$result cpu_us_per_call=$(awk -v t=$((after - before)) -v r="$requests" -v h="$tck" 'BEGIN { printf "%.0f", t / h * 1e6 / r }')"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
p50_ratios=(); rps_ratios=(); cpu1=(); cpu_many=(); p50_added=(); p99_added=()
for round in $(seq "$ROUNDS"); do
    d1=$(wrk_run direct "$ZBX_URL" "$work/host_get.json" 1)
    s1=$(sidecar_phase 1 "$work/call.json")
    dmany=$(wrk_run direct "$ZBX_URL" "$work/host_get.json" "$MANY")
    smany=$(sidecar_phase "$MANY" "$work/call.json")
    [ "$ROUNDS" -gt 1 ] && echo "round $round of $ROUNDS:"
    echo "direct  host.get  c=1:  $d1"
    echo "sidecar host_get  c=1:  $s1"
    echo "direct  host.get  c=$MANY: $dmany"
    echo "sidecar host_get  c=$MANY: $smany"
    p50_ratios+=("$(ratio "$(field "$s1" p50_us)" "$(field "$d1" p50_us)")")
    rps_ratios+=("$(ratio "$(field "$smany" rps)" "$(field "$dmany" rps)")")
    cpu1+=("$(field "$s1" cpu_us_per_call)")
    cpu_many+=("$(field "$smany" cpu_us_per_call)")
    p50_added+=("$(( $(field "$s1" p50_us) - $(field "$d1" p50_us) ))")
    p99_added+=("$(( $(field "$smany" p99_us) - $(field "$dmany" p99_us) ))")
done
l1=$(sidecar_phase 1 "$work/list.json" '"tools"')
echo "sidecar tools/list c=1: $l1"
echo
if [ "$ROUNDS" -gt 1 ]; then
    echo "per round: p50 ratios ${p50_ratios[*]}; calls/s ratios ${rps_ratios[*]}; CPU at 1 connection ${cpu1[*]} µs"
    echo "medians of $ROUNDS rounds:"
fi
echo "host_get p50 / host.get p50 at 1 connection: $(median "${p50_ratios[@]}")"
echo "host_get calls/s / host.get calls/s at $MANY connections: $(median "${rps_ratios[@]}")"
echo "added latency: p50 $(printf '%.0f' "$(median "${p50_added[@]}")") µs at 1 connection, p99 $(printf '%.0f' "$(median "${p99_added[@]}")") µs at $MANY"
echo "sidecar CPU per host_get {limit:100}: $(median "${cpu1[@]}") µs at 1 connection, $(median "${cpu_many[@]}") µs at $MANY"
echo "sidecar CPU per tools/list: $(field "$l1" cpu_us_per_call) µs"
