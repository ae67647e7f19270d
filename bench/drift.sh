#!/usr/bin/env bash
# What drift probes are worth (docs/benchmarks.md, "Predictor"; docs/model.md, "Drift
# correction"), on a campaign database with probes:
#   1. the probe series: how far the device's speed moved;
#   2. latency accuracy on the test split over five split seeds, fitted as measured
#      (--drift off) and divided by the drift (--drift on), side by side;
#   3. with a second database that measured some of the same configurations later (with probes):
#      how far the two measurements of each configuration lie apart, as measured and divided by
#      the probe's latency at each one's moment (carb export's drift_probe_ms).
#   bash bench/drift.sh DB [REMEASURED_DB] [out-dir (out/bench-drift)]
set -euo pipefail
cd "$(dirname "$0")/.."
carb=${CARB:-build/src/cli/carb}
db=$1
again=${2:-}
out=${3:-out/bench-drift}
mkdir -p "$out"

echo "== drift probes in $db"
sqlite3 "$db" "SELECT count(*), sum(status = 'ok' AND contended = 0), min(measured_at),
  max(measured_at), printf('%.4f', min(median_ms)), printf('%.4f', max(median_ms)),
  group_concat(DISTINCT configuration_key) FROM drift_probes" |
  awk -F'|' '{printf "%s probes (%s ok and uncontended), %s to %s, median latency %s to %s ms, probe %s\n", $1, $2, $3, $4, $5, $6, $7}'

echo "== latency on the test split, 5 seeds: as measured | divided by the drift"
for seed in 1 2 3 4 5; do
  for drift in off on; do
    $carb fit --db "$db" -o "$out/seed$seed-$drift.json" --seed "$seed" --threads 1 \
      --drift "$drift" > /dev/null 2> "$out/seed$seed-$drift.err"
  done
  /usr/bin/python3 - "$out/seed$seed-off.json" "$out/seed$seed-on.json" "$seed" <<'EOF'
import json, sys
def latency(path):
    model = json.load(open(path))
    for s in model["evaluation"]["scores"]:
        if s["method"] == "carb" and s["target"] == "latency":
            m = s["metrics"]
            return f'R2 {m["r2"]:.4f} MAPE {m["mape"]:5.2f}% within10 {m["within10"]:5.1f}% cov {m["coverage"]:5.1f}%', model.get("drift")
off, _ = latency(sys.argv[1])
on, drift = latency(sys.argv[2])
print(f'seed {sys.argv[3]}: {off} | {on}')
if sys.argv[3] == "1" and drift:
    print(f'        drift: {drift["probes"]} probes, factors {drift["min_factor"]:.3f}-{drift["max_factor"]:.3f}, reference {drift["reference_ms"]:.4f} ms')
EOF
done

if [ -n "$again" ]; then
  echo "== the same configurations measured twice: $db, then $again"
  $carb export --db "$db" --ok-only --format csv -o "$out/first.csv" 2> /dev/null
  $carb export --db "$again" --ok-only --format csv -o "$out/again.csv" 2> /dev/null
  /usr/bin/python3 - "$out/first.csv" "$out/again.csv" <<'EOF'
import csv, statistics, sys
def rows(path):
    return {r["configuration_key"]: r for r in csv.DictReader(open(path))}
first, again = rows(sys.argv[1]), rows(sys.argv[2])
shared = [k for k in again if k in first]
raw, corrected, raw_signed, corrected_signed = [], [], [], []
for k in shared:
    a, b = first[k], again[k]
    ra = float(b["wall_median_ms"]) / float(a["wall_median_ms"])
    raw.append(abs(ra - 1)); raw_signed.append(ra - 1)
    if a["drift_probe_ms"] and b["drift_probe_ms"]:
        rc = ra / (float(b["drift_probe_ms"]) / float(a["drift_probe_ms"]))
        corrected.append(abs(rc - 1)); corrected_signed.append(rc - 1)
def q(values, f):
    values = sorted(values)
    return values[min(len(values) - 1, int(f * len(values)))]
print(f"{len(shared)} configurations in both")
for name, absolute, signed in (("as measured", raw, raw_signed),
                               ("divided by the drift", corrected, corrected_signed)):
    if absolute:
        print(f"{name:<22} n {len(absolute)}: median |difference| {100 * statistics.median(absolute):.1f}%, "
              f"90th percentile {100 * q(absolute, 0.9):.1f}%, max {100 * max(absolute):.1f}%, "
              f"median signed {100 * statistics.median(signed):+.1f}%")
EOF
fi
