// The one place that knows which backends this build has.
#include <nlohmann/json.hpp>

#include "carb/backend.hpp"
#include "carb/error.hpp"
#include "cpu/cpu_backend.hpp"
#ifdef CARB_WITH_CUDA
#include "cuda/cuda_backend.hpp"
#endif
#ifdef CARB_WITH_TORCH
#include <dlfcn.h>

#include <cstdlib>

#include "carb/graph.hpp"
#include "cpu/cpu_backend.hpp"
#include "torch/torch_backend.hpp"
#endif

namespace carb {

nlohmann::json Session::details() const { return nlohmann::json::object(); }

std::string engine_fingerprint(const DeviceInfo& info) {
  std::string fingerprint = info.kind + "|" + info.library + "|isa=" + info.isa +
                            "|threads=" + std::to_string(info.threads);
  if (info.kind != "cpu") {
    fingerprint += "|gpu=" + info.name + "|memory=" + std::to_string(info.memory_bytes) +
                   "|driver=" + info.driver;
  }
  return fingerprint;
}

std::string engine_part(const std::string& device_fingerprint) {
  const std::size_t bar = device_fingerprint.find('|');
  return bar == std::string::npos ? device_fingerprint : device_fingerprint.substr(bar + 1);
}

std::string engine_backend(const std::string& device_fingerprint) {
  const std::string engine = engine_part(device_fingerprint);
  const std::size_t bar = engine.find('|');
  if (bar != std::string::npos && engine.compare(bar + 1, 8, "PyTorch ") == 0) return "torch";
  return engine.substr(0, bar);
}

engine::KernelEngine kernel_engine_of(const std::string& device_fingerprint) {
  return engine_backend(device_fingerprint) == "torch" ? engine::KernelEngine::kTorch
                                                       : engine::KernelEngine::kCarb;
}

Support support_for(const Config& config, const DeviceInfo& info) {
  if (const std::string why = invalid_reason(config); !why.empty()) {
    return Support::no("invalid configuration: " + why);
  }
  if (config.imported() && !info.imported_reason.empty()) return Support::no(info.imported_reason);
  for (const PrecisionSupport& precision : info.precisions) {
    if (precision.precision == config.precision && !precision.supported) {
      return Support::no(precision.reason);
    }
  }
  return Support::yes();
}

void require_support(const Config& config, const DeviceInfo& info) {
  if (const Support support = support_for(config, info); !support.supported) {
    throw Error(ErrorCategory::kInput,
                to_key(config) + " on " + info.id + ": " + support.to_string());
  }
}

#ifdef CARB_WITH_TORCH
namespace {

// A backend compiled in whose library could not be opened here: no devices, and why.
class UnavailableBackend final : public Backend {
 public:
  UnavailableBackend(std::string name, std::string why)
      : name_(std::move(name)), why_(std::move(why)) {}
  std::string_view name() const override { return name_; }
  const std::vector<std::unique_ptr<Device>>& devices() const override { return none_; }
  std::string unavailable_reason() const override { return why_; }

 private:
  std::string name_, why_;
  std::vector<std::unique_ptr<Device>> none_;
};

}  // namespace

// The carb functions the torch module calls, which it takes from this executable: referenced
// here so that every executable that can open the module links them in. Of external linkage, so
// that the compiler keeps the table and its references (an unused table of internal linkage is
// optimised away, and an executable that calls none of them itself, bench_torch_overhead, then
// linked without compute_features).
extern const void* const torch_module_needs[];
const void* const torch_module_needs[] = {
    reinterpret_cast<const void*>(&build_network),
    reinterpret_cast<const void*>(&compute_features),
    reinterpret_cast<const void*>(&layer_name),
    reinterpret_cast<const void*>(&generate_input),
    reinterpret_cast<const void*>(&layer_parameter_sizes),
    reinterpret_cast<const void*>(
        static_cast<LayerParameters (*)(const Network&, int, std::uint64_t)>(
            &generate_layer_parameters)),
    reinterpret_cast<const void*>(&cpu::make_cpu_backend),
    reinterpret_cast<const void*>(&cpu::cpu_model_name),
    reinterpret_cast<const void*>(&cpu::effective_isa_name),
    reinterpret_cast<const void*>(&support_for),
    reinterpret_cast<const void*>(&require_support),
};

namespace {

// Opens the module (CARB_TORCH_MODULE in the environment, else the build's) once per process
// and never closes it: libtorch does not unload cleanly.
std::unique_ptr<Backend> load_torch_backend() {
  const char* override_path = std::getenv("CARB_TORCH_MODULE");
  const std::string path =
      override_path != nullptr && *override_path != '\0' ? override_path : CARB_TORCH_MODULE;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return std::make_unique<UnavailableBackend>(
        "torch", "cannot open the PyTorch backend (" + path +
                     "): " + (error != nullptr ? error : "unknown error"));
  }
  using Make = Backend* (*)(char*, std::size_t);
  auto make = reinterpret_cast<Make>(dlsym(handle, kTorchEntryPoint));
  if (make == nullptr) {
    return std::make_unique<UnavailableBackend>("torch", path + " has no " + kTorchEntryPoint);
  }
  char why[512] = {};
  Backend* backend = make(why, sizeof why);
  if (backend == nullptr) {
    return std::make_unique<UnavailableBackend>("torch",
                                                std::string("libtorch failed to start: ") + why);
  }
  return std::unique_ptr<Backend>(backend);
}

}  // namespace
#endif

std::vector<std::string> backend_names() {
  std::vector<std::string> names = {"cpu"};
#ifdef CARB_WITH_CUDA
  names.emplace_back("cuda");
#endif
#ifdef CARB_WITH_TORCH
  names.emplace_back("torch");
#endif
  return names;
}

std::unique_ptr<Backend> make_backend_for(std::string_view device) {
  const std::string_view kind = device.substr(0, device.find(':'));
  if (kind == "cpu") return cpu::make_cpu_backend();
#ifdef CARB_WITH_CUDA
  if (kind == "cuda") return cuda::make_cuda_backend();
#endif
#ifdef CARB_WITH_TORCH
  if (kind == "torch") return load_torch_backend();
#endif
  std::string names;
  for (const std::string& name : backend_names()) names += (names.empty() ? "" : ", ") + name;
  throw Error(ErrorCategory::kUsage,
              "no device '" + std::string(device) + "': this build's backends are " + names);
}

std::vector<std::unique_ptr<Backend>> make_backends() {
  std::vector<std::unique_ptr<Backend>> backends;
  for (const std::string& name : backend_names()) backends.push_back(make_backend_for(name));
  return backends;
}

}  // namespace carb
