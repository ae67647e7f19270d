#!/usr/bin/env bash
# Active profiling against random profiling (docs/benchmarks.md, "Active profiling"), replayed on
# the reference CPU campaign: for each seed, a model is fitted on 300 random configurations of
# the 1,600; then `carb screen --refine 50 --rounds 4 --replay` takes the chosen configurations'
# measurements from the reference, once choosing by acquisition score (informative) and once at
# random (over the costs alone and without the domain guard, as these figures were first
# measured: --maximize none --outside-domain allow). Both arms are scored per round against the
# measured truth of all 1,600: budget decisions (false accepts, false rejects) and the Pareto
# front's recall and precision.
# Run after scripts/build.sh:   bash bench/refine.sh [out-dir]   (default out/bench-refine)
set -euo pipefail
cd "$(dirname "$0")/.."
carb=$PWD/build/src/cli/carb
out=${1:-out/bench-refine}
mkdir -p "$out"
ref="$out/cpu-reference.sqlite"
[ -f "$ref" ] || xz -dc data/cpu-reference.sqlite.xz > "$ref"
sqlite3 "$ref" "SELECT configuration_key FROM measurements WHERE status = 'ok'" > "$out/pool.txt"

for budget in 'latency<=2ms,memory<=32MiB' 'latency<=5ms,memory<=64MiB'; do
  echo "== budget $budget: 300 random measured, then 4 rounds of 50"
  for seed in 1 2 3 4 5; do
    start="$out/start-$seed.sqlite"
    if [ ! -f "$start.json" ]; then
      /usr/bin/python3 -c "import random,sys; k=open(sys.argv[1]).read().split(); \
random.Random(int(sys.argv[2])).shuffle(k); print('\n'.join(k[:300]))" \
        "$out/pool.txt" "$seed" > "$out/start-$seed.txt"
      cp "$ref" "$start"
      sqlite3 "$start" <<SQL
CREATE TEMP TABLE keep(key TEXT PRIMARY KEY);
.import $out/start-$seed.txt keep
DELETE FROM measurements WHERE configuration_key NOT IN (SELECT key FROM keep);
DELETE FROM samples WHERE measurement_id NOT IN (SELECT id FROM measurements);
SQL
      "$carb" fit --db "$start" -o "$start.json" --seed "$seed" --threads 1 > /dev/null 2>&1
    fi
    for arm in informative random; do
      "$carb" screen --model "$start.json" --keys "$out/pool.txt" --budget "$budget" \
        --refine 50 --rounds 4 --db "$start" --replay "$ref" --acquire "$arm" \
        --maximize none --outside-domain allow \
        --refine-seed "$seed" --threads 1 --refit-output "$out/refined.json" \
        --json "$out/$arm-$seed.json" > /dev/null 2>&1
    done
  done
  /usr/bin/python3 - "$out" <<'PY'
import json, sys, statistics as st
out = sys.argv[1]
for arm in ("informative", "random"):
    runs = [json.load(open(f"{out}/{arm}-{s}.json"))["refine"] for s in range(1, 6)]
    print(f"{arm}: true front {[r['true_front'] for r in runs]}")
    print("  round  measured  budget_acc_pct  false_accepts  false_rejects  recall_pct  precision_pct"
          "  new_latency_mape_pct  fit_s")
    for i in range(5):
        rows = [r["rounds"][i] for r in runs]
        mean = lambda k: st.mean(x[k] for x in rows)
        lat = [x["new_errors"]["latency"]["mape_pct"] for x in rows if "latency" in x["new_errors"]]
        print(f"  {i:5d}  {rows[0]['training_rows']:8d}  {mean('budget_accuracy_pct'):14.2f}"
              f"  {mean('false_accepts'):13.1f}  {mean('false_rejects'):13.1f}"
              f"  {mean('recall_pct'):10.1f}  {mean('precision_pct'):13.1f}"
              f"  {st.mean(lat) if lat else float('nan'):20.1f}  {mean('fit_s'):5.1f}")
PY
done
