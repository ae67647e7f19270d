// The CUDA backend on cuDNN and cuBLAS: one device per GPU the CUDA runtime sees, and sessions
// on them. Device listing creates no CUDA context (prepare does); without a driver or a GPU the
// backend lists no device and says why.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "carb/backend.hpp"

namespace carb::cuda {

/// The CUDA backend of this machine.
std::unique_ptr<Backend> make_cuda_backend();

/// Whether a GPU of compute capability `major`.`minor` runs each precision in this engine, and
/// why not: fp32 everywhere; fp16 from 7.0 (tensor cores); bf16 from 8.0 (Ampere).
std::vector<PrecisionSupport> precision_support(int major, int minor);

/// NVML's spelling of a CUDA device UUID: "GPU-" and the 16 bytes in 8-4-4-4-12 hex digits.
std::string uuid_string(const std::array<unsigned char, 16>& bytes);

/// Why the CUDA runtime sees no device, from cudaGetDeviceCount's error name and message and
/// whether the driver library loads (`driver_load_error` empty when it does).
std::string no_device_reason(const std::string& error_name, const std::string& error_message,
                             const std::string& driver_load_error);

/// Prepares `network` on the GPU `ordinal` described by `info`.
std::unique_ptr<Session> make_cuda_session(const Network& network, std::uint64_t seed,
                                           const DeviceInfo& info, int ordinal,
                                           const SessionOptions& options);

}  // namespace carb::cuda
