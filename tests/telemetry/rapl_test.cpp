// RAPL meter tests. The machine carb is developed on exposes no powercap tree, so every test
// named RaplReplay... replays counter sequences (synthetic values in the layout and ranges of
// real powercap zones; 262143328850 uJ is the max_energy_range_uj of common Intel and AMD
// packages) written into a temporary root between the meter's reads.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "carb/telemetry.hpp"
#include "fake_root.hpp"

namespace carb {
namespace {

using test::FakeRoot;

constexpr std::uint64_t kTypicalMaxRangeUj = 262143328850;

// Writes one powercap zone: its name, range and current counter value.
void write_zone(const FakeRoot& root, const std::string& zone, const std::string& name,
                std::uint64_t max_range_uj, std::uint64_t energy_uj) {
  const std::string dir = "sys/class/powercap/" + zone + "/";
  root.write(dir + "name", name + "\n");
  root.write(dir + "max_energy_range_uj", std::to_string(max_range_uj) + "\n");
  root.write(dir + "energy_uj", std::to_string(energy_uj) + "\n");
}

void set_energy(const FakeRoot& root, const std::string& zone, std::uint64_t energy_uj) {
  root.write("sys/class/powercap/" + zone + "/energy_uj", std::to_string(energy_uj) + "\n");
}

TEST(Rapl, RaplReplaySinglePackageSumsIntervalDeltas) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 1'000'000);
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  ASSERT_TRUE(meter->available()) << meter->unavailable_reason();
  EXPECT_EQ(meter->name(), "rapl");
  EXPECT_EQ(meter->unavailable_reason(), "");
  EXPECT_EQ(meter->sensor(),
            "powercap " + root.at("sys/class/powercap/intel-rapl:0").string() + " (package-0)");

  meter->start();
  set_energy(root, "intel-rapl:0", 1'500'000);
  meter->sample();
  set_energy(root, "intel-rapl:0", 3'250'000);
  const EnergyWindow window = meter->stop();
  ASSERT_TRUE(window.energy_j.has_value()) << window.unavailable_reason;
  EXPECT_DOUBLE_EQ(*window.energy_j, 2.25);
  EXPECT_EQ(window.unavailable_reason, "");
  EXPECT_GT(window.duration_s, 0.0);
}

TEST(Rapl, RaplReplayIdleWindowIsZeroJoulesMeasured) {
  // An unchanged counter is a measured 0 J, distinct from an unavailable window.
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 42);
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  meter->start();
  const EnergyWindow window = meter->stop();
  ASSERT_TRUE(window.energy_j.has_value());
  EXPECT_EQ(*window.energy_j, 0.0);
}

TEST(Rapl, RaplReplayWraparoundUsesMaxEnergyRange) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 262'143'000'000);
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  ASSERT_TRUE(meter->available()) << meter->unavailable_reason();
  meter->start();
  set_energy(root, "intel-rapl:0", 500'000);
  const EnergyWindow window = meter->stop();
  // (500000 - 262143000000) mod (262143328850 + 1) = 328850 + 1 + 500000 uJ.
  ASSERT_TRUE(window.energy_j.has_value()) << window.unavailable_reason;
  EXPECT_NEAR(*window.energy_j, 0.828851, 1e-12);
}

