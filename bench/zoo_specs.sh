# Sourced by the zoo benches: writes OUT/zoo.yaml (torchvision's 10 families exported to ONNX in
# EXPORTS with their batch norms kept, at RESOLUTIONS x batches 1-16) and OUT/zoo-vgg.yaml (vgg11,
# whose classifier expects the 7x7 map of a 224-px input: that resolution only). EXPORTS must be
# an absolute path with the exports made (scripts/onnx_zoo.py).
#   write_zoo_specs OUT EXPORTS "[96, 128, 160, 192, 224]"
zoo_families="mobilenet_v2 mobilenet_v3_large efficientnet_b0 regnet_x_400mf resnext50_32x4d
              densenet121 shufflenet_v2_x1_0 mnasnet1_0 squeezenet1_1 resnet50"
write_zoo_specs() {
  local out=$1 exports=$2 resolutions=$3 f
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
