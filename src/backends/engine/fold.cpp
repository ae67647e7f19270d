#include "fold.hpp"

#include <cmath>
#include <cstdint>

namespace carb::engine {

namespace {

// values[i] = float(values[i] * scale): exact widening, one double product, one rounding, so
// every clone gives the same bits; AVX-512 does 8 a step where the baseline's SSE2 does 2.
#if defined(__x86_64__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void scale_values(float* values, std::int64_t count, double scale) {
  for (std::int64_t i = 0; i < count; ++i) {
    values[i] = static_cast<float>(values[i] * scale);
  }
}

}  // namespace

std::vector<float> fold_batch_norm(std::span<float> weight, const LayerParameters& batch_norm,
                                   std::span<const float> conv_bias) {
  const auto channels = static_cast<std::int64_t>(batch_norm.weight.size());
  const auto per_channel = static_cast<std::int64_t>(weight.size()) / channels;
  std::vector<float> bias(static_cast<std::size_t>(channels));
  for (std::int64_t o = 0; o < channels; ++o) {
    const auto c = static_cast<std::size_t>(o);
    const double scale =
        static_cast<double>(batch_norm.weight[c]) /
        std::sqrt(static_cast<double>(batch_norm.running_var[c]) + kBatchNormEpsilon);
    scale_values(weight.data() + o * per_channel, per_channel, scale);
    // mean - 0.0 is exact, so a conv without a bias folds to the same bits as before biases.
    const double shifted_mean = static_cast<double>(batch_norm.running_mean[c]) -
                                (conv_bias.empty() ? 0.0 : static_cast<double>(conv_bias[c]));
    bias[c] = static_cast<float>(batch_norm.bias[c] - shifted_mean * scale);
  }
  return bias;
}

}  // namespace carb::engine
