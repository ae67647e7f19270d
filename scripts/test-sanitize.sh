#!/usr/bin/env bash
# Builds carb with clang under AddressSanitizer and UndefinedBehaviorSanitizer, with the
# libFuzzer targets (CARB_FUZZ), into ${CARB_SANITIZE_BUILD_DIR:-build-sanitize}, then runs the
# unit suite there and every fuzz target: each committed input once, then a few seconds of
# fuzzing (CARB_FUZZ_SECONDS, 5). The fault tests (tests/fault, real kill -9s and resource
# limits, minutes of wall time) and tests labelled slow are left to scripts/test.sh. So is the
# PyTorch backend: clang 14 cannot parse libtorch's headers (cmake/CarbTorch.cmake leaves it out).
# And the Python module: an ASan-instrumented module cannot load into an uninstrumented python.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build_dir="${CARB_SANITIZE_BUILD_DIR:-build-sanitize}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DCARB_SANITIZE=address,undefined -DCARB_FUZZ=ON \
  -DCARB_BUILD_BENCH=OFF -DCARB_PYTHON=OFF -DCARB_FUZZ_SECONDS="${CARB_FUZZ_SECONDS:-5}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" -LE "slow|fault"
