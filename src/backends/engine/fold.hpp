// Batch norm folded into the preceding conv, the same way in every engine.
#pragma once

#include <span>
#include <vector>

#include "carb/backend.hpp"

namespace carb::engine {

/// Folds a conv's batch norm into its OIHW weights in place, w' = w * s, and returns the bias
/// b = beta - (mean - c) * s per output channel, s = gamma / sqrt(var + eps), computed in double,
/// where c is the conv's own bias (`conv_bias`, one per output channel), or 0 when it has none
/// (an empty span).
std::vector<float> fold_batch_norm(std::span<float> weight, const LayerParameters& batch_norm,
                                   std::span<const float> conv_bias = {});

}  // namespace carb::engine
