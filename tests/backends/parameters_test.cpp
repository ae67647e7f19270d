// Seeded parameters: the generator's bits are pinned to plain sequential splitmix64 (the
// vectorised generator must not change them), the buffer-filling overload equals the allocating
// one tensor by tensor, and every value is in range and never denormal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "architectures.hpp"
#include "carb/backend.hpp"

namespace carb {
namespace {

constexpr std::uint64_t kSeed = 11;

// splitmix64 as first written (one draw after another), the definition the generator keeps.
class SequentialSplitMix64 {
 public:
  SequentialSplitMix64(std::uint64_t seed, std::uint64_t salt)
      : state_(mix(seed + kGolden) ^ mix(salt + 2 * kGolden)) {}
  float uniform(float low, float high) {
    state_ += kGolden;
    const float unit = static_cast<float>(mix(state_) >> 40) * 0x1p-24f;
    // Two roundings even where the compiler may fuse a multiply-add (-march=native).
    const volatile float scaled = (high - low) * unit;
    return low + scaled;
  }

 private:
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  static constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  std::uint64_t state_;
};

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  // memcmp of an empty vector's null data() is undefined even for 0 bytes (UBSan says so).
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

int first_layer_of_kind(const Network& network, LayerKind kind) {
  for (std::size_t i = 0; i < network.layers.size(); ++i) {
    if (network.layers[i].kind == kind) return static_cast<int>(i);
  }
  return -1;
}

TEST(Parameters, ConvWeightsAreSequentialSplitMix64Bits) {
  const Network network = build_network(parse_key("basic18_w0.5_ds_r32_b1_fp32"));
  // The largest conv: long enough for the vectorised loop and an odd tail.
  int largest = -1;
  for (std::size_t i = 0; i < network.layers.size(); ++i) {
    if (network.layers[i].kind != LayerKind::kConv) continue;
    if (largest < 0 || layer_parameter_sizes(network, static_cast<int>(i)).weight >
                           layer_parameter_sizes(network, largest).weight) {
      largest = static_cast<int>(i);
    }
  }
  ASSERT_GE(largest, 0);
  const Layer& conv = network.layers[static_cast<std::size_t>(largest)];
  const int fan_in =
      network.tensors[static_cast<std::size_t>(conv.inputs[0])].c * conv.kernel * conv.kernel;
  const auto limit = static_cast<float>(std::sqrt(6.0 / fan_in));
  const std::vector<float> weight = generate_layer_parameters(network, largest, kSeed).weight;
  ASSERT_GT(weight.size(), 100000u);
  SequentialSplitMix64 stream(kSeed, static_cast<std::uint64_t>(largest));
  std::vector<float> expected(weight.size());
  for (float& value : expected) value = stream.uniform(-limit, limit);
  EXPECT_TRUE(bitwise_equal(weight, expected));
}

TEST(Parameters, BatchNormAndFcTensorsFollowOneAnotherInTheirStream) {
  const Network network = build_network(parse_key("bottleneck26_w0.25_ds_r32_b1_fp32_k10"));
  const int batch_norm = first_layer_of_kind(network, LayerKind::kBatchNorm);
  const LayerParameters bn = generate_layer_parameters(network, batch_norm, kSeed);
  SequentialSplitMix64 bn_stream(kSeed, static_cast<std::uint64_t>(batch_norm));
  for (const float value : bn.weight) EXPECT_EQ(value, bn_stream.uniform(0.8f, 1.2f));
  for (const float value : bn.bias) EXPECT_EQ(value, bn_stream.uniform(-0.1f, 0.1f));
  for (const float value : bn.running_mean) EXPECT_EQ(value, bn_stream.uniform(-0.1f, 0.1f));
  for (const float value : bn.running_var) EXPECT_EQ(value, bn_stream.uniform(0.9f, 1.1f));

  const int fc = first_layer_of_kind(network, LayerKind::kFullyConnected);
  const LayerParameters linear = generate_layer_parameters(network, fc, kSeed);
  const int inputs = network.tensors[static_cast<std::size_t>(network.layers[fc].inputs[0])].c;
  const auto limit = static_cast<float>(1.0 / std::sqrt(static_cast<double>(inputs)));
  SequentialSplitMix64 fc_stream(kSeed, static_cast<std::uint64_t>(fc));
  for (const float value : linear.weight) ASSERT_EQ(value, fc_stream.uniform(-limit, limit));
  for (const float value : linear.bias) EXPECT_EQ(value, fc_stream.uniform(-limit, limit));
}

TEST(Parameters, FillingCallerBuffersGivesTheSameBitsAndSkipsWhatIsNotAsked) {
  const Network network = build_network(parse_key("bottleneck26_w0.25_ds_r33_b2_fp32_k10"));
  for (int layer = 0; layer < static_cast<int>(network.layers.size()); ++layer) {
    const LayerParameters whole = generate_layer_parameters(network, layer, kSeed);
    const LayerParameterSizes sizes = layer_parameter_sizes(network, layer);
    ASSERT_EQ(whole.weight.size(), sizes.weight);
    ASSERT_EQ(whole.bias.size(), sizes.bias);
    ASSERT_EQ(whole.running_mean.size(), sizes.running_mean);
    ASSERT_EQ(whole.running_var.size(), sizes.running_var);
    // Every tensor alone: the ones before it are skipped, not drawn into it.
    std::vector<float> weight(sizes.weight);
    std::vector<float> bias(sizes.bias);
    std::vector<float> mean(sizes.running_mean);
    std::vector<float> var(sizes.running_var);
    generate_layer_parameters(network, layer, kSeed, {weight, {}, {}, {}});
    generate_layer_parameters(network, layer, kSeed, {{}, bias, {}, {}});
    generate_layer_parameters(network, layer, kSeed, {{}, {}, mean, {}});
    generate_layer_parameters(network, layer, kSeed, {{}, {}, {}, var});
    EXPECT_TRUE(bitwise_equal(weight, whole.weight)) << "layer " << layer;
    EXPECT_TRUE(bitwise_equal(bias, whole.bias)) << "layer " << layer;
    EXPECT_TRUE(bitwise_equal(mean, whole.running_mean)) << "layer " << layer;
    EXPECT_TRUE(bitwise_equal(var, whole.running_var)) << "layer " << layer;
  }
}

TEST(Parameters, GroupedConvsDrawHeUniformOverTheirGroupsFanInThenTheirBias) {
  // dilated_convs: layer 7 is a 3x3 conv of 32 channels in 2 groups; layer 10 a 3x3 conv with
  // a bias.
  const Network network =
      build_network(testing::test_config("dilated_convs", 32, 1, Precision::kFp32));
  const Layer& grouped = network.layers[6];
  ASSERT_EQ(grouped.groups, 2);
  const LayerParameterSizes grouped_sizes = layer_parameter_sizes(network, 6);
  EXPECT_EQ(grouped_sizes.weight, 32u * 16 * 3 * 3);
  EXPECT_EQ(grouped_sizes.bias, 0u);
  EXPECT_EQ(static_cast<std::int64_t>(grouped_sizes.weight), grouped.params);
  const auto grouped_limit = static_cast<float>(std::sqrt(6.0 / (16 * 3 * 3)));
  SequentialSplitMix64 grouped_stream(kSeed, 6);
  for (const float value : generate_layer_parameters(network, 6, kSeed).weight) {
    ASSERT_EQ(value, grouped_stream.uniform(-grouped_limit, grouped_limit));
  }

  const Layer& biased = network.layers[9];
  ASSERT_TRUE(biased.bias);
  const LayerParameterSizes sizes = layer_parameter_sizes(network, 9);
  EXPECT_EQ(sizes.weight, 16u * 32 * 3 * 3);
  EXPECT_EQ(sizes.bias, 16u);
  EXPECT_EQ(static_cast<std::int64_t>(sizes.weight + sizes.bias), biased.params);
  const LayerParameters p = generate_layer_parameters(network, 9, kSeed);
  const int fan_in = 32 * 3 * 3;
  const auto limit = static_cast<float>(std::sqrt(6.0 / fan_in));
  const auto bias_limit = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
  SequentialSplitMix64 stream(kSeed, 9);
  for (const float value : p.weight) ASSERT_EQ(value, stream.uniform(-limit, limit));
  for (const float value : p.bias) EXPECT_EQ(value, stream.uniform(-bias_limit, bias_limit));
}

TEST(Parameters, AnFcOverAFeatureMapHasAWeightPerValueOfIt) {
  // pools_and_activations ends in an fc over 24 x 3 x 3 values.
  const Network network =
      build_network(testing::test_config("pools_and_activations", 32, 2, Precision::kFp32));
  const int fc = first_layer_of_kind(network, LayerKind::kFullyConnected);
  const LayerParameterSizes sizes = layer_parameter_sizes(network, fc);
  EXPECT_EQ(sizes.weight, 10u * 24 * 3 * 3);
  EXPECT_EQ(sizes.bias, 10u);
  EXPECT_EQ(static_cast<std::int64_t>(sizes.weight + sizes.bias),
            network.layers[static_cast<std::size_t>(fc)].params);
  const auto limit = static_cast<float>(1.0 / std::sqrt(24.0 * 3 * 3));
  SequentialSplitMix64 stream(kSeed, static_cast<std::uint64_t>(fc));
  for (const float value : generate_layer_parameters(network, fc, kSeed).weight) {
    ASSERT_EQ(value, stream.uniform(-limit, limit));
  }
}

TEST(Parameters, EveryImportedLayerHasItsIrParameterCount) {
  // A batch norm's running statistics are buffers, not parameters: the IR counts gamma and beta.
  for (const testing::TestArchitecture& test : testing::test_architectures()) {
    const Network network = build_network(testing::test_config(test.name, 32, 1, Precision::kFp32));
    for (int layer = 0; layer < static_cast<int>(network.layers.size()); ++layer) {
      const LayerParameterSizes sizes = layer_parameter_sizes(network, layer);
      EXPECT_EQ(static_cast<std::int64_t>(sizes.weight + sizes.bias),
                network.layers[static_cast<std::size_t>(layer)].params)
          << test.name << " layer " << layer;
    }
  }
}

TEST(Parameters, ValuesAreInRangeAndNeverDenormal) {
  const Network network = build_network(parse_key("basic18_w0.25_ds_r32_b1_fp32"));
  for (int layer = 0; layer < static_cast<int>(network.layers.size()); ++layer) {
    const LayerParameters p = generate_layer_parameters(network, layer, kSeed);
    for (const std::vector<float>* tensor : {&p.weight, &p.bias, &p.running_mean, &p.running_var}) {
      for (const float value : *tensor) {
        ASSERT_NE(std::fpclassify(value), FP_SUBNORMAL) << "layer " << layer;
        ASSERT_LT(std::fabs(value), 1.25f) << "layer " << layer;
      }
    }
  }
  const std::vector<float> input = generate_input(network, kSeed);
  for (const float value : input) {
    ASSERT_NE(std::fpclassify(value), FP_SUBNORMAL);
    ASSERT_GE(value, -1.0f);
    ASSERT_LT(value, 1.0f);
  }
}

}  // namespace
}  // namespace carb
