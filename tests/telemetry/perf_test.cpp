// perf energy meter tests. This machine has no power PMU, so the tests build a temporary root
// whose "power" PMU directory is synthetic. Tests named PerfSubstitutedSoftwarePmu... point that
// directory at the kernel's real software PMU (its type number), so perf_event_open, the 64-bit
// reads and the per-CPU sum run against live kernel counters; their "joules" are the scaled
// counts of a software event. Tests named PerfReplay... only exercise the sysfs parsing.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "carb/telemetry.hpp"
#include "fake_root.hpp"

namespace carb {
namespace {

using test::FakeRoot;

constexpr const char* kPmu = "sys/bus/event_source/devices/power/";

std::string read_live(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string value = text.str();
  while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) {
    value.pop_back();
  }
  return value;
}

// Writes a power PMU with the layout of the kernel's RAPL PMU (intel and amd alike).
void write_pmu(const FakeRoot& root, const std::string& type, const std::string& event,
               const std::string& scale, const std::string& cpumask) {
  const std::string pmu = kPmu;
  root.write(pmu + "type", type + "\n");
  root.write(pmu + "format/event", "config:0-7\n");
  root.write(pmu + "events/energy-pkg", event + "\n");
  root.write(pmu + "events/energy-pkg.scale", scale + "\n");
  root.write(pmu + "events/energy-pkg.unit", "Joules\n");
  root.write(pmu + "cpumask", cpumask + "\n");
}

// A power PMU whose type is the live software PMU and whose event is cpu-clock (config 0),
// counted in nanoseconds; a scale of 1e-9 makes one "joule" one CPU-second.
void write_software_pmu(const FakeRoot& root, const std::string& cpumask) {
  write_pmu(root, read_live("/sys/bus/event_source/devices/software/type"), "event=0x00", "1e-9",
            cpumask);
}

int online_cpu_count(const std::string& list) {
  int count = 0;
  std::stringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    const std::size_t dash = item.find('-');
    count += dash == std::string::npos ? 1 : std::stoi(item.substr(dash + 1)) - std::stoi(item) + 1;
  }
  return count;
}

TEST(Perf, PerfSubstitutedSoftwarePmuSumsEveryCpuOverTheWindow) {
  if (::geteuid() != 0 && std::stoi(read_live("/proc/sys/kernel/perf_event_paranoid")) > 0) {
    GTEST_SKIP() << "system-wide perf events need root or perf_event_paranoid <= 0; "
                    "PerfReplayPermissionDeniedAsUnprivilegedUser covers that case";
  }
  FakeRoot root;
  const std::string online = read_live("/sys/devices/system/cpu/online");
  write_software_pmu(root, online);
  std::unique_ptr<EnergyMeter> meter = open_perf_energy_meter(root.path());
  ASSERT_TRUE(meter->available()) << meter->unavailable_reason();
  EXPECT_EQ(meter->name(), "perf");
  EXPECT_EQ(meter->sensor(), "perf power/energy-pkg/ (type " +
                                 read_live("/sys/bus/event_source/devices/software/type") +
                                 ", config 0x0, 1e-9 J per count, cpus " + online + ")");
  // 2^64 counts of 1 ns at 500 W: the 64-bit count never needs polling in practice.
  EXPECT_NEAR(meter->max_poll_interval_s(), 18446744073.709552 / kAssumedMaxPackagePowerW, 1.0);

  meter->start();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  meter->sample();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const EnergyWindow window = meter->stop();
  ASSERT_TRUE(window.energy_j.has_value()) << window.unavailable_reason;
  // cpu-clock counts every online CPU's elapsed time, busy or idle: the sum is CPUs x duration.
  // The counters and the window's own timestamps are read a moment apart, which a loaded machine
  // can stretch to milliseconds per read: 2% plus 10 ms per CPU of room.
  const double cpus = online_cpu_count(online);
  const double expected = cpus * window.duration_s;
  EXPECT_NEAR(*window.energy_j, expected, 0.02 * expected + 0.010 * cpus);
}

TEST(Perf, PerfSubstitutedSoftwarePmuEncodesEventConfig) {
  if (::geteuid() != 0 && std::stoi(read_live("/proc/sys/kernel/perf_event_paranoid")) > 0) {
    GTEST_SKIP() << "system-wide perf events need root or perf_event_paranoid <= 0";
  }
  // event=0x02 (the real energy-pkg encoding) is the software PMU's page-faults event.
  FakeRoot root;
  write_pmu(root, read_live("/sys/bus/event_source/devices/software/type"), "event=0x02",
            "2.3283064365386962890625e-10", "0");
  std::unique_ptr<EnergyMeter> meter = open_perf_energy_meter(root.path());
  ASSERT_TRUE(meter->available()) << meter->unavailable_reason();
  EXPECT_NE(meter->sensor().find("config 0x2, 2.3283064365386962890625e-10 J per count, cpus 0)"),
            std::string::npos)
      << meter->sensor();
}

