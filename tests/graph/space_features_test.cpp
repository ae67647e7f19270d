#include <gtest/gtest.h>

#include "carb/graph.hpp"

namespace carb {
namespace {

const std::string kExamples = std::string(CARB_SOURCE_DIR) + "/examples/spaces/";

void expect_same(const Features& cached, const Features& direct, const std::string& key) {
  EXPECT_EQ(cached.params, direct.params) << key;
  EXPECT_EQ(cached.macs, direct.macs) << key;
  EXPECT_EQ(cached.flops, direct.flops) << key;
  EXPECT_EQ(cached.param_bytes, direct.param_bytes) << key;
  EXPECT_EQ(cached.activation_bytes, direct.activation_bytes) << key;
  EXPECT_EQ(cached.peak_activation_bytes, direct.peak_activation_bytes) << key;
  EXPECT_EQ(cached.engine_arena_bytes, direct.engine_arena_bytes) << key;
  EXPECT_EQ(cached.prepare_peak_bytes, direct.prepare_peak_bytes) << key;
  EXPECT_EQ(cached.torch_native_macs, direct.torch_native_macs) << key;
  EXPECT_DOUBLE_EQ(cached.arithmetic_intensity, direct.arithmetic_intensity) << key;
  EXPECT_EQ(cached.layer_counts.by_kind, direct.layer_counts.by_kind) << key;
  EXPECT_EQ(cached.widest_channels, direct.widest_channels) << key;
  EXPECT_EQ(cached.kernel_launches, direct.kernel_launches) << key;
  for (int c = 0; c < kLayerClassCount; ++c) {
    const auto& a = cached.layer_classes[static_cast<std::size_t>(c)];
    const auto& b = direct.layer_classes[static_cast<std::size_t>(c)];
    EXPECT_EQ(a.macs, b.macs) << key << " " << to_string(static_cast<LayerClass>(c));
    EXPECT_DOUBLE_EQ(a.bytes, b.bytes) << key << " " << to_string(static_cast<LayerClass>(c));
    EXPECT_EQ(a.count, b.count) << key << " " << to_string(static_cast<LayerClass>(c));
  }
  for (std::size_t b = 0; b < kRooflineBalances.size(); ++b) {
    EXPECT_DOUBLE_EQ(cached.roofline_flops[b], direct.roofline_flops[b]) << key;
  }
}

TEST(SpaceFeatures, CachedFeaturesEqualDirectOnes) {
  for (const char* name : {"paper.yaml", "million.yaml"}) {
    const Space space = Space::from_file(kExamples + name);
    SpaceFeatures features(space);
    for (std::uint64_t index : sample_random(space, 400, 11)) {
      const Config config = space.at(index);
      expect_same(features.at(index), compute_features(build_network(config)), to_key(config));
    }
  }
}

TEST(SpaceFeatures, GivesEachPointsConfigurationAsSpaceAtDoes) {
  for (const char* name : {"paper.yaml", "million.yaml", "cpu-demo.yaml"}) {
    const Space space = Space::from_file(kExamples + name);
    SpaceFeatures features(space);
    // Consecutive points (one architecture, then the next), and points in random order.
    std::vector<std::uint64_t> indices;
    for (std::uint64_t index = 0; index < 3 * space.points_per_architecture_resolution(); ++index) {
      indices.push_back(index);
    }
    for (std::uint64_t index : sample_random(space, 300, 5)) indices.push_back(index);
    for (std::uint64_t index : indices) {
      EXPECT_EQ(features.config_at(index), space.at(index)) << name << " " << index;
    }
  }
}

TEST(SpaceFeatures, ChecksConstraints) {
  const Space space = Space::from_file(kExamples + "cpu-demo.yaml");
  SpaceFeatures features(space);
  std::uint64_t valid = 0;
  for (std::uint64_t index = 0; index < space.size(); ++index) {
    const std::string violated = features.violated_constraint(index);
    const bool within = features.at(index).flops <= 5.0e9;
    EXPECT_EQ(violated.empty(), within);
    if (!violated.empty()) {
      EXPECT_EQ(violated, "max_flops");
    }
    valid += within ? 1 : 0;
  }
  EXPECT_GT(valid, 1500u);
  EXPECT_LT(valid, space.size());
}

}  // namespace
}  // namespace carb
