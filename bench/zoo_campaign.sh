#!/usr/bin/env bash
# The zoo campaign (issue: any CNN via ONNX; docs/onnx.md "The zoo campaign", figures in
# docs/benchmarks.md "Zoo campaign"): torchvision's CNN families, exported to ONNX with their
# batch norms kept (scripts/onnx_zoo.py, weights=None), measured on this machine's CPU engine at
# 5 resolutions x 5 batches, beside a stratified sample of cpu-demo.yaml's ResNets measured on the
# same host in the same run, so that one predictor sees both without pooling two hosts.
#   [DEVICE=torch:0] bash bench/zoo_campaign.sh [out-dir (out/zoo)] [ResNet sample size (300)]
# DEVICE measures on another device than carb's CPU engine (cpu:0): torch:0 is PyTorch's eager
# operators (docs/torch.md).
# Writes out-dir/zoo.sqlite (resumable: run it again to finish an interrupted campaign). A quiet
# machine matters: latency on these VMs moves with anything else running.
set -euo pipefail
cd "$(dirname "$0")/.."
carb=${CARB:-build/src/cli/carb}
out=${1:-out/zoo}
resnets=${2:-300}
device=${DEVICE:-cpu:0}
source bench/zoo_specs.sh
write_zoo_specs "$out" "[96, 128, 160, 192, 224]"  # sets exports
db="$out/zoo.sqlite"
$carb profile --device "$device" --spec examples/spaces/cpu-demo.yaml --sample "$resnets" \
  --seed 1 --sampling stratified --db "$db"
$carb profile --device "$device" --spec "$out/zoo.yaml" --db "$db"
$carb profile --device "$device" --spec "$out/zoo-vgg.yaml" --db "$db"
