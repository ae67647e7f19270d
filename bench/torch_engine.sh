#!/usr/bin/env bash
# carb's oneDNN engine (cpu:0) against the PyTorch backend (torch:0) on the same configurations,
# side by side (docs/torch.md; figures in docs/benchmarks.md, "PyTorch backend against carb's
# engine"): a stratified sample of cpu-demo.yaml, cut into chunks of CHUNK configurations that the
# two engines measure alternately (cpu chunk 1, torch chunk 1, cpu chunk 2, ...), all into one
# database, so that the machine's drift over minutes falls on both engines alike. Then per
# configuration torch / carb latency (geometric mean, range, by batch), Spearman between the
# engines, engine_peak_bytes and peak-RSS ratios, and configurations per minute per engine.
# data/cpu-engines.sqlite.xz is its output (data/README.md). Needs a build with the PyTorch
# backend. Run it on a quiet machine.
#   bash bench/torch_engine.sh [out-dir (out/bench-torch)] [N (40)] [CHUNK (20)] [SEED (11)]
set -euo pipefail
cd "$(dirname "$0")/.."
carb=${CARB:-build/src/cli/carb}
out=${1:-out/bench-torch}
n=${2:-40}
chunk=${3:-20}
seed=${4:-11}
mkdir -p "$out"
devices=$($carb devices 2>&1 || true)
if ! grep -q '^torch:0 ' <<< "$devices"; then
  echo "torch_engine: this build has no torch:0 device ($carb devices says why)" >&2
  exit 2
fi
db="$out/engines.sqlite"
rm -f "$db" "$db-wal" "$db-shm" "$out/walls.txt" "$out"/chunk-*
$carb space list --spec examples/spaces/cpu-demo.yaml --sample "$n" --seed "$seed" \
  --sampling stratified --format csv | tail -n +2 | cut -d, -f1 > "$out/keys.txt"
split -l "$chunk" -d -a 3 "$out/keys.txt" "$out/chunk-"
for part in "$out"/chunk-*; do
  for device in cpu torch; do
    start=$(date +%s.%N)
    $carb profile --device "$device:0" --keys "$part" --db "$db" \
      >> "$out/$device.log" 2>&1
    end=$(date +%s.%N)
    echo "$device $(wc -l < "$part") $(echo "$end - $start" | bc)" >> "$out/walls.txt"
  done
done

/usr/bin/python3 - "$db" "$out/walls.txt" <<'EOF'
import math, sqlite3, statistics, sys
db_path, walls_path = sys.argv[1], sys.argv[2]

def rows(engine):
    db = sqlite3.connect(db_path)
    q = ("SELECT configuration_key, COALESCE(device_median_ms, wall_median_ms), "
         "engine_peak_bytes, process_peak_rss_bytes - baseline_rss_bytes, batch "
         "FROM measurement_view WHERE status = 'ok' AND "
         "(instr(device_fingerprint, 'PyTorch') > 0) = ?")
    return {r[0]: r[1:] for r in db.execute(q, (engine == "torch",))}

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

engines = {device: rows(device) for device in ("cpu", "torch")}
keys = sorted(set(engines["cpu"]) & set(engines["torch"]))
ratio = [engines["torch"][k][0] / engines["cpu"][k][0] for k in keys]
geo = math.exp(statistics.mean(math.log(r) for r in ratio))
print(f"{len(keys)} configurations measured ok by both engines, alternating chunk by chunk")
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
for line in open(walls_path):
    device, count, seconds = line.split()
    total = walls.setdefault(device, [0, 0.0])
    total[0] += int(count)
    total[1] += float(seconds)
print("configurations per minute (campaign wall time): " + ", ".join(
    f"{d} {60 * c / s:.1f}" for d, (c, s) in sorted(walls.items())))
EOF
