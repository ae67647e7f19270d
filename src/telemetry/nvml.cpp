// NVML through dlopen: the library, a GPU monitor (state, identity, this process's memory) and
// the total-energy meter. Nothing here changes a GPU setting.
#include "nvml.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "carb/error.hpp"
#include "counter_meter.hpp"

namespace carb {

namespace telemetry_detail {

namespace {

constexpr const char* kLibraryName = "libnvidia-ml.so.1";

// Looks up `symbol` (the first of the names that exists) into `slot`.
template <typename Function>
void bind(void* handle, Function& slot, std::initializer_list<const char*> symbols) {
  for (const char* symbol : symbols) {
    if (void* address = ::dlsym(handle, symbol)) {
      slot = reinterpret_cast<Function>(address);
      return;
    }
  }
}

std::string nvml_reason(const std::string& text) { return "NVML: " + text; }

}  // namespace

std::shared_ptr<NvmlLibrary> NvmlLibrary::load(std::string* why) {
  void* handle = ::dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    if (why != nullptr) {
      *why = nvml_reason(std::string("cannot load ") + kLibraryName + " (" +
                         (error != nullptr ? error : "unknown error") +
                         "): no NVIDIA driver on this machine");
    }
    return nullptr;
  }
  NvmlApi api;
  bind(handle, api.init, {"nvmlInit_v2"});
  bind(handle, api.shutdown, {"nvmlShutdown"});
  bind(handle, api.error_string, {"nvmlErrorString"});
  bind(handle, api.device_by_uuid, {"nvmlDeviceGetHandleByUUID"});
  bind(handle, api.driver_version, {"nvmlSystemGetDriverVersion"});
  bind(handle, api.nvml_version, {"nvmlSystemGetNVMLVersion"});
  bind(handle, api.name, {"nvmlDeviceGetName"});
  bind(handle, api.memory_info, {"nvmlDeviceGetMemoryInfo"});
  bind(handle, api.total_energy_mj, {"nvmlDeviceGetTotalEnergyConsumption"});
  bind(handle, api.power_mw, {"nvmlDeviceGetPowerUsage"});
  bind(handle, api.power_limit_mw, {"nvmlDeviceGetEnforcedPowerLimit"});
  bind(handle, api.default_power_limit_mw, {"nvmlDeviceGetPowerManagementDefaultLimit"});
  bind(handle, api.clock_mhz, {"nvmlDeviceGetClockInfo"});
  bind(handle, api.temperature_c, {"nvmlDeviceGetTemperature"});
  bind(handle, api.clocks_event_reasons,
       {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  bind(handle, api.utilization, {"nvmlDeviceGetUtilizationRates"});
  bind(handle, api.compute_processes,
       {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  if (api.init == nullptr || api.shutdown == nullptr || api.error_string == nullptr ||
      api.device_by_uuid == nullptr) {
    ::dlclose(handle);
    if (why != nullptr) {
      *why = nvml_reason(std::string(kLibraryName) +
                         " lacks nvmlInit_v2, nvmlShutdown, nvmlErrorString or "
                         "nvmlDeviceGetHandleByUUID (a driver older than NVML 5?)");
    }
    return nullptr;
  }
  const NvmlReturn status = api.init();
  if (status != kNvmlSuccess) {
    const std::string text = api.error_string(status);
    ::dlclose(handle);
    if (why != nullptr) {
      *why = nvml_reason("nvmlInit_v2 failed: " + text + " (NVML error " + std::to_string(status) +
                         ")");
    }
    return nullptr;
  }
  return std::shared_ptr<NvmlLibrary>(new NvmlLibrary(api, handle));
}

std::shared_ptr<NvmlLibrary> NvmlLibrary::from_api(const NvmlApi& api, std::string* why) {
  CARB_CHECK(api.init && api.shutdown && api.error_string && api.device_by_uuid,
             "a replayed NVML needs the four required entry points");
  const NvmlReturn status = api.init();
  if (status != kNvmlSuccess) {
    if (why != nullptr) {
      *why = nvml_reason(std::string("nvmlInit_v2 failed: ") + api.error_string(status) +
                         " (NVML error " + std::to_string(status) + ")");
    }
    return nullptr;
  }
  return std::shared_ptr<NvmlLibrary>(new NvmlLibrary(api, nullptr));
}

NvmlLibrary::~NvmlLibrary() {
  api_.shutdown();
  if (handle_ != nullptr) ::dlclose(handle_);
}

std::string NvmlLibrary::describe(NvmlReturn status) const {
  return std::string(api_.error_string(status)) + " (NVML error " + std::to_string(status) + ")";
}

std::shared_ptr<NvmlLibrary> shared_nvml(std::string* why) {
  static std::string reason;
  static const std::shared_ptr<NvmlLibrary> library = NvmlLibrary::load(&reason);
  if (library == nullptr && why != nullptr) *why = reason;
  return library;
}

namespace {

// A GPU found in a library; the common part of the monitor and the meter.
struct OpenedGpu {
  std::shared_ptr<NvmlLibrary> library;
  NvmlDevice device = nullptr;
  std::string name;
  std::string reason;  ///< why it could not be opened; empty when it was
};

OpenedGpu open_gpu(std::shared_ptr<NvmlLibrary> library, const std::string& library_reason,
                   const std::string& uuid) {
  OpenedGpu gpu;
  if (library == nullptr) {
    gpu.reason = library_reason;
    return gpu;
  }
  const NvmlApi& api = library->api();
  const NvmlReturn status = api.device_by_uuid(uuid.c_str(), &gpu.device);
  if (status != kNvmlSuccess) {
    gpu.reason = nvml_reason("no GPU " + uuid + ": " + library->describe(status));
    return gpu;
  }
  char name[96] = {};
  if (api.name != nullptr && api.name(gpu.device, name, sizeof name) == kNvmlSuccess) {
    gpu.name = name;
  } else {
    gpu.name = "unnamed GPU";
  }
  gpu.library = std::move(library);
  return gpu;
}

// One unsigned value read through `function` (nullopt when NVML lacks it or fails).
std::optional<unsigned int> read_uint(NvmlReturn (*function)(NvmlDevice, unsigned int*),
                                      NvmlDevice device) {
  unsigned int value = 0;
  if (function == nullptr || function(device, &value) != kNvmlSuccess) return std::nullopt;
  return value;
}

// The same for entry points that take a selector (clock or sensor type) first.
std::optional<unsigned int> read_uint(NvmlReturn (*function)(NvmlDevice, int, unsigned int*),
                                      NvmlDevice device, int selector) {
  unsigned int value = 0;
  if (function == nullptr || function(device, selector, &value) != kNvmlSuccess) {
    return std::nullopt;
  }
  return value;
}

std::optional<double> milliwatts(std::optional<unsigned int> value) {
  if (!value) return std::nullopt;
  return static_cast<double>(*value) / 1e3;
}

std::optional<int> as_int(std::optional<unsigned int> value) {
  if (!value) return std::nullopt;
  return static_cast<int>(*value);
}

class NvmlGpuMonitor final : public GpuMonitor {
 public:
  NvmlGpuMonitor(OpenedGpu gpu, std::string uuid) : gpu_(std::move(gpu)), uuid_(std::move(uuid)) {}

  bool available() const override { return gpu_.library != nullptr; }
  std::string unavailable_reason() const override { return gpu_.reason; }

  GpuIdentity identity() const override {
    GpuIdentity identity;
    identity.uuid = uuid_;
    if (!available()) return identity;
    const NvmlApi& api = gpu_.library->api();
    identity.name = gpu_.name;
    char text[96] = {};
    if (api.driver_version != nullptr && api.driver_version(text, sizeof text) == kNvmlSuccess) {
      identity.driver_version = text;
    }
    if (api.nvml_version != nullptr && api.nvml_version(text, sizeof text) == kNvmlSuccess) {
      identity.nvml_version = text;
    }
    NvmlMemory memory;
    if (api.memory_info != nullptr && api.memory_info(gpu_.device, &memory) == kNvmlSuccess) {
      identity.memory_total_bytes = static_cast<std::int64_t>(memory.total);
    }
    identity.power_limit_w = milliwatts(read_uint(api.power_limit_mw, gpu_.device));
    identity.default_power_limit_w = milliwatts(read_uint(api.default_power_limit_mw, gpu_.device));
    return identity;
  }

  GpuSample sample() override {
    GpuSample sample;
    if (!available()) return sample;
    const NvmlApi& api = gpu_.library->api();
    const NvmlDevice device = gpu_.device;
    sample.sm_clock_mhz = as_int(read_uint(api.clock_mhz, device, kNvmlClockSm));
    sample.memory_clock_mhz = as_int(read_uint(api.clock_mhz, device, kNvmlClockMemory));
    sample.temperature_c = as_int(read_uint(api.temperature_c, device, kNvmlTemperatureGpu));
    sample.power_w = milliwatts(read_uint(api.power_mw, device));
    sample.power_limit_w = milliwatts(read_uint(api.power_limit_mw, device));
    unsigned long long reasons = 0;
    if (api.clocks_event_reasons != nullptr &&
        api.clocks_event_reasons(device, &reasons) == kNvmlSuccess) {
      sample.clocks_event_reasons = static_cast<std::uint64_t>(reasons);
    }
    NvmlUtilization utilization;
    if (api.utilization != nullptr && api.utilization(device, &utilization) == kNvmlSuccess) {
      sample.gpu_utilization_percent = static_cast<int>(utilization.gpu);
      sample.memory_utilization_percent = static_cast<int>(utilization.memory);
    }
    NvmlMemory memory;
    if (api.memory_info != nullptr && api.memory_info(device, &memory) == kNvmlSuccess) {
      sample.memory_used_bytes = static_cast<std::int64_t>(memory.used);
    }
    return sample;
  }

  std::optional<std::int64_t> process_memory_bytes(std::string* why) override {
    auto fail = [why](std::string text) -> std::optional<std::int64_t> {
      if (why != nullptr) *why = std::move(text);
      return std::nullopt;
    };
    if (!available()) return fail(gpu_.reason);
    const NvmlApi& api = gpu_.library->api();
    if (api.compute_processes == nullptr) {
      return fail(nvml_reason("this NVML has no nvmlDeviceGetComputeRunningProcesses_v3/_v2"));
    }
    // The list can grow between the size query and the read: ask again with room to spare.
    std::vector<NvmlProcessInfo> processes;
    unsigned int count = 0;
    NvmlReturn status = kNvmlErrorInsufficientSize;
    for (int attempt = 0; attempt < 3 && status == kNvmlErrorInsufficientSize; ++attempt) {
      processes.resize(count + 8);
      count = static_cast<unsigned int>(processes.size());
      status = api.compute_processes(gpu_.device, &count, processes.data());
    }
    if (status != kNvmlSuccess) {
      return fail(
          nvml_reason("nvmlDeviceGetComputeRunningProcesses: " + gpu_.library->describe(status)));
    }
    const auto pid = static_cast<unsigned int>(::getpid());
    for (unsigned int i = 0; i < count; ++i) {
      if (processes[i].pid != pid) continue;
      if (processes[i].used_gpu_memory == kNvmlValueNotAvailable) {
        return fail(nvml_reason("the driver does not report per-process memory on " + gpu_.name));
      }
      return static_cast<std::int64_t>(processes[i].used_gpu_memory);
    }
    return fail(nvml_reason("process " + std::to_string(pid) + " is not among the " +
                            std::to_string(count) + " compute processes NVML lists on " +
                            gpu_.name + " (a container with its own PID namespace?)"));
  }

 private:
  OpenedGpu gpu_;
  std::string uuid_;
};

// NVML's energy counter: 64-bit mJ since the driver was loaded; it never wraps in practice.
class NvmlEnergyMeter final : public CounterMeter {
 public:
  // `gpu_name` is "<name> (<uuid>)".
  NvmlEnergyMeter(OpenedGpu gpu, const std::string& gpu_name)
      : CounterMeter({{"NVML total energy of " + gpu_name,
                       std::numeric_limits<std::uint64_t>::max(), 1e-3}}),
        gpu_(std::move(gpu)),
        sensor_("nvmlDeviceGetTotalEnergyConsumption of " + gpu_name + ", mJ") {}

  std::string name() const override { return "nvml"; }
  std::string sensor() const override { return sensor_; }

 protected:
  std::optional<std::uint64_t> read_counter(std::size_t, std::string& failure) override {
    unsigned long long energy_mj = 0;
    const NvmlReturn status = gpu_.library->api().total_energy_mj(gpu_.device, &energy_mj);
    if (status != kNvmlSuccess) {
      failure = nvml_reason("nvmlDeviceGetTotalEnergyConsumption failed during the window: " +
                            gpu_.library->describe(status));
      return std::nullopt;
    }
    return static_cast<std::uint64_t>(energy_mj);
  }

 private:
  OpenedGpu gpu_;
  std::string sensor_;
};

}  // namespace

std::unique_ptr<GpuMonitor> open_gpu_monitor(std::shared_ptr<NvmlLibrary> library,
                                             const std::string& library_reason,
                                             const std::string& uuid) {
  return std::make_unique<NvmlGpuMonitor>(open_gpu(std::move(library), library_reason, uuid), uuid);
}

std::unique_ptr<EnergyMeter> open_nvml_energy_meter(std::shared_ptr<NvmlLibrary> library,
                                                    const std::string& library_reason,
                                                    const std::string& uuid) {
  OpenedGpu gpu = open_gpu(std::move(library), library_reason, uuid);
  if (gpu.library == nullptr) return std::make_unique<NoSensorMeter>(gpu.reason);
  const NvmlApi& api = gpu.library->api();
  if (api.total_energy_mj == nullptr) {
    return std::make_unique<NoSensorMeter>(
        nvml_reason("this NVML has no nvmlDeviceGetTotalEnergyConsumption"));
  }
  unsigned long long energy_mj = 0;
  const NvmlReturn status = api.total_energy_mj(gpu.device, &energy_mj);
  if (status != kNvmlSuccess) {
    return std::make_unique<NoSensorMeter>(
        nvml_reason("nvmlDeviceGetTotalEnergyConsumption on " + gpu.name + ": " +
                    gpu.library->describe(status) + " (the counter exists on Volta and newer)"));
  }
  const std::string gpu_name = gpu.name + " (" + uuid + ")";
  return std::make_unique<NvmlEnergyMeter>(std::move(gpu), gpu_name);
}

}  // namespace telemetry_detail

std::unique_ptr<GpuMonitor> open_gpu_monitor(const std::string& uuid) {
  std::string why;
  auto library = telemetry_detail::shared_nvml(&why);
  return telemetry_detail::open_gpu_monitor(std::move(library), why, uuid);
}

std::unique_ptr<EnergyMeter> open_nvml_energy_meter(const std::string& uuid) {
  std::string why;
  auto library = telemetry_detail::shared_nvml(&why);
  return telemetry_detail::open_nvml_energy_meter(std::move(library), why, uuid);
}

std::string clocks_event_reason_names(std::uint64_t reasons) {
  if (reasons == 0) return "none";
  std::string names;
  std::uint64_t known = 0;
  for (const ClocksEventReason& reason : kClocksEventReasons) {
    known |= reason.bit;
    if ((reasons & reason.bit) == 0) continue;
    if (!names.empty()) names += "+";
    names += reason.name;
  }
  if (const std::uint64_t unknown = reasons & ~known; unknown != 0) {
    char hex[24];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(unknown));
    if (!names.empty()) names += "+";
    names += hex;
  }
  return names;
}

namespace {

template <typename T>
nlohmann::json or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json gpu_sample_json(const GpuSample& sample) {
  return {{"sm_clock_mhz", or_null(sample.sm_clock_mhz)},
          {"memory_clock_mhz", or_null(sample.memory_clock_mhz)},
          {"temperature_c", or_null(sample.temperature_c)},
          {"power_w", or_null(sample.power_w)},
          {"power_limit_w", or_null(sample.power_limit_w)},
          {"clocks_event_reasons", or_null(sample.clocks_event_reasons)},
          {"gpu_utilization_percent", or_null(sample.gpu_utilization_percent)},
          {"memory_utilization_percent", or_null(sample.memory_utilization_percent)},
          {"memory_used_bytes", or_null(sample.memory_used_bytes)}};
}

void GpuWindow::add(const GpuSample& sample) {
  ++samples_;
  if (!first_) first_ = sample;
  last_ = sample;
  if (sample.clocks_event_reasons) reasons_ = reasons_.value_or(0) | *sample.clocks_event_reasons;
  if (sample.power_w) {
    power_sum_w_ += *sample.power_w;
    ++power_samples_;
  }
}

bool GpuWindow::throttled() const {
  return reasons_ && (*reasons_ & kRemeasureClocksEventReasons) != 0;
}

nlohmann::json GpuWindow::to_json() const {
  return {{"samples", samples_},
          {"start", first_ ? gpu_sample_json(*first_) : nlohmann::json(nullptr)},
          {"end", last_ ? gpu_sample_json(*last_) : nlohmann::json(nullptr)},
          {"clocks_event_reasons", or_null(reasons_)},
          {"clocks_event_reason_names",
           reasons_ ? nlohmann::json(clocks_event_reason_names(*reasons_)) : nullptr},
          {"mean_power_w", power_samples_ > 0 ? nlohmann::json(power_sum_w_ / power_samples_)
                                              : nlohmann::json(nullptr)}};
}

nlohmann::json gpu_identity_json(const GpuIdentity& identity) {
  return {{"name", identity.name},
          {"uuid", identity.uuid},
          {"driver_version", identity.driver_version},
          {"nvml_version", identity.nvml_version},
          {"memory_total_bytes", or_null(identity.memory_total_bytes)},
          {"power_limit_w", or_null(identity.power_limit_w)},
          {"default_power_limit_w", or_null(identity.default_power_limit_w)}};
}

}  // namespace carb
