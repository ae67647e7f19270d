// The host side of the CUDA engine's uploads and read-backs: element conversions (CUDA's own
// round-to-nearest-even conversions) and the NCHW -> NHWC permutation. No GPU needed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cuda/host_data.hpp"

namespace carb::cuda {
namespace {

std::vector<std::uint16_t> halves(const std::vector<std::byte>& bytes) {
  std::vector<std::uint16_t> values(bytes.size() / 2);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

TEST(HostData, LayoutFollowsPrecision) {
  EXPECT_EQ(layout_for(Precision::kFp32), Layout::kNchw);
  EXPECT_EQ(layout_for(Precision::kFp16), Layout::kNhwc);
  EXPECT_EQ(layout_for(Precision::kBf16), Layout::kNhwc);
  EXPECT_EQ(device_element_bytes(Precision::kFp32), 4u);
  EXPECT_EQ(device_element_bytes(Precision::kFp16), 2u);
  EXPECT_EQ(device_element_bytes(Precision::kBf16), 2u);
}

TEST(HostData, Fp32NchwIsTheValuesBitForBit) {
  const std::vector<float> values = {1.5f, -2.25f, 3.0e-38f, 7.0f};
  const std::vector<std::byte> bytes =
      encode_tensor(values, Shape{1, 2, 1, 2}, Precision::kFp32, Layout::kNchw);
  ASSERT_EQ(bytes.size(), 16u);
  EXPECT_EQ(std::memcmp(bytes.data(), values.data(), 16), 0);
  EXPECT_EQ(decode_vector(bytes, Precision::kFp32), values);
}

TEST(HostData, NhwcPutsChannelsInnermost) {
  // n=2, c=3, h=1, w=2: value = 100n + 10c + w.
  std::vector<float> values;
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 3; ++c) {
      for (int w = 0; w < 2; ++w) values.push_back(static_cast<float>(100 * n + 10 * c + w));
    }
  }
  const std::vector<float> nhwc = decode_vector(
      encode_tensor(values, Shape{2, 3, 1, 2}, Precision::kFp32, Layout::kNhwc), Precision::kFp32);
  const std::vector<float> expected = {0, 10, 20, 1, 11, 21, 100, 110, 120, 101, 111, 121};
  EXPECT_EQ(nhwc, expected);
}

TEST(HostData, Fp16RoundsToNearestEven) {
  const float halfway_up = 1.0f + std::ldexp(1.0f, -11);         // between 1 and 1 + 2^-10
  const float above_halfway = 1.0f + 3 * std::ldexp(1.0f, -12);  // nearer 1 + 2^-10
  const std::vector<float> values = {1.0f, halfway_up, above_halfway, -2.0f, 65504.0f, 1e6f};
  const std::vector<std::uint16_t> bits = halves(encode_vector(values, Precision::kFp16));
  EXPECT_EQ(bits[0], 0x3C00);  // 1
  EXPECT_EQ(bits[1], 0x3C00);  // ties to the even significand: 1
  EXPECT_EQ(bits[2], 0x3C01);  // 1 + 2^-10
  EXPECT_EQ(bits[3], 0xC000);  // -2
  EXPECT_EQ(bits[4], 0x7BFF);  // the largest finite half
  EXPECT_EQ(bits[5], 0x7C00);  // beyond it: +infinity
  const std::vector<float> back =
      decode_vector(encode_vector(values, Precision::kFp16), Precision::kFp16);
  EXPECT_EQ(back[2], 1.0f + std::ldexp(1.0f, -10));
  EXPECT_TRUE(std::isinf(back[5]));
}

TEST(HostData, Bf16KeepsTheExponentAndRoundsTheSignificand) {
  const std::vector<float> values = {1.0f, 1.0f + std::ldexp(1.0f, -8), 3.14159f, 3.0e38f};
  const std::vector<std::uint16_t> bits = halves(encode_vector(values, Precision::kBf16));
  EXPECT_EQ(bits[0], 0x3F80);
  EXPECT_EQ(bits[1], 0x3F80);  // halfway between 1 and 1 + 2^-7: ties to even
  EXPECT_EQ(bits[2], 0x4049);  // 3.140625
  EXPECT_EQ(bits[3], 0x7F62);  // 3e38 stays finite in bf16
  const std::vector<float> back =
      decode_vector(encode_vector(values, Precision::kBf16), Precision::kBf16);
  EXPECT_EQ(back[2], 3.140625f);
  EXPECT_NEAR(back[3], 3.0e38f, 3.0e38f * std::ldexp(1.0, -8));
}

TEST(HostData, Fp16TensorIsPermutedAndConverted) {
  const std::vector<float> values = {0.5f, 1.5f, 2.5f, 3.5f};  // n1 c2 h1 w2
  const std::vector<float> back = decode_vector(
      encode_tensor(values, Shape{1, 2, 1, 2}, Precision::kFp16, Layout::kNhwc), Precision::kFp16);
  EXPECT_EQ(back, (std::vector<float>{0.5f, 2.5f, 1.5f, 3.5f}));
}

}  // namespace
}  // namespace carb::cuda
