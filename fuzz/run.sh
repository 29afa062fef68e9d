#!/usr/bin/env bash
# Runs every fuzz target for a fixed time (not in CI). Needs nightly and cargo-fuzz:
#   rustup toolchain install nightly && cargo install cargo-fuzz
# Usage: fuzz/run.sh [SECONDS_PER_TARGET (default 60)] [TARGET...]
# The corpus under fuzz/corpus/<target> is kept in the repository (minimized, small);
# new finds go to fuzz/corpus-new/<target> (not committed) so the repo stays small.
# A crash is written to fuzz/artifacts/<target>/; turn it into a regression test.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(tool_args config_file sealed_state jsonrpc_router)
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
status=0
for target in "${targets[@]}"; do
    mkdir -p "corpus-new/$target"
    echo "== $target: ${seconds}s"
    if ! cargo +nightly fuzz run "$target" "corpus-new/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=8192 \
        -print_final_stats=1 2>&1 | tee "run-$target.log" | grep -E "^#[0-9]+.*(DONE|pulse)|stat::|ERROR|panicked|Done"; then
        status=1
    fi
    if grep -qE "ERROR: libFuzzer|panicked" "run-$target.log"; then
        echo "!! $target found a crash: see fuzz/artifacts/$target/"
        status=1
    fi
done
exit $status
