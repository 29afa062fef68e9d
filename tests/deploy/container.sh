#!/usr/bin/env bash
# deploy/container without a container engine: build the binary with the Dockerfile's
# own build command, lay out the final stage's file tree from its COPY lines (plus the
# binary's glibc from ldd, standing in for the distroless/cc base image), and run the
# Dockerfile's ENTRYPOINT+CMD chrooted into that tree mounted read-only, as its USER,
# with its ENV and the compose service's environment (the official image's ZBX_*
# variables; FrontendURL pointed at the 7.0 lab). Checks /readyz, an MCP call through
# the MCP Inspector CLI, and the decision line on stdout.
#
#   bash tests/deploy/container.sh     # root; lab up; reuses target/release if fresh
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/deploy/lib.sh
[ "$(id -u)" = 0 ] || fail "run as root (chroot, mount namespace)"
lab_env 7
DOCKERFILE=deploy/container/Dockerfile
COMPOSE=deploy/container/compose.yaml
WORK=$(mktemp -d /tmp/zmg-container.XXXXXX)
PID=
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

step "the Dockerfile's shape"
final=$(awk '/^FROM /{n++} n==2' "$DOCKERFILE")
[ "$(grep -c '^FROM ' "$DOCKERFILE")" = 2 ] || fail "expected a two-stage build"
echo "$final" | head -1 | grep -q 'gcr.io/distroless/cc' || fail "the final stage is not distroless (no shell)"
entrypoint=$(echo "$final" | sed -n 's/^ENTRYPOINT //p')
cmd=$(echo "$final" | sed -n 's/^CMD //p')
user=$(echo "$final" | sed -n 's/^USER //p')
for form in "$entrypoint" "$cmd"; do
  python3 -c 'import json,sys; v=json.loads(sys.argv[1]); assert isinstance(v,list)' "$form" \
    || fail "ENTRYPOINT/CMD not in exec (JSON) form: $form"
done
[[ "$user" =~ ^[1-9][0-9]*:[0-9]+$ ]] || fail "USER is not a numeric non-root uid:gid: $user"
# The build image's Rust is one every dependency builds with: the highest rust-version of
# the locked dependencies (1.88 was below parking_lot 0.13's 1.95: no image could build).
image_rust=$(sed -n 's#^FROM docker.io/library/rust:\([0-9.]*\)-.* AS build#\1#p' "$DOCKERFILE")
[ -n "$image_rust" ] || fail "the build stage is not a versioned docker.io/library/rust image"
cargo metadata --format-version 1 | python3 -c '
import json, sys
image = tuple(int(x) for x in sys.argv[1].split("."))
need = max((tuple(int(x) for x in p["rust_version"].split(".")), p["name"])
           for p in json.load(sys.stdin)["packages"] if p.get("rust_version"))
assert image >= need[0][:len(image)], f"rust:{sys.argv[1]} is older than {need[1]} needs ({need[0]})"
' "$image_rust" || fail "the build image's Rust is too old for the dependencies"
# The build stage's own build: the profile-guided one (rustup's llvm-tools there; here
# the lab script installs Debian's llvm-N for rustc's LLVM).
build_cmd=$(awk '/^FROM /{n++} n==1' "$DOCKERFILE" | sed -n 's#^RUN \(scripts/pgo/build.sh\).*#\1#p')
[ -n "$build_cmd" ] || fail "no profile-guided build (scripts/pgo/build.sh) in the build stage"
# Every cargo target lies under a path the build stage copies.
copied=$(awk '/^FROM /{n++} n==1' "$DOCKERFILE" | sed -n 's/^COPY //p' | awk '{for(i=1;i<NF;i++) print $i}')
cargo metadata --no-deps --format-version 1 | python3 -c '
import json, os, sys
root = os.getcwd() + "/"
copied = sys.argv[1].split()
for t in json.load(sys.stdin)["packages"][0]["targets"]:
    # tests/ and examples/ are found by cargo only where they exist; declared targets must.
    if set(t["kind"]) <= {"test", "example"}:
        continue
    rel = t["src_path"].removeprefix(root)
    if not any(rel == c or rel.startswith(c.rstrip("/") + "/") for c in copied):
        sys.exit("target %s (%s) is not copied into the build stage" % (t["name"], rel))
' "$copied"

step "build: $build_cmd"
$build_cmd 2>"$WORK/build.log" || { tail -20 "$WORK/build.log"; fail "$build_cmd"; }