TEST(Rapl, RaplReplayPollingCountsMoreThanOneWrapPerWindow) {
  // Three reads around two wraps: the total exceeds one counter range, which a window read only
  // at its ends could never report.
  FakeRoot root;
  const std::uint64_t range = kTypicalMaxRangeUj + 1;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 100);
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  meter->start();
  set_energy(root, "intel-rapl:0", 200'000'000'000);
  meter->sample();
  set_energy(root, "intel-rapl:0", 100'000'000'000);  // wrapped
  meter->sample();
  set_energy(root, "intel-rapl:0", 50'000'000'000);  // wrapped again
  const EnergyWindow window = meter->stop();
  const std::uint64_t expected_uj = (200'000'000'000 - 100) +
                                    (range - 200'000'000'000 + 100'000'000'000) +
                                    (range - 100'000'000'000 + 50'000'000'000);
  ASSERT_TRUE(window.energy_j.has_value()) << window.unavailable_reason;
  EXPECT_NEAR(*window.energy_j, static_cast<double>(expected_uj) * 1e-6, 1e-6);
  EXPECT_GT(*window.energy_j, static_cast<double>(range) * 1e-6);
}

TEST(Rapl, RaplReplayMultiPackageSumLeavesOutSubzonesPsysAndMmio) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 10'000'000);
  write_zone(root, "intel-rapl:1", "package-1", kTypicalMaxRangeUj, 20'000'000);
  // Subzones and other top-level zones count energy already inside a package or outside the CPU.
  write_zone(root, "intel-rapl:0:0", "core", kTypicalMaxRangeUj, 5'000'000);
  write_zone(root, "intel-rapl:1:0", "dram", kTypicalMaxRangeUj, 5'000'000);
  write_zone(root, "intel-rapl:2", "psys", kTypicalMaxRangeUj, 5'000'000);
  write_zone(root, "intel-rapl-mmio:0", "package-0", kTypicalMaxRangeUj, 5'000'000);
  root.write("sys/class/powercap/intel-rapl/enabled", "1\n");  // the control type directory

  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  ASSERT_TRUE(meter->available()) << meter->unavailable_reason();
  const std::string base = root.at("sys/class/powercap/").string();
  EXPECT_EQ(meter->sensor(),
            "powercap " + base + "intel-rapl:0 (package-0) " + base + "intel-rapl:1 (package-1)");
  meter->start();
  set_energy(root, "intel-rapl:0", 12'000'000);
  set_energy(root, "intel-rapl:1", 23'000'000);
  for (const char* other :
       {"intel-rapl:0:0", "intel-rapl:1:0", "intel-rapl:2", "intel-rapl-mmio:0"}) {
    set_energy(root, other, 105'000'000);
  }
  const EnergyWindow window = meter->stop();
  ASSERT_TRUE(window.energy_j.has_value()) << window.unavailable_reason;
  EXPECT_DOUBLE_EQ(*window.energy_j, 5.0);
}

TEST(Rapl, RaplReplayPackagesWrapIndependently) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", 9'999'999'999, 9'999'999'500);
  write_zone(root, "intel-rapl:1", "package-1", kTypicalMaxRangeUj, 1'000);
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  meter->start();
  set_energy(root, "intel-rapl:0", 500);    // wrapped: 499 + 1 + 500 = 1000 uJ
  set_energy(root, "intel-rapl:1", 3'000);  // 2000 uJ
  const EnergyWindow window = meter->stop();
  ASSERT_TRUE(window.energy_j.has_value()) << window.unavailable_reason;
  EXPECT_NEAR(*window.energy_j, 0.003, 1e-15);
}

TEST(Rapl, RaplReplayMaxPollIntervalFollowsTheSmallestRange) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 0);
  EXPECT_NEAR(open_rapl_meter(root.path())->max_poll_interval_s(),
              (static_cast<double>(kTypicalMaxRangeUj) + 1.0) * 1e-6 / kAssumedMaxPackagePowerW,
              1e-9);
  EXPECT_NEAR(open_rapl_meter(root.path())->max_poll_interval_s(), 524.2866577, 1e-6);
  write_zone(root, "intel-rapl:1", "package-1", 99'999'999, 0);  // 100 J range: 0.2 s
  EXPECT_NEAR(open_rapl_meter(root.path())->max_poll_interval_s(), 0.2, 1e-12);
}

