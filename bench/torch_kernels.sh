#!/usr/bin/env bash
# PyTorch's latency from K networks, two ways, side by side on this machine (docs/benchmarks.md,
# "PyTorch from its kernels"). A pool of cpu-demo configurations is measured whole on torch:0
# (carb profile). For each seed, `carb profile --transfer-for` chooses K of the pool (spread over
# the source's predictions) and measures them; then
#   transfer  carb fit --from SOURCE on those K whole passes (the source: the AMD reference, a
#             model of carb's engine on another host);
#   kernels   carb kernels --device torch:0 on the same K configurations, carb fit --kernels:
#             PyTorch's ATen operators, one per IR layer, timed and predicted one by one and
#             summed (docs/onnx.md, "Kernel model");
#   flat      the same, with every kernel's is_torch_native 0 (as before that feature);
# all scored on the pool's configurations not chosen, against their whole passes, every latency
# brought to one speed of the host by its drift probe (below). "full": carb fit on the whole
# pool, scored on its own test split (15%), one fit per seed. Measure on a quiet machine. Runs whose kernels.csv
# exists are not measured again (delete it to re-time them).
#   [SEEDS="1 2 3 4 5"] [KS="16"] [POOL=200] bash bench/torch_kernels.sh [out-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
carb=${CARB:-build/src/cli/carb}
out=${1:-out/torch-kernels}
seeds=${SEEDS:-1 2 3 4 5}
ks=${KS:-16}
pool=${POOL:-200}
spec=examples/spaces/cpu-demo.yaml
mkdir -p "$out"

if [ ! -f "$out/amd.json" ]; then
  xz -dc data/cpu-reference.sqlite.xz > "$out/cpu-reference.sqlite"
  "$carb" fit --db "$out/cpu-reference.sqlite" -o "$out/amd.json" > /dev/null
fi
if [ ! -f "$out/pool.sqlite" ]; then
  "$carb" space list --spec "$spec" --sample "$pool" --seed 11 --format csv |
    tail -n +2 | cut -d, -f1 > "$out/pool.keys"
  start=$(date +%s)
  "$carb" profile --device torch:0 --keys "$out/pool.keys" --db "$out/pool.sqlite" > /dev/null
  echo "pool: $(wc -l < "$out/pool.keys") configurations measured on torch:0 in" \
    "$(( $(date +%s) - start )) s"
fi
"$carb" export --db "$out/pool.sqlite" --ok-only --format csv > "$out/pool.csv"
for seed in $seeds; do
  [ -f "$out/full-s$seed.txt" ] ||
    "$carb" fit --db "$out/pool.sqlite" --seed "$seed" -o "$out/full-s$seed.json" \
      > "$out/full-s$seed.txt" 2> /dev/null
done

for k in $ks; do
  for seed in $seeds; do
    run="$out/k$k-s$seed"
    mkdir -p "$run"
    if [ ! -f "$run/kernels.csv" ]; then
      "$carb" profile --device torch:0 --keys "$out/pool.keys" --transfer-for "$out/amd.json" \
        --sample "$k" --seed "$seed" --db "$run/chosen.sqlite" > /dev/null 2>&1
      "$carb" export --db "$run/chosen.sqlite" --ok-only --format csv |
        /usr/bin/python3 -c 'import csv, sys
print("\n".join(r["configuration_key"] for r in csv.DictReader(sys.stdin)))' > "$run/chosen.keys"
      start=$(date +%s)
      "$carb" kernels --device torch:0 --keys "$run/chosen.keys" --passes 5 --warmup 2 \
        --format csv > "$run/kernels.csv"
      echo "k=$k seed=$seed: kernels of $(wc -l < "$run/chosen.keys") configurations in" \
        "$(( $(date +%s) - start )) s"
    fi
    "$carb" fit --from "$out/amd.json" --db "$run/chosen.sqlite" -o "$run/transfer.json" \
      > "$run/transfer.txt" 2>&1
    "$carb" fit --kernels "$run/kernels.csv" -o "$run/kernels.json" > "$run/kernel-fit.txt" 2>&1
    # The same timings without is_torch_native (every kernel's 0, as carb's engine's are).
    /usr/bin/python3 -c 'import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
at = rows[0].index("is_torch_native")
for row in rows[1:]:
    row[at] = "0"
