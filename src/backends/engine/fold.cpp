#include "fold.hpp"

#include <cmath>
#include <cstdint>

namespace carb::engine {

std::vector<float> fold_batch_norm(std::span<float> weight, const LayerParameters& batch_norm) {
  const auto channels = static_cast<std::int64_t>(batch_norm.weight.size());
  const auto per_channel = static_cast<std::int64_t>(weight.size()) / channels;
  std::vector<float> bias(static_cast<std::size_t>(channels));
  for (std::int64_t o = 0; o < channels; ++o) {
    const auto c = static_cast<std::size_t>(o);
    const double scale =
        static_cast<double>(batch_norm.weight[c]) /
        std::sqrt(static_cast<double>(batch_norm.running_var[c]) + kBatchNormEpsilon);
    float* const values = weight.data() + o * per_channel;
    for (std::int64_t i = 0; i < per_channel; ++i) {
      values[i] = static_cast<float>(values[i] * scale);
    }
    bias[c] = static_cast<float>(batch_norm.bias[c] - batch_norm.running_mean[c] * scale);
  }
  return bias;
}

}  // namespace carb::engine
