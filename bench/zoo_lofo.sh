#!/usr/bin/env bash
# Leave-one-family-out on the zoo campaign (issue: any CNN via ONNX; docs/onnx.md "Predicting
# a family carb never saw", figures in docs/benchmarks.md "Zoo campaign"): for each network
# family of the database, carb fit --hold-out FAMILY fits CARB on every other family (the ResNet
# sample included) and scores it on the held-out family's rows. Per family and target: MAPE,
# the share within +-10%, Spearman and 90% interval coverage, mean over the seeds.
#   bash bench/zoo_lofo.sh [database (data/cpu-zoo.sqlite.xz, unpacked)] [out-dir (out/zoo-lofo)]
# SEEDS="1 2 3" by default; FIT_ARGS adds options to every carb fit (e.g. "--prior base").
set -euo pipefail
cd "$(dirname "$0")/.."
carb=${CARB:-build/src/cli/carb}
db=${1:-data/cpu-zoo.sqlite.xz}
out=${2:-out/zoo-lofo}
seeds=${SEEDS:-1 2 3}
mkdir -p "$out"
if [[ "$db" == *.xz ]]; then
  xz -dc "$db" > "$out/zoo.sqlite"
  db="$out/zoo.sqlite"
fi
families=$(sqlite3 "$db" "SELECT DISTINCT coalesce(a.name, 'resnet') FROM measurements m
  JOIN configurations c ON c.key = m.configuration_key
  LEFT JOIN architectures a ON a.hash = c.architecture WHERE m.status = 'ok' ORDER BY 1")
for family in $families; do
  [ "$family" = resnet ] && continue  # carb's ResNet sample: the campaign every fit keeps
  for seed in $seeds; do
    csv="$out/$family-$seed.csv"
    [ -s "$csv" ] || $carb fit --db "$db" --hold-out "$family" --seed "$seed" ${FIT_ARGS:-} --format csv \
      -o "$out/$family-$seed.json" > "$csv" 2> "$out/$family-$seed.log"
  done
done
/usr/bin/python3 - "$out" $families <<'PY'
import csv, statistics, sys
out, families = sys.argv[1], [f for f in sys.argv[2:] if f != "resnet"]
rows = {}
for family in families:
    for path in __import__("glob").glob(f"{out}/{family}-*.csv"):
        for r in csv.DictReader(open(path)):
            if r["method"] != "carb":
                continue
            rows.setdefault((family, r["target"]), []).append(r)
def mean(rs, column):
    values = [float(r[column]) for r in rs if r[column] != ""]
    return statistics.mean(values) if values else float("nan")
print("| held-out family | rows | latency MAPE | within ±10% | Spearman | 90% coverage | "
      "memory MAPE | memory coverage |")
print("|---|---|---|---|---|---|---|---|")
total = {"n": 0, "within": 0.0, "cover": 0.0, "mape": 0.0, "mmape": 0.0}
for family in families:
    lat, mem = rows.get((family, "latency"), []), rows.get((family, "memory"), [])
    if not lat:
        continue
    n = int(lat[0]["n"])
    print(f"| {family} | {n} | {mean(lat, 'mape_pct'):.1f}% | {mean(lat, 'within10_pct'):.0f}% | "
          f"{mean(lat, 'spearman'):.3f} | {mean(lat, 'coverage_pct'):.0f}% | "
          f"{mean(mem, 'mape_pct'):.2f}% | {mean(mem, 'coverage_pct'):.0f}% |")
    total["n"] += n
    total["within"] += n * mean(lat, "within10_pct")
    total["cover"] += n * mean(lat, "coverage_pct")
    total["mape"] += n * mean(lat, "mape_pct")
    total["mmape"] += n * mean(mem, "mape_pct")
n = total["n"]
print(f"| all ({len(families)} families, row-weighted) | {n} | {total['mape'] / n:.1f}% | "
      f"{total['within'] / n:.0f}% | | {total['cover'] / n:.0f}% | {total['mmape'] / n:.2f}% | |")
PY
