#!/usr/bin/env bash
# carb's kernel model, nn-Meter's way, on the zoo (issue: any CNN via ONNX; figures in
# docs/benchmarks.md "Kernel by kernel"): `carb kernels` times every kernel of torchvision's
# families at 3 resolutions x 5 batches (vgg11 at 224 px) and of 60 ResNets of cpu-demo.yaml on
# this machine's CPU engine; then, per held-out family, `carb fit --kernels` fits a kernel model
# on the other families' kernels and `carb predict` sums the held-out family's planned kernels,
# scored against each configuration's measured whole pass (bench/kernel_lofo.py). It does so
# twice: on the zoo's and the ResNets' kernels alone, then with a kernel campaign of its own in
# every training set (bench/kernel_campaign.py: SYNTHETIC_MODELS random chains of every kernel
# kind and activation, SYNTHETIC_CONFIGS of them at random resolutions and batches; and
# PREACT_MODELS chains with pre-activation convolutions, whose stand-alone batch norms no other
# chain has, PREACT_CONFIGS of them).
#   bash bench/kernel_lofo.sh [out-dir (out/kernel-lofo)]
# FIT_ARGS are further carb fit options (a kernel model's default prior: additive; the timings
# are fitted as measured, `--drift on` divides them by their probe); ROUNDS (1) times the zoo's,
# vgg11's and the ResNets' configurations in that many rounds (`carb kernels --rounds`), whose
# medians are what the held-out families are scored against. The kernel
# timings in out-dir are reused when there (delete them to measure again). A quiet machine
# matters: nothing else should run while the kernels are timed.
set -euo pipefail
cd "$(dirname "$0")/.."
carb=${CARB:-build/src/cli/carb}
out=${1:-out/kernel-lofo}
source bench/zoo_specs.sh
write_zoo_specs "$out" "[96, 160, 224]"  # sets exports
# Each family's architecture hash (the key's prefix) and name.
: > "$out/families.txt"
for f in $zoo_families vgg11; do
  key=$($carb space show --onnx "$exports/$f-bn.onnx" --resolution 224 --batch 1 --format csv |
    sed -n 2p | cut -d, -f1)
  echo "${key%%_r224*} $f" >> "$out/families.txt"
done
/usr/bin/python3 bench/kernel_campaign.py "$out/synthetic" --models "${SYNTHETIC_MODELS:-200}"
/usr/bin/python3 bench/kernel_campaign.py "$out/synthetic" --models "${PREACT_MODELS:-40}" --preact
kernels() { # name, then the selection
  local name=$1
  shift
  [ -s "$out/$name.csv" ] ||
    $carb kernels "$@" --passes 5 --warmup 2 --format csv > "$out/$name.csv.part"
  [ -s "$out/$name.csv" ] || mv "$out/$name.csv.part" "$out/$name.csv"
}
rounds=(--rounds "${ROUNDS:-1}")
kernels zoo --spec "$out/zoo.yaml" "${rounds[@]}"
kernels vgg --spec "$out/zoo-vgg.yaml" "${rounds[@]}"
kernels resnet --spec examples/spaces/cpu-demo.yaml --sample 60 --seed 1 "${rounds[@]}"
kernels synthetic --spec "$out/synthetic/synthetic.yaml" --sample "${SYNTHETIC_CONFIGS:-1000}" \
  --seed 1
kernels preact --spec "$out/synthetic/preact.yaml" --sample "${PREACT_CONFIGS:-200}" --seed 1
measured=("$out/zoo.csv" "$out/vgg.csv" "$out/resnet.csv")
echo "without the kernel campaign:"
CARB="$carb" /usr/bin/python3 bench/kernel_lofo.py "$out" "${measured[@]}"
echo "with the kernel campaign in every training set:"
CARB="$carb" /usr/bin/python3 bench/kernel_lofo.py "$out" "${measured[@]}" \
  --train-only "$out/synthetic.csv" "$out/preact.csv"
