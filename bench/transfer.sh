#!/usr/bin/env bash
# Few-shot transfer to a new device (docs/model.md, "Transfer"; figures in docs/benchmarks.md,
# "Transfer"). For each case SOURCE -> TARGET, ten seeds (the coverage of a 16-row transfer moves
# by 5-10 points from seed to seed; five seeds left its mean up to 3 points from ten's):
#   K = 0     the source model as it is (no transfer), scored on every target row;
#   K = 8..128 and "all" (80% of the target rows): carb fit --from SOURCE --rows K, the K rows
#             chosen spread over the source's predictions (and, side by side, at random), scored
#             on the target rows not chosen; the table also gives one global scale factor
#             fitted on the same K rows ("scale");
#   full      carb fit on the target alone, scored on its own test split (15%).
# Per target: MAPE, Spearman and 90% interval coverage, mean over the seeds (min-max); "new":
# the same transfers scored on the held-out configurations the source's data does not have
# (where some are; on the others its predictions are in-sample).
#   [SEEDS="1 2 3"] [KS="16"] bash bench/transfer.sh [out-dir (out/bench-transfer)] [quick]
# Cases: the AMD reference campaign <-> the Intel rounds campaign (both shipped), and the AMD
# reference -> the local campaign (data/cpu-local-transfer.sqlite.xz), whose held-out space
# (examples/spaces/cpu-heldout.yaml, knob values between cpu-demo's) gives the unseen-knob rows;
# then from carb's engine to PyTorch (data/cpu-engines.sqlite.xz): on one machine (carb-torch:
# the engine campaign's carb rows as the source) and across machines and engines (amd-torch:
# the AMD reference as the source). CASES="carb-torch amd-torch" runs only those. two-intel: the
# AMD reference -> the Intel rounds with a second source, carb's engine on another Intel host
# (the engine campaign's carb rows, carb-engine.json): carb fit --from amd.json --from
# carb-engine.json (docs/benchmarks.md, "Two sources"). two-local (not a default case): the AMD
# reference and the Intel rounds (both shipped) -> the local campaign, what scripts/demo.sh
# could transfer from.
# Source models already in the out-dir are kept (amd.json, intel.json, carb-engine.json): put
# another model there first to transfer from it (docs/benchmarks.md, "Re-measured at K = 16").
# HOLD_OUT=4 fits each source without every 4th configuration of its own campaign (sorted by
# key), so that the targets' held-out rows include configurations new to the source (the AMD and
# Intel campaigns measured the same 1,600, and 501 of the local campaign's 600 seen ones are the
# AMD reference's): the "new" lines then score those, where the source's predictions are
# out-of-sample (docs/benchmarks.md, "New to the source"). Use another out-dir than a run
# without it.
set -euo pipefail
cd "$(dirname "$0")/.."
carb=${CARB:-build/src/cli/carb}
out=${1:-out/bench-transfer}
quick=${2:-}
cases=${CASES:-amd-intel two-intel intel-amd amd-local unseen carb-torch amd-torch}
mkdir -p "$out"
seeds=${SEEDS:-1 2 3 4 5 6 7 8 9 10}
ks=${KS:-8 16 32 64 128 all}
if [ -n "$quick" ]; then seeds="1 2"; ks="8 16"; fi
wanted() { [[ " $cases " == *" $1 "* ]]; }

for name in cpu-reference cpu-reference-rounds cpu-local-transfer cpu-engines; do
  [ -f "$out/$name.sqlite" ] || xz -dc "data/$name.sqlite.xz" > "$out/$name.sqlite"
done
# The engine campaign holds two devices of one machine, carb's engine and PyTorch: one database
# each here, so that every carb fit below reads one device.
if [ ! -f "$out/engines-torch.sqlite" ]; then
  for engine in carb torch; do cp "$out/cpu-engines.sqlite" "$out/engines-$engine.sqlite"; done
  /usr/bin/python3 - "$out" <<'EOF'
