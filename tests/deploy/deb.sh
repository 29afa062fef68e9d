#!/usr/bin/env bash
# The Debian package: build it as released (scripts/pgo/build.sh, then `cargo deb
# --no-build`), check its files, install it with `dpkg -i` on this machine, start the packaged binary with the packaged
# configuration as the unit would (the credential directory, an unprivileged user, no new
# privileges, a notification socket; systemd is not init here) against the 7.0 lab, and
# check READY=1, /readyz, an MCP call through the MCP Inspector CLI, the decision log and
# STOPPING=1. Purges the package at the end.
#
#   bash tests/deploy/deb.sh            # build + install + run (root; lab up)
#   DEB=path.deb bash tests/deploy/deb.sh   # an already built package
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/deploy/lib.sh
[ "$(id -u)" = 0 ] || fail "run as root (dpkg -i)"
lab_env 7
WORK=$(mktemp -d /tmp/zmg-deb.XXXXXX)
PID=
NOTIFY_PID=
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  [ -n "$NOTIFY_PID" ] && kill "$NOTIFY_PID" 2>/dev/null || true
  dpkg --purge zabbix-mcp-guard >/dev/null 2>&1 || true
  rm -rf /var/log/zabbix-mcp-guard "$WORK"
}
trap cleanup EXIT

if [ -z "${DEB:-}" ]; then
  step "scripts/pgo/build.sh (the profile-guided release build), cargo deb --no-build"
  command -v cargo-deb >/dev/null || fail "cargo-deb is missing: cargo install cargo-deb"
  scripts/pgo/build.sh 2>"$WORK/build.log" || { tail -30 "$WORK/build.log"; fail "scripts/pgo/build.sh"; }
  DEB=$(cargo deb --no-build --strip 2>"$WORK/cargo-deb.log" | tail -1) || { cat "$WORK/cargo-deb.log"; fail "cargo deb"; }
fi
[ -f "$DEB" ] || fail "no package at $DEB"

step "package contents"
dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's#^\./#/#' > "$WORK/files"
for f in /usr/bin/zabbix-mcp-guard /etc/zabbix/zabbix_mcp_guard.conf \
         /etc/zabbix/mcp-guard/policies/default.rego \
         /etc/zabbix/mcp-guard/zabbix_mcp_guard.d/README \
         /etc/logrotate.d/zabbix-mcp-guard \
         /usr/lib/systemd/system/zabbix-mcp-guard.service \
         /usr/share/doc/zabbix-mcp-guard/copyright \
         /usr/share/doc/zabbix-mcp-guard/README.md \
         /usr/share/doc/zabbix-mcp-guard/docs/performance-log.md \
         /usr/share/doc/zabbix-mcp-guard/examples/zabbix_mcp_guard.conf \
         /usr/share/doc/zabbix-mcp-guard/examples/policies/read_only/policy.rego; do
  grep -qx "$f" "$WORK/files" || { cat "$WORK/files"; fail "the package lacks $f"; }
done
dpkg-deb -f "$DEB" Package Version Architecture Depends
dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles | grep -qx /etc/zabbix/zabbix_mcp_guard.conf \
  || fail "the configuration is not a conffile"

step "dpkg -i"
dpkg --purge zabbix-mcp-guard >/dev/null 2>&1 || true
dpkg -i "$DEB" > "$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log"; fail "dpkg -i"; }
key=/etc/zabbix/mcp-guard/seal-key
[ "$(stat -c '%a %U' "$key")" = "600 root" ] || fail "the seal key is not root-only: $(stat -c '%a %U' "$key")"
grep -Eqx '[0-9a-f]{64}' "$key" || fail "the seal key is not 32 bytes of hex"
/usr/bin/zabbix-mcp-guard --version
systemd-analyze verify /usr/lib/systemd/system/zabbix-mcp-guard.service 2>"$WORK/verify.log" \
  && [ ! -s "$WORK/verify.log" ] || { cat "$WORK/verify.log"; fail "systemd-analyze verify on the installed unit"; }

step "-T on the installed files, as an admin checks a change"
# As root outside the unit: the seal key's file is its own credential directory.
CREDENTIALS_DIRECTORY=/etc/zabbix/mcp-guard \
  /usr/bin/zabbix-mcp-guard -c /etc/zabbix/zabbix_mcp_guard.conf -T > "$WORK/test-config.log" 2>&1 \
  || { cat "$WORK/test-config.log"; fail "-T on the installed configuration"; }
grep -q '^policies loaded: /etc/zabbix/mcp-guard/policies, revision ' "$WORK/test-config.log" \
  && grep -qx 'configuration OK' "$WORK/test-config.log" \
  || { cat "$WORK/test-config.log"; fail "-T did not load the installed policies"; }

