# Shared by the tests/deploy/*.sh scripts (sourced): failing loudly, waiting on a
# condition with a deadline, the lab's env file, a free port, a real MCP client.

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*" >&2; }

# wait_for SECONDS DESCRIPTION CMD...: run CMD until it succeeds; after SECONDS say so and
# return 1 (under set -e that ends the script unless the caller adds its details).
wait_for() {
  local seconds=$1 what=$2; shift 2
  local deadline=$(( $(date +%s) + seconds ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "FAIL: timed out after ${seconds}s waiting for: $what" >&2; return 1; }
    sleep 0.2
  done
}

# lab_env V: exports ZBX_URL, ZBX_TOKEN_VIEWER, ... of the lab's Zabbix V.
lab_env() {
  local file="${ZBX_STATE_DIR:-/var/lib/zbx-test}/zabbix$1.env"
  [ -r "$file" ] || fail "the lab is not up ($file); run: bash deploy/lab/start-zabbix.sh all"
  set -a; . "$file"; set +a
}

# free_port: a free loopback TCP port within ListenPort's 1024-32767.
free_port() {
  local p
  for _ in $(seq 200); do
    p=$(( 20000 + RANDOM % 12000 ))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  fail "no free port"
}

http_ok() { curl -fsS -o /dev/null --max-time 5 "$@"; }

# inspector URL TOKEN ARGS...: the MCP Inspector CLI (a real MCP client), nothing of a
# person's own Inspector setup leaking in.
inspector() {
  local url=$1 token=$2; shift 2
  local bin="${INSPECTOR_HOME:-/opt/mcp-inspector}/node_modules/.bin/mcp-inspector"
  [ -x "$bin" ] || fail "no MCP Inspector CLI at $bin; run: bash deploy/lab/start-zabbix.sh all"
  HOME="$WORK/inspector-home" MCP_CATALOG_PATH="$WORK/inspector-catalog.json" \
    "$bin" --cli "$url" --transport http --header "Authorization: Bearer $token" "$@"
}
