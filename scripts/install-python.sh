#!/usr/bin/env bash
# Makes `import carb` work for Debian's python3 (/usr/bin/python3) from any directory: writes
# carb.pth into its site directory (/usr/local/lib/python3.X/dist-packages), naming the build's
# python/ folder, where the build lays out the package (docs/python.md). Idempotent: a carb.pth
# that names this build already is left alone; another build's is replaced. Needs root or sudo,
# as install-deps.sh does. Usage: bash scripts/install-python.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-${CARB_BUILD_DIR:-build}}"
python="${CARB_PYTHON_EXECUTABLE:-/usr/bin/python3}"
package_dir="$(cd "$build_dir" && pwd)/python"
if ! compgen -G "$package_dir/carb/_carb*.so" >/dev/null; then
  echo "install-python: no module in $package_dir/carb (a build with CARB_PYTHON=OFF?); skipped"
  exit 0
fi
site_dir="$("$python" -c 'import site; print(site.getsitepackages()[0])')"
pth="$site_dir/carb.pth"
if [ -f "$pth" ] && [ "$(cat "$pth")" = "$package_dir" ]; then
  echo "install-python: $pth names $package_dir"
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
$sudo mkdir -p "$site_dir"
echo "$package_dir" | $sudo tee "$pth.tmp" >/dev/null
$sudo mv "$pth.tmp" "$pth"
echo "install-python: $pth names $package_dir: import carb works for $python from any directory"