TEST(Rapl, RaplReplayTooSlowlyPolledWindowIsUnavailable) {
  // A 1000 uJ range lasts 2 us at 500 W, so a 2 ms gap may hide whole wraps.
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", 999, 10);
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  ASSERT_TRUE(meter->available()) << meter->unavailable_reason();
  meter->start();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  set_energy(root, "intel-rapl:0", 20);
  const EnergyWindow window = meter->stop();
  EXPECT_FALSE(window.energy_j.has_value());
  EXPECT_NE(window.unavailable_reason.find("exceeds the wrap-safe interval of 2e-06 s"),
            std::string::npos)
      << window.unavailable_reason;
  EXPECT_NE(window.unavailable_reason.find("500 W"), std::string::npos);
  EXPECT_GE(window.duration_s, 0.002);
}

TEST(Rapl, RaplReplayGarbageMidWindowMakesWindowUnavailableNotZero) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 1'000);
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  meter->start();
  root.write("sys/class/powercap/intel-rapl:0/energy_uj", "garbage\n");
  meter->sample();
  set_energy(root, "intel-rapl:0", 2'000);  // a later good read cannot restore the lost interval
  const EnergyWindow window = meter->stop();
  EXPECT_FALSE(window.energy_j.has_value());
  EXPECT_EQ(window.unavailable_reason,
            "RAPL: " + root.at("sys/class/powercap/intel-rapl:0/energy_uj").string() +
                " holds 'garbage\\n', not an unsigned integer");

  // The next window starts clean.
  meter->start();
  set_energy(root, "intel-rapl:0", 4'000);
  const EnergyWindow next = meter->stop();
  ASSERT_TRUE(next.energy_j.has_value()) << next.unavailable_reason;
  EXPECT_DOUBLE_EQ(*next.energy_j, 0.002);
}

TEST(Rapl, RaplReplayValueAboveRangeMidWindowIsUnavailable) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", 1'000'000, 1'000);
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  meter->start();
  set_energy(root, "intel-rapl:0", 1'000'001);
  const EnergyWindow window = meter->stop();
  EXPECT_FALSE(window.energy_j.has_value());
  EXPECT_EQ(window.unavailable_reason,
            root.at("sys/class/powercap/intel-rapl:0/energy_uj").string() +
                " read 1000001, above the counter's maximum 1000000");
}

TEST(Rapl, NoPowercapDirectoryGivesNoSensorMeter) {
  FakeRoot root;  // an empty tree, like this VM's /sys
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  EXPECT_FALSE(meter->available());
  EXPECT_EQ(meter->name(), "none");
  EXPECT_EQ(meter->unavailable_reason(), "RAPL: no " + root.at("sys/class/powercap").string() +
                                             " (RAPL not exposed: virtual machine?)");
}

TEST(Rapl, RaplReplayNoPackageZone) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0:0", "core", kTypicalMaxRangeUj, 0);
  write_zone(root, "intel-rapl:1", "psys", kTypicalMaxRangeUj, 0);
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  EXPECT_FALSE(meter->available());
  EXPECT_EQ(meter->unavailable_reason(), "RAPL: no package zone under " +
                                             root.at("sys/class/powercap").string() +
                                             " (no intel-rapl:N whose name is package-*)");
}

TEST(Rapl, RaplReplayMissingEnergyFile) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 0);
  std::filesystem::remove(root.at("sys/class/powercap/intel-rapl:0/energy_uj"));
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  EXPECT_FALSE(meter->available());
  EXPECT_EQ(meter->unavailable_reason(),
            "RAPL: " + root.at("sys/class/powercap/intel-rapl:0/energy_uj").string() + " missing");
}

TEST(Rapl, RaplReplayMissingMaxEnergyRange) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 0);
  std::filesystem::remove(root.at("sys/class/powercap/intel-rapl:0/max_energy_range_uj"));
  EXPECT_EQ(open_rapl_meter(root.path())->unavailable_reason(),
            "RAPL: " + root.at("sys/class/powercap/intel-rapl:0/max_energy_range_uj").string() +
                " missing");
}

