// Seeded network parameters and inputs, shared by every backend and the conformance reference.
// Our own generator (splitmix64) rather than <random>'s distributions, whose output differs
// between standard libraries: the same seed must give the same bits everywhere.
#include <cmath>
#include <string>
#include <string_view>

#include "carb/backend.hpp"
#include "carb/error.hpp"

namespace carb {

namespace {

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
constexpr std::uint64_t kInputSalt = ~0ULL;

std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// splitmix64 draws state+golden .. state+count*golden into out, uniform in [low, high). A plain
// counted loop the compiler vectorises: the state is an induction variable, and the 24-bit value
// converts exactly through int32. -ffp-contract=off (CMakeLists.txt) keeps low + range * unit
// two roundings in every clone. The AVX-512 clone uses its 64-bit vector multiply; AVX2 has
// none, so its clone gains little over scalar code (docs/benchmarks.md, "CPU engine: prepare").
#if defined(__x86_64__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void fill_uniform(std::uint64_t state, float* out, std::size_t count, float low, float high) {
  const float range = high - low;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t bits = mix64(state + (i + 1) * kGolden) >> 40;
    const float unit = static_cast<float>(static_cast<std::int32_t>(bits)) * 0x1p-24f;
    out[i] = low + range * unit;
  }
}

// A splitmix64 stream (Steele, Lea, Flood 2014), one per (seed, salt) pair: every layer draws
// from its own stream, so a layer's parameters do not depend on which other layers were
// generated. Its state after k draws is origin + k * golden, so draw k is a pure function of k.
class Stream {
 public:
  Stream(std::uint64_t seed, std::uint64_t salt)
      : origin_(mix64(seed + kGolden) ^ mix64(salt + 2 * kGolden)) {}

  // The next values.size() draws, uniform in [low, high). Floats are built from 24 random bits:
  // uniform values are exact multiples of 2^-24 of their range, so none is ever denormal.
  void uniform(std::span<float> values, float low, float high) {
    fill_uniform(origin_ + drawn_ * kGolden, values.data(), values.size(), low, high);
    drawn_ += values.size();
  }
  // Skips `count` draws.
  void skip(std::size_t count) { drawn_ += count; }

 private:
  std::uint64_t origin_;
  std::uint64_t drawn_ = 0;
};

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

// Draws one tensor: into `out` when it is given (it must have `count` values), else skips the
// draws so the next tensor starts where it would have.
void draw(Stream& stream, std::span<float> out, std::size_t count, float low, float high,
          std::string_view what) {
  if (out.empty()) {
    stream.skip(count);
    return;
  }
  CARB_CHECK(out.size() == count, std::string(what) + " has the wrong size");
  stream.uniform(out, low, high);
}

}  // namespace

LayerParameterSizes layer_parameter_sizes(const Network& network, int layer_index) {
  CARB_CHECK(layer_index >= 0 && layer_index < static_cast<int>(network.layers.size()),
             "layer index out of range");
  const Layer& layer = network.layers[static_cast<std::size_t>(layer_index)];
  const Shape& in = network.tensors[static_cast<std::size_t>(layer.inputs[0])];
  const auto out =
      static_cast<std::size_t>(network.tensors[static_cast<std::size_t>(layer.output)].c);
  const std::size_t bias = layer.bias ? out : 0;
  switch (layer.kind) {
    case LayerKind::kConv: {
      const auto window = static_cast<std::size_t>(layer.kernel) * layer.kernel;
      const auto in_per_group = static_cast<std::size_t>(in.c / layer.groups);
      return {out * in_per_group * window, bias, 0, 0};
    }
    case LayerKind::kBatchNorm:
      return {out, out, out, out};
    case LayerKind::kFullyConnected:
      // Its input's C x H x W values per image (a flatten before it).
      return {out * static_cast<std::size_t>(in.elements() / in.n), bias, 0, 0};
    default:
      break;
  }
  return {};
}

void generate_layer_parameters(const Network& network, int layer_index, std::uint64_t seed,
                               const LayerParameterSpans& out) {
  const LayerParameterSizes sizes = layer_parameter_sizes(network, layer_index);
  const Layer& layer = network.layers[static_cast<std::size_t>(layer_index)];
  const Shape& in = network.tensors[static_cast<std::size_t>(layer.inputs[0])];
  Stream stream(seed, static_cast<std::uint64_t>(layer_index));
  switch (layer.kind) {
    case LayerKind::kConv: {
      // He-uniform: variance 2 / fan_in keeps the pre-activation variance through conv + ReLU.
      // A group's output channels see in.c / groups inputs each.
      const int fan_in = in.c / layer.groups * layer.kernel * layer.kernel;
      const auto limit = static_cast<float>(std::sqrt(6.0 / fan_in));
      draw(stream, out.weight, sizes.weight, -limit, limit, "conv weight");
      // PyTorch's nn.Conv2d default bias: uniform within 1/sqrt(fan_in).
      const auto bias_limit = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
      draw(stream, out.bias, sizes.bias, -bias_limit, bias_limit, "conv bias");
      break;
    }
    case LayerKind::kBatchNorm: {
      // Without the 1/sqrt(blocks) factor each residual add would double the variance.
      const float gamma_scale =
          ends_residual_branch(network, layer)
              ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(residual_blocks(network))))
              : 1.0f;
      draw(stream, out.weight, sizes.weight, 0.8f * gamma_scale, 1.2f * gamma_scale, "gamma");
      draw(stream, out.bias, sizes.bias, -0.1f, 0.1f, "beta");
      draw(stream, out.running_mean, sizes.running_mean, -0.1f, 0.1f, "running mean");
      draw(stream, out.running_var, sizes.running_var, 0.9f, 1.1f, "running variance");
      break;
    }
    case LayerKind::kFullyConnected: {
      // PyTorch's nn.Linear default: uniform within 1/sqrt(fan_in) for weight and bias, fan_in
      // its input's C x H x W values.
      const double fan_in = static_cast<double>(in.c) * in.h * in.w;
      const auto limit = static_cast<float>(1.0 / std::sqrt(fan_in));
      draw(stream, out.weight, sizes.weight, -limit, limit, "fc weight");
      draw(stream, out.bias, sizes.bias, -limit, limit, "fc bias");
      break;
    }
    default:
      break;
  }
}

LayerParameters generate_layer_parameters(const Network& network, int layer_index,
                                          std::uint64_t seed) {
  const LayerParameterSizes sizes = layer_parameter_sizes(network, layer_index);
  LayerParameters parameters;
  parameters.weight.resize(sizes.weight);
  parameters.bias.resize(sizes.bias);
  parameters.running_mean.resize(sizes.running_mean);
  parameters.running_var.resize(sizes.running_var);
  generate_layer_parameters(
      network, layer_index, seed,
      {parameters.weight, parameters.bias, parameters.running_mean, parameters.running_var});
  return parameters;
}

std::vector<float> generate_input(const Network& network, std::uint64_t seed) {
  const Shape& shape = network.tensors[static_cast<std::size_t>(network.input)];
  std::vector<float> values(static_cast<std::size_t>(shape.elements()));
  Stream(seed, kInputSalt).uniform(values, -1.0f, 1.0f);
  return values;
}

}  // namespace carb
