#!/usr/bin/env bash
# What measuring every configuration in several rounds is worth (docs/benchmarks.md, "Predictor";
# docs/measurement.md, "Rounds"), on a campaign database of `carb profile --rounds N` with drift
# probes:
#   1. how far two rounds' measurements of each configuration lie apart, as measured and divided
#      by the drift probe's latency at each one's moment (carb export's drift_probe_ms);
#   2. latency accuracy on the test split over five split seeds, with drift correction, fitted
#      on the first round alone, on the first two rounds and on all of them (each configuration
#      the median of its rounds): the same configurations and the same splits, side by side.
#   bash bench/rounds.sh DB [out-dir (out/bench-rounds)]
set -euo pipefail
cd "$(dirname "$0")/.."
carb=${CARB:-build/src/cli/carb}
db=$1
out=${2:-out/bench-rounds}
mkdir -p "$out"
rounds=$(sqlite3 "$db" "SELECT 1 + max(coalesce(json_extract(protocol, '$.round'), 0))
  FROM measurements WHERE status = 'ok'")
echo "== $db: $rounds rounds"
sqlite3 "$db" "SELECT coalesce(json_extract(protocol, '$.round'), 0) AS round, count(*),
  min(started_at), max(finished_at) FROM measurements WHERE status = 'ok' GROUP BY round" |
  awk -F'|' '{printf "round %s: %s ok measurements, %s to %s\n", $1, $2, $3, $4}'

echo "== two rounds of the same configuration"
$carb export --db "$db" --ok-only --format csv -o "$out/all.csv" 2> /dev/null
/usr/bin/python3 - "$out/all.csv" <<'EOF'
import csv, itertools, json, statistics, sys
by = {}
for r in csv.DictReader(open(sys.argv[1])):
    by.setdefault(r["configuration_key"], {})[json.loads(r["protocol"]).get("round", 0)] = r
rounds = sorted({k for v in by.values() for k in v})
def q(values, f):
    values = sorted(values)
    return values[min(len(values) - 1, int(f * len(values)))]
for a, b in itertools.combinations(rounds, 2):
    raw, corrected, signed = [], [], []
    for per in by.values():
        if a not in per or b not in per:
            continue
        x, y = per[a], per[b]
        ratio = float(y["wall_median_ms"]) / float(x["wall_median_ms"])
        raw.append(abs(ratio - 1))
        if x["drift_probe_ms"] and y["drift_probe_ms"]:
            c = ratio / (float(y["drift_probe_ms"]) / float(x["drift_probe_ms"]))
            corrected.append(abs(c - 1)); signed.append(c - 1)
    line = (f"rounds {a} and {b}: {len(raw)} configurations, as measured median |difference| "
            f"{100 * statistics.median(raw):.1f}% (mean {100 * statistics.fmean(raw):.1f}%)")
    if corrected:
        line += (f"; divided by the drift {100 * statistics.median(corrected):.1f}% (mean "
                 f"{100 * statistics.fmean(corrected):.1f}%, 90th percentile "
                 f"{100 * q(corrected, 0.9):.1f}%, median signed {100 * statistics.median(signed):+.1f}%)")
    print(line)
EOF

echo "== latency on the test split, drift-corrected, 5 seeds: first round | first two | all"
for keep in $(seq 1 "$rounds"); do
  copy="$out/rounds-$keep.sqlite"
  cp "$db" "$copy"
  sqlite3 "$copy" "PRAGMA foreign_keys = ON; DELETE FROM measurements
    WHERE coalesce(json_extract(protocol, '$.round'), 0) >= $keep"
done
for seed in 1 2 3 4 5; do
  line="seed $seed:"
  for keep in $(seq 1 "$rounds"); do
    $carb fit --db "$out/rounds-$keep.sqlite" -o "$out/seed$seed-$keep.json" --seed "$seed" \
      --threads 1 --drift on > /dev/null 2> "$out/seed$seed-$keep.err"
    line+=$(/usr/bin/python3 - "$out/seed$seed-$keep.json" "$keep" <<'EOF'
import json, sys
model = json.load(open(sys.argv[1]))
for s in model["evaluation"]["scores"]:
    if s["method"] == "carb" and s["target"] == "latency":
        m = s["metrics"]
        print(f' | {sys.argv[2]}: R2 {m["r2"]:.4f} MAPE {m["mape"]:5.2f}% cov {m["coverage"]:5.1f}%', end="")
EOF
)
  done
  echo "$line"
done
