// The check macros for the CUDA runtime, cuDNN and cuBLAS: a failed call becomes std::bad_alloc
// when memory ran out (the measure module's `oom` status), else carb::Error (runtime) naming the
// call, the place and the library's own message, and saying so when the CUDA context is lost.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

namespace carb::cuda {

/// Whether a CUDA error is sticky: the context is unusable until the process ends, so the worker
/// measuring the configuration ends with it and the campaign goes on in a fresh one.
bool is_sticky(cudaError_t status);

/// cuDNN's status and, when it has one, its last detailed message, e.g.
/// "CUDNN_STATUS_NOT_SUPPORTED (...)".
std::string describe_cudnn(cudnnStatus_t status);

/// Whether a cuDNN status refuses a call rather than failing it: any of cuDNN 9's
/// CUDNN_STATUS_NOT_SUPPORTED_* or CUDNN_STATUS_BAD_PARAM_* (a combination of types, layout or
/// activation this cuDNN does not take). Nothing ran, so another way of computing it may.
bool is_refusal(cudnnStatus_t status);

[[noreturn]] void throw_cuda(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn(cudnnStatus_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace carb::cuda

#define CARB_CUDA(call)                                                      \
  do {                                                                       \
    const cudaError_t carb_cuda_status = (call);                             \
    if (carb_cuda_status != cudaSuccess) {                                   \
      ::carb::cuda::throw_cuda(carb_cuda_status, #call, __FILE__, __LINE__); \
    }                                                                        \
  } while (false)

#define CARB_CUDNN(call)                                                       \
  do {                                                                         \
    const cudnnStatus_t carb_cudnn_status = (call);                            \
    if (carb_cudnn_status != CUDNN_STATUS_SUCCESS) {                           \
      ::carb::cuda::throw_cudnn(carb_cudnn_status, #call, __FILE__, __LINE__); \
    }                                                                          \
  } while (false)

#define CARB_CUBLAS(call)                                                        \
  do {                                                                           \
    const cublasStatus_t carb_cublas_status = (call);                            \
    if (carb_cublas_status != CUBLAS_STATUS_SUCCESS) {                           \
      ::carb::cuda::throw_cublas(carb_cublas_status, #call, __FILE__, __LINE__); \
    }                                                                            \
  } while (false)
