// Architectures whose counts would not fit 64 bits (an imported file's, or a stored JSON's) are
// input errors naming the layer, where their shape inference once overflowed.
#include <gtest/gtest.h>

#include <string>

#include "carb/error.hpp"
#include "carb/graph.hpp"

namespace carb {
namespace {

Architecture one_conv(int channels, int kernel, int padding) {
  Architecture a;
  a.name = "huge";
  a.input_channels = 3;
  a.native_resolution = 8;
  Layer conv;
  conv.kind = LayerKind::kConv;
  conv.name = "big";
  conv.inputs = {0};
  conv.channels = channels;
  conv.kernel = kernel;
  conv.padding = conv.padding_after = padding;
  a.layers.push_back(conv);
  a.output = 1;
  return a;
}

std::string build_error(const Architecture& a, int resolution = 8, int batch = 1) {
  try {
    (void)build_network(imported_config(*find_architecture(register_architecture(a)), resolution,
                                        batch, Precision::kFp32));
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    return error.what();
  }
  ADD_FAILURE() << "built";
  return {};
}

std::string register_error(const Architecture& a) {
  try {
    (void)register_architecture(a);
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    return error.what();
  }
  ADD_FAILURE() << "registered";
  return {};
}

TEST(ArchitectureLimits, CountsPast64BitsAreInputErrors) {
  // 2^24 channels of (8 + 2^25 - 2^12 + 1)^2 values: 2^74 values.
  EXPECT_NE(register_error(one_conv(1 << 24, 1 << 12, 1 << 24))
                .find("layer big (conv) has 1x16777216x33550345x33550345 values, too many"),
            std::string::npos);
  // Padding that makes a side longer than 2^30.
  EXPECT_NE(register_error(one_conv(1, 1, 1 << 30)).find("pads its input of 1x3x8x8 past 2^30"),
            std::string::npos);
  // A fine network at a batch and resolution (the largest a configuration allows) whose MACs
  // pass 2^60: 2^16 x 2^14 x 2^26 outputs of 3 x 9 MACs each.
  Architecture fine = one_conv(1 << 14, 3, 1);
  EXPECT_NE(build_error(fine, 8192, 1 << 16).find("too many parameters or MACs to count"),
            std::string::npos);
  // Channels concatenated past 2^30.
  Architecture wide = one_conv(1 << 20, 1, 0);
  for (int i = 0; i < 12; ++i) {
    Layer concat;
    concat.kind = LayerKind::kConcat;
    concat.name = "cat" + std::to_string(i);
    concat.inputs = {i + 1, i + 1};
    wide.layers.push_back(concat);
  }
  wide.output = static_cast<int>(wide.layers.size());
  EXPECT_NE(register_error(wide).find("layer cat10 (concat) makes more than 2^30 channels"),
            std::string::npos);
}

}  // namespace
}  // namespace carb
