// The CPU device: what oneDNN can run on this processor, and sessions on it.
#include "cpu_backend.hpp"

#include <omp.h>

#include <fstream>

#include "carb/error.hpp"
#include "dnnl_check.hpp"

namespace carb::cpu {

namespace {

std::string_view isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::all:
      return "all";
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
  }
  return "unknown";
}

std::string library_version() {
  const dnnl_version_t* version = dnnl::version();
  return "oneDNN " + std::to_string(version->major) + "." + std::to_string(version->minor) + "." +
         std::to_string(version->patch) + " (" + version->hash + ")";
}

// oneDNN 2.6 runs bf16 at full speed only with the AVX-512 BF16 or AMX instructions; on older
// CPUs it emulates them, many times slower than fp32, which would measure the emulation.
PrecisionSupport bf16_support(dnnl::cpu_isa isa) {
  if (isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx) {
    return {Precision::kBf16, true, {}};
  }
  return {Precision::kBf16, false,
          "bf16 needs avx512_bf16 or amx_bf16; this CPU's ISA is " + std::string(isa_name(isa))};
}

class CpuDevice final : public Device {
 public:
  CpuDevice() : engine_(CARB_DNNL(dnnl::engine(dnnl::engine::kind::cpu, 0))) {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    info_.id = "cpu:0";
    info_.kind = "cpu";
    info_.name = cpu_model_name();
    info_.library = library_version();
    info_.isa = isa_name(isa);
    info_.threads = omp_get_max_threads();
    info_.precisions = {
        {Precision::kFp32, true, {}},
        {Precision::kFp16, false,
         "fp16 is not supported on CPU: oneDNN 2.6 has no fp16 convolution kernels for CPUs"},
        bf16_support(isa),
    };
  }

  const DeviceInfo& info() const override { return info_; }

  // An imported network may hold what the engine cannot run as PyTorch would
  // (unsupported_reason): it is built to be checked, which is cheap next to prepare(). A ResNet
  // never does.
  Support supports(const Config& config) const override {
    Support support = support_for(config, info_);
    if (!support.supported || !config.imported()) return support;
    try {
      if (std::string why = unsupported_reason(build_network(config)); !why.empty()) {
        return Support::no(std::move(why));
      }
    } catch (const Error& error) {
      return Support::no(error.what());
    }
    return support;
  }

  // The CPU engine offers none of SessionOptions' choices.
  std::unique_ptr<Session> prepare(const Config& config, std::uint64_t seed,
                                   const SessionOptions&) const override {
    return make_cpu_session(supported_network(config), seed, engine_, weight_memory_);
  }

  std::optional<MemoryUsage> plan_memory(const Config& config) const override {
    return plan_cpu_memory(supported_network(config), engine_);
  }

  void keep_memory_between_sessions(bool keep) const override { weight_memory_->keep(keep); }

  std::int64_t kept_memory_bytes() const override { return weight_memory_->kept_bytes(); }
  std::int64_t kept_memory_unused_bytes() const override { return weight_memory_->unused_bytes(); }

 private:
  // The network of a configuration prepare() may run; throws carb::Error (input) saying why not.
  Network supported_network(const Config& config) const {
    require_support(config, info_);
    Network network = build_network(config);
    if (const std::string why = unsupported_reason(network); !why.empty()) {
      throw Error(ErrorCategory::kInput,
                  to_key(config) + " on " + info_.id + ": unsupported: " + why);
    }
    return network;
  }

  DeviceInfo info_;
  dnnl::engine engine_;
  std::shared_ptr<WeightMemory> weight_memory_ = std::make_shared<WeightMemory>();
};

class CpuBackend final : public Backend {
 public:
  CpuBackend() { devices_.push_back(std::make_unique<CpuDevice>()); }
  std::string_view name() const override { return "cpu"; }
  const std::vector<std::unique_ptr<Device>>& devices() const override { return devices_; }

 private:
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace

// Informational, so a missing /proc/cpuinfo is no error.
std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

std::string effective_isa_name() { return std::string(isa_name(dnnl::get_effective_cpu_isa())); }

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace carb::cpu
