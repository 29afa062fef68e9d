# Shared by the perf scripts (sourced, not run).

# A free port in ListenPort's range (1024-32767).
free_port() {
    python3 -c '
import random, socket
for _ in range(100):
    port = random.randint(20000, 32767)
    try:
        socket.socket().bind(("127.0.0.1", port))
        print(port)
        break
    except OSError:
        pass'
}

# Waits until the sidecar on port $1 is ready.
wait_ready() {
    for _ in $(seq 300); do
        python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$1/readyz', timeout=5)" 2>/dev/null && return 0
        sleep 0.2
    done
    echo "sidecar on port $1 not ready" >&2; exit 1
}

# The machine's CPU time so far, "STEAL TOTAL" in ticks (/proc/stat), for steal_since.
cpu_ticks_now() { awk '/^cpu / { print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }

# The percentage of the machine's CPU time the hypervisor took (steal) since the
# cpu_ticks_now snapshot $1: on a shared host it moves CPU per call more than most changes.
steal_since() {
    awk -v then="$1" -v now="$(cpu_ticks_now)" 'BEGIN {
        split(then, a, " "); split(now, b, " ")
        share = 0
        if (b[2] > a[2]) share = (b[1] - a[1]) * 100 / (b[2] - a[2])
        printf "%.0f", share }'
}

# The value of NAME=… in wrk.lua's RESULT line $1: field LINE NAME.
field() { sed -n "s/.*$2=\([0-9.]*\).*/\1/p" <<<"$1"; }

# succeeded WHAT LINE: stops the script unless wrk.lua's RESULT line LINE counts answers
# and no failure (a figure over denials or errors is not a call's cost), naming the first
# failure, which wrk.lua writes to $FAIL_FILE (set by scratch).
succeeded() {
    [ "$(field "$2" failed)" = 0 ] && [ "$(field "$2" requests)" != 0 ] && return 0
    echo "$1: answers that were not successes: $2" >&2
    [ -s "$FAIL_FILE" ] && echo "the first one: $(cat "$FAIL_FILE")" >&2
    exit 1
}

# wrk_phase KIND BODY THREADS CONNECTIONS SECS URL [PID]: one run of scripts/perf/wrk.lua
# (KIND and BODY_FILE as it reads them; PAUSE_MS and OK_MARKER pass through from the
# caller's environment), printing its RESULT line; with PID also cpu_us_per_call, that
# process's task clock meanwhile (perf stat, all its threads) per answer, and
# kernel_share, the part of its CPU time spent in the kernel (/proc/PID/stat's system and
# user ticks, 10 ms each: a share over a phase of many ticks, not a per-call figure).
# Stops the script when any answer was not a success (succeeded).
wrk_phase() {
    local result counted=() ticks
    [ -n "${7:-}" ] && counted=(perf stat -x, -e task-clock -o "$work/perf" -p "$7" --)
    [ -n "${7:-}" ] && ticks=$(proc_ticks "$7")
    result=$(KIND=$1 BODY_FILE=$2 "${counted[@]}" wrk -t"$3" -c"$4" -d"$5s" --timeout 10s \
        -s scripts/perf/wrk.lua "$6" | grep '^RESULT')
    succeeded "$1 to $6 at $4 connections" "$result"
    if [ -n "${7:-}" ]; then
        result+=$(awk -F, -v n="$(field "$result" requests)" \
            '$3 == "task-clock" { printf " cpu_us_per_call=%.0f", $1 * 1000 / n }' "$work/perf")
        result+=$(echo "$ticks $(proc_ticks "$7")" | awk '{ u = $3 - $1; s = $4 - $2
            printf " kernel_share=%.2f", (u + s) ? s / (u + s) : 0 }')
    fi
    echo "$result"
}

# proc_ticks PID: the process's user and system CPU time so far (all its threads), ticks.
proc_ticks() {
    # The command name (field 2) may hold spaces: count from after its closing parenthesis.
    sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12, $13 }'
}

# For the scripts that drive the lab: reads the lab's env file $ENV (ZBX_URL, ZBX_TOKEN;
# TOKEN for wrk.lua) and makes the scratch directory (scratch, below).
against_lab() {
    # shellcheck disable=SC1090
    . "$ENV"
    export TOKEN=$ZBX_TOKEN
    scratch
}

# A scratch directory $work, removed on exit, and $pids, the processes stopped on exit.
scratch() {
    work=$(mktemp -d)
    export FAIL_FILE=$work/failure
    pids=()
    trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"' EXIT
}

# bench_policies: $work/policies, the default policy with its per-caller read budget raised
# from 10,000 to 1,000,000 calls a second (the most a decision may give). Against an instant
# stub, 64 connections send some 25,000 calls a second: with the default budget a third of
# them were `rate_limited` denials, cheap answers that made the figures look better. The
# policy evaluates the same way; only the constant differs.
bench_policies() {
    [ -f "$work/policies/default.rego" ] && return 0
    mkdir -p "$work/policies"
    sed 's/"rate": {"calls": 10000, "per_seconds": 1,/"rate": {"calls": 1000000, "per_seconds": 1,/' \
        policies/default.rego >"$work/policies/default.rego"
    grep -q '"calls": 1000000, "per_seconds": 1,' "$work/policies/default.rego" || {
        echo "policies/default.rego has no read budget of 10000 calls a second to raise" >&2; exit 1; }
}

