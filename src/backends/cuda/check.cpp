#include "check.hpp"

#include <filesystem>
#include <new>

#include "carb/error.hpp"

namespace carb::cuda {

namespace {

std::string where(const char* call, const char* file, int line) {
  return std::string(call) + " at " + std::filesystem::path(file).filename().string() + ":" +
         std::to_string(line);
}

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

}  // namespace

bool is_sticky(cudaError_t status) {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
      return true;
    default:
      return false;
  }
}

std::string describe_cudnn(cudnnStatus_t status) {
  std::string text = cudnnGetErrorString(status);
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  if (detail[0] != '\0') text += std::string(" (") + detail + ")";
  return text;
}

bool is_refusal(cudnnStatus_t status) {
  const int category = CUDNN_STATUS_CATEGORY(status);
  return category == CUDNN_STATUS_NOT_SUPPORTED || category == CUDNN_STATUS_BAD_PARAM;
}

void throw_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaErrorMemoryAllocation) {
    // Not sticky: clear it so the process can report the outcome.
    cudaGetLastError();
    throw std::bad_alloc();
  }
  std::string message = "CUDA: " + where(call, file, line) + ": " + cudaGetErrorString(status) +
                        " (" + cudaGetErrorName(status);
  message += is_sticky(status) ? ", sticky: this process's CUDA context is unusable)" : ")";
  throw Error(ErrorCategory::kRuntime, message);
}

void throw_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED) {
    throw std::bad_alloc();
  }
  throw Error(ErrorCategory::kRuntime,
              "cuDNN: " + where(call, file, line) + ": " + describe_cudnn(status));
}

void throw_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw std::bad_alloc();
  throw Error(ErrorCategory::kRuntime,
              "cuBLAS: " + where(call, file, line) + ": " + cublas_status_name(status));
}

}  // namespace carb::cuda