step "the final stage's file tree"
ROOT="$WORK/rootfs"
mkdir -p "$ROOT"
while read -r line; do
  set -- $line
  from=; [[ "$1" == --from=* ]] && { from=${1#--from=}; shift; }
  src=$1 dst=$2
  # The build stage's WORKDIR is /src, filled from the repository root.
  [ -n "$from" ] && src=${src#/src/}
  [ -e "$src" ] || fail "COPY source $src does not exist"
  mkdir -p "$ROOT$(dirname "$dst")"
  cp -a "$src" "$ROOT$dst"
done < <(echo "$final" | sed -n 's/^COPY //p')
# The build stage strips the binary after building it.
if awk '/^FROM /{n++} n==1' "$DOCKERFILE" | grep -q 'strip target/release/zabbix-mcp-guard'; then
  strip "$ROOT/usr/bin/zabbix-mcp-guard"
fi
# The distroless/cc base: glibc and libgcc (not our files; taken from this machine).
for lib in $(ldd "$ROOT/usr/bin/zabbix-mcp-guard" | grep -o '/[^ ]*'); do
  mkdir -p "$ROOT$(dirname "$lib")"; cp -L "$lib" "$ROOT$lib"
done
mkdir -p "$ROOT/run/secrets" "$ROOT/tmp" "$ROOT/dev"
find "$ROOT" -type f | sed "s#^$ROOT##" | sort
[ ! -e "$ROOT/bin/sh" ] && [ ! -e "$ROOT/usr/bin/sh" ] || fail "a shell in the image"

step "the compose service's environment, the lab as the frontend"
PORT=$(free_port)
python3 - "$COMPOSE" "$DOCKERFILE" > "$WORK/env" <<'PY'
import sys, yaml
compose = yaml.safe_load(open(sys.argv[1]))
svc = compose["services"]["zabbix-mcp-guard"]
assert svc["read_only"] is True, "read_only"
assert svc["cap_drop"] == ["ALL"], "cap_drop"
assert "no-new-privileges:true" in svc["security_opt"], "no-new-privileges"
assert svc["build"]["dockerfile"] == "deploy/container/Dockerfile"
assert svc["ports"] == ["8443:8443"], "only the MCP port"
for name in ("zabbix-web", "zabbix-server"):
    assert compose["services"][name]["image"].startswith("docker.io/zabbix/"), name
    assert "ports" not in compose["services"][name], f"{name} publishes a port"
env = dict(svc["environment"])
# ENV lines of the final stage (the image's own environment).
final = open(sys.argv[2]).read().split("\nFROM ")[-1]
lines = final.replace("\\\n", " ").splitlines()
for line in lines:
    if line.startswith("ENV "):
        for pair in line[4:].split():
            k, v = pair.split("=", 1)
            env.setdefault(k, v)
for k, v in env.items():
    print(f"{k}={v}")
PY
sed -i -e "s#^ZBX_FRONTEND_URL=.*#ZBX_FRONTEND_URL=$ZBX_URL#" \
       -e "s#^ZBX_LISTENPORT=.*#ZBX_LISTENPORT=$PORT#" "$WORK/env"
cat "$WORK/env"
od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$WORK/seal-key"
chown "${user%%:*}" "$WORK/seal-key"; chmod 0400 "$WORK/seal-key"

step "run ENTRYPOINT+CMD in the read-only tree as $user"
mapfile -t envs < "$WORK/env"
mapfile -t argv < <(python3 -c 'import json,sys; [print(a) for a in json.loads(sys.argv[1]) + json.loads(sys.argv[2])]' "$entrypoint" "$cmd")
: > "$ROOT/run/secrets/seal-key"   # the mount point of the secret, as compose makes it
# A private mount namespace: the tree bound read-only, the secret bound in; then only the
# image's environment, the image's user and the image's root.
unshare --mount --fork --kill-child=SIGTERM sh -c '
  set -e
  root=$1 key=$2; shift 2
  mount --bind "$root" "$root"
  mount --bind "$key" "$root/run/secrets/seal-key"
  mount -o remount,bind,ro "$root"
  exec "$@"
' sh "$ROOT" "$WORK/seal-key" \
  /usr/bin/env -i "${envs[@]}" /usr/sbin/chroot --userspec="$user" "$ROOT" "${argv[@]}" \
  > "$WORK/stdout" 2> "$WORK/stderr" &
PID=$!
BASE="http://127.0.0.1:$PORT"
wait_for 30 "/readyz of the container tree" http_ok "$BASE/readyz" \
  || { cat "$WORK/stdout" "$WORK/stderr"; exit 1; }

step "an MCP call through the Inspector CLI"
inspector "$BASE/mcp" "$ZBX_TOKEN_VIEWER" --method tools/call --tool-name host_get \
  > "$WORK/call.json" 2>"$WORK/call.err" || { cat "$WORK/call.err" "$WORK/stdout"; fail "tools/call"; }
grep -q 'mcp-web-01' "$WORK/call.json" || { cat "$WORK/call.json"; fail "no seeded host in the answer"; }
wait_for 10 "a decision line on stdout" grep -q '"host_get"' "$WORK/stdout"
# The image's default deny list (from the contract) holds: item_get is not offered.
inspector "$BASE/mcp" "$ZBX_TOKEN_VIEWER" --method tools/list > "$WORK/list.json" 2>&1 || fail "tools/list"
grep -q '"name": "host_get"' "$WORK/list.json" || fail "host_get not listed"
grep -q '"name": "item_get"' "$WORK/list.json" && fail "item_get listed despite the image's default deny"
grep -q 'Read-only file system' "$WORK/stderr" && fail "a write to the read-only root: $(cat "$WORK/stderr")"

# unshare's child is the sidecar itself (sh, chroot and env exec it).
kill -TERM "$(pgrep -P "$PID")"; wait "$PID" || fail "exit status $? after SIGTERM: $(cat "$WORK/stderr")"
PID=
echo "container: OK (tree $(du -sh "$ROOT" | cut -f1), run read-only as $user)"