import sqlite3, sys
out = sys.argv[1]
for engine, keep_torch in (("carb", False), ("torch", True)):
    db = sqlite3.connect(f"{out}/engines-{engine}.sqlite")
    db.execute("PRAGMA foreign_keys = ON")  # a measurement's samples go with it
    drop = ("SELECT id FROM devices WHERE instr(fingerprint, 'PyTorch') " +
            ("= 0" if keep_torch else "> 0"))
    for table in ("measurements", "drift_probes"):
        db.execute(f"DELETE FROM {table} WHERE device_id IN ({drop})")
    db.execute(f"DELETE FROM devices WHERE id IN ({drop})")
    db.commit()
    print(engine, db.execute("SELECT count(*) FROM measurements WHERE status = 'ok'").fetchone()[0], "ok rows")
EOF
fi
# The local campaign holds two spaces: cpu-demo's knob values (seen) and cpu-heldout's (unseen).
if [ ! -f "$out/local-seen.sqlite" ]; then
  for part in seen unseen; do
    cp "$out/cpu-local-transfer.sqlite" "$out/local-$part.sqlite"
  done
  /usr/bin/python3 - "$out" "$carb" <<'EOF'
import sqlite3, sys, subprocess
out = sys.argv[1]
keys = subprocess.run([sys.argv[2], "space", "list", "--spec", "examples/spaces/cpu-heldout.yaml"],
                      capture_output=True, text=True, check=True).stdout.split()
for part, keep_heldout in (("seen", False), ("unseen", True)):
    db = sqlite3.connect(f"{out}/local-{part}.sqlite")
    db.execute("PRAGMA foreign_keys = ON")  # a measurement's samples go with it
    db.execute("CREATE TEMP TABLE heldout (key TEXT PRIMARY KEY)")
    db.executemany("INSERT OR IGNORE INTO heldout VALUES (?)", [(k,) for k in keys])
    db.execute("DELETE FROM measurements WHERE configuration_key " +
               ("NOT IN" if keep_heldout else "IN") + " (SELECT key FROM heldout)")
    db.commit()
    print(part, db.execute("SELECT count(*) FROM measurements WHERE status = 'ok'").fetchone()[0], "ok rows")
EOF
fi

# Source models: each campaign fitted on its own (drift as the campaign allows: the Intel rounds
# campaign has probes; the local one is fitted as measured, its probe drift did not follow the
# networks, docs/benchmarks.md).
hold_out=${HOLD_OUT:-}
fit_source() {  # name db drift
  [ -f "$out/$1.json" ] && return
  local db=$2
  if [ -n "$hold_out" ]; then
    db="$out/$1-source.sqlite"
    cp "$2" "$db"
    /usr/bin/python3 - "$db" "$hold_out" <<'EOF'
import sqlite3, sys
db, every = sqlite3.connect(sys.argv[1]), int(sys.argv[2])
db.execute("PRAGMA foreign_keys = ON")  # a measurement's samples go with it
keys = [k for (k,) in db.execute("SELECT DISTINCT configuration_key FROM measurements ORDER BY 1")]
held = keys[every - 1::every]
db.executemany("DELETE FROM measurements WHERE configuration_key = ?", [(k,) for k in held])
db.commit()
print(f"{sys.argv[1]}: {len(held)} of {len(keys)} configurations held out of the source")
EOF
  fi
  $carb fit --db "$db" -o "$out/$1.json" --threads 1 --drift "$3" \
    --format json > "$out/$1.fit.json" 2> /dev/null
}
fit_source amd "$out/cpu-reference.sqlite" auto
fit_source intel "$out/cpu-reference-rounds.sqlite" auto
if wanted carb-torch || wanted two-intel; then
  fit_source carb-engine "$out/engines-carb.sqlite" auto
fi

