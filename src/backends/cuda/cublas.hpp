// cuBLAS, opened with dlopen when the first CUDA session is prepared. Linking it would make every
// carb process, CPU workers and CLI calls included, relocate libcublasLt at start (measured in
// docs/benchmarks.md, "Start-up cost of linking cuBLAS"), for the one GEMM a forward pass runs.
// The function types come from cublas_api.h, so every call is checked against the real
// prototypes.
#pragma once

#include <cublas_api.h>

#include <string>
#include <type_traits>

namespace carb::cuda {

/// cublasGemmEx's C entry point (the header adds a C++ overload for an older compute-type enum).
using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                  int, const void*, const void*, cudaDataType, int, const void*,
                                  cudaDataType, int, const void*, void*, cudaDataType, int,
                                  cublasComputeType_t, cublasGemmAlgo_t);
// Fails to compile unless the header declares exactly this overload.
static_assert(std::is_same_v<decltype(static_cast<GemmEx>(&::cublasGemmEx)), GemmEx>);

/// The cuBLAS entry points carb calls.
struct CublasApi {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  decltype(&::cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&::cublasSetMathMode) set_math_mode = nullptr;
  decltype(&::cublasGetVersion_v2) get_version = nullptr;
  GemmEx gemm_ex = nullptr;
  std::string library;  ///< the file loaded
};

/// cuBLAS, loaded once per process. Throws carb::Error (runtime) when it cannot be loaded.
const CublasApi& cublas();

}  // namespace carb::cuda
