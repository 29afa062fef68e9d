#!/usr/bin/env bash
# Stand up a REAL Zabbix API (+ server) on loopback on Debian bookworm, no docker.
#
#   start-zabbix.sh        -> Zabbix 6.0 (bookworm packages)                       [default]
#   start-zabbix.sh 7      -> Zabbix 7.0 (trixie debs, extracted under /opt/zabbix7, NOT installed)
#   start-zabbix.sh all    -> both, side by side, plus the approval page test parts (Redis, Chromium)
#                             and the test tools (Inspector, Python SDK, cargo-deb, llvm-profdata)
#   start-zabbix.sh approval -> only Redis (127.0.0.1:6390) + Chromium/chromedriver
#
# = install + start + seed (seed.py: fixed test dataset, see README.md; ZBX_SEED=0 skips it).
# Idempotent: re-running only (re)starts what is not running, refreshes the API token if needed and
# re-checks the seed (creates nothing twice). Everything binds 127.0.0.1 only. Needs root + the Debian
# mirror; runs from any cwd (paths are relative to this script). python3 (stdlib) is used by seed.py.
#
# Results (per version V in 6|7):   $ZBX_STATE_DIR/zabbixV.env  (ZBX_URL, ZBX_TOKEN, ZBX_TOKEN_OPERATOR, ...)
#                                   $ZBX_STATE_DIR/zabbixV.token, seedV.json (seed manifest)
# Ports (override via env):  6.0: web 8080, server(trapper) 10051   7.0: web 8081, server 10052
# Postgres: cluster 15/main on 127.0.0.1:5432; DB/user/pass zabbix/zabbix/zabbix and zabbix7/zabbix7/zabbix7
# Frontend/API login: Admin / zabbix
set -euo pipefail

LAB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WHAT="${1:-6}"
ZBX_STATE_DIR="${ZBX_STATE_DIR:-/var/lib/zbx-test}"
ZBX6_WEB_PORT="${ZBX6_WEB_PORT:-8080}"
ZBX6_SERVER_PORT="${ZBX6_SERVER_PORT:-10051}"
ZBX7_WEB_PORT="${ZBX7_WEB_PORT:-8081}"
ZBX7_SERVER_PORT="${ZBX7_SERVER_PORT:-10052}"
ZBX7_HOME="${ZBX7_HOME:-/opt/zabbix7}"
ZBX_START_SERVER="${ZBX_START_SERVER:-1}"          # 0 = API/frontend only (no zabbix_server)
ZBX_DISABLE_DEFAULT_HOST="${ZBX_DISABLE_DEFAULT_HOST:-1}"  # disable 'Zabbix server' host (no agent here -> noise problems)
ZBX_TOKEN_NAME="${ZBX_TOKEN_NAME:-mcp-test}"
ZBX_PHP_WORKERS="${ZBX_PHP_WORKERS:-4}"            # PHP_CLI_SERVER_WORKERS (parallel requests)
ZBX_SEED="${ZBX_SEED:-1}"                          # 0 = do not run seed.py
PG_VER=15
PG_PORT=5432
T_START=$(date +%s)

log() { echo "[start-zabbix $(date +%T)] $*" >&2; }
need_root() { [ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }; }
need_root
mkdir -p "$ZBX_STATE_DIR" "$ZBX_STATE_DIR/logs"

# ---------------------------------------------------------------- packages (bookworm)
PKGS=(postgresql zabbix-server-pgsql zabbix-frontend-php php8.2-cli php8.2-cgi php8.2-pgsql php8.2-gd
      php8.2-bcmath php8.2-mbstring php8.2-xml php8.2-ldap php8.2-curl fonts-dejavu-core)
