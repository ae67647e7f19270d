// The no-sensor meter and the choice between sensors, on this machine and on replayed roots.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "carb/telemetry.hpp"
#include "fake_root.hpp"

namespace carb {
namespace {

using test::FakeRoot;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(NoSensorMeter, WindowHasDurationAndNoEnergyNeverZero) {
  NoSensorMeter meter("no sensor on this test bench");
  EXPECT_EQ(meter.name(), "none");
  EXPECT_EQ(meter.sensor(), "none");
  EXPECT_FALSE(meter.available());
  EXPECT_EQ(meter.unavailable_reason(), "no sensor on this test bench");
  EXPECT_TRUE(std::isinf(meter.max_poll_interval_s()));

  meter.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  meter.sample();
  const EnergyWindow window = meter.stop();
  EXPECT_FALSE(window.energy_j.has_value());
  EXPECT_EQ(window.unavailable_reason, "no sensor on this test bench");
  EXPECT_GE(window.duration_s, 0.020);
  EXPECT_LT(window.duration_s, 5.0);
}

TEST(NoSensorMeterDeathTest, StopWithoutStartIsABug) {
  NoSensorMeter meter("none here");
  EXPECT_DEATH(meter.stop(), "without start");
}

// Whether this machine exposes a RAPL package zone (/sys/class/powercap/intel-rapl:N named
// package-*): powercap can exist and be empty, as on a stock Debian kernel in a VM.
bool has_rapl_package_zone() {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/powercap", error)) {
    std::ifstream name(entry.path() / "name");
    std::string text;
    if (name >> text && text.rfind("package", 0) == 0) return true;
  }
  return false;
}

TEST(OpenCpuEnergyMeter, OnThisMachine) {
  // The development VMs have no powercap (or an empty one), and no power PMU or one without a
  // package counter; a machine with a sensor must yield a meter whose window really measures
  // energy.
  const bool has_powercap = std::filesystem::exists("/sys/class/powercap");
  const bool has_zone = has_rapl_package_zone();
  const bool has_power_pmu = std::filesystem::exists("/sys/bus/event_source/devices/power");
  const bool has_package_event =
      std::filesystem::exists("/sys/bus/event_source/devices/power/events/energy-pkg");
  std::unique_ptr<EnergyMeter> meter = open_cpu_energy_meter();
  meter->start();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const EnergyWindow window = meter->stop();
  EXPECT_GE(window.duration_s, 0.050);
  if (!has_zone && !has_package_event) {
    // Nothing to read: the reason says why for RAPL and for perf, each as this machine is.
    EXPECT_FALSE(meter->available());
    if (!has_power_pmu) {
      EXPECT_EQ(meter->name(), "none");
    }
    const std::string rapl =
        has_powercap ? "RAPL: no package zone under /sys/class/powercap (no intel-rapl:N whose "
                       "name is package-*)"
                     : "RAPL: no /sys/class/powercap (RAPL not exposed: virtual machine?)";
    const std::string perf =
        has_power_pmu ? "perf: power PMU has no energy-pkg event "
                        "(/sys/bus/event_source/devices/power/events/energy-pkg missing)"
                      : "perf: no power PMU (/sys/bus/event_source/devices/power missing)";
    EXPECT_EQ(meter->unavailable_reason(), rapl + "; " + perf);
    EXPECT_FALSE(window.energy_j.has_value());
    EXPECT_EQ(window.unavailable_reason, meter->unavailable_reason());
  } else if (meter->available()) {
    ASSERT_TRUE(window.energy_j.has_value()) << window.unavailable_reason;
    EXPECT_GT(*window.energy_j, 0.0) << "a powered package spends energy in 50 ms";
  } else {
    // A sensor exists but this process may not read it (energy_uj is root-only).
    EXPECT_TRUE(contains(meter->unavailable_reason(), "permission denied"))
        << meter->unavailable_reason();
    EXPECT_FALSE(window.energy_j.has_value());
  }
}

void write_rapl_package(const FakeRoot& root, const std::string& zone) {
  root.write("sys/class/powercap/" + zone + "/name", "package-0\n");
  root.write("sys/class/powercap/" + zone + "/max_energy_range_uj", "262143328850\n");
  root.write("sys/class/powercap/" + zone + "/energy_uj", "5000\n");
}

std::string live_software_pmu_type() {
  std::ifstream in("/sys/bus/event_source/devices/software/type");
  std::string type;
  in >> type;
  return type;
}

// A power PMU whose type is the live software PMU (see perf_test.cpp).
void write_substituted_power_pmu(const FakeRoot& root) {
  const std::string pmu = "sys/bus/event_source/devices/power/";
  root.write(pmu + "type", live_software_pmu_type() + "\n");
  root.write(pmu + "format/event", "config:0-7\n");
  root.write(pmu + "events/energy-pkg", "event=0x00\n");
  root.write(pmu + "events/energy-pkg.scale", "1e-9\n");
  root.write(pmu + "events/energy-pkg.unit", "Joules\n");
  root.write(pmu + "cpumask", "0\n");
}

TEST(OpenCpuEnergyMeter, RaplReplayIsPreferredOverPerf) {
  FakeRoot root;
  write_rapl_package(root, "intel-rapl:0");
  write_substituted_power_pmu(root);
  EXPECT_EQ(open_cpu_energy_meter(root.path())->name(), "rapl");
}

TEST(OpenCpuEnergyMeter, PerfSubstitutedSoftwarePmuIsTheFallback) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "opening the substituted system-wide event needs root";
  }
  FakeRoot root;
  write_substituted_power_pmu(root);
  EXPECT_EQ(open_cpu_energy_meter(root.path())->name(), "perf");
}

TEST(OpenCpuEnergyMeter, RaplReplayUnreadableAndNoPmuNamesBothFailures) {
  FakeRoot root;
  write_rapl_package(root, "intel-rapl:0");
  std::filesystem::remove(root.at("sys/class/powercap/intel-rapl:0/energy_uj"));
  root.make_directory("sys/class/powercap/intel-rapl:0/energy_uj");
  std::unique_ptr<EnergyMeter> meter = open_cpu_energy_meter(root.path());
  EXPECT_EQ(meter->name(), "none");
  EXPECT_EQ(meter->unavailable_reason(),
            "RAPL: " + root.at("sys/class/powercap/intel-rapl:0/energy_uj").string() +
                " unreadable (Is a directory); perf: no power PMU (" +
                root.at("sys/bus/event_source/devices/power").string() + " missing)");
}

}  // namespace
}  // namespace carb
