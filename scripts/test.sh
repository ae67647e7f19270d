#!/usr/bin/env bash
# Builds carb and runs the whole test suite. Tests labelled "slow" run only with CARB_SLOW_TESTS=1.
# Then lists every skipped test with its reason, so a skip that hides a feature is seen.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build_dir="${CARB_BUILD_DIR:-build}"
exclude=(-LE slow)
if [ "${CARB_SLOW_TESTS:-0}" = "1" ]; then
  exclude=()
fi
rc=0
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "${exclude[@]}" || rc=$?
# GoogleTest prints "FILE:LINE: Skipped" and the reason on the next line; ctest's log has the
# test's name above it.
log="$build_dir/Testing/Temporary/LastTest.log"
if [ -f "$log" ]; then
  awk '/^[0-9]+\/[0-9]+ Testing: / { name = $3 }
       reason { print "  " name ": " $0; reason = 0 }
       /: Skipped$/ { reason = 1 }' "$log" | sort > "$build_dir/skipped-tests.txt"
  echo "skipped tests, with their reasons ($(wc -l < "$build_dir/skipped-tests.txt")):"
  cat "$build_dir/skipped-tests.txt"
fi
exit "$rc"
