// Where the fixture onnx_zoo (scripts/onnx_zoo.py) exported torchvision's models, and what it
// wrote beside them (truths.json), for the tests in tests/graph/zoo.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace carb_test {

/// The models scripts/onnx_zoo.py exports, each as <name>-bn.onnx and <name>-folded.onnx.
inline const std::vector<std::string> kZooModels = {
    "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "regnet_x_400mf", "resnext50_32x4d",
    "densenet121",  "shufflenet_v2_x1_0", "mnasnet1_0",      "vgg11",          "squeezenet1_1",
    "resnet50"};

/// A file of the zoo: CARB_ONNX_ZOO_DIR/name.
inline std::string zoo_file(const std::string& name) {
  return std::string(CARB_ONNX_ZOO_DIR) + "/" + name;
}

/// Why the zoo is not there (the reason a test skips), or empty when it is.
inline std::string zoo_missing() {
  if (std::ifstream skipped(zoo_file("SKIPPED")); skipped) {
    std::stringstream reason;
    reason << skipped.rdbuf();
    std::string text = reason.str();
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return "no ONNX exports of torchvision's models: " + text;
  }
  if (!std::filesystem::exists(zoo_file("truths.json"))) {
    return "no ONNX exports of torchvision's models in " + std::string(CARB_ONNX_ZOO_DIR) +
           ": ctest's fixture onnx_zoo writes them (ctest -R onnx_zoo)";
  }
  return {};
}

/// truths.json of the zoo's main directory: per model, PyTorch's params, MACs and module calls.
inline const nlohmann::json& zoo_truths() {
  static const nlohmann::json truths = [] {
    std::ifstream in(zoo_file("truths.json"));
    return nlohmann::json::parse(in);
  }();
  return truths;
}

}  // namespace carb_test
