// The one place that knows which backends this build has.
#include <nlohmann/json.hpp>

#include "carb/backend.hpp"
#include "carb/error.hpp"
#include "cpu/cpu_backend.hpp"
#ifdef CARB_WITH_CUDA
#include "cuda/cuda_backend.hpp"
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

Support support_for(const Config& config, const DeviceInfo& info) {
  if (const std::string why = invalid_reason(config); !why.empty()) {
    return Support::no("invalid configuration: " + why);
  }
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

std::vector<std::string> backend_names() {
#ifdef CARB_WITH_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::unique_ptr<Backend> make_backend_for(std::string_view device) {
  const std::string_view kind = device.substr(0, device.find(':'));
  if (kind == "cpu") return cpu::make_cpu_backend();
#ifdef CARB_WITH_CUDA
  if (kind == "cuda") return cuda::make_cuda_backend();
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
