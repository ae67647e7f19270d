#include <gtest/gtest.h>

#include <map>
#include <set>

#include "carb/error.hpp"
#include "carb/space.hpp"

namespace carb {
namespace {

const std::string kExamples = std::string(CARB_SOURCE_DIR) + "/examples/spaces/";

TEST(SampleRandom, IsSeededDistinctAndInRange) {
  const Space space = Space::from_file(kExamples + "million.yaml");
  const auto first = sample_random(space, 2000, 42);
  EXPECT_EQ(first, sample_random(space, 2000, 42));
  EXPECT_NE(first, sample_random(space, 2000, 43));
  EXPECT_EQ(std::set<std::uint64_t>(first.begin(), first.end()).size(), 2000u);
  for (std::uint64_t index : first) EXPECT_LT(index, space.size());
}

TEST(SampleRandom, IsRoughlyUniform) {
  const Space space = Space::from_file(kExamples + "paper.yaml");
  const auto indices = sample_random(space, 8000, 1);
  std::map<int, int> batches;
  for (std::uint64_t index : indices) ++batches[space.at(index).batch];
  ASSERT_EQ(batches.size(), 9u);
  for (const auto& [batch, count] : batches) {
    EXPECT_NEAR(count, 8000.0 / 9, 100) << "batch " << batch;  // ~4 standard deviations
  }
}

TEST(SampleRandom, TakesEverythingWhenAskedForMore) {
  const Space space = Space::from_file(kExamples + "torchvision.yaml");
  const auto indices = sample_random(space, 50, 3);
  EXPECT_EQ(std::set<std::uint64_t>(indices.begin(), indices.end()),
            (std::set<std::uint64_t>{0, 1, 2, 3, 4}));
}

TEST(SampleStratified, BalancesEveryKnob) {
  const Space space = Space::from_file(kExamples + "paper.yaml");
  const std::uint64_t count = 1000;
  const auto indices = sample_stratified(space, count, 9);
  ASSERT_EQ(indices.size(), count);
  EXPECT_EQ(std::set<std::uint64_t>(indices.begin(), indices.end()).size(), count);
  std::vector<std::map<int, int>> per_axis(space.axes().size());
  std::map<BlockType, int> per_block;
  for (std::uint64_t index : indices) {
    const auto digits = space.digits(index);
    for (std::size_t axis = 0; axis < digits.size(); ++axis) ++per_axis[axis][digits[axis]];
    ++per_block[space.at(index).block];
  }
  // Block types are balanced first, then depths within each block type (8 basic, 4 bottleneck).
  EXPECT_EQ(per_block[BlockType::kBasic], 500);
  EXPECT_EQ(per_block[BlockType::kBottleneck], 500);
  for (std::size_t axis = 1; axis < per_axis.size(); ++axis) {
    const auto& counts = per_axis[axis];
    ASSERT_EQ(counts.size(), space.axes()[axis].values.size()) << space.axes()[axis].name;
    int low = static_cast<int>(count), high = 0;
    for (const auto& entry : counts) {
      low = std::min(low, entry.second);
      high = std::max(high, entry.second);
    }
    EXPECT_LE(high - low, 1) << space.axes()[axis].name;
  }
  for (const auto& [structure, n] : per_axis[0]) {
    const bool basic =
        space.structures()[static_cast<std::size_t>(structure)].block == BlockType::kBasic;
    EXPECT_NEAR(n, basic ? 500.0 / 8 : 500.0 / 4, 1.0) << structure;
  }
}

TEST(SampleStratified, HonoursTheFilterAndFallsBackToAllThatPass) {
  const Space space = Space::from_file(kExamples + "paper.yaml");
  auto only_batch_one = [&](std::uint64_t index) { return space.at(index).batch == 1; };
  const auto indices = sample_stratified(space, 300, 5, only_batch_one);
  ASSERT_EQ(indices.size(), 300u);
  for (std::uint64_t index : indices) EXPECT_EQ(space.at(index).batch, 1);
  // Only 1,920 points pass; asking for more returns exactly those.
  const auto all = sample_random(space, 5000, 5, only_batch_one);
  EXPECT_EQ(all.size(), 17280u / 9);
  EXPECT_EQ(std::set<std::uint64_t>(all.begin(), all.end()).size(), all.size());
}

}  // namespace
}  // namespace carb

namespace carb {
namespace {

TEST(Sample, RefusesSamplesTooLargeToHold) {
  const Space space = Space::from_yaml(
      "block: basic\nstage_blocks: [[1,2,3,4,5,6,7,8], [1,2,3,4,5,6,7,8], [1,2,3,4,5,6,7,8], "
      "[1,2,3,4,5,6,7,8]]\nwidth: [0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2]\n"
      "resolution: [32, 64, 96, 128, 160, 192, 224, 256]\nbatch: [1, 2, 4, 8, 16, 32, 64, 128]\n"
      "precision: [fp32, fp16, bf16]\n"
      "stage_widths: [[16, 32], [32, 64], [64, 128], [128, 256]]\n",
      "big.yaml");
  ASSERT_GT(space.size(), 60'000'000u);
  try {
    sample_random(space, 60'000'000, 1);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("too large: at most 50000000"), std::string::npos);
  }
  EXPECT_EQ(sample_stratified(space, 1000, 1).size(), 1000u);
}

}  // namespace
}  // namespace carb