step "start the packaged binary as the unit does"
# What systemd would do for the unit: the credential copy readable by the service user
# only, the LogsDirectory, an unprivileged user (DynamicUser), no new privileges.
mkdir -p "$WORK/credentials" /var/log/zabbix-mcp-guard
install -m 0400 -o nobody "$key" "$WORK/credentials/seal-key"
chown nobody /var/log/zabbix-mcp-guard "$WORK/credentials"
chmod 0755 "$WORK"
PORT=$(free_port)
# The unit is Type=notify with WatchdogSec=30s: a notification socket as systemd's.
python3 tests/deploy/notify_listener.py "$WORK/notify" "$WORK/notify.log" &
NOTIFY_PID=$!
wait_for 10 "the notification socket" test -S "$WORK/notify"
# The local override a `systemctl edit` drop-in would set: the 7.0 lab, a free port.
CREDENTIALS_DIRECTORY="$WORK/credentials" \
NOTIFY_SOCKET="$WORK/notify" WATCHDOG_USEC=30000000 \
ZABBIX_MCP_GUARD_FRONTEND_URL="$ZBX_URL" ZABBIX_MCP_GUARD_LISTEN_PORT="$PORT" \
  setpriv --reuid=nobody --regid=nogroup --clear-groups --no-new-privs \
  /usr/bin/zabbix-mcp-guard --config /etc/zabbix/zabbix_mcp_guard.conf serve \
  > "$WORK/guard.log" 2>&1 &
PID=$!
BASE="http://127.0.0.1:$PORT"
wait_for 30 "/readyz of the packaged sidecar" http_ok "$BASE/readyz" \
  || { cat "$WORK/guard.log"; exit 1; }
http_ok "$BASE/healthz" || fail "/healthz"
grep -q 'ApprovalSealKeyFile is readable' "$WORK/guard.log" && fail "seal key warning: $(cat "$WORK/guard.log")"
wait_for 10 "READY=1 on the notification socket" grep -q "^READY=1 STATUS=serving MCP on .*:$PORT" "$WORK/notify.log" \
  || { cat "$WORK/notify.log" "$WORK/guard.log"; fail "no READY=1 from the service user"; }

step "an MCP call through the Inspector CLI"
inspector "$BASE/mcp" "$ZBX_TOKEN_VIEWER" --method tools/call --tool-name host_get \
  > "$WORK/call.json" 2>"$WORK/call.err" || { cat "$WORK/call.err" "$WORK/guard.log"; fail "tools/call"; }
grep -q 'mcp-web-01' "$WORK/call.json" || { cat "$WORK/call.json"; fail "host_get did not return the seeded host"; }
grep -q '"isError": true' "$WORK/call.json" && { cat "$WORK/call.json"; fail "host_get returned an error"; }
wait_for 10 "the call in the packaged decision log" \
  grep -q '"host_get"' /var/log/zabbix-mcp-guard/decisions.log
[ "$(stat -c %U /var/log/zabbix-mcp-guard/decisions.log)" = nobody ] || fail "decision log owner"

step "logrotate rotates the decision log with the packaged rule"
# logrotate moves the file away; the sidecar's next write creates the new one. A call's
# last line is its zabbix_result event: one per call.
LOGS=/var/log/zabbix-mcp-guard
calls() { if [ -e "$1" ]; then grep -c '"zabbix_result"' "$1" || true; else echo none; fi; }
rotate() {
  logrotate -f --state "$WORK/logrotate.state" /etc/logrotate.d/zabbix-mcp-guard \
    2>"$WORK/logrotate.err" || { cat "$WORK/logrotate.err"; fail "logrotate"; }
}
call_again() {
  inspector "$BASE/mcp" "$ZBX_TOKEN_VIEWER" --method tools/call --tool-name host_get \
    > "$WORK/call.json" 2>"$WORK/call.err" || { cat "$WORK/call.err"; fail "tools/call"; }
  wait_for 10 "the call's result event in a new decisions.log" \
    grep -q '"zabbix_result"' "$LOGS/decisions.log" || { ls -l "$LOGS"; fail "no new decisions.log"; }
}
expect() { [ "$(calls "$1")" = "$2" ] || fail "$1 holds $(calls "$1") calls, not $2: $(ls -l "$LOGS")"; }
wait_for 10 "the first call's result event" grep -q '"zabbix_result"' "$LOGS/decisions.log"
expect "$LOGS/decisions.log" 1
rotate
expect "$LOGS/decisions.log" none
expect "$LOGS/decisions.log.1" 1
call_again
[ "$(stat -c %U "$LOGS/decisions.log")" = nobody ] || fail "new decision log owner"
expect "$LOGS/decisions.log" 1
expect "$LOGS/decisions.log.1" 1
# The second rotation compresses the first file (delaycompress); every line is kept.
rotate
call_again
[ "$(zcat "$LOGS/decisions.log.2.gz" | grep -c '"zabbix_result"')" = 1 ] || fail "decisions.log.2.gz"
expect "$LOGS/decisions.log.1" 1
expect "$LOGS/decisions.log" 1

step "SIGTERM stops it cleanly"
kill -TERM "$PID"; wait "$PID" || fail "exit status $? after SIGTERM: $(cat "$WORK/guard.log")"
PID=
wait_for 10 "STOPPING=1 on the notification socket" grep -q '^STOPPING=1' "$WORK/notify.log" \
  || { cat "$WORK/notify.log"; fail "no STOPPING=1"; }

step "purge"
dpkg --purge zabbix-mcp-guard > "$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log"; fail "dpkg --purge"; }
[ ! -e /usr/bin/zabbix-mcp-guard ] && [ ! -e "$key" ] && [ ! -e /etc/zabbix/zabbix_mcp_guard.conf ] \
  || fail "purge left files behind"
echo "deb: OK ($DEB)"
