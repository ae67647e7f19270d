// The CUDA devices of this machine and what each can run.
#include "cuda_backend.hpp"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <cstdio>

#include "carb/error.hpp"
#include "carb/telemetry.hpp"

namespace carb::cuda {

namespace {

std::string version_text(int encoded) {  // CUDA's 1000 * major + 10 * minor
  return std::to_string(encoded / 1000) + "." + std::to_string(encoded % 1000 / 10);
}

std::string library_versions() {
  const std::size_t cudnn = cudnnGetVersion();  // 10000 * major + 100 * minor + patch
  int runtime = 0;
  int driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  return "cuDNN " + std::to_string(cudnn / 10000) + "." + std::to_string(cudnn % 10000 / 100) +
         "." + std::to_string(cudnn % 100) + "; cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) + "." +
         std::to_string(CUBLAS_VER_MINOR) + "." + std::to_string(CUBLAS_VER_PATCH) +
         "; CUDA runtime " + version_text(runtime) + "; driver API " + version_text(driver);
}

// Whether the driver library loads; the loader's message when it does not.
std::string driver_load_error() {
  void* handle = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    return error != nullptr ? error : "libcuda.so.1 cannot be loaded";
  }
  ::dlclose(handle);
  return {};
}

class CudaDevice final : public Device {
 public:
  CudaDevice(int ordinal, const cudaDeviceProp& properties, const std::string& libraries)
      : ordinal_(ordinal) {
    std::array<unsigned char, 16> uuid{};
    for (std::size_t i = 0; i < uuid.size(); ++i) {
      uuid[i] = static_cast<unsigned char>(properties.uuid.bytes[i]);
    }
    info_.id = "cuda:" + std::to_string(ordinal);
    info_.kind = "cuda";
    info_.name = properties.name;
    info_.library = libraries;
    info_.isa = "sm_" + std::to_string(properties.major) + std::to_string(properties.minor);
    info_.threads = 0;
    info_.precisions = precision_support(properties.major, properties.minor);
    info_.memory_bytes = static_cast<std::int64_t>(properties.totalGlobalMem);
    info_.uuid = uuid_string(uuid);
    // NVML knows the driver's own version; the runtime knows only the CUDA version it supports.
    const auto monitor = open_gpu_monitor(info_.uuid);
    info_.driver = monitor->available() ? monitor->identity().driver_version : "";
    info_.imported_reason =
        "the CUDA engine runs carb's ResNet networks only so far; imported architectures run on "
        "carb's CPU engine (docs/onnx.md)";
  }

  const DeviceInfo& info() const override { return info_; }

  Support supports(const Config& config) const override { return support_for(config, info_); }

  std::unique_ptr<Session> prepare(const Config& config, std::uint64_t seed,
                                   const SessionOptions& options) const override {
    require_support(config, info_);
    return make_cuda_session(build_network(config), seed, info_, ordinal_, options);
  }

 private:
  int ordinal_;
  DeviceInfo info_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      reason_ = no_device_reason(cudaGetErrorName(status), cudaGetErrorString(status),
                                 driver_load_error());
      cudaGetLastError();
      return;
    }
    if (count == 0) {
      reason_ = "the CUDA runtime sees no GPU";
      return;
    }
    const std::string libraries = library_versions();
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      cudaDeviceProp properties{};
      const cudaError_t read = cudaGetDeviceProperties(&properties, ordinal);
      if (read != cudaSuccess) {
        throw Error(ErrorCategory::kRuntime, "CUDA: cudaGetDeviceProperties(" +
                                                 std::to_string(ordinal) +
                                                 "): " + cudaGetErrorString(read));
      }
      devices_.push_back(std::make_unique<CudaDevice>(ordinal, properties, libraries));
    }
  }

  std::string_view name() const override { return "cuda"; }
  const std::vector<std::unique_ptr<Device>>& devices() const override { return devices_; }
  std::string unavailable_reason() const override { return reason_; }

 private:
  std::vector<std::unique_ptr<Device>> devices_;
  std::string reason_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

std::vector<PrecisionSupport> precision_support(int major, int minor) {
  const int capability = major * 10 + minor;
  const std::string here =
      "; this GPU's compute capability is " + std::to_string(major) + "." + std::to_string(minor);
  std::vector<PrecisionSupport> support = {{Precision::kFp32, true, {}}};
  if (capability >= 70) {
    support.push_back({Precision::kFp16, true, {}});
  } else {
    support.push_back({Precision::kFp16, false,
                       "fp16 needs tensor cores: compute capability 7.0 or newer" + here});
  }
  if (capability >= 80) {
    support.push_back({Precision::kBf16, true, {}});
  } else {
    support.push_back(
        {Precision::kBf16, false, "bf16 needs compute capability 8.0 (Ampere) or newer" + here});
  }
  return support;
}

std::string uuid_string(const std::array<unsigned char, 16>& bytes) {
  std::string text = "GPU-";
  char hex[3];
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    std::snprintf(hex, sizeof hex, "%02x", bytes[i]);
    text += hex;
  }
  return text;
}

std::string no_device_reason(const std::string& error_name, const std::string& error_message,
                             const std::string& driver_load_error) {
  std::string runtime = "cudaGetDeviceCount: " + error_message + " (" + error_name + ")";
  if (!driver_load_error.empty()) {
    return "no NVIDIA driver: libcuda.so.1 cannot be loaded (" + driver_load_error + "); " +
           runtime;
  }
  if (error_name == "cudaErrorNoDevice") {
    return "the NVIDIA driver sees no GPU (is CUDA_VISIBLE_DEVICES empty?); " + runtime;
  }
  if (error_name == "cudaErrorInsufficientDriver") {
    return "the NVIDIA driver is older than this CUDA runtime needs; " + runtime;
  }
  return runtime;
}

}  // namespace carb::cuda
