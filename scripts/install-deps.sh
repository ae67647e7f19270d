#!/usr/bin/env bash
# Installs what carb needs to build and test: Debian packages (libtorch-dev for the PyTorch
# backend, docs/torch.md; libonnx-dev for ONNX import and python3-torch and python3-torchvision
# for the torchvision models its tests export, docs/onnx.md; pybind11, numpy, pandas, pytest,
# matplotlib and tqdm for the Python module, docs/python.md, among them), and the pinned
# Vega-Lite scripts the HTML report inlines (third_party/vega, from the npm registry through its
# lockfile).
# Idempotent: packages already present are left alone, apt-get is skipped entirely when nothing
# is missing, and npm runs only when the lockfile changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git xz-utils
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
  libdnnl-dev ocl-icd-opencl-dev libxgboost-dev libeigen3-dev libsqlite3-dev libnanoflann-dev
  googletest libgtest-dev libgmock-dev
  chromium fonts-dejavu-core
  sqlite3
  clang libclang-rt-dev clang-tidy
  libopenmpi-dev openmpi-bin
  libtorch-dev
  libonnx-dev libprotobuf-dev python3-torch python3-torchvision
  pybind11-dev python3-pybind11 python3-dev python3-numpy python3-pandas python3-pytest
  python3-matplotlib python3-tqdm
)
# Node.js with npm fetches the report's scripts; any installed node and npm will do (e.g.
# NodeSource's nodejs, which bundles npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The report's scripts: exactly the versions and hashes of third_party/vega/package-lock.json.
vega=third_party/vega
stamp="$vega/node_modules/.carb-lock.sha256"
lock_hash="$(sha256sum "$vega/package-lock.json" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$lock_hash" ]; then
  echo "install-deps: Vega-Lite scripts present ($vega/node_modules)"
else
  echo "install-deps: installing the Vega-Lite scripts from $vega/package-lock.json"
  npm ci --prefix "$vega" --no-audit --no-fund --loglevel=error
  echo "$lock_hash" > "$stamp"
fi
