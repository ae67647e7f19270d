// Specs that list model files as their architectures (docs/spaces.md, docs/onnx.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "carb/error.hpp"
#include "carb/graph.hpp"

namespace carb {
namespace {

const std::string kData = std::string(CARB_SOURCE_DIR) + "/tests/graph/data/";

std::string write_spec(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(SpecModels, ModelsAreTheArchitecturesAndResolutionBatchPrecisionTheKnobs) {
  const Space space = Space::from_yaml("name: zoo\n"
                                       "models: [" + kData + "tiny_cnn.onnx]\n"
                                       "resolution: [32, 64]\n"
                                       "batch: [1, 4]\n"
                                       "precision: [fp32, bf16]\n",
                                       "zoo.yaml");
  ASSERT_EQ(space.models().size(), 1u);
  EXPECT_EQ(space.models()[0].name, "tiny_cnn");
  EXPECT_EQ(space.size(), 8u);
  const std::string hash = space.models()[0].hash;
  EXPECT_EQ(hash, architecture_hash(import_model(kData + "tiny_cnn.onnx")));
  const Config first = space.at(0);
  EXPECT_EQ(to_key(first), "graph-" + hash + "_r32_b1_fp32");
  EXPECT_EQ(to_key(space.at(7)), "graph-" + hash + "_r64_b4_bf16");
  for (std::uint64_t index = 0; index < space.size(); ++index) {
    EXPECT_EQ(space.index_of(space.at(index)), index);
    EXPECT_EQ(space.index_of(parse_key(to_key(space.at(index)))), index);
  }
  // Every point builds, and the space's cached features agree with a fresh computation.
  SpaceFeatures cached(space);
  for (std::uint64_t index = 0; index < space.size(); ++index) {
    const Features fresh = compute_features(build_network(space.at(index)));
    EXPECT_EQ(cached.at(index).macs, fresh.macs);
    EXPECT_EQ(cached.at(index).peak_activation_bytes, fresh.peak_activation_bytes);
  }
  EXPECT_EQ(compute_features(build_network(first)).params, 386);
  EXPECT_EQ(compute_features(build_network(first)).macs, 73808);
}

TEST(SpecModels, PathsAreRelativeToTheSpec) {
  std::filesystem::copy_file(kData + "tiny_cnn.onnx", ::testing::TempDir() + "here.onnx",
                             std::filesystem::copy_options::overwrite_existing);
  const Space space =
      Space::from_file(write_spec("relative.yaml", "models: [here.onnx]\nresolution: 32\n"));
  ASSERT_EQ(space.models().size(), 1u);
  EXPECT_EQ(space.models()[0].name, "here");
}

TEST(SpecModels, BadModelEntriesNameTheSpecLineAndTheProblem) {
  const std::string model = kData + "tiny_cnn.onnx";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"models: [" + model + "]\nresolution: 32\nwidth: [1, 2]\n",
       "zoo.yaml:3:8: 'width' is a ResNet knob"},
      {"models: [" + model + "]\n", "zoo.yaml: missing knob 'resolution'"},
      {"models: [" + model + ", " + model + "]\nresolution: 32\n", "twice"},
      {"models: [missing.onnx]\nresolution: 32\n", "zoo.yaml:1:10: missing.onnx: cannot open"},
      {"models: [" + kData + "SOURCE.txt]\nresolution: 32\n", "not a model file carb reads"},
      {"models: [" + model + "]\nresolution: 0\n", "resolution must be 1..8192"},
  };
  for (const auto& [text, expected] : cases) {
    try {
      (void)Space::from_yaml(text, "zoo.yaml");
      ADD_FAILURE() << text << " parsed";
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::kInput);
      EXPECT_NE(std::string(error.what()).find(expected), std::string::npos)
          << "expected '" << expected << "' in: " << error.what();
    }
  }
}

}  // namespace
}  // namespace carb