run_case() {  # case "source [further sources]" target-db drift
  local case=$1 db=$3 drift=$4 n name
  local sources=($2) from=()
  for name in "${sources[@]}"; do from+=(--from "$out/$name.json"); done
  n=$(sqlite3 "$db" "SELECT count(DISTINCT configuration_key) FROM measurements WHERE status = 'ok'")
  for seed in $seeds; do
    $carb evaluate --model "$out/${sources[0]}.json" --db "$db" --drift "$drift" --format json \
      > "$out/$case-k0-s$seed.json" 2> /dev/null
    $carb fit --db "$db" -o "$out/$case-full-s$seed.json" --seed "$seed" --threads 1 \
      --drift "$drift" --format json > "$out/$case-full-s$seed.out" 2> /dev/null
    for k in $ks; do
      local rows=$k
      [ "$k" = all ] && rows=$((n * 8 / 10))
      for choose in spread random; do
        [ "$choose" = random ] && [ "$k" = all ] && continue
        $carb fit "${from[@]}" --db "$db" --drift "$drift" --rows "$rows" \
          --seed "$seed" --choose "$choose" --threads 1 --format json \
          -o "$out/$case-k$k-$choose-s$seed.model.json" \
          > "$out/$case-k$k-$choose-s$seed.json" 2> /dev/null
      done
    done
  done
}
if wanted amd-intel; then run_case amd-intel amd "$out/cpu-reference-rounds.sqlite" auto; fi
if wanted two-intel; then
  run_case two-intel "amd carb-engine" "$out/cpu-reference-rounds.sqlite" auto
fi
if wanted intel-amd; then run_case intel-amd intel "$out/cpu-reference.sqlite" auto; fi
if wanted amd-local || wanted unseen; then run_case amd-local amd "$out/local-seen.sqlite" off; fi
if wanted two-local; then run_case two-local "amd intel" "$out/local-seen.sqlite" off; fi
if wanted carb-torch; then run_case carb-torch carb-engine "$out/engines-torch.sqlite" auto; fi
if wanted amd-torch; then run_case amd-torch amd "$out/engines-torch.sqlite" auto; fi

# Unseen knob values: transfer models fitted on the seen local rows, scored on the unseen ones;
# and a model fitted on the seen local rows alone, scored on both.
wanted unseen && for seed in $seeds; do
  $carb evaluate --model "$out/amd.json" --db "$out/local-unseen.sqlite" --drift off \
    --format json > "$out/unseen-k0-s$seed.json" 2> /dev/null
  for k in $ks; do
    $carb evaluate --model "$out/amd-local-k$k-spread-s$seed.model.json" \
      --db "$out/local-unseen.sqlite" --drift off --format json \
      > "$out/unseen-k$k-spread-s$seed.json" 2> /dev/null
  done
  $carb evaluate --model "$out/amd-local-full-s$seed.json" --db "$out/local-unseen.sqlite" \
    --drift off --format json > "$out/unseen-full-s$seed.json" 2> /dev/null
done

/usr/bin/python3 - "$out" "$seeds" "$ks" "$cases" <<'EOF'
import json, statistics, sys
out, seeds, ks, cases = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()

def scores(path, method="carb", key="scores"):
    """{target: (mape, spearman, coverage)} of one result file ({} when there is none); key
    scores_new_to_source: on the scored configurations the source's data does not have."""
    try:
        data = json.load(open(path))
    except FileNotFoundError:
        return {}
    if key != "scores":
        data = {"scores": data.get(key) or []}
    if "scores" in data and isinstance(data["scores"], list) and data["scores"] and "metrics" in data["scores"][0]:
        rows = [dict(s["metrics"], target=s["target"], method=s["method"]) for s in data["scores"]]
    elif "evaluation" in data:
        rows = [dict(s["metrics"], target=s["target"], method=s["method"]) for s in data["evaluation"]["scores"]]
    else:
        rows = data["scores"]
    found = {}
    for r in rows:
        if r["method"] == method:
            found[r["target"]] = (r["mape"], r["spearman"], r.get("coverage"))
    return found

def cell(values, fmt):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    mean = statistics.mean(values)
    return (fmt % mean) + (f" ({fmt % min(values)}-{fmt % max(values)})" if len(values) > 1 else "")

