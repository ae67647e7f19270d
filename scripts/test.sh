#!/usr/bin/env bash
# Builds carb and runs the whole test suite. Tests labelled "slow" run only with CARB_SLOW_TESTS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build_dir="${CARB_BUILD_DIR:-build}"
exclude=(-LE slow)
if [ "${CARB_SLOW_TESTS:-0}" = "1" ]; then
  exclude=()
fi
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "${exclude[@]}"
