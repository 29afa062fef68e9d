#!/usr/bin/env bash
# Load and soak of the released sidecar, driven from outside its process (issue 12, and the
# memory rows of issue 11): builds the release binary (scripts/pgo/build.sh) and the load
# client, starts the instant stub Zabbix and the sidecar (default policy, a decision-log
# file), runs the load client against it and prints its figures. Bounded: the client stops
# after SECS.
#
#   scripts/load/run.sh                          # 60 s, 1000 connections + 100 slow clients
#   SECS=600 scripts/load/run.sh                 # the 10-minute soak
#   CONNECTIONS=1000 SLOW=0 MIX=list scripts/load/run.sh   # memory: tools/list only
#
# Environment: SECS (60), CONNECTIONS (1000), SLOW (100), MIX (all|list), SAMPLE_SECS (5),
# PORT (18480), SIDECAR_ARGS (extra sidecar flags), OUT (a directory for the logs; default
# a fresh temporary one), NO_BUILD=1 to reuse the binaries already built.
set -euo pipefail

cd "$(dirname "$0")/../.."
SECS=${SECS:-60}
CONNECTIONS=${CONNECTIONS:-1000}
SLOW=${SLOW:-100}
MIX=${MIX:-all}
SAMPLE_SECS=${SAMPLE_SECS:-5}
PORT=${PORT:-18480}
STUB_PORT=${STUB_PORT:-$((PORT + 1))}
OUT=${OUT:-$(mktemp -d /tmp/zmg-load.XXXXXX)}
mkdir -p "$OUT"
target=${CARGO_TARGET_DIR:-target}

if [[ -z ${NO_BUILD:-} ]]; then
    # The load client first: a bench build also builds (and puts back) the plain binary.
    cargo bench --bench load --no-run
    scripts/pgo/build.sh
fi
sidecar="$target/release/zabbix-mcp-guard"
# The newest load bench executable (cargo names it load-<hash>).
load=$(ls -t "$target"/release/deps/load-* 2>/dev/null | grep -v '\.d$' | head -n 1)
[[ -x $sidecar && -x ${load:-} ]] || { echo "build the binaries first (unset NO_BUILD)" >&2; exit 1; }

# Room for every connection, the slow clients and the stub connections on both sides.
ulimit -n "$(( (CONNECTIONS + SLOW) * 2 + 1024 ))" 2>/dev/null || true

pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
trap cleanup EXIT

"$load" stub --listen "127.0.0.1:$STUB_PORT" >"$OUT/stub.log" 2>&1 &
pids+=($!)

# shellcheck disable=SC2086
"$sidecar" --frontend-url "http://127.0.0.1:$STUB_PORT/api_jsonrpc.php" \
    --allowed-ip 127.0.0.1 --listen-ip 127.0.0.1 --listen-port "$PORT" \
    --policy-dir policies --decision-log "$OUT/decisions.log" \
    --max-connections "$(( CONNECTIONS + SLOW + 100 ))" ${SIDECAR_ARGS:-} \
    >"$OUT/sidecar.log" 2>&1 &
sidecar_pid=$!
pids+=("$sidecar_pid")

for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
    kill -0 "$sidecar_pid" 2>/dev/null || { cat "$OUT/sidecar.log" >&2; exit 1; }
    sleep 0.1
done

# Idle: after start-up and one call.
curl -fsS -o /dev/null "http://127.0.0.1:$PORT/mcp" -H 'Authorization: Bearer load-token-0' \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2025-11-25' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"host_get","arguments":{"limit":1}}}'
echo "sidecar idle after one call: $(grep -E 'VmRSS|VmHWM' /proc/$sidecar_pid/status | tr -s ' \t' ' ' | paste -sd ' ')"

status=0
"$load" run --url "http://127.0.0.1:$PORT" --pid "$sidecar_pid" --connections "$CONNECTIONS" \
    --slow "$SLOW" --secs "$SECS" --sample-secs "$SAMPLE_SECS" --mix "$MIX" || status=$?

echo "sidecar after the load: $(grep -E 'VmRSS|VmHWM' /proc/$sidecar_pid/status | tr -s ' \t' ' ' | paste -sd ' ')"
echo "decision log lines: $(wc -l <"$OUT/decisions.log"); sidecar WARN/ERROR lines: $(grep -cE " (WARN|ERROR) " "$OUT/sidecar.log" || true)"
echo "logs in $OUT"
exit "$status"
