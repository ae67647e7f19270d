// torchvision's CNNs exported to ONNX by PyTorch (scripts/onnx_zoo.py, run once by the ctest
// fixture onnx_zoo into <build>/onnx-zoo) imported by carb, against PyTorch's own figures
// (truths.json): parameters exactly as torchvision counts them with batch norms kept, MACs as
// forward hooks count them (the goal: within 1%; they agree exactly), layer counts by kind against
// the modules a forward pass calls, content hashes across exports, other resolutions, and whole
// models on the PyTorch backend against carb's engine. Where PyTorch is missing they skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "carb/backend.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "reference.hpp"
#include "zoo.hpp"

namespace carb {
namespace {

using carb_test::kZooModels;
using carb_test::zoo_file;
using json = nlohmann::json;

// Imports a zoo file and builds it at `resolution` (0: its own), batch 1.
Network zoo_network(const Architecture& architecture, int resolution = 0) {
  const std::string hash = register_architecture(architecture);
  return build_network(imported_config(*find_architecture(hash),
                                       resolution > 0 ? resolution : architecture.native_resolution,
                                       1, Precision::kFp32));
}

int count(const Architecture& architecture, LayerKind kind) {
  int n = 0;
  for (const Layer& layer : architecture.layers) n += layer.kind == kind ? 1 : 0;
  return n;
}

int calls(const json& truths, const std::string& module) {
  return truths["module_calls"].value(module, 0);
}

// The learnable values an export's graph holds, counted from the file by onnx's Python package
// (scripts/onnx_zoo.py, independently of carb), where it was installed.
void expect_learnable_in_file(const json& truths, const std::string& variant, std::int64_t params,
                              const std::string& name) {
  if (!truths.contains("learnable_in_file") || !truths["learnable_in_file"].contains(variant)) {
    return;  // no onnx package where the zoo was exported
  }
  EXPECT_EQ(params, truths["learnable_in_file"][variant].get<std::int64_t>()) << name << variant;
}

class Zoo : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (const std::string why = carb_test::zoo_missing(); !why.empty()) GTEST_SKIP() << why;
  }
};

TEST_P(Zoo, ParamsAreTorchvisionsWithBatchNormsKept) {
  const std::string& name = GetParam();
  const json& truths = carb_test::zoo_truths()["models"][name];
  const Architecture kept = import_model(zoo_file(name + "-bn.onnx"));
  const Features features = compute_features(zoo_network(kept));
  EXPECT_EQ(features.params, truths["params"].get<std::int64_t>()) << name;
  expect_learnable_in_file(truths, "bn", features.params, name);
  EXPECT_EQ(count(kept, LayerKind::kBatchNorm), calls(truths, "BatchNorm2d")) << name;
}

TEST_P(Zoo, FoldedParamsAreWhatTheGraphHolds) {
  const std::string& name = GetParam();
  const json& truths = carb_test::zoo_truths()["models"][name];
  const Architecture kept = import_model(zoo_file(name + "-bn.onnx"));
  const Architecture folded = import_model(zoo_file(name + "-folded.onnx"));
  const std::int64_t params = compute_features(zoo_network(folded)).params;
  expect_learnable_in_file(truths, "folded", params, name);
  // Each batch norm folded into the conv before it leaves that conv's bias: C values for 2C.
  std::int64_t folded_channels = 0;
  const Network kept_network = zoo_network(kept);
  for (const Layer& layer : kept_network.layers) {
    if (layer.kind != LayerKind::kBatchNorm) continue;
    const Layer& before = kept_network.layers[static_cast<std::size_t>(layer.inputs[0] - 1)];
    if (layer.inputs[0] > 0 && before.kind == LayerKind::kConv && !before.bias) {
      folded_channels += layer.params / 2;
    }
  }
  EXPECT_EQ(params, truths["params"].get<std::int64_t>() - folded_channels) << name;
  if (calls(truths, "BatchNorm2d") == 0) {
    // Nothing to fold (vgg11, squeezenet1_1): both exports are one architecture.
    EXPECT_EQ(folded.hash, kept.hash) << name;
    EXPECT_EQ(folded_channels, 0) << name;
    return;
  }
  EXPECT_GT(folded_channels, 0) << name;
  EXPECT_LT(count(folded, LayerKind::kBatchNorm), count(kept, LayerKind::kBatchNorm)) << name;
  EXPECT_NE(folded.hash, kept.hash) << name;
}

