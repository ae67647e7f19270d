#include "host_data.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "carb/error.hpp"

namespace carb::cuda {

namespace {

template <typename Element>
void store(std::byte* out, std::size_t index, Element value) {
  std::memcpy(out + index * sizeof(Element), &value, sizeof(Element));
}

// Writes `value` as element `index` of a buffer of `precision`.
void put(std::byte* out, std::size_t index, float value, Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      store(out, index, value);
      return;
    case Precision::kFp16:
      store(out, index, __float2half_rn(value));
      return;
    case Precision::kBf16:
      store(out, index, __float2bfloat16_rn(value));
      return;
  }
}

}  // namespace

Layout layout_for(Precision precision) {
  return precision == Precision::kFp32 ? Layout::kNchw : Layout::kNhwc;
}

std::size_t device_element_bytes(Precision precision) {
  return precision == Precision::kFp32 ? 4 : 2;
}

std::vector<std::byte> encode_tensor(std::span<const float> values, const Shape& shape,
                                     Precision precision, Layout layout) {
  CARB_CHECK(static_cast<std::int64_t>(values.size()) == shape.elements(),
             "tensor values do not match the shape");
  std::vector<std::byte> bytes(values.size() * device_element_bytes(precision));
  const auto n = static_cast<std::size_t>(shape.n);
  const auto c = static_cast<std::size_t>(shape.c);
  const auto hw = static_cast<std::size_t>(shape.h) * static_cast<std::size_t>(shape.w);
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < c; ++b) {
      for (std::size_t p = 0; p < hw; ++p) {
        const std::size_t from = (a * c + b) * hw + p;
        const std::size_t to = layout == Layout::kNchw ? from : (a * hw + p) * c + b;
        put(bytes.data(), to, values[from], precision);
      }
    }
  }
  return bytes;
}

std::vector<std::byte> encode_vector(std::span<const float> values, Precision precision) {
  std::vector<std::byte> bytes(values.size() * device_element_bytes(precision));
  for (std::size_t i = 0; i < values.size(); ++i) put(bytes.data(), i, values[i], precision);
  return bytes;
}

std::vector<float> decode_vector(std::span<const std::byte> bytes, Precision precision) {
  const std::size_t count = bytes.size() / device_element_bytes(precision);
  CARB_CHECK(count * device_element_bytes(precision) == bytes.size(), "partial element");
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    switch (precision) {
      case Precision::kFp32:
        std::memcpy(&values[i], bytes.data() + i * 4, 4);
        break;
      case Precision::kFp16: {
        __half half;
        std::memcpy(&half, bytes.data() + i * 2, 2);
        values[i] = __half2float(half);
        break;
      }
      case Precision::kBf16: {
        __nv_bfloat16 bf16;
        std::memcpy(&bf16, bytes.data() + i * 2, 2);
        values[i] = __bfloat162float(bf16);
        break;
      }
    }
  }
  return values;
}

}  // namespace carb::cuda
