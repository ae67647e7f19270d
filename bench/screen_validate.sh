#!/usr/bin/env bash
# Screening validated on measured truth (docs/benchmarks.md, "Screening on measured truth"): the
# reference CPU campaign as a fully measured space. For each seed, the model is fitted on a
# random half of its 1,600 configurations and screens the other half (--keys) for the value-cost
# front (MACs per image up, memory and latency down) under each budget; carb validate then scores,
# against the measurements of that half, the front's recall and precision and the budget
# decisions (accuracy, false accepts, false rejects), with the domain guard and without it,
# by the predictions (default) and by the intervals' upper ends (--safe).
# Run after scripts/build.sh:   bash bench/screen_validate.sh [out-dir]   (out/bench-screen)
set -euo pipefail
cd "$(dirname "$0")/.."
carb=${CARB:-$PWD/build/src/cli/carb}
out=${1:-out/bench-screen}
seeds=${SEEDS:-"1 2 3 4 5"}
mkdir -p "$out"
ref="$out/cpu-reference.sqlite"
[ -f "$ref" ] || xz -dc data/cpu-reference.sqlite.xz > "$ref"
sqlite3 "$ref" "SELECT DISTINCT configuration_key FROM measurements WHERE status = 'ok'" \
  > "$out/pool.txt"
# Budgets: the demo's; one at about the medians of the campaign (the hardest: half the space on
# either side); and a loose one.
budgets=('latency<=2ms,memory<=32MiB' 'latency<=4ms,memory<=24MiB' 'latency<=20ms,memory<=128MiB')

for seed in $seeds; do
  half="$out/half-$seed"
  if [ ! -f "$half.json" ]; then
    /usr/bin/python3 -c "import random,sys; k=open(sys.argv[1]).read().split(); \
random.Random(int(sys.argv[2])).shuffle(k); n=len(k)//2; \
open(sys.argv[3]+'-fit.txt','w').write('\n'.join(k[:n])+'\n'); \
open(sys.argv[3]+'-screen.txt','w').write('\n'.join(k[n:])+'\n')" "$out/pool.txt" "$seed" "$half"
    cp "$ref" "$half.sqlite"
    sqlite3 "$half.sqlite" <<SQL
CREATE TEMP TABLE keep(key TEXT PRIMARY KEY);
.import $half-fit.txt keep
DELETE FROM measurements WHERE configuration_key NOT IN (SELECT key FROM keep);
DELETE FROM samples WHERE measurement_id NOT IN (SELECT id FROM measurements);
SQL
    "$carb" fit --db "$half.sqlite" -o "$half.json" --seed "$seed" --threads 1 > /dev/null 2>&1
  fi
  b=0
  for budget in "${budgets[@]}"; do
    b=$((b + 1))
    for mode in default safe; do
      flag=""
      [ "$mode" = safe ] && flag="--safe"
      result="$out/screen-s$seed-b$b-$mode.json"
      "$carb" screen --model "$half.json" --keys "$half-screen.txt" --budget "$budget" $flag \
        --json "$result" > /dev/null 2> "$out/screen-s$seed-b$b-$mode.err"
      "$carb" validate --shortlist "$result" --db "$ref" --model "$half.json" \
        --keys "$half-screen.txt" > /dev/null 2> "$out/validate-s$seed-b$b-$mode.txt"
    done
  done
done

/usr/bin/python3 - "$out" "$seeds" "${budgets[@]}" <<'PY'
import re, statistics, sys
out, seeds, budgets = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
number = r"([0-9.e+-]+)"
def parse(path):
    text = open(path).read()
    head = re.search(r"measured configurations \((\d+) outside the training domain, (\d+) truly "
                     r"feasible", text)
    row = {"outside": int(head[1]), "feasible": int(head[2])}
    for policy in ("allow", "exclude", "widen"):
        m = re.search(r"outside-domain " + policy + ": accuracy " + number + r"%, false accepts " +
                      number + r"% of all \((\d+) of (\d+) accepted\), false rejects " + number,
                      text)
        row[policy] = (float(m[1]), float(m[2]), float(m[5]))
    front = re.search(r"\): (\d+) configurations; shortlist recall " + number + r"%, precision " +
                      number + r"% \((\d+) shortlisted", text)
    row.update({"true_front": int(front[1]), "recall": float(front[2]),
                "precision": float(front[3])})
    return row
def cell(values, digits=2):
    m = statistics.mean(values)
    return f"{m:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"
print(f"screening half of the reference campaign with a model fitted on the other half; "
      f"seeds {' '.join(seeds)}, mean (min-max)")
for b, budget in enumerate(budgets, 1):
    for mode in ("default", "safe"):
        rows = [parse(f"{out}/validate-s{s}-b{b}-{mode}.txt") for s in seeds]
        print(f"\n== {budget} ({mode}): truly feasible {cell([r['feasible'] for r in rows], 0)} of "
              f"800, outside the training domain {cell([r['outside'] for r in rows], 0)}")
        print(f"  value-cost front (screened with outside-domain widen): true front "
              f"{cell([r['true_front'] for r in rows], 0)}, recall {cell([r['recall'] for r in rows])} %, "
              f"precision {cell([r['precision'] for r in rows])} %")
        for policy in ("allow", "exclude", "widen"):
            print(f"  outside-domain {policy:8} accuracy {cell([r[policy][0] for r in rows])} %, "
                  f"false accepts {cell([r[policy][1] for r in rows])} %, "
                  f"false rejects {cell([r[policy][2] for r in rows])} %")
PY
