// Host-side preparation of what a CUDA session uploads and reads back: float values converted to
// the session's element type (round to nearest even, CUDA's own conversions) and permuted to its
// layout. Pure functions of their inputs, tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "carb/graph.hpp"
#include "carb/space.hpp"

namespace carb::cuda {

/// How a session lays out 4-D tensors (activations and conv weights alike).
enum class Layout { kNchw, kNhwc };

/// fp32 runs NCHW (cuDNN's FMA kernels' layout, and PyTorch's default); fp16 and bf16 run NHWC,
/// the layout of cuDNN's tensor-core kernels, so no transposition runs between layers.
Layout layout_for(Precision precision);

/// Bytes of one element of `precision` on the device (4 or 2).
std::size_t device_element_bytes(Precision precision);

/// `values`, a row-major [a][b][c][d] tensor of `shape` (NCHW activations or OIHW weights),
/// converted to `precision` and laid out as `layout` ([a][c][d][b] for NHWC), as raw bytes.
std::vector<std::byte> encode_tensor(std::span<const float> values, const Shape& shape,
                                     Precision precision, Layout layout);

/// `values` (a vector: bias, or an already [a][b] matrix) converted to `precision`, as raw bytes.
std::vector<std::byte> encode_vector(std::span<const float> values, Precision precision);

/// Device elements of `precision` back to float.
std::vector<float> decode_vector(std::span<const std::byte> bytes, Precision precision);

}  // namespace carb::cuda
