// The campaign's energy path with a working meter (a replayed RAPL counter), run by ctest with
// nothing beside it: its figures are timed windows (tests/CMakeLists.txt, *_serial_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include <nlohmann/json.hpp>

#include "campaign_fixtures.hpp"
#include "carb/campaign.hpp"
#include "energy_replay.hpp"

namespace carb {
namespace {

using testing::fresh_db;
using testing::quick_options;
using testing::tiny_configs;

TEST(Campaign, EnergyThroughWorkersWithAReplayedRaplCounter) {
  // The campaign's energy path end to end with a working meter: the idle baseline here, energy
  // per inference in the workers (which inherit kTelemetryRootVariable), the dynamic energy, into
  // the database. The counter is a synthetic RAPL package at a constant 40 W (energy_replay.hpp),
  // so every figure is known: idle power 40 W, energy x inferences / window = 40 W, dynamic
  // energy 0.
  testing::ThreadedRaplCounter counter(40, 262'143'328'850);
  ::setenv(kTelemetryRootVariable, counter.root().c_str(), 1);
  const std::string db = fresh_db("energy.sqlite");
  CampaignOptions options = quick_options(db);
  options.idle_window_s = 0.5;
  options.protocol.energy_window_min_s = 0.3;
  const CampaignSummary summary = run_campaign(tiny_configs(2), options, {});
  ::unsetenv(kTelemetryRootVariable);
  EXPECT_EQ(summary.measured.at("ok"), 2);
  ASSERT_TRUE(summary.idle_power_w.has_value()) << summary.idle_power_null_reason;
  // Within what a busy machine's delays (tens of ms on a window of tenths of seconds) allow.
  EXPECT_NEAR(*summary.idle_power_w, 40, 40 * 0.1);

  std::ostringstream lines;
  ASSERT_EQ(Store::open(db).export_measurements(lines, ExportFormat::kJsonLines), 2);
  std::istringstream rows(lines.str());
  for (std::string line; std::getline(rows, line);) {
    const auto row = nlohmann::json::parse(line);
    ASSERT_FALSE(row.at("energy_j").is_null()) << row.at("energy_null_reason");
    EXPECT_EQ(row.at("energy_method"), "rapl");
    EXPECT_NE(row.at("energy_sensor").get<std::string>().find(counter.root().string()),
              std::string::npos)
        << row.at("energy_sensor");
    const double energy_j = row.at("energy_j").get<double>();
    const double window_s = row.at("energy_window_s").get<double>();
    const auto inferences = row.at("energy_window_inferences").get<double>();
    EXPECT_GE(window_s, 0.3);
    EXPECT_NEAR(energy_j * inferences / window_s, 40, 40 * 0.1);
    EXPECT_DOUBLE_EQ(row.at("idle_power_w").get<double>(), *summary.idle_power_w);
    // energy - idle power x window / inferences: what the work added, none at a constant power.
    const double dynamic_j = row.at("dynamic_energy_j").get<double>();
    EXPECT_DOUBLE_EQ(dynamic_j, energy_j - *summary.idle_power_w * window_s / inferences);
    EXPECT_LT(std::abs(dynamic_j), 0.2 * energy_j);
    const auto alignment = row.at("provenance").at("energy_window");
    EXPECT_TRUE(alignment.at("aligned_start").get<bool>()) << alignment;
    EXPECT_TRUE(alignment.at("aligned_end").get<bool>()) << alignment;
  }
}

}  // namespace
}  // namespace carb
