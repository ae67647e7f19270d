// NVML tests. The machine carb is developed on has no NVIDIA driver, so every test named
// NvmlReplay... runs carb's NVML code over a replayed library: the table of entry points carb
// would dlsym from libnvidia-ml.so.1, answering in NVML's units from the values below. The idle
// and loaded SM clocks (345 and 1980 MHz), the memory clock (3201 MHz), the driver (580.159.03)
// and the memory size (143771 MiB) are what an H200 of this workplace reported through
// nvidia-smi (2026-10-28); the energy counter, power and temperature sequences are synthetic,
// in NVML's units and an H200's ranges (700 W power limit). Tests in NvmlLive load the real
// library and check what carb says where there is none.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "carb/telemetry.hpp"
#include "nvml.hpp"

namespace carb::telemetry_detail {
namespace {

constexpr const char* kUuid = "GPU-5c3d1a2e-8f4b-4c6d-9e7a-0b1c2d3e4f50";

// What the replayed library answers. Sequences are consumed one value per call; the last value
// repeats once a sequence is exhausted.
struct Replay {
  NvmlReturn init_status = kNvmlSuccess;
  NvmlReturn uuid_status = kNvmlSuccess;
  std::deque<std::pair<NvmlReturn, unsigned long long>> energy_mj;
  std::deque<unsigned long long> reasons;
  std::vector<NvmlProcessInfo> processes;
  unsigned int sm_clock_mhz = 345;
  unsigned int power_mw = 74'830;
  int shutdowns = 0;
};
Replay replay;

template <typename T>
T next(std::deque<T>& sequence) {
  T value = sequence.front();
  if (sequence.size() > 1) sequence.pop_front();
  return value;
}

const char* error_string(NvmlReturn status) {
  switch (status) {
    case kNvmlSuccess:
      return "Success";
    case kNvmlErrorNotSupported:
      return "Not Supported";
    case kNvmlErrorNotFound:
      return "Not Found";
    case kNvmlErrorInsufficientSize:
      return "Insufficient Size";
    case kNvmlErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case kNvmlErrorGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

NvmlDevice the_device() { return reinterpret_cast<NvmlDevice>(&replay); }

NvmlApi full_api() {
  NvmlApi api;
  api.init = [] { return replay.init_status; };
  api.shutdown = [] {
    ++replay.shutdowns;
    return kNvmlSuccess;
  };
  api.error_string = error_string;
  api.device_by_uuid = [](const char* uuid, NvmlDevice* device) {
    if (std::strcmp(uuid, kUuid) != 0 || replay.uuid_status != kNvmlSuccess) {
      return replay.uuid_status != kNvmlSuccess ? replay.uuid_status : kNvmlErrorNotFound;
    }
    *device = the_device();
    return kNvmlSuccess;
  };
  api.driver_version = [](char* text, unsigned int size) {
    std::snprintf(text, size, "580.159.03");
    return kNvmlSuccess;
  };
  api.nvml_version = [](char* text, unsigned int size) {
    std::snprintf(text, size, "13.580.159.03");
    return kNvmlSuccess;
  };
  api.name = [](NvmlDevice, char* text, unsigned int size) {
    std::snprintf(text, size, "NVIDIA H200");
    return kNvmlSuccess;
  };
  api.memory_info = [](NvmlDevice, NvmlMemory* memory) {
    memory->total = 143771ull << 20;
    memory->used = 1024ull << 20;
    memory->free = memory->total - memory->used;
    return kNvmlSuccess;
  };
  api.total_energy_mj = [](NvmlDevice, unsigned long long* value) {
    const auto [status, energy] = next(replay.energy_mj);
    *value = energy;
    return status;
  };
  api.power_mw = [](NvmlDevice, unsigned int* value) {
    *value = replay.power_mw;
    return kNvmlSuccess;
  };
  api.power_limit_mw = [](NvmlDevice, unsigned int* value) {
    *value = 700'000;
    return kNvmlSuccess;
  };
  api.default_power_limit_mw = [](NvmlDevice, unsigned int* value) {
    *value = 700'000;
    return kNvmlSuccess;
  };
  api.clock_mhz = [](NvmlDevice, int type, unsigned int* value) {
    if (type == kNvmlClockSm) *value = replay.sm_clock_mhz;
    if (type == kNvmlClockMemory) *value = 3201;
    return type == kNvmlClockSm || type == kNvmlClockMemory ? kNvmlSuccess : kNvmlErrorNotSupported;
  };
  api.temperature_c = [](NvmlDevice, int sensor, unsigned int* value) {
    *value = 31;
    return sensor == kNvmlTemperatureGpu ? kNvmlSuccess : kNvmlErrorNotSupported;
  };
  api.clocks_event_reasons = [](NvmlDevice, unsigned long long* value) {
    *value = next(replay.reasons);
    return kNvmlSuccess;
  };
  api.utilization = [](NvmlDevice, NvmlUtilization* value) {
    value->gpu = 97;
    value->memory = 41;
    return kNvmlSuccess;
  };
  api.compute_processes = [](NvmlDevice, unsigned int* count, NvmlProcessInfo* infos) {
    const auto total = static_cast<unsigned int>(replay.processes.size());
    if (*count < total) {
      *count = total;
      return kNvmlErrorInsufficientSize;
    }
    for (unsigned int i = 0; i < total; ++i) infos[i] = replay.processes[i];
    *count = total;
    return kNvmlSuccess;
  };
  return api;
}

class Nvml : public ::testing::Test {
 protected:
  void SetUp() override {
    replay = Replay{};
    replay.energy_mj = {{kNvmlSuccess, 0}};
    replay.reasons = {0};
  }

  std::shared_ptr<NvmlLibrary> library(const NvmlApi& api = full_api()) {
    std::string why;
    auto loaded = NvmlLibrary::from_api(api, &why);
    EXPECT_NE(loaded, nullptr) << why;
    return loaded;
  }
};

TEST_F(Nvml, NvmlReplayEnergyMeterSumsCounterDeltasInMillijoules) {
  replay.energy_mj = {{kNvmlSuccess, 91'234'567'890},
                      {kNvmlSuccess, 91'234'567'890},
                      {kNvmlSuccess, 91'234'980'235},
                      {kNvmlSuccess, 91'235'379'000}};
  auto meter = open_nvml_energy_meter(library(), "", kUuid);
  ASSERT_TRUE(meter->available()) << meter->unavailable_reason();
  EXPECT_EQ(meter->name(), "nvml");
  EXPECT_EQ(meter->sensor(),
            std::string("nvmlDeviceGetTotalEnergyConsumption of NVIDIA H200 (") + kUuid + "), mJ");
  meter->start();
  meter->sample();
  const EnergyWindow window = meter->stop();
  ASSERT_TRUE(window.energy_j.has_value()) << window.unavailable_reason;
  // (91235379000 - 91234567890) mJ.
  EXPECT_NEAR(*window.energy_j, 811.110, 1e-9);
  EXPECT_GT(window.duration_s, 0.0);
}

TEST_F(Nvml, NvmlReplayCounterWithoutSupportIsNoSensorWithTheReason) {
  replay.energy_mj = {{kNvmlErrorNotSupported, 0}};
  auto meter = open_nvml_energy_meter(library(), "", kUuid);
  EXPECT_FALSE(meter->available());
  EXPECT_EQ(meter->name(), "none");
  EXPECT_EQ(meter->unavailable_reason(),
            "NVML: nvmlDeviceGetTotalEnergyConsumption on NVIDIA H200: Not Supported (NVML error "
            "3) (the counter exists on Volta and newer)");
  meter->start();
  const EnergyWindow window = meter->stop();
  EXPECT_FALSE(window.energy_j.has_value());
}

TEST_F(Nvml, NvmlReplayCounterFailingInsideTheWindowLosesTheWindow) {
  replay.energy_mj = {{kNvmlSuccess, 5'000}, {kNvmlSuccess, 5'000}, {kNvmlErrorGpuIsLost, 0}};
  auto meter = open_nvml_energy_meter(library(), "", kUuid);
  ASSERT_TRUE(meter->available());
  meter->start();
  const EnergyWindow window = meter->stop();
  EXPECT_FALSE(window.energy_j.has_value());
  EXPECT_EQ(window.unavailable_reason,
            "NVML: nvmlDeviceGetTotalEnergyConsumption failed during the window: GPU is lost "
            "(NVML error 15)");
}

TEST_F(Nvml, NvmlReplayUnknownGpuMakesMonitorAndMeterUnavailable) {
  const std::string other = "GPU-00000000-0000-0000-0000-000000000000";
  auto monitor = open_gpu_monitor(library(), "", other);
  EXPECT_FALSE(monitor->available());
  EXPECT_EQ(monitor->unavailable_reason(), "NVML: no GPU " + other + ": Not Found (NVML error 6)");
  EXPECT_EQ(monitor->identity().uuid, other);
  EXPECT_FALSE(monitor->sample().sm_clock_mhz.has_value());
  auto meter = open_nvml_energy_meter(library(), "", other);
  EXPECT_FALSE(meter->available());
  EXPECT_EQ(meter->unavailable_reason(), monitor->unavailable_reason());
}

TEST_F(Nvml, NvmlReplayFailedInitNamesNvmlsError) {
  replay.init_status = kNvmlErrorDriverNotLoaded;
  std::string why;
  EXPECT_EQ(NvmlLibrary::from_api(full_api(), &why), nullptr);
  EXPECT_EQ(why, "NVML: nvmlInit_v2 failed: Driver Not Loaded (NVML error 9)");
  auto monitor = open_gpu_monitor(nullptr, why, kUuid);
  EXPECT_FALSE(monitor->available());
  EXPECT_EQ(monitor->unavailable_reason(), why);
}

TEST_F(Nvml, NvmlReplayLibraryShutsNvmlDownWhenTheLastUserLetsGo) {
  {
    auto shared = library();
    auto monitor = open_gpu_monitor(shared, "", kUuid);
    shared.reset();
    EXPECT_EQ(replay.shutdowns, 0);
  }
  EXPECT_EQ(replay.shutdowns, 1);
}

TEST_F(Nvml, NvmlReplaySampleConvertsNvmlUnits) {
  replay.sm_clock_mhz = 1980;
  replay.power_mw = 612'345;
  replay.reasons = {0x4};
  auto monitor = open_gpu_monitor(library(), "", kUuid);
  ASSERT_TRUE(monitor->available()) << monitor->unavailable_reason();
  const GpuSample sample = monitor->sample();
  EXPECT_EQ(sample.sm_clock_mhz, 1980);
  EXPECT_EQ(sample.memory_clock_mhz, 3201);
  EXPECT_EQ(sample.temperature_c, 31);
  EXPECT_DOUBLE_EQ(*sample.power_w, 612.345);
  EXPECT_DOUBLE_EQ(*sample.power_limit_w, 700.0);
  EXPECT_EQ(sample.clocks_event_reasons, 0x4u);
  EXPECT_EQ(sample.gpu_utilization_percent, 97);
  EXPECT_EQ(sample.memory_utilization_percent, 41);
  EXPECT_EQ(sample.memory_used_bytes, std::int64_t{1024} << 20);
  const nlohmann::json json = gpu_sample_json(sample);
  EXPECT_EQ(json.at("sm_clock_mhz"), 1980);
  EXPECT_EQ(json.at("clocks_event_reasons"), 4);
}

TEST_F(Nvml, NvmlReplayEntryPointsMissingFromOlderDriversLeaveFieldsAbsent) {
  NvmlApi api = full_api();
  api.clocks_event_reasons = nullptr;
  api.utilization = nullptr;
  api.power_mw = nullptr;
  auto monitor = open_gpu_monitor(library(api), "", kUuid);
  const GpuSample sample = monitor->sample();
  EXPECT_EQ(sample.sm_clock_mhz, 345);
  EXPECT_FALSE(sample.clocks_event_reasons.has_value());
  EXPECT_FALSE(sample.gpu_utilization_percent.has_value());
  EXPECT_FALSE(sample.power_w.has_value());
  EXPECT_TRUE(gpu_sample_json(sample).at("power_w").is_null());
}

TEST_F(Nvml, NvmlReplayIdentityForTheFingerprint) {
  auto monitor = open_gpu_monitor(library(), "", kUuid);
  const GpuIdentity identity = monitor->identity();
  EXPECT_EQ(identity.name, "NVIDIA H200");
  EXPECT_EQ(identity.uuid, kUuid);
  EXPECT_EQ(identity.driver_version, "580.159.03");
  EXPECT_EQ(identity.nvml_version, "13.580.159.03");
  EXPECT_EQ(identity.memory_total_bytes, std::int64_t{143771} << 20);
  EXPECT_EQ(identity.power_limit_w, 700.0);
  EXPECT_EQ(gpu_identity_json(identity).at("driver_version"), "580.159.03");
}

TEST_F(Nvml, NvmlReplayProcessMemoryFindsThisProcess) {
  const auto pid = static_cast<unsigned int>(::getpid());
  replay.processes = {{pid + 1, 3ull << 30, 0, 0}, {pid, 537'919'488, 0, 0}};
  auto monitor = open_gpu_monitor(library(), "", kUuid);
  std::string why;
  EXPECT_EQ(monitor->process_memory_bytes(&why), 537'919'488) << why;
}

TEST_F(Nvml, NvmlReplayMoreProcessesThanTheFirstGuessTakeASecondCall) {
  const auto pid = static_cast<unsigned int>(::getpid());
  replay.processes.assign(9, {pid + 1, 1ull << 20, 0, 0});
  replay.processes.push_back({pid, 600ull << 20, 0, 0});
  auto monitor = open_gpu_monitor(library(), "", kUuid);
  std::string why;
  // 10 processes: the first read (room for 8) is too small, the second succeeds.
  EXPECT_EQ(monitor->process_memory_bytes(&why), std::int64_t{600} << 20) << why;
}

TEST_F(Nvml, NvmlReplayProcessNotListedSaysWhy) {
  replay.processes = {{1, 1ull << 30, 0, 0}, {2, 1ull << 30, 0, 0}};
  auto monitor = open_gpu_monitor(library(), "", kUuid);
  std::string why;
  EXPECT_FALSE(monitor->process_memory_bytes(&why).has_value());
  EXPECT_EQ(why, "NVML: process " + std::to_string(::getpid()) +
                     " is not among the 2 compute processes NVML lists on NVIDIA H200 (a "
                     "container with its own PID namespace?)");
}

TEST_F(Nvml, NvmlReplayProcessMemoryNotAvailableIsNoNumber) {
  replay.processes = {{static_cast<unsigned int>(::getpid()), kNvmlValueNotAvailable, 0, 0}};
  auto monitor = open_gpu_monitor(library(), "", kUuid);
  std::string why;
  EXPECT_FALSE(monitor->process_memory_bytes(&why).has_value());
  EXPECT_EQ(why, "NVML: the driver does not report per-process memory on NVIDIA H200");
}

TEST(GpuWindow, OrsClocksEventReasonsOverEverySample) {
  GpuWindow window;
  EXPECT_FALSE(window.reasons().has_value());
  EXPECT_FALSE(window.throttled());
  GpuSample sample;
  sample.clocks_event_reasons = 0x4;  // sw_power_cap: normal at full load
  sample.power_w = 650;
  window.add(sample);
  EXPECT_FALSE(window.throttled());
  sample.clocks_event_reasons = 0x40;  // hw_thermal_slowdown, seen once in the middle
  sample.power_w = 700;
  window.add(sample);
  sample.clocks_event_reasons = 0x1;
  sample.power_w.reset();
  window.add(sample);
  EXPECT_EQ(window.samples(), 3);
  EXPECT_EQ(window.reasons(), 0x45u);
  EXPECT_TRUE(window.throttled());
  EXPECT_EQ(window.first()->clocks_event_reasons, 0x4u);
  EXPECT_EQ(window.last()->clocks_event_reasons, 0x1u);
  const nlohmann::json json = window.to_json();
  EXPECT_EQ(json.at("clocks_event_reason_names"), "gpu_idle+sw_power_cap+hw_thermal_slowdown");
  EXPECT_DOUBLE_EQ(json.at("mean_power_w").get<double>(), 675.0);
  EXPECT_EQ(json.at("samples"), 3);
}

TEST(GpuWindow, EachProtectiveReasonAsksForAMeasureAgain) {
  for (const ClocksEventReason& reason : kClocksEventReasons) {
    GpuWindow window;
    GpuSample sample;
    sample.clocks_event_reasons = reason.bit;
    window.add(sample);
    const bool protective = reason.name == "hw_slowdown" || reason.name == "sw_thermal_slowdown" ||
                            reason.name == "hw_thermal_slowdown" ||
                            reason.name == "hw_power_brake_slowdown";
    EXPECT_EQ(window.throttled(), protective) << reason.name;
  }
}

TEST(GpuWindow, WindowWithoutReasonsIsNotThrottled) {
  GpuWindow window;
  window.add(GpuSample{});
  EXPECT_EQ(window.samples(), 1);
  EXPECT_FALSE(window.reasons().has_value());
  EXPECT_FALSE(window.throttled());
  EXPECT_TRUE(window.to_json().at("clocks_event_reasons").is_null());
  EXPECT_TRUE(window.to_json().at("mean_power_w").is_null());
}

TEST(ClocksEventReasonNames, NamesKnownBitsAndKeepsUnknownOnes) {
  EXPECT_EQ(clocks_event_reason_names(0), "none");
  EXPECT_EQ(clocks_event_reason_names(0x80), "hw_power_brake_slowdown");
  EXPECT_EQ(clocks_event_reason_names(0x104), "sw_power_cap+display_clock_setting");
  EXPECT_EQ(clocks_event_reason_names(0x3000 | 0x8), "hw_slowdown+0x3000");
}

TEST(NvmlLive, WithoutTheLibraryTheMonitorAndMeterSaySo) {
  if (void* handle = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(handle);
    GTEST_SKIP() << "libnvidia-ml.so.1 is present here; the replay tests cover the library";
  }
  auto monitor = carb::open_gpu_monitor(kUuid);
  EXPECT_FALSE(monitor->available());
  EXPECT_NE(monitor->unavailable_reason().find("NVML: cannot load libnvidia-ml.so.1 ("),
            std::string::npos)
      << monitor->unavailable_reason();
  EXPECT_NE(monitor->unavailable_reason().find("): no NVIDIA driver on this machine"),
            std::string::npos);
  auto meter = carb::open_nvml_energy_meter(kUuid);
  EXPECT_FALSE(meter->available());
  EXPECT_EQ(meter->unavailable_reason(), monitor->unavailable_reason());
  std::string why;
  EXPECT_FALSE(monitor->process_memory_bytes(&why).has_value());
  EXPECT_EQ(why, monitor->unavailable_reason());
}

}  // namespace
}  // namespace carb::telemetry_detail
