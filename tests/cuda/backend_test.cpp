// What the CUDA backend says about devices without running anything on one: precision support
// by compute capability, UUID spelling, and the reason it gives when there is no GPU (the
// machine carb is developed on has no driver: the live test checks that path there).
#include <gtest/gtest.h>

#include "carb/backend.hpp"
#include "cuda/cuda_backend.hpp"

namespace carb::cuda {
namespace {

const PrecisionSupport& of(const std::vector<PrecisionSupport>& all, Precision precision) {
  for (const PrecisionSupport& support : all) {
    if (support.precision == precision) return support;
  }
  throw std::logic_error("precision missing");
}

TEST(CudaPrecisions, FollowComputeCapability) {
  const auto turing = precision_support(7, 5);  // T4
  EXPECT_TRUE(of(turing, Precision::kFp32).supported);
  EXPECT_TRUE(of(turing, Precision::kFp16).supported);
  EXPECT_FALSE(of(turing, Precision::kBf16).supported);
  EXPECT_EQ(of(turing, Precision::kBf16).reason,
            "bf16 needs compute capability 8.0 (Ampere) or newer; this GPU's compute capability "
            "is 7.5");
  const auto pascal = precision_support(6, 1);
  EXPECT_FALSE(of(pascal, Precision::kFp16).supported);
  EXPECT_NE(of(pascal, Precision::kFp16).reason.find("tensor cores"), std::string::npos);
  for (const auto& [major, minor] :
       {std::pair{8, 0}, std::pair{8, 9}, std::pair{9, 0}, std::pair{12, 0}}) {
    const auto support = precision_support(major, minor);
    ASSERT_EQ(support.size(), 3u);
    for (const PrecisionSupport& each : support) {
      EXPECT_TRUE(each.supported) << major << "." << minor;
      EXPECT_TRUE(each.reason.empty());
    }
  }
}

TEST(CudaUuid, SpelledAsNvmlDoes) {
  std::array<unsigned char, 16> bytes{};
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 17);
  EXPECT_EQ(uuid_string(bytes), "GPU-00112233-4455-6677-8899-aabbccddeeff");
}

TEST(CudaNoDevice, ReasonNamesTheCause) {
  EXPECT_EQ(no_device_reason("cudaErrorInsufficientDriver",
                             "CUDA driver version is insufficient for CUDA runtime version",
                             "libcuda.so.1: cannot open shared object file"),
            "no NVIDIA driver: libcuda.so.1 cannot be loaded (libcuda.so.1: cannot open shared "
            "object file); cudaGetDeviceCount: CUDA driver version is insufficient for CUDA "
            "runtime version (cudaErrorInsufficientDriver)");
  EXPECT_EQ(no_device_reason("cudaErrorNoDevice", "no CUDA-capable device is detected", ""),
            "the NVIDIA driver sees no GPU (is CUDA_VISIBLE_DEVICES empty?); cudaGetDeviceCount: "
            "no CUDA-capable device is detected (cudaErrorNoDevice)");
  EXPECT_EQ(no_device_reason("cudaErrorInsufficientDriver", "old", ""),
            "the NVIDIA driver is older than this CUDA runtime needs; cudaGetDeviceCount: old "
            "(cudaErrorInsufficientDriver)");
}

TEST(CudaBackend, ListsDevicesOrSaysWhyNot) {
  const std::unique_ptr<Backend> backend = make_cuda_backend();
  EXPECT_EQ(backend->name(), "cuda");
  if (backend->devices().empty()) {
    EXPECT_FALSE(backend->unavailable_reason().empty());
    EXPECT_NE(backend->unavailable_reason().find("cudaGetDeviceCount"), std::string::npos)
        << backend->unavailable_reason();
    return;
  }
  EXPECT_TRUE(backend->unavailable_reason().empty());
  for (const auto& device : backend->devices()) {
    const DeviceInfo& info = device->info();
    EXPECT_EQ(info.kind, "cuda");
    EXPECT_EQ(info.id.rfind("cuda:", 0), 0u);
    EXPECT_EQ(info.uuid.rfind("GPU-", 0), 0u);
    EXPECT_GT(info.memory_bytes, 0);
    EXPECT_EQ(info.isa.rfind("sm_", 0), 0u);
    EXPECT_NE(info.library.find("cuDNN 9."), std::string::npos);
    EXPECT_EQ(info.precisions.size(), 3u);
  }
}

TEST(CudaBackend, UnsupportedConfigurationsAreAStatusNotAnException) {
  const std::unique_ptr<Backend> backend = make_cuda_backend();
  if (backend->devices().empty()) GTEST_SKIP() << "no GPU: " << backend->unavailable_reason();
  Config bad = parse_key("basic18_w1_ds_r32_b1_fp32");
  bad.batch = 0;
  const Support support = backend->devices().front()->supports(bad);
  EXPECT_FALSE(support.supported);
  EXPECT_EQ(support.reason.rfind("invalid configuration: ", 0), 0u) << support.reason;
}

}  // namespace
}  // namespace carb::cuda
