# Sourced by the zoo benches: exports torchvision's families to ONNX with their batch norms kept
# (scripts/onnx_zoo.py, weights=None) into ZOO_EXPORTS (build/onnx-zoo), sets `exports` to that
# folder's absolute path, and writes OUT/zoo.yaml (the 10 families at RESOLUTIONS x batches
# 1-16) and OUT/zoo-vgg.yaml (vgg11, whose classifier expects the 7x7 map of a 224-px input:
# that resolution only).
#   write_zoo_specs OUT "[96, 128, 160, 192, 224]"
zoo_families="mobilenet_v2 mobilenet_v3_large efficientnet_b0 regnet_x_400mf resnext50_32x4d
              densenet121 shufflenet_v2_x1_0 mnasnet1_0 squeezenet1_1 resnet50"
write_zoo_specs() {
  local out=$1 resolutions=$2 f
  exports=${ZOO_EXPORTS:-build/onnx-zoo}
  mkdir -p "$out"
  /usr/bin/python3 scripts/onnx_zoo.py "$exports" >/dev/null
  exports=$(cd "$exports" && pwd)
  {
    echo "name: zoo"
    echo "models:"
    for f in $zoo_families; do echo "  - $exports/$f-bn.onnx"; done
    echo "resolution: $resolutions"
    echo "batch: [1, 2, 4, 8, 16]"
  } > "$out/zoo.yaml"
  {
    echo "name: zoo-vgg"
    echo "models:"
    echo "  - $exports/vgg11-bn.onnx"
    echo "resolution: 224"
    echo "batch: [1, 2, 4, 8, 16]"
  } > "$out/zoo-vgg.yaml"
}
