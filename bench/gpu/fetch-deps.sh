#!/usr/bin/env bash
# Downloads, on a Debian 12 machine with the network, the Debian packages carb needs to build
# (scripts/install-deps.sh's list, less the tools) into .gpu-deps/, for a GPU machine that has the
# CUDA toolkit and a compiler but none of carb's libraries and no network (the device machine).
# bench/gpu/check.sh unpacks them into a private prefix there (never into /) when the machine's
# own libraries do not configure. Debian 12's glibc (2.36) is older than the device image's, so
# its libraries load there. Carry the folder with the run: carry [".gpu-deps"] (about 13 MB).
set -euo pipefail
cd "$(dirname "$0")/../.."
folder=.gpu-deps
packages=(
  libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev libcli11-dev
  libdnnl-dev libdnnl2 ocl-icd-opencl-dev ocl-icd-libopencl1 opencl-c-headers opencl-clhpp-headers
  libxgboost-dev libxgboost0 libdmlc0 libdmlc-dev libeigen3-dev libnanoflann-dev libsqlite3-dev
  libsqlite3-0
  googletest libgtest-dev libgmock-dev
)
mkdir -p "$folder"
rm -f "$folder"/*.deb
(cd "$folder" && apt-get download "${packages[@]}")
ls -l "$folder"
du -sh "$folder"
