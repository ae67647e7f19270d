// NVML, opened with dlopen("libnvidia-ml.so.1") and never linked: the few entry points carb
// calls, as a table of function pointers, so the library can be replaced by a replay in tests.
// The types below mirror nvml.h's (which carb does not need at build time): every value and
// layout is the one the driver's header fixes for these entry points.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "carb/telemetry.hpp"

namespace carb::telemetry_detail {

using NvmlReturn = int;  ///< nvmlReturn_t
struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;  ///< nvmlDevice_t

inline constexpr NvmlReturn kNvmlSuccess = 0;
inline constexpr NvmlReturn kNvmlErrorNotSupported = 3;
inline constexpr NvmlReturn kNvmlErrorNoPermission = 4;
inline constexpr NvmlReturn kNvmlErrorNotFound = 6;
inline constexpr NvmlReturn kNvmlErrorInsufficientSize = 7;
inline constexpr NvmlReturn kNvmlErrorDriverNotLoaded = 9;
inline constexpr NvmlReturn kNvmlErrorGpuIsLost = 15;
inline constexpr int kNvmlClockSm = 1;         ///< NVML_CLOCK_SM
inline constexpr int kNvmlClockMemory = 2;     ///< NVML_CLOCK_MEM
inline constexpr int kNvmlTemperatureGpu = 0;  ///< NVML_TEMPERATURE_GPU
/// NVML_VALUE_NOT_AVAILABLE for unsigned long long fields (e.g. a process's memory).
inline constexpr unsigned long long kNvmlValueNotAvailable = ~0ull;

/// nvmlMemory_t.
struct NvmlMemory {
  unsigned long long total = 0;
  unsigned long long free = 0;
  unsigned long long used = 0;
};

/// nvmlUtilization_t.
struct NvmlUtilization {
  unsigned int gpu = 0;
  unsigned int memory = 0;
};

/// nvmlProcessInfo_t (v2/v3 layout, what nvmlDeviceGetComputeRunningProcesses_v3 fills).
struct NvmlProcessInfo {
  unsigned int pid = 0;
  unsigned long long used_gpu_memory = 0;
  unsigned int gpu_instance_id = 0;
  unsigned int compute_instance_id = 0;
};

/// NVML's entry points that carb calls. The first four are required; any other may be null when
/// this driver's NVML lacks it, and what it reads is then absent.
struct NvmlApi {
  NvmlReturn (*init)() = nullptr;                                    ///< nvmlInit_v2
  NvmlReturn (*shutdown)() = nullptr;                                ///< nvmlShutdown
  const char* (*error_string)(NvmlReturn) = nullptr;                 ///< nvmlErrorString
  NvmlReturn (*device_by_uuid)(const char*, NvmlDevice*) = nullptr;  ///< nvmlDeviceGetHandleByUUID
  NvmlReturn (*driver_version)(char*, unsigned int) = nullptr;       ///< nvmlSystemGetDriverVersion
  NvmlReturn (*nvml_version)(char*, unsigned int) = nullptr;         ///< nvmlSystemGetNVMLVersion
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int) = nullptr;     ///< nvmlDeviceGetName
  NvmlReturn (*memory_info)(NvmlDevice, NvmlMemory*) = nullptr;      ///< nvmlDeviceGetMemoryInfo
  /// nvmlDeviceGetTotalEnergyConsumption: mJ since the driver was last loaded (Volta and newer).
  NvmlReturn (*total_energy_mj)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*power_mw)(NvmlDevice, unsigned int*) = nullptr;  ///< nvmlDeviceGetPowerUsage
  /// nvmlDeviceGetEnforcedPowerLimit, mW.
  NvmlReturn (*power_limit_mw)(NvmlDevice, unsigned int*) = nullptr;
  /// nvmlDeviceGetPowerManagementDefaultLimit, mW.
  NvmlReturn (*default_power_limit_mw)(NvmlDevice, unsigned int*) = nullptr;
  NvmlReturn (*clock_mhz)(NvmlDevice, int, unsigned int*) = nullptr;  ///< nvmlDeviceGetClockInfo
  NvmlReturn (*temperature_c)(NvmlDevice, int, unsigned int*) = nullptr;  ///< ...GetTemperature
  /// nvmlDeviceGetCurrentClocksEventReasons, or the older ...ClocksThrottleReasons.
  NvmlReturn (*clocks_event_reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;  ///< ...GetUtilizationRates
  /// nvmlDeviceGetComputeRunningProcesses_v3 (or _v2: the same layout).
  NvmlReturn (*compute_processes)(NvmlDevice, unsigned int*, NvmlProcessInfo*) = nullptr;
};

/// NVML initialised once (nvmlInit_v2) and shut down when the last user lets go.
class NvmlLibrary {
 public:
  /// dlopen("libnvidia-ml.so.1"), dlsym and nvmlInit_v2; nullptr with `why` when any fails.
  static std::shared_ptr<NvmlLibrary> load(std::string* why);
  /// Uses `api` as the library (tests replay recorded values through it): calls its init.
  static std::shared_ptr<NvmlLibrary> from_api(const NvmlApi& api, std::string* why);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const NvmlApi& api() const { return api_; }
  /// "Not Supported (NVML error 3)": NVML's own words and the number.
  std::string describe(NvmlReturn status) const;

 private:
  NvmlLibrary(const NvmlApi& api, void* handle) : api_(api), handle_(handle) {}
  NvmlApi api_;
  void* handle_ = nullptr;  ///< dlopen handle; null for a replayed api
};

/// The process-wide NVML (loaded at first use, kept until exit); nullptr with `why` without it.
std::shared_ptr<NvmlLibrary> shared_nvml(std::string* why);

/// The monitor and energy meter of the GPU with `uuid`, over `library` (null: unavailable with
/// `library_reason`).
std::unique_ptr<GpuMonitor> open_gpu_monitor(std::shared_ptr<NvmlLibrary> library,
                                             const std::string& library_reason,
                                             const std::string& uuid);
std::unique_ptr<EnergyMeter> open_nvml_energy_meter(std::shared_ptr<NvmlLibrary> library,
                                                    const std::string& library_reason,
                                                    const std::string& uuid);

}  // namespace carb::telemetry_detail
