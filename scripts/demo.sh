#!/usr/bin/env bash
# carb's main job: design spaces and their features, the CARB predictor fitted on the shipped
# reference campaign, carried to this machine from 16 configurations measured here (chosen for
# it) and scored on 24 more, screening to a Pareto shortlist and its validation by measurement,
# the characterization of what was measured, and the HTML report. A second run resumes: measured configurations are not measured again and
# the model is reused while it is newer than carb and the reference campaign.
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
echo "== the CARB predictor, fitted on the shipped reference campaign (data/README.md)"
[ -s "$out/cpu-reference.sqlite" ] || xz -dc data/cpu-reference.sqlite.xz > "$out/cpu-reference.sqlite"
if [ -s "$out/cpu-model.json" ] && [ "$out/cpu-model.json" -nt "$carb" ] &&
  [ "$out/cpu-model.json" -nt data/cpu-reference.sqlite.xz ]; then
  echo "reusing $out/cpu-model.json (newer than carb and the reference campaign; delete it to refit)"
else
  # One XGBoost thread: OpenMP threads collapse when another process holds a core (docs/benchmarks.md).
  "$carb" fit --db "$out/cpu-reference.sqlite" -o "$out/cpu-model.json" --threads 1
fi

echo
echo "== measuring the 16 configurations a transfer of that model to this machine learns most from"
"$carb" profile --spec examples/spaces/cpu-demo.yaml --transfer-for "$out/cpu-model.json" \
  --sample 16 --seed 1 --device cpu --db "$out/calibration.sqlite" --target-ci 0.02 --max-time 2

echo
echo "== the model transferred to this machine from those 16 measurements (docs/model.md, Transfer)"
"$carb" fit --from "$out/cpu-model.json" --db "$out/calibration.sqlite" \
  -o "$out/cpu-model-here.json" --threads 1

echo
echo "== 24 further configurations of cpu-demo.yaml measured on the CPU, to score both models on"
"$carb" profile --spec examples/spaces/cpu-demo.yaml --sample 24 --seed 7 --sampling stratified \
  --device cpu --db "$out/runs.sqlite" --target-ci 0.02 --max-time 2
"$carb" export --db "$out/runs.sqlite" --format csv -o "$out/runs.csv"
echo "database: $out/runs.sqlite; measurements with features: $out/runs.csv"

echo
echo "== the reference model scored on those 24 measurements (no transfer)"
"$carb" evaluate --model "$out/cpu-model.json" --db "$out/runs.sqlite"
echo
echo "== the transferred model scored on the same 24 measurements"
"$carb" evaluate --model "$out/cpu-model-here.json" --db "$out/runs.sqlite"

budget='latency<=2ms,memory<=32MiB'
echo
echo "== screening cpu-demo.yaml under $budget with the transferred model: the front of the most"
echo "   capable networks (MACs per image, up) against their costs (down), ranked by value"
"$carb" screen --model "$out/cpu-model-here.json" --spec examples/spaces/cpu-demo.yaml \
  --budget "$budget" --top 10 -o "$out/shortlist.csv" --json "$out/shortlist.json" \
  --candidates "$out/candidates.csv"

echo
echo "== validating the shortlist by measuring it on this machine"
"$carb" validate --shortlist "$out/shortlist.json" --measure --db "$out/validate.sqlite"

databases=(--db "$out/cpu-reference.sqlite" --db "$out/runs.sqlite" --db "$out/validate.sqlite")
echo
echo "== characterization (method.md §6) of the reference campaign and this machine's measurements"
"$carb" characterize "${databases[@]}" --model "$out/cpu-model.json"

echo
echo "== the report"
"$carb" report "${databases[@]}" --model "$out/cpu-model.json" --screening "$out/shortlist.json" \
  -o "$out/report.html"

echo
echo "outputs: $out/calibration.sqlite and $out/runs.sqlite (this machine's measurements),"
echo "         $out/cpu-model.json (the reference's model), $out/cpu-model-here.json (transferred here),"
echo "         $out/shortlist.csv, $out/shortlist.json and $out/candidates.csv (screening),"
echo "         $out/validate.sqlite (the shortlist measured), $out/report.html (the report: open it"
echo "         in a browser; it needs no network)"
