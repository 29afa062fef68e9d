#!/usr/bin/env bash
# The sidecar pattern with network namespaces. A "pod" namespace holds the real Zabbix
# 7.0 frontend of the lab (php -S on the pod's 127.0.0.1:8080; its PostgreSQL bridged
# onto the pod's loopback by tests/deploy/bridge.py) and the sidecar (listening on the pod's address); an
# "agent" namespace, joined to the pod by a veth pair, holds the agent. The agent reaches
# /mcp (an MCP call through the MCP Inspector CLI) and can not reach api_jsonrpc.php: not
# on the pod's address, not on its own loopback, not through the sidecar's port.
# Addresses exist only inside the namespaces this script makes (10.213.N.0/30).
#
#   bash tests/deploy/netns.sh     # root; lab up; uses target/debug (cargo build first)
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/deploy/lib.sh
[ "$(id -u)" = 0 ] || fail "run as root (ip netns)"
lab_env 7
BIN=${BIN:-target/debug/zabbix-mcp-guard}
[ -x "$BIN" ] || fail "no $BIN; run cargo build first"
BIN=$(realpath "$BIN")
DOCROOT=${ZBX7_DOCROOT:-/opt/zabbix7/pkg/usr/share/zabbix}
WORK=$(mktemp -d /tmp/zmg-netns.XXXXXX)
chmod 0755 "$WORK"
POD=zmg-pod-$$ AGENT=zmg-agent-$$
NET=10.213.$(( RANDOM % 250 + 1 ))
POD_IP=$NET.1 AGENT_IP=$NET.2
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del "$POD" 2>/dev/null || true
  ip netns del "$AGENT" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
in_pod() { ip netns exec "$POD" "$@"; }
in_agent() { ip netns exec "$AGENT" "$@"; }

step "namespaces $POD ($POD_IP) and $AGENT ($AGENT_IP)"
ip netns add "$POD"
ip netns add "$AGENT"
ip link add "zp$$" type veth peer name "za$$"
ip link set "zp$$" netns "$POD"
ip link set "za$$" netns "$AGENT"
in_pod ip addr add "$POD_IP/30" dev "zp$$"
in_agent ip addr add "$AGENT_IP/30" dev "za$$"
for ns in "$POD" "$AGENT"; do ip -n "$ns" link set lo up; done
in_pod ip link set "zp$$" up
in_agent ip link set "za$$" up

step "the frontend on the pod's loopback"
# The only way out of the pod: its 127.0.0.1:5432 to the lab's PostgreSQL.
setsid python3 tests/deploy/bridge.py "$POD" 127.0.0.1 5432 127.0.0.1 5432 > "$WORK/bridge.log" 2>&1 &
PIDS+=($!)
ip netns exec "$POD" setsid env PHP_CLI_SERVER_WORKERS=2 php -d memory_limit=512M -d date.timezone=UTC \
  -S 127.0.0.1:8080 -t "$DOCROOT" > "$WORK/php.log" 2>&1 &
PIDS+=($!)
api_version() {
  in_pod curl -fsS --max-time 5 -H 'Content-Type: application/json-rpc' \
    -d '{"jsonrpc":"2.0","method":"apiinfo.version","params":{},"id":1}' "$1" | grep -q '"result"'
}
wait_for 30 "the frontend in the pod" api_version http://127.0.0.1:8080/api_jsonrpc.php \
  || { cat "$WORK/php.log" "$WORK/bridge.log"; exit 1; }

step "the sidecar in the pod"
PORT=8443
ip netns exec "$POD" setsid "$BIN" --frontend-url http://127.0.0.1:8080/api_jsonrpc.php \
  --allowed-ip "$AGENT_IP" --listen-ip "$POD_IP" --listen-port "$PORT" \
  --decision-log "$WORK/decisions.log" serve > "$WORK/guard.log" 2>&1 &
PIDS+=($!)
MCP="http://$POD_IP:$PORT"
wait_for 30 "the sidecar's /readyz from the agent" in_agent curl -fsS -o /dev/null --max-time 5 "$MCP/readyz" \
  || { cat "$WORK/guard.log"; exit 1; }

step "the agent reaches /mcp"
in_agent env HOME="$WORK/inspector-home" MCP_CATALOG_PATH="$WORK/catalog.json" \
  "${INSPECTOR_HOME:-/opt/mcp-inspector}/node_modules/.bin/mcp-inspector" --cli "$MCP/mcp" \
  --transport http --header "Authorization: Bearer $ZBX_TOKEN_VIEWER" \
  --method tools/call --tool-name host_get > "$WORK/call.json" 2>"$WORK/call.err" \
  || { cat "$WORK/call.err" "$WORK/guard.log"; fail "tools/call from the agent"; }
grep -q 'mcp-web-01' "$WORK/call.json" || { cat "$WORK/call.json"; fail "no seeded host in the answer"; }
# Decision lines reach the file within the writer's linger (50 ms) of the call.
wait_for 10 "the decision naming the agent's address" grep -q "\"address\":\"$AGENT_IP\"" "$WORK/decisions.log" \
  || { cat "$WORK/decisions.log"; fail "the decision does not name the agent's address"; }

step "the agent can not reach api_jsonrpc.php"
body='{"jsonrpc":"2.0","method":"apiinfo.version","params":{},"id":1}'
for url in "http://$POD_IP:8080/api_jsonrpc.php" "http://127.0.0.1:8080/api_jsonrpc.php"; do
  if in_agent curl -sS --max-time 5 -o /dev/null -d "$body" "$url" 2>"$WORK/curl.err"; then
    fail "the agent reached $url"
  fi
  grep -q 'Failed to connect\|Connection refused\|Couldn.t connect' "$WORK/curl.err" \
    || fail "unexpected failure for $url: $(cat "$WORK/curl.err")"
  echo "refused: $url"
done
code=$(in_agent curl -sS --max-time 5 -o /dev/null -w '%{http_code}' -d "$body" "$MCP/api_jsonrpc.php")
[ "$code" = 404 ] || fail "the sidecar's port answered api_jsonrpc.php with $code"
echo "404: $MCP/api_jsonrpc.php"
# The host's own lab frontend is not in the agent's namespace either.
in_agent curl -sS --max-time 3 -o /dev/null "$ZBX_URL" 2>/dev/null && fail "the agent reached the host's $ZBX_URL"
echo "netns: OK"
