#!/usr/bin/env bash
# Set up the local Zabbix lab (6.0 and 7.0, seeded) and run the sidecar in front of one of
# them on http://127.0.0.1:8443/mcp.   Usage: deploy/run-local.sh [7|6] [extra sidecar flags...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
version="${1:-7}"; shift || true
case "$version" in 6|7) ;; *) echo "usage: $0 [7|6] [flags...]" >&2; exit 2 ;; esac

bash "$here/lab/start-zabbix.sh" all
state="${ZBX_STATE_DIR:-/var/lib/zbx-test}"
# shellcheck disable=SC1090
. "$state/zabbix$version.env"

cd "$repo"
cargo build --release --bin zabbix-mcp-guard
cat <<MSG

Zabbix $ZBX_API_VERSION at $ZBX_URL
MCP endpoint:  http://127.0.0.1:8443/mcp
Admin token:   $ZBX_TOKEN
(viewer token: $ZBX_TOKEN_VIEWER, operator token: $ZBX_TOKEN_OPERATOR)

MSG
exec target/release/zabbix-mcp-guard \
  --frontend-url "$ZBX_URL" --allowed-ip 127.0.0.1,::1 \
  --listen-ip 127.0.0.1 --listen-port 8443 "$@"
