#!/usr/bin/env bash
# Installs the dependencies (idempotently), builds carb into ${CARB_BUILD_DIR:-build}, and makes
# `import carb` work for Debian's python3 from any directory (install-python.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build_dir="${CARB_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCARB_MPI=ON "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
bash scripts/install-python.sh "$build_dir"
