#include <gtest/gtest.h>

#include "carb/error.hpp"
#include "carb/space.hpp"

namespace carb {
namespace {

std::string error_of(const std::string& key) {
  try {
    parse_key(key);
  } catch (const Error& error) {
    EXPECT_EQ(error.exit_code(), 2);
    return error.what();
  }
  return "";
}

TEST(Key, TorchvisionResnetsHaveShortKeys) {
  Config config;
  config.block = BlockType::kBottleneck;
  config.stage_blocks = {3, 4, 6, 3};
  config.stage_widths = default_stage_widths();
  EXPECT_EQ(to_key(config), "bottleneck50_w1_ds_r224_b1_fp32");
  config.block = BlockType::kBasic;
  config.stage_blocks = {2, 2, 2, 2};
  config.width_multiplier = 0.25;
  config.early_downsample = false;
  config.resolution = 32;
  config.batch = 64;
  config.precision = Precision::kBf16;
  config.classes = 10;
  EXPECT_EQ(to_key(config), "basic18_w0.25_nods_r32_b64_bf16_k10");
}

TEST(Key, ParsesEverySpellingToOneConfiguration) {
  const Config canonical = parse_key("basic18_w1_ds_r224_b1_fp32");
  EXPECT_EQ(parse_key("basic18_w1.0_ds_r224_b1_fp32"), canonical);
  EXPECT_EQ(parse_key("basic18s2.2.2.2_c64.128.256.512_w1.00_ds_r224_b1_fp32_k1000"), canonical);
  EXPECT_EQ(canonical.stage_blocks, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(canonical.depth(), 18);
}

TEST(Key, CustomStagesRoundTrip) {
  const std::string key = "basic8s1.1.1_c16.32.64_w0.5_nods_r32_b2_fp16_k10";
  const Config config = parse_key(key);
  EXPECT_EQ(config.stage_blocks, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(config.stage_widths, (std::vector<int>{16, 32, 64}));
  EXPECT_EQ(config.stage_channels(2), 32);
  EXPECT_EQ(to_key(config), key);
}

TEST(Key, NonStandardStageBlocksAreSpelledOut) {
  Config config = parse_key("bottleneck50_w1_ds_r64_b1_fp32");
  config.stage_blocks = {1, 8, 6, 1};  // also depth 50, but not torchvision's split
  EXPECT_EQ(to_key(config), "bottleneck50s1.8.6.1_w1_ds_r64_b1_fp32");
  EXPECT_EQ(parse_key(to_key(config)), config);
}

TEST(Key, BadKeysGiveOneClearError) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty key"},
      {"resnet18_w1_ds_r224_b1_fp32", "unknown block type 'resnet'"},
      {"basic19_w1_ds_r224_b1_fp32", "depth 19 cannot be built from basic blocks"},
      {"basic18_wide_ds_r224_b1_fp32", "width 'ide' is not a number"},
      {"basic18_w1_maybe_r224_b1_fp32", "expected ds or nods"},
      {"basic18_w1_ds_r16_b1_fp32", "resolution 16 is too small"},
      {"basic18_w1_ds_r224_b0_fp32", "batch must be 1..65536"},
      {"basic18_w1_ds_r224_b1_fp8", "unknown precision 'fp8'"},
      {"basic18_w1_ds_r224_b1", "missing precision"},
      {"basic18_w1_ds_r224_b1_fp32_extra", "unexpected field 'extra'"},
      {"basic18_w-1_ds_r224_b1_fp32", "width multiplier must be > 0"},
      {"basic18s2.2_w1_ds_r224_b1_fp32", "depth 18 does not match stage blocks 2.2"},
      {"basic6s1.1_w1_ds_r224_b1_fp32", "2 stages of blocks but 4 stage widths"},
      {"basic18_w1_ds_r99999999999_b1_fp32", "resolution '99999999999' is not an integer"},
      {"basic18_w1_ds_r224_b1_fp32_k0", "classes must be"},
      {"basic10s0.1.2.1_w1_ds_r224_b1_fp32", "blocks per stage must be 1..256"},
  };
  for (const auto& [key, expected] : cases) {
    const std::string message = error_of(key);
    EXPECT_NE(message.find(expected), std::string::npos)
        << "key '" << key << "' gave '" << message << "', expected it to contain '" << expected
        << "'";
    EXPECT_NE(message.find("key '" + key + "'"), std::string::npos) << message;
  }
}

TEST(DepthRule, UsesTheStandardTable) {
  EXPECT_EQ(*stage_blocks_for_depth(BlockType::kBasic, 34), (std::vector<int>{3, 4, 6, 3}));
  EXPECT_EQ(*stage_blocks_for_depth(BlockType::kBottleneck, 101), (std::vector<int>{3, 4, 23, 3}));
  EXPECT_EQ(*stage_blocks_for_depth(BlockType::kBottleneck, 152), (std::vector<int>{3, 8, 36, 3}));
  EXPECT_EQ(*stage_blocks_for_depth(BlockType::kBottleneck, 200), (std::vector<int>{3, 24, 36, 3}));
}

TEST(DepthRule, SplitsOtherDepthsThreeFourSixThree) {
  // Blocks = (depth - 2) / convs per block, split 3:4:6:3 by largest remainder, ties earlier.
  EXPECT_EQ(*stage_blocks_for_depth(BlockType::kBasic, 12), (std::vector<int>{1, 1, 2, 1}));
  EXPECT_EQ(*stage_blocks_for_depth(BlockType::kBasic, 14), (std::vector<int>{1, 2, 2, 1}));
  EXPECT_EQ(*stage_blocks_for_depth(BlockType::kBasic, 20), (std::vector<int>{2, 2, 3, 2}));
  EXPECT_EQ(*stage_blocks_for_depth(BlockType::kBasic, 26), (std::vector<int>{2, 3, 5, 2}));
  EXPECT_EQ(*stage_blocks_for_depth(BlockType::kBasic, 32), (std::vector<int>{3, 4, 5, 3}));
  for (int depth = 10; depth <= 400; depth += 2) {
    const auto blocks = stage_blocks_for_depth(BlockType::kBasic, depth);
    ASSERT_TRUE(blocks.has_value()) << depth;
    EXPECT_EQ(depth_of(BlockType::kBasic, *blocks), depth);
  }
  for (int depth = 14; depth <= 401; depth += 3) {
    const auto blocks = stage_blocks_for_depth(BlockType::kBottleneck, depth);
    ASSERT_TRUE(blocks.has_value()) << depth;
    EXPECT_EQ(depth_of(BlockType::kBottleneck, *blocks), depth);
  }
}

TEST(DepthRule, RejectsDepthsTheBlockCannotBuild) {
  std::string why;
  EXPECT_FALSE(stage_blocks_for_depth(BlockType::kBasic, 19, &why));
  EXPECT_NE(why.find("2 x blocks + 2"), std::string::npos) << why;
  EXPECT_FALSE(stage_blocks_for_depth(BlockType::kBasic, 8, &why));
  EXPECT_FALSE(stage_blocks_for_depth(BlockType::kBottleneck, 51, &why));
  EXPECT_FALSE(stage_blocks_for_depth(BlockType::kBottleneck, 11, &why));
}

TEST(Key, DottedListsAreHowKeysSpellPerStageLists) {
  EXPECT_EQ(dotted_list({2, 2, 2, 2}), "2.2.2.2");
  EXPECT_EQ(dotted_list({64}), "64");
  EXPECT_EQ(dotted_list({}), "");
  Config config = parse_key("basic16s1.2.3.1_w1_ds_r64_b1_fp32");
  EXPECT_EQ(dotted_list(config.stage_blocks), "1.2.3.1");
}

}  // namespace
}  // namespace carb