TEST(Rapl, RaplReplayDirectoryWhereEnergyFileBelongsIsUnreadable) {
  // Tests run as root, which reads a mode-000 file; a directory in the file's place is a read
  // failure that root cannot bypass.
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 0);
  std::filesystem::remove(root.at("sys/class/powercap/intel-rapl:0/energy_uj"));
  root.make_directory("sys/class/powercap/intel-rapl:0/energy_uj");
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  EXPECT_FALSE(meter->available());
  EXPECT_EQ(meter->unavailable_reason(),
            "RAPL: " + root.at("sys/class/powercap/intel-rapl:0/energy_uj").string() +
                " unreadable (Is a directory)");
}

TEST(Rapl, RaplReplayPermissionDeniedAsUnprivilegedUser) {
  // energy_uj is mode 0400 root:root on Linux >= 5.10; replayed here as mode 000 and read by a
  // child process running as nobody, since root would read it anyway.
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 0);
  const std::filesystem::path energy = root.at("sys/class/powercap/intel-rapl:0/energy_uj");
  std::filesystem::permissions(energy, std::filesystem::perms::none);
  const std::optional<std::string> reason = test::run_unprivileged(
      [&root] { return open_rapl_meter(root.path())->unavailable_reason(); });
  if (!reason) {
    GTEST_SKIP() << "root cannot become nobody here; the directory-in-place test covers reads";
  }
  EXPECT_EQ(*reason, "RAPL: permission denied reading " + energy.string() +
                         " (energy_uj is readable by root only since Linux 5.10)");
}

TEST(Rapl, RaplReplayGarbageEnergyFile) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 0);
  root.write("sys/class/powercap/intel-rapl:0/energy_uj", "12abc\n");
  EXPECT_EQ(open_rapl_meter(root.path())->unavailable_reason(),
            "RAPL: " + root.at("sys/class/powercap/intel-rapl:0/energy_uj").string() +
                " holds '12abc\\n', not an unsigned integer");
}

TEST(Rapl, RaplReplayEmptyAndNegativeRangeAreGarbage) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 0);
  const std::string range_path =
      root.at("sys/class/powercap/intel-rapl:0/max_energy_range_uj").string();
  root.write("sys/class/powercap/intel-rapl:0/max_energy_range_uj", "");
  EXPECT_EQ(open_rapl_meter(root.path())->unavailable_reason(),
            "RAPL: " + range_path + " holds '', not an unsigned integer");
  root.write("sys/class/powercap/intel-rapl:0/max_energy_range_uj", "-1\n");
  EXPECT_EQ(open_rapl_meter(root.path())->unavailable_reason(),
            "RAPL: " + range_path + " holds '-1\\n', not an unsigned integer");
  root.write("sys/class/powercap/intel-rapl:0/max_energy_range_uj", "0\n");
  EXPECT_EQ(open_rapl_meter(root.path())->unavailable_reason(),
            "RAPL: " + range_path + " is 0, so the counter cannot count");
}

TEST(Rapl, RaplReplayInitialValueAboveRangeIsRejected) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", 1'000, 1'001);
  EXPECT_EQ(open_rapl_meter(root.path())->unavailable_reason(),
            "RAPL: " + root.at("sys/class/powercap/intel-rapl:0/energy_uj").string() +
                " reads 1001, above max_energy_range_uj 1000");
}

TEST(Rapl, RaplReplayMissingZoneName) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 0);
  std::filesystem::remove(root.at("sys/class/powercap/intel-rapl:0/name"));
  EXPECT_EQ(open_rapl_meter(root.path())->unavailable_reason(),
            "RAPL: " + root.at("sys/class/powercap/intel-rapl:0/name").string() + " missing");
}

TEST(RaplDeathTest, StopWithoutStartIsABug) {
  FakeRoot root;
  write_zone(root, "intel-rapl:0", "package-0", kTypicalMaxRangeUj, 0);
  std::unique_ptr<EnergyMeter> meter = open_rapl_meter(root.path());
  EXPECT_DEATH(meter->stop(), "without start");
}

}  // namespace
}  // namespace carb
