#!/usr/bin/env bash
# The released binary, built with profile-guided optimisation (PGO): one build
# instrumented to count what runs, a training run through it (scripts/pgo/train.py: the
# common MCP requests, against scripts/perf/stub_zabbix.py), then the release build shaped
# by those counts: inlined where calls are hot, likely paths laid out straight, cold code
# kept small. The deb package and the container image ship this build (README
# Performance: about a quarter less CPU per call against the lab).
#
#   scripts/pgo/build.sh             # -> target/release/zabbix-mcp-guard
#   PGO=off scripts/pgo/build.sh     # the plain release build, nothing else
#
# The instrumented build lives in target/pgo/ and its profile in
# target/pgo/zabbix-mcp-guard.profdata; training runs again only when the instrumented
# binary changed (a new profile makes cargo rebuild everything). Needs python3 and
# llvm-profdata of rustc's own LLVM major version: LLVM_PROFDATA=path, rustup's llvm-tools
# component, or Debian's llvm-N package (N as `rustc -vV` prints it).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=(cargo build --release --locked --bin zabbix-mcp-guard)
[ "${PGO:-on}" = off ] && exec "${build[@]}"
[ "${PGO:-on}" = on ] || { echo "PGO must be on or off, not '$PGO'" >&2; exit 2; }

target=$(realpath -m "${CARGO_TARGET_DIR:-target}")
host=$(rustc -vV | sed -n 's/^host: //p')
major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
[ -n "$host" ] && [ -n "$major" ] || { echo "rustc -vV names no host or LLVM version" >&2; exit 1; }

# llvm-profdata reads the raw profiles of its own LLVM major version only.
profdata=
for candidate in "${LLVM_PROFDATA:-}" \
    "$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata" \
    "$(command -v "llvm-profdata-$major" || true)" "/usr/lib/llvm-$major/bin/llvm-profdata" \
    "$(command -v llvm-profdata || true)"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    if "$candidate" --version 2>/dev/null | grep -q "LLVM version $major\."; then
        profdata=$candidate
        break
    fi
done
[ -n "$profdata" ] || {
    echo "no llvm-profdata of LLVM $major (rustc's): rustup component add llvm-tools," \
        "or apt-get install llvm-$major, or LLVM_PROFDATA=path; PGO=off builds without" >&2
    exit 1
}

pgo=$target/pgo
profile=$pgo/zabbix-mcp-guard.profdata
instrumented=$pgo/$host/release/zabbix-mcp-guard
# Both builds name the target (--target): build scripts and proc macros, host code, then
# take none of these flags. And both use the release profile as it is: the counts are
# matched to functions by their symbol names, which change with the target given and
# with the profile's settings (a quicker instrumented build matched nothing).
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$pgo/raw" CARGO_TARGET_DIR=$pgo \
    "${build[@]}" --target "$host"

if [ ! -s "$profile" ] || [ "$instrumented" -nt "$profile" ]; then
    . scripts/perf/common.sh
    scratch
    rm -rf "$pgo/raw"
    # Every second answer closes its connection, as many frontends do (the lab's `php -S`
    # closes each): connecting again is trained as well as reusing a connection.
    start_stub_zabbix "$work" --hosts 100 --close-every 2
    pids+=("$stub_pid")
    port=$(free_port)
    start_sidecar "$instrumented" "$stub_url" "$port" pgo
    python3 scripts/pgo/train.py "127.0.0.1:$port" pgo-training-token-0123456789abcdef "${ROUNDS:-200}"
    # The counts are written when the process exits.
    kill -TERM "$sidecar_pid"
    wait "$sidecar_pid" || { cat "$work/sidecar-pgo.log" >&2; echo "the instrumented sidecar failed" >&2; exit 1; }
    compgen -G "$pgo/raw/*.profraw" >/dev/null || { echo "the training run wrote no profile" >&2; exit 1; }
    "$profdata" merge -o "$profile.new" "$pgo/raw"/*.profraw
    mv "$profile.new" "$profile"
fi

RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$profile" "${build[@]}" --target "$host"
final=$target/$host/release/zabbix-mcp-guard
# Counts reach only the functions of the same name; names that differ (another target
# given, other profile settings) leave a plain build, silently. Our functions' names must
# be the instrumented build's.
ours() { nm "$1" | awk '$3 ~ /zabbix_mcp_guard/ { print $3 }' | sort -u; }
[ -n "$(comm -12 <(ours "$instrumented") <(ours "$final") | head -n 1)" ] || {
    echo "the release build's function names are not the instrumented build's:" \
        "the profile applies to none of them" >&2
    exit 1
}
# Where cargo's plain release build puts the binary (the package, the image and the perf
# scripts take it there); a later plain `cargo build --release` puts its own back.
mkdir -p "$target/release"
cp "$final" "$target/release/zabbix-mcp-guard.pgo"
mv "$target/release/zabbix-mcp-guard.pgo" "$target/release/zabbix-mcp-guard"
echo "profile-guided build: $target/release/zabbix-mcp-guard"
