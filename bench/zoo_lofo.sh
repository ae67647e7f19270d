#!/usr/bin/env bash
# Leave-one-family-out on the zoo campaign (issue: any CNN via ONNX; docs/onnx.md "Predicting
# a family carb never saw", figures in docs/benchmarks.md "Zoo campaign"): for each network
# family of the database, carb fit --hold-out FAMILY fits CARB on every other family (the ResNet
# sample included) and scores it on the held-out family's rows. Per family and target: MAPE,
# the share within +-10%, Spearman and 90% interval coverage, mean over the seeds.
# Then, per held-out family, seed and K in KS, carb fit --from carries that fit to the family
# from K of its own rows (a transfer on the same device, docs/onnx.md) and scores the rest.
#   bash bench/zoo_lofo.sh [database (data/cpu-zoo.sqlite.xz, unpacked)] [out-dir (out/zoo-lofo)]
# SEEDS="1 2 3" and KS="2 4 8" by default (KS="" skips the transfers); FIT_ARGS adds options to
# every carb fit (e.g. "--prior base"). Fits whose CSV is in out-dir already are not redone.
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
ks=${KS-2 4 8}
for family in $families; do
  [ "$family" = resnet ] && continue
  [ -n "$ks" ] || break
  only="$out/only-$family.sqlite"  # the family's rows alone, what a user would measure of it
  if [ ! -s "$only" ]; then
    cp "$db" "$only.part"
    sqlite3 "$only.part" "PRAGMA foreign_keys = ON; DELETE FROM measurements WHERE configuration_key
      IN (SELECT c.key FROM configurations c LEFT JOIN architectures a ON a.hash = c.architecture
          WHERE coalesce(a.name, 'resnet') <> '$family'); VACUUM;"
    mv "$only.part" "$only"
  fi
  n=$(sqlite3 "$only" "SELECT count(DISTINCT configuration_key) FROM measurements WHERE status = 'ok'")
  for seed in $seeds; do
    for k in $ks; do
      [ "$k" -lt "$n" ] || continue  # leave rows to score
      csv="$out/$family-$seed-k$k.csv"
      [ -s "$csv" ] || $carb fit --from "$out/$family-$seed.json" --db "$only" --rows "$k" \
        --seed "$seed" --format csv -o "$out/$family-$seed-k$k.json" > "$csv" 2> "$out/$family-$seed-k$k.log"
    done
  done
done
/usr/bin/python3 - "$out" $families <<'PY'
import csv, statistics, sys
out, families = sys.argv[1], [f for f in sys.argv[2:] if f != "resnet"]
rows = {}
for family in families:
    for path in __import__("glob").glob(f"{out}/{family}-[0-9]*.csv"):
        if "-k" in path[len(out) + len(family) + 2:]:
            continue  # a transfer's scores, the second table
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

# The transfers to each family from K of its rows: latency on the family's other rows, beside
# the held-out fit alone on those same rows ("source").
shots = {}
for path in __import__("glob").glob(f"{out}/*-k*.csv"):
    name = path[len(out) + 1:-4]
    family, seed, k = name.rsplit("-", 2)
    for r in csv.DictReader(open(path)):
        if r["target"] == "latency" and r["method"] in ("carb", "source"):
            shots.setdefault((family, int(k[1:]), r["method"]), []).append(r)
if shots:
    print()
    print("| family | K | rows scored | latency MAPE | within ±10% | Spearman | 90% coverage | "
          "held-out fit alone on those rows: MAPE / within ±10% |")
    print("|---|---|---|---|---|---|---|---|")
    ks = sorted({k for (_, k, _) in shots})
    sums = {}
    for family in families:
        for k in ks:
            carb, alone = shots.get((family, k, "carb"), []), shots.get((family, k, "source"), [])
            if not carb:
                continue
            n = int(carb[0]["n"])
            print(f"| {family} | {k} | {n} | {mean(carb, 'mape_pct'):.1f}% | "
                  f"{mean(carb, 'within10_pct'):.0f}% | {mean(carb, 'spearman'):.3f} | "
                  f"{mean(carb, 'coverage_pct'):.0f}% | {mean(alone, 'mape_pct'):.1f}% / "
                  f"{mean(alone, 'within10_pct'):.0f}% |")
            total = sums.setdefault(k, {"n": 0, "families": 0, "mape": 0.0, "within": 0.0,
                                        "cover": 0.0, "alone": 0.0, "alone_within": 0.0})
            total["n"] += n
            total["families"] += 1
            for key, rs, column in (("mape", carb, "mape_pct"), ("within", carb, "within10_pct"),
                                    ("cover", carb, "coverage_pct"), ("alone", alone, "mape_pct"),
                                    ("alone_within", alone, "within10_pct")):
                total[key] += n * mean(rs, column)
    for k, t in sorted(sums.items()):
        n = t["n"]
        print(f"| all ({t['families']} families, row-weighted) | {k} | {n} | "
              f"{t['mape'] / n:.1f}% | {t['within'] / n:.0f}% | | {t['cover'] / n:.0f}% | "
              f"{t['alone'] / n:.1f}% / {t['alone_within'] / n:.0f}% |")
PY
