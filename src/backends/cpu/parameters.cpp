// Seeded network parameters and inputs, shared by every backend and the conformance reference.
// Our own generator (splitmix64) rather than <random>'s distributions, whose output differs
// between standard libraries: the same seed must give the same bits everywhere.
#include <cmath>

#include "carb/backend.hpp"
#include "carb/error.hpp"

namespace carb {

namespace {

std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// splitmix64 (Steele, Lea, Flood 2014) with floats built from 24 random bits: uniform values are
// exact multiples of 2^-24 of their range, so none is ever denormal.
class SplitMix64 {
 public:
  // One independent stream per (seed, salt) pair: every layer draws from its own stream, so a
  // layer's parameters do not depend on which other layers were generated.
  SplitMix64(std::uint64_t seed, std::uint64_t salt)
      : state_(mix64(seed + kGolden) ^ mix64(salt + 2 * kGolden)) {}

  std::uint64_t next() {
    state_ += kGolden;
    return mix64(state_);
  }
  float uniform(float low, float high) {
    const float unit = static_cast<float>(next() >> 40) * 0x1p-24f;
    return low + (high - low) * unit;
  }
  std::vector<float> uniform(std::size_t count, float low, float high) {
    std::vector<float> values(count);
    for (float& value : values) value = uniform(low, high);
    return values;
  }

 private:
  static constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  std::uint64_t state_;
};

constexpr std::uint64_t kInputSalt = ~0ULL;

// Whether a batch-norm output is the residual branch of an add (the block's last batch norm).
bool ends_residual_branch(const Network& network, const Layer& batch_norm) {
  for (const Layer& layer : network.layers) {
    if (layer.kind == LayerKind::kAdd && layer.inputs[0] == batch_norm.output) return true;
  }
  return false;
}

int residual_blocks(const Network& network) {
  int blocks = 0;
  for (const Layer& layer : network.layers) blocks += layer.kind == LayerKind::kAdd ? 1 : 0;
  return blocks;
}

}  // namespace

LayerParameters generate_layer_parameters(const Network& network, int layer_index,
                                          std::uint64_t seed) {
  CARB_CHECK(layer_index >= 0 && layer_index < static_cast<int>(network.layers.size()),
             "layer index out of range");
  const Layer& layer = network.layers[static_cast<std::size_t>(layer_index)];
  const Shape& in = network.tensors[static_cast<std::size_t>(layer.inputs[0])];
  const Shape& out = network.tensors[static_cast<std::size_t>(layer.output)];
  SplitMix64 stream(seed, static_cast<std::uint64_t>(layer_index));
  LayerParameters parameters;
  switch (layer.kind) {
    case LayerKind::kConv: {
      // He-uniform: variance 2 / fan_in keeps the pre-activation variance through conv + ReLU.
      const int fan_in = in.c * layer.kernel * layer.kernel;
      const auto limit = static_cast<float>(std::sqrt(6.0 / fan_in));
      parameters.weight = stream.uniform(
          static_cast<std::size_t>(out.c) * static_cast<std::size_t>(fan_in), -limit, limit);
      break;
    }
    case LayerKind::kBatchNorm: {
      const auto channels = static_cast<std::size_t>(out.c);
      // Without the 1/sqrt(blocks) factor each residual add would double the variance.
      const float gamma_scale =
          ends_residual_branch(network, layer)
              ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(residual_blocks(network))))
              : 1.0f;
      parameters.weight = stream.uniform(channels, 0.8f * gamma_scale, 1.2f * gamma_scale);
      parameters.bias = stream.uniform(channels, -0.1f, 0.1f);
      parameters.running_mean = stream.uniform(channels, -0.1f, 0.1f);
      parameters.running_var = stream.uniform(channels, 0.9f, 1.1f);
      break;
    }
    case LayerKind::kFullyConnected: {
      // PyTorch's nn.Linear default: uniform within 1/sqrt(fan_in) for weight and bias.
      const auto limit = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in.c)));
      parameters.weight = stream.uniform(
          static_cast<std::size_t>(out.c) * static_cast<std::size_t>(in.c), -limit, limit);
      parameters.bias = stream.uniform(static_cast<std::size_t>(out.c), -limit, limit);
      break;
    }
    case LayerKind::kRelu:
    case LayerKind::kAdd:
    case LayerKind::kMaxPool:
    case LayerKind::kGlobalAvgPool:
      break;
  }
  return parameters;
}

std::vector<float> generate_input(const Network& network, std::uint64_t seed) {
  const Shape& shape = network.tensors[static_cast<std::size_t>(network.input)];
  SplitMix64 stream(seed, kInputSalt);
  return stream.uniform(static_cast<std::size_t>(shape.elements()), -1.0f, 1.0f);
}

}  // namespace carb
