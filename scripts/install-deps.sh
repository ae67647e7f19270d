#!/usr/bin/env bash
# Installs the Debian packages carb needs to build and test. Idempotent: packages already present
# are left alone, and apt-get is skipped entirely when nothing is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git xz-utils
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
  libdnnl-dev ocl-icd-opencl-dev libxgboost-dev libeigen3-dev libsqlite3-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  sqlite3
  clang libclang-rt-dev
  libopenmpi-dev openmpi-bin
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
