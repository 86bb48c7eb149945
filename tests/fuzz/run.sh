#!/bin/bash
# Runs every fuzz target for FUZZ_SECONDS from its seed corpus. New corpus entries go
# to a scratch dir (the seeds in git stay as they are); a crash leaves its input in
# $BUILD/fuzz-crashes/ and fails the run: add it to the target's corpus as a
# regression seed once fixed.
set -euo pipefail
BUILD=${1:?usage: run.sh BUILD_DIR [SECONDS]}
SECONDS_PER_TARGET=${2:-60}
SRC=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d /tmp/topocni-fuzz-XXXXXX)
trap 'rm -rf "$scratch" /tmp/topocni-fuzz-resolv-* /tmp/topocni-fuzz-sysfs-*' EXIT
mkdir -p "$BUILD/fuzz-crashes"
passed=0; failed=0
for seeds in "$SRC"/corpus/*/; do
  name=$(basename "$seeds")
  mkdir -p "$scratch/$name"
  echo "== fuzz_$name for ${SECONDS_PER_TARGET}s"
  if "$BUILD/fuzz_$name" -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$BUILD/fuzz-crashes/$name-" -print_final_stats=1 "$scratch/$name" "$seeds" \
       >"$scratch/$name.log" 2>&1; then
    passed=$((passed + 1))
    grep -E "stat::number_of_executed_units|cov:" "$scratch/$name.log" | tail -2 || true
  else
    failed=$((failed + 1))
    tail -40 "$scratch/$name.log"
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