TEST(Perf, PerfReplayPermissionDeniedAsUnprivilegedUser) {
  // A real perf_event_open by a process running as nobody; the kernel's paranoia setting
  // decides, so the replayed root carries the live value for the reason to quote.
  FakeRoot root;
  write_software_pmu(root, "0");
  const std::string paranoid = read_live("/proc/sys/kernel/perf_event_paranoid");
  root.write("proc/sys/kernel/perf_event_paranoid", paranoid + "\n");
  const std::optional<std::string> reason = test::run_unprivileged(
      [&root] { return open_perf_energy_meter(root.path())->unavailable_reason(); });
  if (!reason) {
    GTEST_SKIP() << "root cannot become nobody here";
  }
  if (std::stoi(paranoid) > 0) {
    EXPECT_EQ(*reason,
              "perf: permission denied opening power/energy-pkg/ on cpu 0 "
              "(perf_event_paranoid is " +
                  paranoid + "; system-wide events need CAP_PERFMON or perf_event_paranoid <= 0)");
  } else {
    EXPECT_EQ(*reason, "") << "with perf_event_paranoid <= 0 anyone may open the event";
  }
}

TEST(Perf, PerfReplayUnknownPmuTypeFailsToOpen) {
  if (::geteuid() != 0 && std::stoi(read_live("/proc/sys/kernel/perf_event_paranoid")) > 0) {
    GTEST_SKIP() << "unprivileged, the kernel refuses system-wide events before it looks up the "
                    "PMU type";
  }
  FakeRoot root;
  write_pmu(root, "4000000", "event=0x02", "1e-9", "0");
  EXPECT_EQ(open_perf_energy_meter(root.path())->unavailable_reason(),
            "perf: perf_event_open(power/energy-pkg/ on cpu 0) failed: No such file or directory");
}

TEST(Perf, NoPowerPmuGivesNoSensorMeter) {
  FakeRoot root;
  std::unique_ptr<EnergyMeter> meter = open_perf_energy_meter(root.path());
  EXPECT_FALSE(meter->available());
  EXPECT_EQ(meter->name(), "none");
  EXPECT_EQ(meter->unavailable_reason(),
            "perf: no power PMU (" + root.at("sys/bus/event_source/devices/power").string() +
                " missing)");
}

TEST(Perf, PerfReplayPmuWithoutEnergyPkgEvent) {
  // Some CPUs expose only energy-cores or energy-psys.
  FakeRoot root;
  root.write(std::string(kPmu) + "type", "23\n");
  root.write(std::string(kPmu) + "events/energy-cores", "event=0x01\n");
  EXPECT_EQ(open_perf_energy_meter(root.path())->unavailable_reason(),
            "perf: power PMU has no energy-pkg event (" +
                root.at(std::string(kPmu) + "events/energy-pkg").string() + " missing)");
}

TEST(Perf, PerfReplayMalformedAttributes) {
  FakeRoot root;
  const std::string pmu = root.at(kPmu).string();

  write_pmu(root, "power", "event=0x02", "2.3283064365386962890625e-10", "0");
  EXPECT_EQ(open_perf_energy_meter(root.path())->unavailable_reason(),
            "perf: " + pmu + "type holds 'power', not a 32-bit PMU type number");

  write_pmu(root, "23", "event=0x02", "-1", "0");
  EXPECT_EQ(open_perf_energy_meter(root.path())->unavailable_reason(),
            "perf: " + pmu +
                "events/energy-pkg.scale holds '-1', not a positive number of joules "
                "per count");

  write_pmu(root, "23", "event=0x02", "1e-9", "0-");
  EXPECT_EQ(open_perf_energy_meter(root.path())->unavailable_reason(),
            "perf: " + pmu + "cpumask holds '0-', not a CPU list such as 0,64");

  write_pmu(root, "23", "event=zz", "1e-9", "0");
  EXPECT_EQ(open_perf_energy_meter(root.path())->unavailable_reason(),
            "perf: " + pmu +
                "events/energy-pkg holds 'event=zz', not an event string such as "
                "event=0x02");

  write_pmu(root, "23", "event=0x02", "1e-9", "0");
  root.write(std::string(kPmu) + "events/energy-pkg.unit", "mJ\n");
  EXPECT_EQ(open_perf_energy_meter(root.path())->unavailable_reason(),
            "perf: " + pmu + "events/energy-pkg.unit holds 'mJ', not Joules");
}

TEST(Perf, PerfReplayEventValueWiderThanItsFormat) {
  FakeRoot root;
  write_pmu(root, "23", "event=0x20", "1e-9", "0");
  root.write(std::string(kPmu) + "format/event", "config:0-3\n");
  EXPECT_EQ(open_perf_energy_meter(root.path())->unavailable_reason(),
            "perf: value 32 does not fit the 4 bits of " + root.at(kPmu).string() + "format/event");
  root.write(std::string(kPmu) + "format/event", "config1:0-7\n");
  EXPECT_EQ(open_perf_energy_meter(root.path())->unavailable_reason(),
            "perf: " + root.at(kPmu).string() +
                "format/event holds 'config1:0-7', not a config:<bits> field (config1/config2 "
                "unsupported)");
}

TEST(Perf, PerfReplayMissingFormatAndUnreadableType) {
  FakeRoot root;
  write_pmu(root, "23", "event=0x02,umask=0x1", "1e-9", "0");
  EXPECT_EQ(open_perf_energy_meter(root.path())->unavailable_reason(),
            "perf: " + root.at(kPmu).string() + "format/umask missing");

  // Root reads any file, so a directory in the file's place stands for an unreadable attribute.
  std::filesystem::remove(root.at(std::string(kPmu) + "type"));
  root.make_directory(std::string(kPmu) + "type");
  EXPECT_EQ(open_perf_energy_meter(root.path())->unavailable_reason(),
            "perf: " + root.at(kPmu).string() + "type unreadable (Is a directory)");
}

}  // namespace
}  // namespace carb
