#!/usr/bin/env bash
# Where PyTorch's time goes against carb's engine (issue: measure what users deploy; figures in
# docs/torch.md, "Where PyTorch's time goes"): `carb kernels` on both engines over the same
# configurations, then the time per layer kind (convolutions by layer class), summed over them.
#   bash bench/engine_kernels.sh [out-dir (out/engine-kernels)] [sample (30)] [seed (3)]
set -euo pipefail
cd "$(dirname "$0")/.."
carb=${CARB:-build/src/cli/carb}
out=${1:-out/engine-kernels}
mkdir -p "$out"
$carb space list --spec examples/spaces/cpu-demo.yaml --sample "${2:-30}" --seed "${3:-3}" \
  --format csv | sed 1d | cut -d, -f1 > "$out/keys.txt"
$carb kernels --keys "$out/keys.txt" --passes 5 --warmup 2 --format csv > "$out/cpu.csv"
$carb kernels --keys "$out/keys.txt" --device torch:0 --passes 5 --warmup 2 --format csv \
  > "$out/torch.csv"
/usr/bin/python3 - "$out" <<'PY'
import collections, csv, math, sys
out = sys.argv[1]
def load(path):
    per_kind, passes = collections.Counter(), {}
    for r in csv.DictReader(open(path)):
        kind = "conv " + r["class"] if r["kind"] == "conv" else r["kind"]
        per_kind[kind] += float(r["median_ms"])
        passes[r["key"]] = float(r["pass_ms"])
    return per_kind, passes
carb, carb_pass = load(f"{out}/cpu.csv")
torch, torch_pass = load(f"{out}/torch.csv")
ratios = [math.log(torch_pass[k] / carb_pass[k]) for k in carb_pass]
print(f"{len(carb_pass)} configurations; PyTorch / carb's engine per pass, geometric mean "
      f"{math.exp(sum(ratios) / len(ratios)):.2f}")
total = sum(torch.values())
print("| layer kind | carb's engine, ms | PyTorch, ms | ratio | share of PyTorch's time |")
print("|---|---|---|---|---|")
for kind in sorted(set(carb) | set(torch), key=lambda k: -torch[k]):
    ratio = f"{torch[kind] / carb[kind]:.2f}" if carb[kind] > 0 else "(fused)"
    print(f"| {kind} | {carb[kind]:.1f} | {torch[kind]:.1f} | {ratio} | "
          f"{100 * torch[kind] / total:.1f}% |")
print(f"| all | {sum(carb.values()):.1f} | {total:.1f} | {total / sum(carb.values()):.2f} | |")
PY
