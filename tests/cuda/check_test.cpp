// The CUDA backend's check macros: which failures become std::bad_alloc (the `oom` status),
// which say the CUDA context is lost, and which cuDNN statuses count as a refusal that another
// way of computing may avoid. Library message lookups need no GPU.
#include <gtest/gtest.h>

#include <new>
#include <string>

#include "carb/error.hpp"
#include "cuda/check.hpp"

namespace carb::cuda {
namespace {

std::string message_of(const auto& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "no carb::Error";
}

TEST(CudaCheck, OutOfMemoryIsBadAllocInEveryLibrary) {
  EXPECT_THROW(CARB_CUDA(cudaErrorMemoryAllocation), std::bad_alloc);
  EXPECT_THROW(CARB_CUDNN(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED), std::bad_alloc);
  EXPECT_THROW(CARB_CUDNN(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED), std::bad_alloc);
  EXPECT_THROW(CARB_CUBLAS(CUBLAS_STATUS_ALLOC_FAILED), std::bad_alloc);
}

TEST(CudaCheck, StickyErrorsSaySoAndNameTheCallAndPlace) {
  EXPECT_TRUE(is_sticky(cudaErrorIllegalAddress));
  EXPECT_TRUE(is_sticky(cudaErrorLaunchFailure));
  EXPECT_FALSE(is_sticky(cudaErrorMemoryAllocation));
  EXPECT_FALSE(is_sticky(cudaErrorInvalidValue));
  const std::string sticky = message_of([] { CARB_CUDA(cudaErrorIllegalAddress); });
  EXPECT_EQ(sticky.rfind("CUDA: cudaErrorIllegalAddress at check_test.cpp:", 0), 0u) << sticky;
  EXPECT_NE(sticky.find("(cudaErrorIllegalAddress, sticky: this process's CUDA context is "
                        "unusable)"),
            std::string::npos)
      << sticky;
  const std::string plain = message_of([] { CARB_CUDA(cudaErrorInvalidValue); });
  EXPECT_EQ(plain.find("sticky"), std::string::npos) << plain;
  EXPECT_NE(plain.find("(cudaErrorInvalidValue)"), std::string::npos) << plain;
}

TEST(CudaCheck, CudnnAndCublasFailuresCarryTheLibrarysWords) {
  const std::string cudnn = message_of([] { CARB_CUDNN(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT); });
  EXPECT_EQ(cudnn.rfind("cuDNN: CUDNN_STATUS_NOT_SUPPORTED_LAYOUT at check_test.cpp:", 0), 0u)
      << cudnn;
  EXPECT_NE(cudnn.find(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)), std::string::npos);
  const std::string blas = message_of([] { CARB_CUBLAS(CUBLAS_STATUS_ARCH_MISMATCH); });
  EXPECT_NE(blas.find(": CUBLAS_STATUS_ARCH_MISMATCH"), std::string::npos) << blas;
}

TEST(CudaCheck, RefusalsAreNotSupportedOrBadParameterOnly) {
  EXPECT_TRUE(is_refusal(CUDNN_STATUS_NOT_SUPPORTED));
  EXPECT_TRUE(is_refusal(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE));
  EXPECT_TRUE(is_refusal(CUDNN_STATUS_BAD_PARAM));
  EXPECT_TRUE(is_refusal(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH));
  EXPECT_FALSE(is_refusal(CUDNN_STATUS_SUCCESS));
  EXPECT_FALSE(is_refusal(CUDNN_STATUS_EXECUTION_FAILED));
  EXPECT_FALSE(is_refusal(CUDNN_STATUS_INTERNAL_ERROR));
  EXPECT_FALSE(is_refusal(CUDNN_STATUS_NOT_INITIALIZED));
}

}  // namespace
}  // namespace carb::cuda
