#include <gtest/gtest.h>

#include <set>

#include "carb/error.hpp"
#include "carb/space.hpp"

namespace carb {
namespace {

const std::string kExamples = std::string(CARB_SOURCE_DIR) + "/examples/spaces/";

std::string error_of(const std::string& yaml) {
  try {
    Space::from_yaml(yaml, "spec.yaml");
  } catch (const Error& error) {
    EXPECT_EQ(error.exit_code(), 2);
    return error.what();
  }
  return "(no error)";
}

TEST(Spec, ShippedSpacesHaveTheirSizes) {
  EXPECT_EQ(Space::from_file(kExamples + "paper.yaml").size(), 17280u);
  EXPECT_EQ(Space::from_file(kExamples + "torchvision.yaml").size(), 5u);
  EXPECT_GE(Space::from_file(kExamples + "million.yaml").size(), 1000000u);
  EXPECT_GT(Space::from_file(kExamples + "cpu-demo.yaml").size(), 1500u);
}

TEST(Spec, TorchvisionSpaceIsExactlyTheFiveResnets) {
  const Space space = Space::from_file(kExamples + "torchvision.yaml");
  std::set<std::string> keys;
  for (std::uint64_t i = 0; i < space.size(); ++i) keys.insert(to_key(space.at(i)));
  EXPECT_EQ(keys, (std::set<std::string>{"basic18_w1_ds_r224_b1_fp32", "basic34_w1_ds_r224_b1_fp32",
                                         "bottleneck50_w1_ds_r224_b1_fp32",
                                         "bottleneck101_w1_ds_r224_b1_fp32",
                                         "bottleneck152_w1_ds_r224_b1_fp32"}));
}

TEST(Spec, EveryPaperPointHasAUniqueKeyThatParsesBack) {
  const Space space = Space::from_file(kExamples + "paper.yaml");
  std::set<std::string> keys;
  for (std::uint64_t index = 0; index < space.size(); ++index) {
    const Config config = space.at(index);
    const std::string key = to_key(config);
    ASSERT_EQ(parse_key(key), config) << key;
    ASSERT_EQ(to_key(parse_key(key)), key);
    ASSERT_EQ(space.index_of(config), index) << key;
    keys.insert(key);
  }
  EXPECT_EQ(keys.size(), space.size());
}

TEST(Spec, MillionSpaceIndexAndKeyRoundTrip) {
  const Space space = Space::from_file(kExamples + "million.yaml");
  for (std::uint64_t index : sample_random(space, 5000, 7)) {
    const Config config = space.at(index);
    ASSERT_EQ(parse_key(to_key(config)), config) << to_key(config);
    ASSERT_EQ(space.index_of(config), index);
  }
  // The last axes vary fastest: neighbours differ only in precision.
  EXPECT_EQ(space.at(0).precision, Precision::kFp32);
  EXPECT_EQ(space.at(1).precision, Precision::kFp16);
  EXPECT_EQ(space.at(1).batch, space.at(0).batch);
  EXPECT_EQ(space.points_per_architecture_resolution(), 27u);
}

TEST(Spec, IndexOfRejectsPointsOutsideTheGrid) {
  const Space space = Space::from_file(kExamples + "paper.yaml");
  Config config = space.at(100);
  config.resolution = 33;
  EXPECT_FALSE(space.index_of(config).has_value());
  config = space.at(100);
  config.classes = 10;
  EXPECT_FALSE(space.index_of(config).has_value());
}

TEST(Spec, ScalarsAreOneValueListsAndDefaultsAreDocumented) {
  const Space space = Space::from_yaml("block: basic\ndepth: 18\nresolution: 64\n", "s.yaml");
  ASSERT_EQ(space.size(), 1u);
  EXPECT_EQ(to_key(space.at(0)), "basic18_w1_ds_r64_b1_fp32");
}

TEST(Spec, StageBlocksAndWidthsMakeAxes) {
  const Space space = Space::from_yaml(
      "block: [basic, bottleneck]\n"
      "stage_blocks: [[1, 2], 1, [1, 3]]\n"
      "stage_widths: [16, [32, 48], 64]\n"
      "early_downsample: false\n"
      "resolution: 32\n"
      "classes: 10\n",
      "s.yaml");
  EXPECT_EQ(space.size(), 2u * 2 * 1 * 2 * 2);
  const Config last = space.at(space.size() - 1);
  EXPECT_EQ(last.block, BlockType::kBottleneck);
  EXPECT_EQ(last.stage_blocks, (std::vector<int>{2, 1, 3}));
  EXPECT_EQ(last.stage_widths, (std::vector<int>{16, 48, 64}));
  EXPECT_EQ(last.classes, 10);
  EXPECT_EQ(to_key(last), "bottleneck20s2.1.3_c16.48.64_w1_nods_r32_b1_fp32_k10");
}

TEST(Spec, Constraints) {
  const Space space = Space::from_yaml(
      "block: basic\ndepth: 18\nresolution: 64\nconstraints:\n  max_params: 1.2e7\n"
      "  max_flops: 5e9\n",
      "s.yaml");
  ASSERT_EQ(space.constraints().size(), 2u);
  EXPECT_EQ(space.constraints()[0].feature, "params");
  EXPECT_DOUBLE_EQ(space.constraints()[0].max_value, 1.2e7);
}

TEST(SpecErrors, PointAtFileLineAndColumn) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"block: [basic\ndepth: 18\n",
       "spec.yaml:2:6: YAML syntax error: end of sequence flow not found"},
      {"block: basic\ndepth: 18\nresolution: 64\nwidht: 1\n",
       "spec.yaml:4:1: unknown knob 'widht' (did you mean 'width'?)"},
      {"block: basic\ndepth: 18\nresolution: sixty\n",
       "spec.yaml:3:13: resolution must be an integer, not 'sixty'"},
      {"block: basic\ndepth: 18\nresolution: 64\nbatch: []\n",
       "spec.yaml:4:8: batch is an empty list"},
      {"block: basic\ndepth: 18\nresolution: 64\nwidth: [1, 0]\n",
       "spec.yaml:4:8: width multiplier must be > 0"},
      {"block: basic\ndepth: [18, 19]\nresolution: 64\n",
       "spec.yaml:2:13: depth 19 cannot be built from basic blocks"},
      {"block: bottleneck\ndepth: 18\nresolution: 64\n",
       "spec.yaml:2:8: depth 18 cannot be built from bottleneck blocks"},
      {"block: basic\ndepth: 18\nresolution: [64, 16]\n",
       "spec.yaml:3:18: resolution 16 is too small for early downsampling and 4 stages: needs at "
       "least 32 px"},
      {"block: basic\ndepth: 18\nresolution: 64\nbatch: [1, 2, 1]\n",
       "spec.yaml:4:15: batch lists 1 twice"},
      {"block: basic\ndepth: 18\nresolution: 64\nprecision: fp64\n",
       "spec.yaml:4:12: precision 'fp64' is not fp32, fp16 or bf16"},
      {"block: basic\ndepth: 18\nresolution: 64\nearly_downsample: maybe\n",
       "spec.yaml:4:19: early_downsample values are true or false, not 'maybe'"},
      {"block: basic\ndepth: 18\n", "spec.yaml: missing knob 'resolution'"},
      {"block: basic\nresolution: 64\n", "spec.yaml: missing knob 'depth'"},
      {"- 1\n- 2\n", "spec.yaml:1:1: a spec is a YAML mapping"},
      {"block: basic\ndepth: 18\nresolution: 64\nwidth: [[1]]\n",
       "spec.yaml:4:9: width values must be single values"},
      {"block: basic\ndepth: 18\nresolution: 64\nbatch: 0\n",
       "spec.yaml:4:8: batch must be 1..65536"},
      {"block: basic\nstage_blocks: [1, 1, 1]\nresolution: 64\n",
       "with 3 stages, give stage_widths"},
      {"block: basic\ndepth: 18\nstage_widths: [8, 16]\nresolution: 64\n",
       "spec.yaml:3:15: stage_widths has 2 entries but the networks have 4 stages"},
      {"block: basic\ndepth: 18\nresolution: 64\nconstraints:\n  max_parms: 5\n",
       "spec.yaml:5:3: unknown constraint 'max_parms' (did you mean 'max_params'?)"},
      {"block: basic\ndepth: 18\nresolution: 64\nconstraints:\n  max_flops: -5\n",
       "spec.yaml:5:14: max_flops must be > 0"},
      {"depth: {basic: 18, tiny: 4}\nresolution: 64\n",
       "spec.yaml:1:20: block type 'tiny' is not basic or bottleneck"},
      {"block: basic\ndepth: 18\nresolution: 64\nwidth: 64\nstage_widths: [64, 128, 256, 1024]\n",
       "more than 65536 channels"},
  };
  for (const auto& [yaml, expected] : cases) {
    const std::string message = error_of(yaml);
    EXPECT_NE(message.find(expected), std::string::npos)
        << "spec:\n"
        << yaml << "gave: " << message << "\nexpected: " << expected;
  }
}

TEST(SpecErrors, UnreadableFile) {
  try {
    Space::from_file("/nonexistent/space.yaml");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), "/nonexistent/space.yaml: cannot open spec file");
  }
}

}  // namespace
}  // namespace carb