csv.writer(open(sys.argv[2], "w", newline="")).writerows(rows)' "$run/kernels.csv" "$run/flat.csv"
    "$carb" fit --kernels "$run/flat.csv" -o "$run/flat.json" > /dev/null 2>&1
    grep -vxF -f "$run/chosen.keys" "$out/pool.keys" > "$run/rest.keys"
    for model in transfer kernels flat; do
      "$carb" predict --model "$run/$model.json" --keys "$run/rest.keys" --format csv \
        > "$run/$model-predicted.csv" 2> /dev/null
    done
  done
done

for k in $ks; do
  for seed in $seeds; do
    "$carb" export --db "$out/k$k-s$seed/chosen.sqlite" --ok-only --format csv \
      > "$out/k$k-s$seed/chosen.csv"
  done
done
/usr/bin/python3 - "$out" "$ks" "$seeds" <<'EOF'
# Scored at one speed of the host: every latency, measured or predicted, is brought to the pool's
# median drift probe by the probe at its moment (a measurement's own; a model's, the median of
# those its rows were timed beside), as carb evaluate divides by the drift: this VM ran 1.45x
# slower for minutes of the first run, while some seeds' kernels were timed.
import csv, statistics, sys
import numpy
out, ks, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
pool = list(csv.DictReader(open(f"{out}/pool.csv")))
reference = statistics.median(float(r["drift_probe_ms"]) for r in pool)
measured = {r["configuration_key"]: float(r["wall_median_ms"]) * reference /
            float(r["drift_probe_ms"]) for r in pool}

def score(path, probe):
    rows = [r for r in csv.DictReader(open(path)) if r["key"] in measured]
    scale = reference / probe
    truth = [measured[r["key"]] for r in rows]
    value = [float(r["latency_ms"]) * scale for r in rows]
    low = [float(r["latency_ms_low"]) * scale for r in rows]
    high = [float(r["latency_ms_high"]) * scale for r in rows]
    errors = [abs(v - t) / t for v, t in zip(value, truth)]
    n = len(rows)
    spearman = numpy.corrcoef(numpy.argsort(numpy.argsort(truth)),
                              numpy.argsort(numpy.argsort(value)))[0, 1]
    return (100 * sum(errors) / n, 100 * sum(e <= 0.10 for e in errors) / n, spearman,
            100 * sum(l <= t <= h for l, t, h in zip(low, truth, high)) / n, n)

full = []  # the full fit's latency on its test split, per seed: MAPE, Spearman, coverage
for seed in seeds:
    for line in open(f"{out}/full-s{seed}.txt"):
        cells = line.split()
        if cells[:2] == ["latency", "carb"]:
            full.append((float(cells[6]), float(cells[8]), float(cells[10])))
print(f"full fit on the pool, {len(full)} seeds: MAPE {statistics.mean(f[0] for f in full):.2f}% "
      f"({min(f[0] for f in full):.2f}-{max(f[0] for f in full):.2f}), Spearman "
      f"{statistics.mean(f[1] for f in full):.4f}, coverage {statistics.mean(f[2] for f in full):.1f}%")
print(f"every latency at the pool's median probe, {reference:.2f} ms")
print("K  seed  model     rows  MAPE    within10  spearman  coverage  probe")
for k in ks:
    means = {}
    for seed in seeds:
        run = f"{out}/k{k}-s{seed}"
        probes = {
            "transfer": statistics.median(
                float(r["drift_probe_ms"]) for r in csv.DictReader(open(f"{run}/chosen.csv"))),
            "kernels": statistics.median(
                float(r["probe_ms"]) for r in csv.DictReader(open(f"{run}/kernels.csv"))),
        }
        probes["flat"] = probes["kernels"]
        for model in ("transfer", "kernels", "flat"):
            m = score(f"{run}/{model}-predicted.csv", probes[model])
            means.setdefault(model, []).append(m)
            print(f"{k:>2} {seed:>5}  {model:<8} {m[4]:>5} {m[0]:6.2f}%  {m[1]:6.1f}%  "
                  f"{m[2]:8.4f}  {m[3]:6.1f}%  {probes[model]:.2f}")
    for model, ms in means.items():
        mean = [sum(m[i] for m in ms) / len(ms) for i in range(4)]
        lo, hi = min(m[0] for m in ms), max(m[0] for m in ms)
        print(f"{k:>2}  mean  {model:<8}       {mean[0]:6.2f}% ({lo:.2f}-{hi:.2f})  "
              f"{mean[1]:6.1f}%  {mean[2]:8.4f}  {mean[3]:6.1f}%")
EOF