command -v python3 >/dev/null 2>&1 || PKGS+=(python3)   # seed.py (stdlib only)
install_packages() {
  local missing=()
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && { log "packages already installed"; return; }
  log "installing: ${missing[*]}"
  if ! apt-cache policy zabbix-server-pgsql | grep -q 'Candidate: 1:6'; then apt-get update -qq; fi
  # php8.2-cgi satisfies 'php' -> avoids libapache2-mod-php/apache2. Block service autostart during install.
  local made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
    > "$ZBX_STATE_DIR/logs/apt-install.log" 2>&1 || { tail -30 "$ZBX_STATE_DIR/logs/apt-install.log"; exit 1; }
  [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  true
}

# ---------------------------------------------------------------- postgres
start_postgres() {
  if ! pg_lsclusters -h 2>/dev/null | awk '{print $1,$2}' | grep -q "^$PG_VER main$"; then
    log "creating PG cluster"; pg_createcluster $PG_VER main >/dev/null
  fi
  if ! pg_lsclusters -h | awk -v v=$PG_VER '$1==v && $2=="main"{print $4}' | grep -q online; then
    log "starting PostgreSQL $PG_VER"; pg_ctlcluster $PG_VER main start
  fi
  for _ in $(seq 60); do pg_isready -q -h 127.0.0.1 -p $PG_PORT && return; sleep 0.5; done
  echo "postgres not ready" >&2; exit 1
}
psql_su() { (cd / && su postgres -c "psql -p $PG_PORT -X -q -tA -v ON_ERROR_STOP=1"); }   # SQL on stdin

# create_db DB USER PASS SQLDIR : atomic (load into DB_loading, then rename)
create_db() {
  local db=$1 user=$2 pass=$3 sqldir=$4
  psql_su <<<"DO \$\$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname='$user') THEN CREATE ROLE $user LOGIN PASSWORD '$pass'; END IF; END\$\$;"
  if [ "$(psql_su <<<"SELECT 1 FROM pg_database WHERE datname='$db'")" = 1 ]; then
    log "database $db already present"; return; fi
  log "loading schema into $db from $sqldir"
  psql_su <<<"DROP DATABASE IF EXISTS ${db}_loading"
  psql_su <<<"CREATE DATABASE ${db}_loading OWNER $user ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
  for f in schema images data; do
    zcat "$sqldir/$f.sql.gz" | PGPASSWORD=$pass psql -X -q -h 127.0.0.1 -p $PG_PORT -U "$user" -d "${db}_loading" -v ON_ERROR_STOP=1 \
      > "$ZBX_STATE_DIR/logs/schema-$db-$f.log" 2>&1 || { tail "$ZBX_STATE_DIR/logs/schema-$db-$f.log"; exit 1; }
  done
  psql_su <<<"ALTER DATABASE ${db}_loading RENAME TO $db"
}

write_frontend_conf() { # FILE DB USER PASS SERVERPORT
  cat > "$1.tmp" <<EOF
<?php
\$DB['TYPE'] = 'POSTGRESQL'; \$DB['SERVER'] = '127.0.0.1'; \$DB['PORT'] = '$PG_PORT';
\$DB['DATABASE'] = '$2'; \$DB['USER'] = '$3'; \$DB['PASSWORD'] = '$4'; \$DB['SCHEMA'] = '';
\$DB['ENCRYPTION'] = false; \$DB['KEY_FILE'] = ''; \$DB['CERT_FILE'] = ''; \$DB['CA_FILE'] = '';
\$DB['VERIFY_HOST'] = false; \$DB['CIPHER_LIST'] = '';
\$DB['VAULT'] = ''; \$DB['VAULT_URL'] = ''; \$DB['VAULT_PREFIX'] = ''; \$DB['VAULT_DB_PATH'] = '';
\$DB['VAULT_TOKEN'] = ''; \$DB['VAULT_CERT_FILE'] = ''; \$DB['VAULT_KEY_FILE'] = '';
\$DB['DOUBLE_IEEE754'] = true;
\$ZBX_SERVER = '127.0.0.1'; \$ZBX_SERVER_PORT = '$5'; \$ZBX_SERVER_NAME = 'mcp-test';
\$IMAGE_FORMAT_DEFAULT = IMAGE_FORMAT_PNG;
EOF
  chmod 644 "$1.tmp"; mv "$1.tmp" "$1"
}

write_server_conf() { # FILE DB USER PASS PORT RUNDIR LOGDIR
  cat > "$1" <<EOF
LogFile=$7/zabbix_server.log
PidFile=$6/zabbix_server.pid
SocketDir=$6
DBHost=127.0.0.1
DBPort=$PG_PORT
DBName=$2
DBUser=$3
DBPassword=$4
ListenIP=127.0.0.1
ListenPort=$5
Timeout=4
FpingLocation=/usr/bin/fping
StatsAllowedIP=127.0.0.1
CacheUpdateFrequency=2
StartPollers=1
StartPollersUnreachable=1
StartPingers=1
StartDiscoverers=1
StartHTTPPollers=1
StartTrappers=2
StartPreprocessors=1
StartEscalators=1
StartAlerters=1
StartLLDProcessors=1
StartTimers=1
HousekeepingFrequency=0
EOF
}

# is_running PIDFILE
is_running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
# php -S runs as its own process group (setsid); with PHP_CLI_SERVER_WORKERS the workers outlive a killed
# master, so liveness and stopping are per process group:  kill -- -$(cat php6.pid)
group_alive() { [ -s "$1" ] && kill -0 -- "-$(cat "$1")" 2>/dev/null; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_server() { # NAME CONF PIDFILE RUNDIR LOGDIR PORT CMD...
  local name=$1 conf=$2 pidf=$3 rund=$4 logd=$5 port=$6; shift 6
  mkdir -p "$rund" "$logd"; chown zabbix:zabbix "$rund" "$logd"
  if is_running "$pidf"; then log "$name already running (pid $(cat "$pidf"))"; return; fi
  port_open "$port" && { echo "port $port busy but $pidf not alive; stop it first" >&2; exit 1; }
  log "starting $name on 127.0.0.1:$port"
  "$@" -c "$conf"   # daemonizes, drops root -> user zabbix
  for _ in $(seq 60); do port_open "$port" && return; sleep 0.5; done
  echo "$name did not open port $port; see $logd/zabbix_server.log" >&2; tail -20 "$logd/zabbix_server.log" >&2; exit 1
}

start_php() { # NAME DOCROOT PORT PIDFILE
  local name=$1 root=$2 port=$3 pidf=$4
  if group_alive "$pidf"; then log "$name php already running (pgid $(cat "$pidf"))";
  else
    port_open "$port" && { echo "port $port busy but not ours ($pidf); stop it first" >&2; exit 1; }
    log "starting php -S 127.0.0.1:$port -t $root"
    PHP_CLI_SERVER_WORKERS=$ZBX_PHP_WORKERS setsid nohup php -d memory_limit=512M -d max_execution_time=300 \
      -d date.timezone=UTC -d post_max_size=16M -S "127.0.0.1:$port" -t "$root" \
      >> "$ZBX_STATE_DIR/logs/$name-php.log" 2>&1 < /dev/null &
    echo $! > "$pidf"
  fi
  for _ in $(seq 120); do
    php -r '$c=stream_context_create(["http"=>["method"=>"POST","header"=>"Content-Type: application/json-rpc","content"=>"{\"jsonrpc\":\"2.0\",\"method\":\"apiinfo.version\",\"params\":{},\"id\":1}","timeout"=>3]]);$r=@file_get_contents($argv[1],false,$c);exit($r!==false&&strpos($r,"result")!==false?0:1);' \
      "http://127.0.0.1:$port/api_jsonrpc.php" && return; sleep 0.5; done
  echo "API on port $port not answering" >&2; exit 1
}

# bootstrap_token URL TOKENFILE -> prints token. Reuses the token if it still works.
bootstrap_token() {
  php -d display_errors=stderr -- "$1" "$2" "$ZBX_TOKEN_NAME" "$ZBX_DISABLE_DEFAULT_HOST" <<'PHP'
<?php
[$_, $url, $file, $name, $disable] = $argv;
$ver = null;
function rpc($method, $params, $auth = null) {
  global $url, $ver;
  static $id = 0;
  $req = ['jsonrpc' => '2.0', 'method' => $method, 'params' => $params, 'id' => ++$id];
  $hdr = "Content-Type: application/json-rpc\r\n";
  if ($auth !== null) {
    if (version_compare($ver, '6.4', '>=')) $hdr .= "Authorization: Bearer $auth\r\n";  // 6.4+ (required 7.2+)
    else $req['auth'] = $auth;                                                          // 6.0: body field only
  }
  $ctx = stream_context_create(['http' => ['method' => 'POST', 'timeout' => 60, 'header' => $hdr,
    'content' => json_encode($req), 'ignore_errors' => true]]);
  $raw = file_get_contents($url, false, $ctx);
  $r = json_decode($raw, true);
  if (!is_array($r)) throw new Exception("$method: bad response: ".substr((string)$raw, 0, 300));
  if (isset($r['error'])) throw new Exception("$method: ".json_encode($r['error']));
  return $r['result'];
}
$ver = rpc('apiinfo.version', []);
if (is_readable($file)) {
  $tok = trim(file_get_contents($file));
  try { rpc('host.get', ['limit' => 1, 'output' => ['hostid']], $tok); echo "$ver $tok"; exit(0); } catch (Exception $e) {}
}
$sid = rpc('user.login', ['username' => 'Admin', 'password' => 'zabbix']);  // 6.0 accepts user|username, 6.4+ only username
if ($disable === '1') {
  $h = rpc('host.get', ['filter' => ['host' => 'Zabbix server'], 'output' => ['hostid', 'status']], $sid);
  if ($h && $h[0]['status'] === '0') rpc('host.update', ['hostid' => $h[0]['hostid'], 'status' => 1], $sid);
}
$old = rpc('token.get', ['filter' => ['name' => $name, 'userid' => '1'], 'output' => ['tokenid']], $sid);
if ($old) rpc('token.delete', array_column($old, 'tokenid'), $sid);
$t = rpc('token.create', ['name' => $name, 'userid' => '1'], $sid);
$g = rpc('token.generate', $t['tokenids'], $sid);
$tok = $g[0]['token'];
file_put_contents($file, $tok."\n");
rpc('user.logout', [], $sid);
echo "$ver $tok";
PHP
}

write_env() { # V URL TOKEN SERVERPORT VERSION   (keeps the lines seed.py added: user tokens, manifest)
  local f="$ZBX_STATE_DIR/zabbix$1.env"
  cat > "$f.tmp" <<EOF
ZBX_URL=$2
ZBX_TOKEN=$3
ZBX_USER=Admin
ZBX_PASSWORD=zabbix
ZBX_API_VERSION=$5
ZBX_TRAPPER_HOST=127.0.0.1
ZBX_TRAPPER_PORT=$4
EOF
  [ -f "$f" ] && grep -E '^(ZBX_TOKEN_OPERATOR|ZBX_TOKEN_VIEWER|ZBX_SEED_MANIFEST)=' "$f" >> "$f.tmp" || true
  mv "$f.tmp" "$f"
}

seed() { # V
  [ "$ZBX_SEED" = 1 ] || { log "ZBX_SEED=$ZBX_SEED: not seeding zabbix$1"; return; }
  ZBX_STATE_DIR="$ZBX_STATE_DIR" ZBX_DISABLE_DEFAULT_HOST="$ZBX_DISABLE_DEFAULT_HOST" \
    python3 "$LAB_DIR/seed.py" "$ZBX_STATE_DIR/zabbix$1.env"
}

# ================================================================ Zabbix 6.0 (bookworm)
up6() {
  start_postgres
  create_db zabbix zabbix zabbix /usr/share/zabbix-server-pgsql
  write_frontend_conf /etc/zabbix/zabbix.conf.php zabbix zabbix zabbix "$ZBX6_SERVER_PORT"  # Debian path (CConfigFile)
  # Standalone server config (the packaged one is left alone; duplicate keys via Include= would be fatal).
  # SocketDir is set so 6.0 and 7.0 servers don't clash on /tmp/zabbix_server_*.sock.
  write_server_conf /etc/zabbix/zabbix_server-mcp-test.conf zabbix zabbix zabbix "$ZBX6_SERVER_PORT" /run/zabbix /var/log/zabbix-server
  [ "$ZBX_START_SERVER" = 1 ] && start_server zabbix_server-6.0 /etc/zabbix/zabbix_server-mcp-test.conf /run/zabbix/zabbix_server.pid \
      /run/zabbix /var/log/zabbix-server "$ZBX6_SERVER_PORT" /usr/sbin/zabbix_server
  start_php zabbix6 /usr/share/zabbix "$ZBX6_WEB_PORT" "$ZBX_STATE_DIR/php6.pid"
  local url="http://127.0.0.1:$ZBX6_WEB_PORT/api_jsonrpc.php"
  local vt; vt=$(bootstrap_token "$url" "$ZBX_STATE_DIR/zabbix6.token"); local tok=${vt#* }
  write_env 6 "$url" "$tok" "$ZBX6_SERVER_PORT" "${vt%% *}"
  seed 6
  echo "ZABBIX6_URL=$url"; echo "ZABBIX6_TOKEN=$tok"
}

# ================================================================ Zabbix 7.0 (trixie debs, extracted)
fetch7() {
  local A=(-o Dir::Etc::SourceList="$ZBX7_HOME/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
           -o Dir::State::Lists="$ZBX7_HOME/apt/lists" -o Dir::Cache="$ZBX7_HOME/apt/cache"
           -o Dir::State::status="$ZBX7_HOME/apt/empty-status" -o Dir::State::extended_states="$ZBX7_HOME/apt/extended_states"
           -o Dir::Cache::archives="$ZBX7_HOME/debs" -o APT::Sandbox::User=root -q)
  [ -f "$ZBX7_HOME/.extracted" ] && { log "7.0 already extracted in $ZBX7_HOME"; return; }
  log "fetching Zabbix 7.0 debs from trixie (download only, system apt untouched)"
  mkdir -p "$ZBX7_HOME"/apt/lists/partial "$ZBX7_HOME"/apt/cache "$ZBX7_HOME"/debs/partial
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" > "$ZBX7_HOME/apt/sources.list"
  : > "$ZBX7_HOME/apt/empty-status"
  apt-get "${A[@]}" update > "$ZBX_STATE_DIR/logs/apt7.log" 2>&1
  # zabbix_server 7.0 needs glibc 2.38 + t64 libs -> fetch its runtime closure and run it with trixie's ld.so
  (cd "$ZBX7_HOME/debs" && apt-get "${A[@]}" download zabbix-frontend-php zabbix-server-pgsql) >> "$ZBX_STATE_DIR/logs/apt7.log" 2>&1
  apt-get "${A[@]}" install -y --download-only --no-install-recommends \
    libc6 libcurl3t64-gnutls libevent-core-2.1-7t64 libevent-extra-2.1-7t64 libevent-pthreads-2.1-7t64 libgnutls30t64 \
    libldap2 libodbc2 libopenipmi0t64 libpcre2-8-0 libpq5 libsnmp40t64 libssh2-1t64 libxml2 zlib1g >> "$ZBX_STATE_DIR/logs/apt7.log" 2>&1
  rm -rf "$ZBX7_HOME/pkg" "$ZBX7_HOME/root"; mkdir -p "$ZBX7_HOME/pkg" "$ZBX7_HOME/root"
  dpkg-deb -x "$ZBX7_HOME"/debs/zabbix-frontend-php_*.deb "$ZBX7_HOME/pkg"
  dpkg-deb -x "$ZBX7_HOME"/debs/zabbix-server-pgsql_*.deb "$ZBX7_HOME/pkg"
  for d in "$ZBX7_HOME"/debs/*.deb; do case "$d" in */zabbix-*) ;; *) dpkg-deb -x "$d" "$ZBX7_HOME/root";; esac; done
  # Debian hard-codes /etc/zabbix/zabbix.conf.php (shared with 6.0) -> point the 7.0 copy elsewhere
  sed -i "s#const CONFIG_FILE_PATH = '/etc/zabbix/zabbix.conf.php';#const CONFIG_FILE_PATH = '$ZBX7_HOME/zabbix.conf.php';#" \
    "$ZBX7_HOME/pkg/usr/share/zabbix/include/classes/core/CConfigFile.php"
  grep -q "$ZBX7_HOME/zabbix.conf.php" "$ZBX7_HOME/pkg/usr/share/zabbix/include/classes/core/CConfigFile.php"
  ln -sfn /usr/share/fonts "$ZBX7_HOME/pkg/usr/share/fonts"   # relative font symlinks in the frontend
  chmod -R a+rX "$ZBX7_HOME"
  touch "$ZBX7_HOME/.extracted"
}

up7() {
  start_postgres
  fetch7
  create_db zabbix7 zabbix7 zabbix7 "$ZBX7_HOME/pkg/usr/share/zabbix-server-pgsql"
  write_frontend_conf "$ZBX7_HOME/zabbix.conf.php" zabbix7 zabbix7 zabbix7 "$ZBX7_SERVER_PORT"
  write_server_conf "$ZBX7_HOME/zabbix_server.conf" zabbix7 zabbix7 zabbix7 "$ZBX7_SERVER_PORT" /run/zabbix7 /var/log/zabbix7
  local R="$ZBX7_HOME/root"
  if [ "$ZBX_START_SERVER" = 1 ]; then
    start_server zabbix_server-7.0 "$ZBX7_HOME/zabbix_server.conf" /run/zabbix7/zabbix_server.pid /run/zabbix7 /var/log/zabbix7 \
      "$ZBX7_SERVER_PORT" "$R/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$R/usr/lib/x86_64-linux-gnu" \
      "$ZBX7_HOME/pkg/usr/sbin/zabbix_server"
  fi
  start_php zabbix7 "$ZBX7_HOME/pkg/usr/share/zabbix" "$ZBX7_WEB_PORT" "$ZBX_STATE_DIR/php7.pid"
  local url="http://127.0.0.1:$ZBX7_WEB_PORT/api_jsonrpc.php"
  local vt; vt=$(bootstrap_token "$url" "$ZBX_STATE_DIR/zabbix7.token"); local tok=${vt#* }
  write_env 7 "$url" "$tok" "$ZBX7_SERVER_PORT" "${vt%% *}"
  seed 7
  echo "ZABBIX7_URL=$url"; echo "ZABBIX7_TOKEN=$tok"
}

# ---------------------------------------------------------------- MCP Inspector CLI (tests/inspector.rs)
# A TypeScript-SDK client nobody here wrote. Its package asks for Node >= 22.19; its CLI runs on
# the Node 20 of this machine (checked: tools/call over streamable HTTP), so the engine check is
# only a warning here.
INSPECTOR_VERSION="${INSPECTOR_VERSION:-2.12.0}"
INSPECTOR_HOME="${INSPECTOR_HOME:-/opt/mcp-inspector}"
install_inspector() {
  local pkg="$INSPECTOR_HOME/node_modules/@modelcontextprotocol/inspector/package.json"
  if [ -f "$pkg" ] && grep -q "\"version\": \"$INSPECTOR_VERSION\"" "$pkg"; then
    log "MCP Inspector $INSPECTOR_VERSION already installed in $INSPECTOR_HOME"; return
  fi
  if ! command -v npm >/dev/null 2>&1; then
    apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends nodejs npm \
      > "$ZBX_STATE_DIR/logs/apt-node.log" 2>&1 || { tail -30 "$ZBX_STATE_DIR/logs/apt-node.log"; exit 1; }
  fi
  local node_major; node_major=$(node -p 'process.versions.node.split(".")[0]')
  if [ "$node_major" -lt 20 ]; then
    echo "the MCP Inspector CLI needs Node 20 or later; this machine has $(node --version)" >&2; exit 1
  fi
  log "installing MCP Inspector $INSPECTOR_VERSION in $INSPECTOR_HOME"
  npm install --prefix "$INSPECTOR_HOME" --no-fund --no-audit "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" \
    > "$ZBX_STATE_DIR/logs/npm-inspector.log" 2>&1 || { tail -30 "$ZBX_STATE_DIR/logs/npm-inspector.log"; exit 1; }
  "$INSPECTOR_HOME/node_modules/.bin/mcp-inspector" --cli --help > /dev/null
}

# ---------------------------------------------------------------- approval page test parts
# Redis (replicas sharing approvals) on loopback, and headless Chromium + chromedriver (the
# approval page test drives a real browser). Debian packages; idempotent.
ZBX_REDIS_PORT="${ZBX_REDIS_PORT:-6390}"
up_approval_parts() {
  local missing=()
  # libssl-dev + pkg-config: the WebDriver client of the tests (fantoccini, native-tls).
  for p in redis-server chromium chromium-driver libssl-dev pkg-config; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]}"
    local made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" \
      > "$ZBX_STATE_DIR/logs/apt-install-approval.log" 2>&1 || { tail -30 "$ZBX_STATE_DIR/logs/apt-install-approval.log"; exit 1; }
    [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  fi
  if ! is_running "$ZBX_STATE_DIR/redis.pid"; then
    log "starting Redis on 127.0.0.1:$ZBX_REDIS_PORT"
    redis-server --bind 127.0.0.1 --port "$ZBX_REDIS_PORT" --daemonize yes --save '' --appendonly no \
      --pidfile "$ZBX_STATE_DIR/redis.pid" --dir "$ZBX_STATE_DIR" --logfile "$ZBX_STATE_DIR/logs/redis.log"
    for _ in $(seq 40); do port_open "$ZBX_REDIS_PORT" && break; sleep 0.25; done
    port_open "$ZBX_REDIS_PORT" || { echo "redis did not start" >&2; exit 1; }
  fi
  echo "ZMG_TEST_REDIS_URL=redis://127.0.0.1:$ZBX_REDIS_PORT/" > "$ZBX_STATE_DIR/approval.env"
}

# ---------------------------------------------------------------- deployment checks (tests/deploy*.rs)
# systemd-analyze (unit verify; systemd need not be init), ip (network namespaces),
# python3-yaml (Kubernetes manifest checks), logrotate (the package's decision log rotation).
install_deploy_tools() {
  local missing=()
  command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
  command -v logrotate >/dev/null 2>&1 || missing+=(logrotate)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  /usr/bin/python3 -c 'import yaml' >/dev/null 2>&1 || missing+=(python3-yaml)
  [ ${#missing[@]} -eq 0 ] && { log "deployment check tools present"; return; }
  log "installing ${missing[*]}"
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" \
    > "$ZBX_STATE_DIR/logs/apt-deploy.log" 2>&1 || { tail -30 "$ZBX_STATE_DIR/logs/apt-deploy.log"; exit 1; }
}

# ---------------------------------------------------------------- MCP Python SDK (tests/stdio.rs)
MCP_PYTHON_VERSION="${MCP_PYTHON_VERSION:-1.30.0}"
MCP_PYTHON_HOME="${MCP_PYTHON_HOME:-/opt/mcp-python}"
install_mcp_python() {
  if "$MCP_PYTHON_HOME/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_PYTHON_VERSION')" 2>/dev/null; then
    log "MCP Python SDK $MCP_PYTHON_VERSION already installed in $MCP_PYTHON_HOME"; return
  fi
  python3 -m venv --help >/dev/null 2>&1 || apt-get -o DPkg::Lock::Timeout=600 install -y -q python3-venv \
    > "$ZBX_STATE_DIR/logs/apt-venv.log" 2>&1 || { tail -30 "$ZBX_STATE_DIR/logs/apt-venv.log"; exit 1; }
  log "installing the MCP Python SDK $MCP_PYTHON_VERSION in $MCP_PYTHON_HOME"
  python3 -m venv "$MCP_PYTHON_HOME"
  "$MCP_PYTHON_HOME/bin/pip" install -q "mcp==$MCP_PYTHON_VERSION" > "$ZBX_STATE_DIR/logs/pip-mcp.log" 2>&1 \
    || { tail -30 "$ZBX_STATE_DIR/logs/pip-mcp.log"; exit 1; }
}

# ---------------------------------------------------------------- cargo-deb (tests/deploy/deb.sh)
CARGO_DEB_VERSION="${CARGO_DEB_VERSION:-3.8.0}"
install_cargo_deb() {
  if command -v cargo-deb >/dev/null 2>&1 && cargo deb --version 2>/dev/null | grep -q "$CARGO_DEB_VERSION"; then
    log "cargo-deb $CARGO_DEB_VERSION already installed"; return
  fi
  command -v cargo >/dev/null 2>&1 || { echo "cargo is needed for cargo-deb" >&2; exit 1; }
  log "installing cargo-deb $CARGO_DEB_VERSION (cargo install)"
  cargo install --locked --version "$CARGO_DEB_VERSION" cargo-deb > "$ZBX_STATE_DIR/logs/cargo-deb.log" 2>&1 \
    || { tail -30 "$ZBX_STATE_DIR/logs/cargo-deb.log"; exit 1; }
}

# ---------------------------------------------------------------- the profile-guided build (scripts/pgo/build.sh)
# llvm-profdata reads raw profiles of its own LLVM major version only: Debian's llvm-N for
# the N rustc was built with.
install_llvm_profdata() {
  local major
  major=$(rustc -vV 2>/dev/null | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
  [ -n "$major" ] || { echo "rustc is needed to tell which llvm-profdata to install" >&2; exit 1; }
  if [ -x "/usr/lib/llvm-$major/bin/llvm-profdata" ]; then log "llvm-profdata $major present"; return; fi
  log "installing llvm-$major (llvm-profdata, for the profile-guided build)"
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "llvm-$major" \
    > "$ZBX_STATE_DIR/logs/apt-llvm.log" 2>&1 || { tail -30 "$ZBX_STATE_DIR/logs/apt-llvm.log"; exit 1; }
}

install_packages
case "$WHAT" in
  6) up6 ;;
  7) up7 ;;
  all) up6; up7; install_inspector; up_approval_parts; install_deploy_tools; install_mcp_python; install_cargo_deb; install_llvm_profdata ;;
  approval) up_approval_parts ;;
  *) echo "usage: $0 [6|7|all|approval]" >&2; exit 2 ;;
esac
log "done in $(( $(date +%s) - T_START ))s; env files in $ZBX_STATE_DIR"
