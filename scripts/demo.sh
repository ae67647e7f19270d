#!/usr/bin/env bash
# carb's main job: design spaces and their features, then a short real profiling campaign on
# this machine's CPU. Fitting, screening and the report join as they land. A second run resumes
# the campaign instead of starting over.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
carb="${CARB_BUILD_DIR:-build}/src/cli/carb"
out="${CARB_OUT:-out/demo}"
mkdir -p "$out"

echo "== design spaces"
for spec in examples/spaces/*.yaml; do
  "$carb" space count --spec "$spec" --format csv | tail -n 1
done

echo
echo "== torchvision's ResNets, analytic features"
"$carb" space features --spec examples/spaces/torchvision.yaml --format csv > "$out/torchvision-features.csv"
cut -d, -f1,9-14 "$out/torchvision-features.csv"

echo
echo "== a stratified sample of 500 configurations of cpu-demo.yaml, with features"
"$carb" space features --spec examples/spaces/cpu-demo.yaml --sample 500 --seed 1 \
  --sampling stratified --format csv > "$out/cpu-demo-sample.csv"
echo "wrote $out/cpu-demo-sample.csv ($(($(wc -l < "$out/cpu-demo-sample.csv") - 1)) rows)"

echo
echo "== features of all 1,399,680 points of million.yaml (streamed)"
start_ns=$(date +%s%N)
"$carb" space features --spec examples/spaces/million.yaml --format csv > "$out/million-features.csv"
elapsed_ms=$((($(date +%s%N) - start_ns) / 1000000))
echo "wrote $out/million-features.csv ($(($(wc -l < "$out/million-features.csv") - 1)) rows) in ${elapsed_ms} ms"

echo
echo "== this machine's devices"
"$carb" devices

echo
echo "== profiling a stratified sample of 24 configurations of cpu-demo.yaml on the CPU"
"$carb" profile --spec examples/spaces/cpu-demo.yaml --sample 24 --seed 7 --sampling stratified \
  --device cpu --db "$out/runs.sqlite" --target-ci 0.02 --max-time 2
"$carb" export --db "$out/runs.sqlite" --format csv -o "$out/runs.csv"
echo "database: $out/runs.sqlite; measurements with features: $out/runs.csv"
