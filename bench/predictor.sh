#!/usr/bin/env bash
# The predictor's figures (docs/benchmarks.md, "Predictor"): accuracy on the reference CPU
# campaign over five split seeds, what the prior, cascade, corrector and early stopping are
# worth, leave-low-batch-out, prediction throughput over the paper space, fit time for 13,000
# rows and three targets, and the NeuSight A100 conv table. Run after scripts/build.sh:
#   bash bench/predictor.sh [out-dir]          (default out/bench-predictor)
set -euo pipefail
cd "$(dirname "$0")/.."
carb=build/src/cli/carb
out=${1:-out/bench-predictor}
mkdir -p "$out"
db="$out/cpu-reference.sqlite"
[ -f "$db" ] || xz -dc data/cpu-reference.sqlite.xz > "$db"

# One line per fit: seed, variant, then target,r2,mape,within10,coverage,width for carb.
summarise() {  # model.json label
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, sys
model = json.load(open(sys.argv[1]))
ev = model["evaluation"]
rows = [s for s in ev["scores"] if s["method"] == "carb"]
parts = [f'{s["target"]}: R2 {s["metrics"]["r2"]:.4f} MAPE {s["metrics"]["mape"]:.2f}% '
         f'cov {s["metrics"]["coverage"]:.1f}%' for s in rows]
# The same target's MAPE without the corrector and as a plain specialist, where scored.
others = [f'{s["target"]} {s["method"]} MAPE {s["metrics"]["mape"]:.2f}%' for s in ev["scores"]
          if s["method"] in ("carb-no-corrector", "specialist", "additive-prior")]
rounds = [m.get("rounds", 0) for t in model["targets"] if t["available"] for m in t["members"]]
print(f'{sys.argv[2]:<24} fit {ev["fit_seconds"]:5.1f} s trees {rounds} ' + "; ".join(parts))
if others:
    print(" " * 26 + "; ".join(others))
EOF
}

echo "== accuracy on the reference campaign (test split, 5 seeds)"
for seed in 1 2 3 4 5; do
  $carb fit --db "$db" -o "$out/ref-seed$seed.json" --seed "$seed" --threads 1 > /dev/null 2>&1
  summarise "$out/ref-seed$seed.json" "seed $seed"
done

echo "== variants (seed 1)"
for variant in "--prior member" "--prior none" "--no-cascade" "--corrector" \
               "--fixed-rounds 800" "--learning-rate 0.05" "--leave-low-batch-out"; do
  name=$(echo "$variant" | tr -d ' -')
  $carb fit --db "$db" -o "$out/ref-$name.json" $variant > /dev/null 2>&1
  summarise "$out/ref-$name.json" "$variant"
done

echo "== prediction throughput (paper space, 17,280 configurations)"
build/bench/bench_predict "$out/ref-seed1.json" examples/spaces/paper.yaml
build/bench/bench_predict "$out/ref-fixedrounds800.json" examples/spaces/paper.yaml | sed -n 4,5p

echo "== fit time, 13,000 rows x 3 targets (bootstrap of the reference rows; timing only)"
$carb export --db "$db" --ok-only --format csv -o "$out/ref.csv" 2> /dev/null
/usr/bin/python3 - "$out/ref.csv" "$out/ref-13000.csv" <<'EOF'
import csv, random, sys
rows = list(csv.DictReader(open(sys.argv[1])))
random.seed(1)
keep = ["depth", "width_multiplier", "early_downsample", "resolution", "batch", "params", "macs",
        "flops", "param_bytes", "activation_bytes", "peak_activation_bytes", "arithmetic_intensity",
        "engine_peak_bytes", "process_peak_rss_bytes", "wall_median_ms"]
with open(sys.argv[2], "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["bottleneck"] + keep)
    for _ in range(13000):
        r = random.choice(rows)
        w.writerow([1 if r["block"] == "bottleneck" else 0] + [r[k] for k in keep])
EOF
features=bottleneck,depth,width_multiplier,early_downsample,resolution,batch,params,macs,flops,param_bytes,activation_bytes,peak_activation_bytes,arithmetic_intensity
start=$(date +%s%N)
$carb fit --table "$out/ref-13000.csv" --features $features --target memory=engine_peak_bytes \
  --target rss=process_peak_rss_bytes --target latency=wall_median_ms --batch-column batch \
  -o "$out/ref-13000.json" > /dev/null 2>&1
end=$(date +%s%N)
summarise "$out/ref-13000.json" "13,000 rows (wall $(( (end - start) / 1000000000 )) s)"

neusight=../shared/data/external/neusight-conv/conv_p2.1.0_NVIDIA_A100_80GB_PCIe.csv
if [ -f "$neusight" ]; then
  echo "== NeuSight A100 conv latencies (4,787 measured layers)"
  $carb fit --table "$neusight" --features B,Input_Channel,Output_Channel,Input_Size \
    --target latency=Latency --stratify B --batch-column B -o "$out/neusight.json" 2>&1 |
    grep -E "^(target|latency)"
fi
