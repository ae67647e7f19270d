#include "cublas.hpp"

#include <dlfcn.h>

#include <mutex>

#include "carb/error.hpp"

namespace carb::cuda {

namespace {

template <typename Function>
void bind(void* handle, Function& slot, const char* symbol, std::string& missing) {
  slot = reinterpret_cast<Function>(::dlsym(handle, symbol));
  if (slot == nullptr) missing += std::string(missing.empty() ? "" : ", ") + symbol;
}

// The library the build found first, then its soname through the loader's search path.
CublasApi load() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::string errors;
  void* handle = nullptr;
  for (const std::string& candidate : {std::string(CARB_CUBLAS_PATH), soname}) {
    handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      CublasApi api;
      api.library = candidate;
      std::string missing;
      bind(handle, api.create, "cublasCreate_v2", missing);
      bind(handle, api.destroy, "cublasDestroy_v2", missing);
      bind(handle, api.set_stream, "cublasSetStream_v2", missing);
      bind(handle, api.set_workspace, "cublasSetWorkspace_v2", missing);
      bind(handle, api.set_math_mode, "cublasSetMathMode", missing);
      bind(handle, api.get_version, "cublasGetVersion_v2", missing);
      bind(handle, api.gemm_ex, "cublasGemmEx", missing);
      if (!missing.empty()) {
        throw Error(ErrorCategory::kRuntime, "cuBLAS: " + candidate + " lacks " + missing);
      }
      return api;  // the handle stays open for the life of the process
    }
    const char* error = ::dlerror();
    errors += std::string(errors.empty() ? "" : "; ") + (error != nullptr ? error : candidate);
  }
  throw Error(ErrorCategory::kRuntime, "cuBLAS: cannot load " + soname + ": " + errors);
}

}  // namespace

const CublasApi& cublas() {
  static std::once_flag once;
  static CublasApi api;
  std::call_once(once, [] { api = load(); });
  return api;
}

}  // namespace carb::cuda
