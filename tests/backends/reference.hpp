// The conformance oracle: a plain float64 forward pass over the IR, one layer at a time, no fusion.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "carb/graph.hpp"

namespace carb::testing {

/// The output of `network` (NCHW; a classifier's logits [batch][classes]) with the parameters
/// generate_layer_parameters(seed) gives, on `input` (NCHW). Batch norm in inference mode with
/// running statistics; every other layer as PyTorch defines it.
std::vector<double> reference_forward(const Network& network, std::uint64_t seed,
                                      std::span<const float> input);

/// The same pass with `round` applied to the input, every conv and fc weight and every layer's
/// output: a float64 simulation of an engine that stores them in a narrower format.
std::vector<double> reference_forward(const Network& network, std::uint64_t seed,
                                      std::span<const float> input,
                                      const std::function<double(double)>& round);

/// max |actual - expected| / max |expected|: the error relative to the largest reference logit.
/// Normwise rather than elementwise because logits near zero have no meaningful relative error.
double relative_error(std::span<const float> actual, std::span<const double> expected);

}  // namespace carb::testing