TEST_P(Zoo, MacsAreWhatForwardHooksCount) {
  const std::string& name = GetParam();
  const json& truths = carb_test::zoo_truths()["models"][name];
  for (const char* variant : {"-bn.onnx", "-folded.onnx"}) {
    const Architecture a = import_model(zoo_file(name + variant));
    for (const auto& [resolution, hooked] : truths["macs"].items()) {
      if (name == "vgg11" && resolution != "224") continue;  // a fixed fc input (below)
      const double macs =
          static_cast<double>(compute_features(zoo_network(a, std::stoi(resolution))).macs);
      // The goal is 1%; carb counts what the hooks count (conv and fc multiply-accumulates), so
      // they agree exactly.
      EXPECT_EQ(macs, hooked.get<double>()) << name << variant << " at " << resolution << " px";
    }
  }
}

TEST_P(Zoo, LayerCountsAreTheModulesAForwardPassCalls) {
  const std::string& name = GetParam();
  const json& truths = carb_test::zoo_truths()["models"][name];
  const Architecture a = import_model(zoo_file(name + "-bn.onnx"));
  EXPECT_EQ(count(a, LayerKind::kConv), calls(truths, "Conv2d")) << name;
  EXPECT_EQ(count(a, LayerKind::kFullyConnected), calls(truths, "Linear")) << name;
  EXPECT_EQ(count(a, LayerKind::kSwish), calls(truths, "SiLU")) << name;
  EXPECT_EQ(count(a, LayerKind::kHardSwish), calls(truths, "Hardswish")) << name;
  EXPECT_EQ(count(a, LayerKind::kHardSigmoid), calls(truths, "Hardsigmoid")) << name;
  EXPECT_EQ(count(a, LayerKind::kSigmoid), calls(truths, "Sigmoid")) << name;
  EXPECT_EQ(count(a, LayerKind::kClip), calls(truths, "ReLU6")) << name;
  EXPECT_EQ(count(a, LayerKind::kMaxPool), calls(truths, "MaxPool2d")) << name;
  const Features f = compute_features(zoo_network(a));
  int classified = 0;
  for (const LayerClassTotals& totals : f.layer_classes) classified += totals.count;
  EXPECT_EQ(classified, static_cast<int>(a.layers.size())) << name;
  EXPECT_EQ(f.output_channels, 1000) << name;
}

TEST_P(Zoo, OtherResolutionsBuildForFullyConvolutionalNetworks) {
  const std::string& name = GetParam();
  const Architecture a = import_model(zoo_file(name + "-bn.onnx"));
  EXPECT_EQ(a.native_resolution, 224);
  if (name != "vgg11") {
    for (const int resolution : {96, 160, 320}) {
      const Network network = zoo_network(a, resolution);
      EXPECT_EQ(network.tensors[static_cast<std::size_t>(network.output)].c, 1000) << name;
    }
    return;
  }
  // vgg11's classifier takes 512 x 7 x 7 values: at 160 px its features are 5 x 5.
  try {
    (void)zoo_network(a, 160);
    ADD_FAILURE() << "vgg11 built at 160 px";
  } catch (const Error& error) {
    const std::string what = error.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find("at resolution 160: layer /classifier/classifier.0/Gemm (fc) has weights "
                        "for 25088 inputs but gets 1x512x5x5 (12800 values per image)"),
              std::string::npos)
        << what;
  }
}

// The whole exported model, batch norms kept and folded, run by the PyTorch backend (ATen's
// operators, as torchvision's forward calls them) and by carb's oneDNN engine on the same seeded
// weights and input: the same output (the conformance suite checks each layer kind of both
// against the float64 reference on small networks).
TEST_P(Zoo, PyTorchBackendComputesWhatCarbsEngineDoesOnTheWholeModel) {
  const std::vector<std::string> names = backend_names();
  if (std::find(names.begin(), names.end(), "torch") == names.end()) {
    GTEST_SKIP() << "this build has no PyTorch backend";
  }
  const auto torch = make_backend_for("torch:0");
  if (torch->devices().empty()) GTEST_SKIP() << torch->unavailable_reason();
  const auto cpu = make_backend_for("cpu:0");
  const std::string& name = GetParam();
  for (const char* variant : {"-bn.onnx", "-folded.onnx"}) {
    const Architecture a = import_model(zoo_file(name + variant));
    const std::string hash = register_architecture(a);
    const Config config =
        imported_config(*find_architecture(hash), name == "vgg11" ? 224 : 64, 1, Precision::kFp32);
    std::vector<std::vector<float>> outputs;
    for (const Device* device : {torch->devices().front().get(), cpu->devices().front().get()}) {
      const auto session = device->prepare(config, 1);
      session->run();
      session->sync();
      outputs.push_back(session->read_output());
    }
    ASSERT_EQ(outputs[0].size(), 1000u) << name << variant;
    ASSERT_EQ(outputs[1].size(), 1000u) << name << variant;
    const std::vector<double> engine(outputs[1].begin(), outputs[1].end());
    EXPECT_LE(testing::relative_error(outputs[0], engine), 1e-4) << name << variant;
  }
}

