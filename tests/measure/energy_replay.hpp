// Energy counters replayed for the measure and campaign tests (the development machine has no
// readable energy sensor, so these are the only way its energy path runs). Both are synthetic and
// say so: a constant power, and a counter updated in steps as real ones are.
//   - NVML-like: carb's real NVML meter over a replayed library (the table of entry points carb
//     would dlsym) whose total-energy counter, in mJ, is advanced from the steady clock in steps
//     of `refresh_s`, as NVML's is about every 100 ms.
//   - RAPL-like: a powercap folder (sys/class/powercap/intel-rapl:0) whose energy_uj a thread
//     rewrites every millisecond, wrapping at max_energy_range_uj, read by carb's real RAPL meter
//     (open_rapl_meter on that folder, or a worker's through kTelemetryRootVariable).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "carb/telemetry.hpp"
#include "nvml.hpp"

namespace carb::testing {

using ReplayClock = std::chrono::steady_clock;

/// Counter steps since `origin`: whole periods of `refresh_s` (the counter holds still between).
inline std::uint64_t steps_since(ReplayClock::time_point origin, double refresh_s) {
  const double elapsed_s = std::chrono::duration<double>(ReplayClock::now() - origin).count();
  return static_cast<std::uint64_t>(std::floor(elapsed_s / refresh_s));
}

/// An NVML energy counter at a constant `power_w`, updated every `refresh_s`. One at a time
/// (NVML's entry points are plain function pointers, so the state is global).
class ClockedNvmlCounter {
 public:
  static constexpr const char* kUuid = "GPU-00000000-1111-2222-3333-444444444444";

  /// `power_w` x `refresh_s` must be whole millijoules, so each step is exact.
  ClockedNvmlCounter(double power_w, double refresh_s) {
    state() = {ReplayClock::now(), refresh_s,
               static_cast<std::uint64_t>(std::llround(power_w * refresh_s * 1e3))};
  }

  /// Energy of one counter step, J.
  static double step_j() { return static_cast<double>(state().step_mj) * 1e-3; }

  /// carb's NVML energy meter over the replayed library.
  std::unique_ptr<EnergyMeter> open_meter() const {
    telemetry_detail::NvmlApi api;
    api.init = [] { return telemetry_detail::kNvmlSuccess; };
    api.shutdown = [] { return telemetry_detail::kNvmlSuccess; };
    api.error_string = [](telemetry_detail::NvmlReturn) { return "replayed"; };
    api.device_by_uuid = [](const char*, telemetry_detail::NvmlDevice* device) {
      *device = reinterpret_cast<telemetry_detail::NvmlDevice>(&state());
      return telemetry_detail::kNvmlSuccess;
    };
    api.name = [](telemetry_detail::NvmlDevice, char* text, unsigned int size) {
      std::snprintf(text, size, "replayed GPU");
      return telemetry_detail::kNvmlSuccess;
    };
    api.total_energy_mj = [](telemetry_detail::NvmlDevice, unsigned long long* value) {
      // Starts far from 0, as a driver loaded days ago does.
      *value = 5'000'000'000ull + steps_since(state().origin, state().refresh_s) * state().step_mj;
      return telemetry_detail::kNvmlSuccess;
    };
    std::string why;
    auto library = telemetry_detail::NvmlLibrary::from_api(api, &why);
    return telemetry_detail::open_nvml_energy_meter(library, why, kUuid);
  }

 private:
  struct State {
    ReplayClock::time_point origin;
    double refresh_s = 0.1;
    std::uint64_t step_mj = 0;
  };
  static State& state() {
    static State the_state;
    return the_state;
  }
};

/// A powercap tree under a fresh temporary folder with one package zone whose energy_uj a thread
/// advances at `power_w` every millisecond, wrapping at `max_range_uj`. Each value is written
/// with one pwrite at a fixed width, so a reader never sees a half-written number.
class ThreadedRaplCounter {
 public:
  ThreadedRaplCounter(double power_w, std::uint64_t max_range_uj) : max_range_uj_(max_range_uj) {
    std::string pattern = (std::filesystem::temp_directory_path() / "carb-rapl-XXXXXX").string();
    root_ = ::mkdtemp(pattern.data());
    const std::filesystem::path zone = root_ / "sys/class/powercap/intel-rapl:0";
    std::filesystem::create_directories(zone);
    std::ofstream(zone / "name") << "package-0\n";
    std::ofstream(zone / "max_energy_range_uj") << max_range_uj << "\n";
    fd_ = ::open((zone / "energy_uj").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const auto origin = ReplayClock::now();
    write_value(0);
    writer_ = std::thread([this, origin, power_w] {
      while (!stop_) {
        const double elapsed_s = std::chrono::duration<double>(ReplayClock::now() - origin).count();
        const auto energy_uj = static_cast<std::uint64_t>(std::floor(elapsed_s * power_w * 1e6));
        write_value(energy_uj % (max_range_uj_ + 1));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  ~ThreadedRaplCounter() {
    stop_ = true;
    writer_.join();
    ::close(fd_);
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  ThreadedRaplCounter(const ThreadedRaplCounter&) = delete;
  ThreadedRaplCounter& operator=(const ThreadedRaplCounter&) = delete;

  /// The folder that stands for "/".
  const std::filesystem::path& root() const { return root_; }

 private:
  void write_value(std::uint64_t value) const {
    char text[32];
    const int length = std::snprintf(text, sizeof text, "%020llu\n",
                                     static_cast<unsigned long long>(value));
    if (::pwrite(fd_, text, static_cast<std::size_t>(length), 0) != length) std::abort();
  }

  std::uint64_t max_range_uj_;
  std::filesystem::path root_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread writer_;
};

}  // namespace carb::testing
