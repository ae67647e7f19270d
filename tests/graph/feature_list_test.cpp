// kScalarFeatures is the one list of scalar analytic features: every place that names them
// (feature_value, the export, `carb space features`, the docs) follows it.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "carb/graph.hpp"

namespace carb {
namespace {

TEST(FeatureList, NamesAreUniqueAndEachHasOneMember) {
  std::set<std::string_view> names;
  for (const ScalarFeature& feature : kScalarFeatures) {
    EXPECT_FALSE(feature.name.empty());
    EXPECT_TRUE(names.insert(feature.name).second) << feature.name;
    EXPECT_NE(feature.integer == nullptr, feature.real == nullptr) << feature.name;
  }
}

TEST(FeatureList, FeatureValueReadsTheListedMember) {
  // ResNet-18 at 224 (timm: 11,689,512 parameters, 1.814 GMACs).
  const Features features = compute_features(build_network(parse_key("basic18_w1_ds_r224_b1_fp32")));
  EXPECT_EQ(feature_value(features, "params"), 11689512.0);
  EXPECT_EQ(feature_value(features, "macs"), 1814073344.0);
  EXPECT_EQ(feature_value(features, "flops"), 2.0 * 1814073344.0);
  EXPECT_EQ(feature_value(features, "arithmetic_intensity"), features.arithmetic_intensity);
  for (const ScalarFeature& feature : kScalarFeatures) {
    const double member = feature.integer != nullptr
                              ? static_cast<double>(features.*feature.integer)
                              : features.*feature.real;
    EXPECT_EQ(feature_value(features, feature.name), member) << feature.name;
    EXPECT_GT(member, 0) << feature.name;
  }
  EXPECT_FALSE(feature_value(features, "depth").has_value());
  EXPECT_FALSE(feature_value(features, "").has_value());
}

TEST(FeatureList, DocsDescribeEveryFeature) {
  std::ifstream in(std::string(CARB_SOURCE_DIR) + "/docs/features.md");
  ASSERT_TRUE(in) << "docs/features.md";
  std::stringstream text;
  text << in.rdbuf();
  for (const ScalarFeature& feature : kScalarFeatures) {
    EXPECT_NE(text.str().find("| `" + std::string(feature.name) + "` |"), std::string::npos)
        << "docs/features.md has no table row for " << feature.name;
  }
}

}  // namespace
}  // namespace carb