def table(case, title):
    if case not in cases:
        return
    print(f"\n== {title}: mean over seeds {' '.join(seeds)} (min-max)")
    print(f"{'target':8} {'K':>5} {'how':8} {'MAPE %':>22} {'Spearman':>24} {'coverage %':>22}")
    for target in ("memory", "latency"):
        def line(k, how, files, method="carb", key="scores"):
            got = [scores(f, method, key).get(target) for f in files]
            got = [g for g in got if g]
            if not got:
                return
            print(f"{target:8} {k:>5} {how:8} {cell([g[0] for g in got], '%.2f'):>22} "
                  f"{cell([g[1] for g in got], '%.4f'):>24} {cell([g[2] for g in got], '%.1f'):>22}")
        line("0", "source", [f"{out}/{case}-k0-s{s}.json" for s in seeds])
        if target == "memory":  # carb's memory is the engine's plan where this machine runs it
            line("0", "model", [f"{out}/{case}-k0-s{s}.json" for s in seeds], "memory-model")
        for k in ks:
            line(k, "spread", [f"{out}/{case}-k{k}-spread-s{s}.json" for s in seeds])
            line(k, "new", [f"{out}/{case}-k{k}-spread-s{s}.json" for s in seeds],
                 key="scores_new_to_source")
            if target == "memory":
                line(k, "model", [f"{out}/{case}-k{k}-spread-s{s}.json" for s in seeds], "memory-model")
            if k != "all":
                line(k, "random", [f"{out}/{case}-k{k}-random-s{s}.json" for s in seeds])
                line(k, "scale", [f"{out}/{case}-k{k}-spread-s{s}.json" for s in seeds], "scale")
        line("full", "target", [f"{out}/{case}-full-s{s}.json" for s in seeds])

table("amd-intel", "AMD reference -> Intel rounds")
table("two-intel", "AMD reference and carb's engine on another Intel host -> Intel rounds")
table("intel-amd", "Intel rounds -> AMD reference")
table("amd-local", "AMD reference -> this machine (seen knob values)")
table("two-local", "AMD reference and Intel rounds -> this machine (seen knob values)")
table("unseen", "AMD reference -> this machine, scored on unseen knob values (transfer fitted on seen rows)")
table("carb-torch", "carb's engine -> PyTorch, one machine (data/cpu-engines)")
table("amd-torch", "AMD reference (carb's engine) -> PyTorch on another machine")

if "unseen" in cases:
    print("\n== unseen knob values against seen ones (latency MAPE, spread, mean over seeds)")
    for k in ks:
        def mean_mape(prefix, key="scores"):
            got = [scores(f"{out}/{prefix}-k{k}-spread-s{s}.json", key=key).get("latency") for s in seeds]
            got = [g[0] for g in got if g]
            return statistics.mean(got) if got else None
        unseen, seen = mean_mape("unseen"), mean_mape("amd-local")
        seen_new = mean_mape("amd-local", "scores_new_to_source")
        if unseen and seen:
            print(f"K={k:>4}: unseen {unseen:.2f}%, {unseen / seen:.2f}x the seen rows' {seen:.2f}%"
                  + (f", {unseen / seen_new:.2f}x the seen rows new to the source ({seen_new:.2f}%)"
                     if seen_new else ""))

print("\n== chosen methods (latency), K: method counts over seeds")
for case in ("amd-intel", "two-intel", "intel-amd", "amd-local", "two-local", "carb-torch",
             "amd-torch"):
    if case not in cases and not (case == "amd-local" and "unseen" in cases):
        continue
    for k in ks:
        methods = []
        for s in seeds:
            data = json.load(open(f"{out}/{case}-k{k}-spread-s{s}.json"))
            methods += [t["method"] for t in data["targets"] if t["target"] == "latency"]
        print(f"{case:10} K={k:>4}: " + ", ".join(f"{m} {methods.count(m)}" for m in sorted(set(methods))))
EOF
