#!/usr/bin/env bash
# carb's main job: design spaces and their features, a short real profiling campaign on this
# machine's CPU, the CARB predictor fitted on the shipped reference campaign, screening to a
# Pareto shortlist and its validation by measurement. The report joins when it lands. A second
# run resumes the campaigns instead of starting over.
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

echo
echo "== the CARB predictor, fitted on the shipped reference campaign (data/README.md)"
[ -s "$out/cpu-reference.sqlite" ] || xz -dc data/cpu-reference.sqlite.xz > "$out/cpu-reference.sqlite"
"$carb" fit --db "$out/cpu-reference.sqlite" -o "$out/cpu-model.json"

echo
echo "== the reference model scored on this machine's 24 measurements"
"$carb" evaluate --model "$out/cpu-model.json" --db "$out/runs.sqlite"

echo
echo "== screening cpu-demo.yaml to a Pareto shortlist under a budget"
"$carb" screen --model "$out/cpu-model.json" --spec examples/spaces/cpu-demo.yaml \
  --budget 'latency<=2ms,memory<=32MiB' -o "$out/shortlist.csv" --json "$out/shortlist.json"

echo
echo "== validating the shortlist by measuring it on this machine"
"$carb" validate --shortlist "$out/shortlist.csv" --measure --db "$out/validate.sqlite" \
  --budget 'latency<=2ms,memory<=32MiB'

echo
echo "outputs: $out/runs.sqlite (measurements), $out/cpu-model.json (model),"
echo "         $out/shortlist.csv and $out/shortlist.json (shortlist), $out/validate.sqlite (its measurements)"
