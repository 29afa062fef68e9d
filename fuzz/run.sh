#!/usr/bin/env bash
# Runs every fuzz target for a fixed time (not in CI). Needs nightly and cargo-fuzz:
#   rustup toolchain install nightly && cargo install cargo-fuzz
# Usage: fuzz/run.sh [SECONDS_PER_TARGET (default 60)] [TARGET...]
# Builds once (`cargo fuzz build -O`, the first build compiles every dependency with the
# sanitizer: ~25 min on 2 cores), then runs each binary. The corpus under
# fuzz/corpus/<target> is kept in the repository; new finds go to fuzz/corpus-new/<target>
# (not committed; merge with `-merge=1` to keep what adds coverage). A crash or hang
# (-timeout=10 s) is written to fuzz/artifacts/; make it a regression test.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(tool_args config_file sealed_state jsonrpc_router zabbix_answer)
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo +nightly fuzz build -O
bin="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release"
mkdir -p artifacts
status=0
for target in "${targets[@]}"; do
    mkdir -p "corpus-new/$target"
    echo "== $target: ${seconds}s"
    "$bin/$target" "corpus-new/$target" "corpus/$target" -max_total_time="$seconds" \
        -timeout=10 -rss_limit_mb=4096 -max_len=8192 -print_final_stats=1 \
        -artifact_prefix="artifacts/$target-" >"run-$target.log" 2>&1 || status=1
    grep -E "^Done|DONE|ERROR|panicked|deadly signal|timeout" "run-$target.log" || true
done
if [ "$status" -ne 0 ]; then
    echo "!! a target failed: see fuzz/artifacts/ and fuzz/run-<target>.log"
fi
exit $status