# start_sidecar BIN FRONTEND_URL PORT NAME: the sidecar as the perf scripts run it (the
# default policy set as bench_policies makes it, a decision log file
# $work/decisions-NAME.log, log $work/sidecar-NAME.log), in front of FRONTEND_URL on PORT;
# sets sidecar_pid (stopped on exit) and waits for it.
start_sidecar() {
    bench_policies
    "$1" --frontend-url "$2" --allowed-ip 127.0.0.1 --listen-ip 127.0.0.1 --listen-port "$3" \
        --policy-dir "$work/policies" --decision-log "$work/decisions-$4.log" --debug-level 3 \
        >>"$work/sidecar-$4.log" 2>&1 &
    sidecar_pid=$!
    pids+=("$sidecar_pid")
    wait_ready "$3"
}

# start_stub_zabbix DIR [ARGS...]: scripts/perf/stub_zabbix.py with ARGS, its port file in
# DIR; sets stub_pid (the caller stops it) and stub_url once it listens.
start_stub_zabbix() {
    local dir=$1
    shift
    python3 scripts/perf/stub_zabbix.py "$@" --port-file "$dir/stub.port" 2>/dev/null &
    stub_pid=$!
    for _ in $(seq 100); do [ -s "$dir/stub.port" ] && break; sleep 0.1; done
    [ -s "$dir/stub.port" ] || { echo "the stub Zabbix did not start" >&2; exit 1; }
    stub_url="http://127.0.0.1:$(cat "$dir/stub.port")/api_jsonrpc.php"
}

# start_load_stub: the load client's instant stub Zabbix (`cargo bench --bench load
# --no-run` builds it) in a process of its own; sets stub_url and adds its pid to $pids.
start_load_stub() {
    local target load
    target=${CARGO_TARGET_DIR:-target}
    load=$(ls -t "$target"/release/deps/load-* 2>/dev/null | grep -v '\.d$' | head -n 1)
    [ -x "${load:-}" ] || { echo "no load client: cargo bench --bench load --no-run" >&2; exit 1; }
    "$load" stub --listen 127.0.0.1:0 >"$work/stub.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do grep -q '^stub listening on' "$work/stub.log" && break; sleep 0.1; done
    stub_url=$(sed -n 's/^stub listening on //p' "$work/stub.log")
    [ -n "$stub_url" ] || { echo "the stub did not start:" >&2; cat "$work/stub.log" >&2; exit 1; }
}

# start_nginx NAME HTTP_BLOCK [COMMAND...]: nginx (Debian's nginx-light) with one worker
# process, as the sidecar runs one runtime thread, access log off, its files in
# $work/nginx-NAME; HTTP_BLOCK is the rest of its http {} block. With COMMAND (valgrind and
# its options) nginx runs under it as one process, without a master. Sets nginx_worker,
# the pid that serves (what perf stat or callgrind_control is given); stopped on exit.
start_nginx() {
    local dir=$work/nginx-$1 block=$2 main=
    shift 2
    [ $# -gt 0 ] && main="master_process off;"
    mkdir -p "$dir"
    cat >"$dir/nginx.conf" <<EOF
daemon off;
$main
pid $dir/nginx.pid;
worker_processes 1;
user root;
error_log $dir/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
$block
}
EOF
    "$@" nginx -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/out.log" 2>&1 &
    local started=$!
    pids+=("$started")
    nginx_worker=
    for _ in $(seq 300); do
        if [ -s "$dir/nginx.pid" ]; then
            if [ -n "$main" ]; then nginx_worker=$started; break; fi
            nginx_worker=$(pgrep -P "$(cat "$dir/nginx.pid")" | head -n 1) && break
        fi
        kill -0 "$started" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$nginx_worker" ] || { echo "nginx did not start: $(cat "$dir/error.log" "$dir/out.log")" >&2; exit 1; }
}

# start_nginx_proxy URL [COMMAND...]: the reference proxy, nginx forwarding each request as
# it came to URL's server over keep-alive connections (as the sidecar keeps its own), on a
# port of its own (under COMMAND as start_nginx runs it); sets proxy_url (URL's path on
# that port) and nginx_worker.
start_nginx_proxy() {
    local scheme=${1%%://*} rest=${1#*://} port
    shift
    port=$(free_port)
    start_nginx proxy "    upstream zabbix { server ${rest%%/*}; keepalive 64; }
    server {
        listen 127.0.0.1:$port;
        location / {
            proxy_pass $scheme://zabbix;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }
    }" "$@"
    proxy_url="http://127.0.0.1:$port/${rest#*/}"
}

# record_host_get BIN FRONTEND_URL ARGS OUT: writes to OUT the host.get body the sidecar
# BIN sends to FRONTEND_URL for tools/call host_get ARGS (a throw-away sidecar behind
# scripts/perf/stub_zabbix.py --forward, one call with $TOKEN), so that the reference
# phases post exactly what the sidecar does.
record_host_get() {
    local forward_port port forward_pid
    forward_port=$(free_port)
    python3 scripts/perf/stub_zabbix.py --port "$forward_port" --forward "$2" --record "$4" 2>/dev/null &
    forward_pid=$!
    pids+=("$forward_pid")
    port=$(free_port)
    start_sidecar "$1" "http://127.0.0.1:$forward_port/api_jsonrpc.php" "$port" record
    python3 scripts/perf/mcp_calls.py "127.0.0.1:$port" "$TOKEN" 1 --args "$3"
    kill "$sidecar_pid" "$forward_pid"
    wait "$sidecar_pid" "$forward_pid" 2>/dev/null || true
    [ -s "$4" ] || { echo "no host.get recorded" >&2; exit 1; }
}