INSTANTIATE_TEST_SUITE_P(Torchvision, Zoo, ::testing::ValuesIn(kZooModels),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

TEST(ZooHash, SameArchitectureSameHashAcrossExports) {
  if (const std::string why = carb_test::zoo_missing(); !why.empty()) GTEST_SKIP() << why;
  // Re-exported with other random weights (seed 1): other files, one architecture.
  for (const std::string name : {"squeezenet1_1", "shufflenet_v2_x1_0"}) {
    const Architecture first = import_model(zoo_file(name + "-bn.onnx"));
    const Architecture again = import_model(zoo_file("seed1/" + name + "-bn.onnx"));
    EXPECT_EQ(again.hash, first.hash) << name;
    EXPECT_EQ(again.name, first.name);
    EXPECT_NE(again.source, first.source);
  }
  // Exported at 160 px: the hash is not of the native resolution.
  const Architecture small = import_model(zoo_file("r160/squeezenet1_1-bn.onnx"));
  EXPECT_EQ(small.native_resolution, 160);
  EXPECT_EQ(small.hash, import_model(zoo_file("squeezenet1_1-bn.onnx")).hash);
  // Opset 17 exports hard swish as HardSwish, opset 13 as HardSigmoid times its input.
  EXPECT_EQ(import_model(zoo_file("opset17/mobilenet_v3_large-bn.onnx")).hash,
            import_model(zoo_file("mobilenet_v3_large-bn.onnx")).hash);
  // Eleven models: nine with batch norms, whose two exports differ, and two without: twenty
  // architectures, twenty hashes.
  std::map<std::string, std::string> seen;
  for (const std::string& name : kZooModels) {
    for (const char* variant : {"-bn.onnx", "-folded.onnx"}) {
      seen.emplace(import_model(zoo_file(name + variant)).hash, name + variant);
    }
  }
  EXPECT_EQ(seen.size(), 20u);
}

TEST(ZooCounts, ShuffleNetSwishAndHardSwishAsTorchvisionBuildsThem) {
  if (const std::string why = carb_test::zoo_missing(); !why.empty()) GTEST_SKIP() << why;
  const Architecture shufflenet = import_model(zoo_file("shufflenet_v2_x1_0-bn.onnx"));
  EXPECT_EQ(count(shufflenet, LayerKind::kChannelShuffle), 16);  // one per block: 4 + 8 + 4
  EXPECT_EQ(count(shufflenet, LayerKind::kSlice), 2 * 13);       // split of stride-1 blocks
  const Architecture efficientnet = import_model(zoo_file("efficientnet_b0-bn.onnx"));
  // stem and head, and per block depthwise and squeeze-excite; expansion in 15 of 16 blocks
  EXPECT_EQ(count(efficientnet, LayerKind::kSwish), 2 + 2 * 16 + 15);
  EXPECT_EQ(count(efficientnet, LayerKind::kMul), 16);  // squeeze-excite gates
  const Architecture mobilenet_v3 = import_model(zoo_file("mobilenet_v3_large-bn.onnx"));
  // expansion and depthwise of the last nine blocks, stem, last conv and classifier
  EXPECT_EQ(count(mobilenet_v3, LayerKind::kHardSwish), 2 * 9 + 3);
  const Features f = compute_features(zoo_network(mobilenet_v3));
  EXPECT_EQ(f.layer_classes[static_cast<std::size_t>(LayerClass::kConvDepthwise)].count, 15);
  const Architecture resnext = import_model(zoo_file("resnext50_32x4d-bn.onnx"));
  const Features r = compute_features(zoo_network(resnext));
  EXPECT_EQ(r.layer_classes[static_cast<std::size_t>(LayerClass::kConvGrouped)].count, 16);
}

}  // namespace
}  // namespace carb
