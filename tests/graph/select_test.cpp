#include <gtest/gtest.h>

#include "carb/graph.hpp"

namespace carb {
namespace {

const std::string kExamples = std::string(CARB_SOURCE_DIR) + "/examples/spaces/";

TEST(Select, ParsesSamplingNames) {
  EXPECT_EQ(parse_sampling("random"), Sampling::kRandom);
  EXPECT_EQ(parse_sampling("stratified"), Sampling::kStratified);
  EXPECT_FALSE(parse_sampling("Random").has_value());
  EXPECT_FALSE(parse_sampling("").has_value());
  for (Sampling sampling : {Sampling::kRandom, Sampling::kStratified}) {
    EXPECT_EQ(parse_sampling(to_string(sampling)), sampling);
  }
}

TEST(Select, ConstraintFilterAcceptsExactlyThePointsMeetingTheConstraints) {
  const Space unconstrained = Space::from_file(kExamples + "paper.yaml");
  SpaceFeatures paper(unconstrained);
  EXPECT_FALSE(constraint_filter(unconstrained, paper));

  const Space space = Space::from_file(kExamples + "cpu-demo.yaml");  // max_flops: 5e9
  SpaceFeatures features(space);
  const IndexFilter accept = constraint_filter(space, features);
  ASSERT_TRUE(accept);
  std::uint64_t accepted = 0;
  for (std::uint64_t index = 0; index < space.size(); ++index) {
    EXPECT_EQ(accept(index), features.at(index).flops <= 5.0e9) << index;
    accepted += accept(index) ? 1 : 0;
  }
  EXPECT_EQ(count_points(space, features, space.size()), accepted);
  EXPECT_LT(accepted, space.size());
  EXPECT_EQ(count_points(space, features, space.size() - 1), std::nullopt);
  // Without constraints nothing is walked: the size, however large.
  EXPECT_EQ(count_points(unconstrained, paper, 0), unconstrained.size());
}

TEST(Select, SamplesArePointsMeetingTheConstraintsDrawnAsTheSamplersDraw) {
  const Space space = Space::from_file(kExamples + "cpu-demo.yaml");
  SpaceFeatures features(space);
  const IndexFilter accept = constraint_filter(space, features);
  const auto random = sample_points(space, features, 50, 3, Sampling::kRandom);
  EXPECT_EQ(random, sample_random(space, 50, 3, accept));
  const auto stratified = sample_points(space, features, 50, 3, Sampling::kStratified);
  EXPECT_EQ(stratified, sample_stratified(space, 50, 3, accept));
  EXPECT_NE(random, stratified);
  for (const auto* sample : {&random, &stratified}) {
    ASSERT_EQ(sample->size(), 50u);
    for (std::uint64_t index : *sample) EXPECT_TRUE(features.violated_constraint(index).empty());
  }
  // More than there are: every point that meets the constraints.
  const auto all = sample_points(space, features, space.size(), 1, Sampling::kRandom);
  EXPECT_EQ(all.size(), *count_points(space, features, space.size()));
}

}  // namespace
}  // namespace carb
