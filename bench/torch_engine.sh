#!/usr/bin/env bash
# carb's oneDNN engine (cpu:0) against the PyTorch backend (torch:0) on the same configurations,
# side by side (docs/torch.md; figures in docs/benchmarks.md, "PyTorch backend against carb's
# engine"): a stratified sample of cpu-demo.yaml, measured in ROUNDS alternating campaigns per
# engine (cpu, torch, cpu, torch, ...), each into its own database. Per configuration: the median
# latency over an engine's rounds; then torch / carb latency (geometric mean, range, by batch),
# Spearman between the engines, engine_peak_bytes and peak-RSS ratios, and configurations per
# minute per engine. Needs a build with the PyTorch backend. Run it on a quiet machine.
#   bash bench/torch_engine.sh [out-dir (out/bench-torch)] [N (40)] [ROUNDS (2)]
set -euo pipefail
cd "$(dirname "$0")/.."
carb=${CARB:-build/src/cli/carb}
out=${1:-out/bench-torch}
n=${2:-40}
rounds=${3:-2}
mkdir -p "$out"
devices=$($carb devices 2>&1 || true)
if ! grep -q '^torch:0 ' <<< "$devices"; then
  echo "torch_engine: this build has no torch:0 device ($carb devices says why)" >&2
  exit 2
fi
$carb space list --spec examples/spaces/cpu-demo.yaml --sample "$n" --seed 11 \
  --sampling stratified --format csv | tail -n +2 | cut -d, -f1 > "$out/keys.txt"
for round in $(seq 1 "$rounds"); do
  for device in cpu torch; do
    db="$out/$device-$round.sqlite"
    rm -f "$db" "$db-wal" "$db-shm"
    start=$(date +%s.%N)
    $carb profile --device "$device:0" --keys "$out/keys.txt" --db "$db" --drift-probe none \
      > "$out/$device-$round.log" 2>&1
    end=$(date +%s.%N)
    echo "$device $round $(echo "$end - $start" | bc)" >> "$out/walls.txt"
  done
done

/usr/bin/python3 - "$out" "$rounds" <<'EOF'
import math, sqlite3, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])

def rows(path):
    db = sqlite3.connect(path)
    q = ("SELECT configuration_key, COALESCE(device_median_ms, wall_median_ms), "
         "engine_peak_bytes, process_peak_rss_bytes - baseline_rss_bytes, batch "
         "FROM measurement_view WHERE status = 'ok'")
    return {r[0]: r[1:] for r in db.execute(q)}

def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    for position, i in enumerate(order):
        r[i] = position
    return r

def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return num / den

engines = {}
for device in ("cpu", "torch"):
    per_round = [rows(f"{out}/{device}-{r}.sqlite") for r in range(1, rounds + 1)]
    keys = set.intersection(*(set(p) for p in per_round))
    engines[device] = {k: (statistics.median(p[k][0] for p in per_round), per_round[0][k][1],
                           statistics.median(p[k][2] for p in per_round), per_round[0][k][3])
                       for k in keys}
keys = sorted(set(engines["cpu"]) & set(engines["torch"]))
ratio = [engines["torch"][k][0] / engines["cpu"][k][0] for k in keys]
geo = math.exp(statistics.mean(math.log(r) for r in ratio))
print(f"{len(keys)} configurations measured ok by both engines, {rounds} rounds each, alternating")
print(f"latency torch / carb: geometric mean {geo:.3f}, min {min(ratio):.3f}, max {max(ratio):.3f}; "
      f"torch faster on {sum(r < 1 for r in ratio)} of {len(ratio)}")
print(f"Spearman between the engines' latencies: "
      f"{spearman([engines['cpu'][k][0] for k in keys], [engines['torch'][k][0] for k in keys]):.4f}")
by_batch = {}
for k, r in zip(keys, ratio):
    by_batch.setdefault(engines["cpu"][k][3], []).append(r)
print("by batch: " + ", ".join(
    f"{b}: {math.exp(statistics.mean(math.log(r) for r in v)):.3f} ({len(v)})"
    for b, v in sorted(by_batch.items())))
memory = [engines["torch"][k][1] / engines["cpu"][k][1] for k in keys]
rss = [engines["torch"][k][2] / engines["cpu"][k][2] for k in keys if engines["cpu"][k][2] > 0]
print(f"engine_peak_bytes torch / carb: median {statistics.median(memory):.3f} "
      f"({min(memory):.3f}-{max(memory):.3f}); peak RSS over baseline: median "
      f"{statistics.median(rss):.3f} ({min(rss):.3f}-{max(rss):.3f})")
walls = {}
for line in open(f"{out}/walls.txt"):
    device, _, seconds = line.split()
    walls.setdefault(device, []).append(float(seconds))
print("configurations per minute (campaign wall time): " + ", ".join(
    f"{d} {60 * len(keys) / statistics.median(w):.1f}" for d, w in sorted(walls.items())))
EOF
