// The energy path of the protocol with a working meter, on the real CPU engine: energy per
// inference, windows aligned to the counter's updates, a window shorter than one update, a
// counter that wraps inside the window, and the idle baseline. The meters are carb's real NVML
// and RAPL meters over replayed counters (energy_replay.hpp: synthetic, constant power), so each
// figure can be checked by hand: energy per inference x inferences / window = the power.
#include <gtest/gtest.h>

#include <cmath>

#include "carb/measure.hpp"
#include "energy_replay.hpp"
#include "quick_protocol.hpp"

namespace carb {
namespace {

using testing::ClockedNvmlCounter;
using testing::kTinyKey;
using testing::quick_protocol;
using testing::ThreadedRaplCounter;

const Device& cpu_device() {
  static const auto backend = make_backend_for("cpu");
  return *backend->devices().front();
}

// The tiny network measured with `meter` and an energy window of at least `window_min_s`.
Measurement measure_with(EnergyMeter& meter, double window_min_s) {
  Protocol protocol = quick_protocol();
  protocol.energy_window_min_s = window_min_s;
  return measure_configuration(cpu_device(), parse_key(kTinyKey), protocol, meter);
}

// The power a measurement's energy figures imply: energy per inference x inferences / window.
double implied_power_w(const Measurement& measurement) {
  return *measurement.energy_j * static_cast<double>(*measurement.energy_window_inferences) /
         *measurement.energy_window_s;
}

// The counters below move in steps of kRefreshS, far longer than the latency with which the
// protocol sees a step on a busy machine (kLatencyS, one pass of the tiny network or a delayed
// thread); the windows' minimum lengths are not multiples of it, so an unaligned window would
// end a distance from any multiple that no scheduling delay explains.
constexpr double kRefreshS = 0.25;
constexpr double kLatencyS = 0.08;

TEST(EnergyWindow, NvmlLikeCounterWindowIsAlignedToItsUpdates) {
  // 250 W in 62.5 J steps every 250 ms. A 0.6 s window that started and stopped anywhere would
  // last about 0.6 s and count two or three steps (208 or 312 W); aligned, it lasts three or four
  // whole steps and counts exactly those.
  ClockedNvmlCounter counter(250, kRefreshS);
  auto meter = counter.open_meter();
  ASSERT_TRUE(meter->available()) << meter->unavailable_reason();
  const Measurement measurement = measure_with(*meter, 0.6);
  ASSERT_EQ(measurement.status, MeasurementStatus::kOk) << measurement.detail;
  ASSERT_TRUE(measurement.energy_j.has_value()) << measurement.energy_null_reason;
  EXPECT_EQ(measurement.energy_method, "nvml");
  EXPECT_EQ(measurement.energy_null_reason, "");
  const nlohmann::json& alignment = measurement.provenance.at("energy_window");
  EXPECT_TRUE(alignment.at("aligned_start").get<bool>()) << alignment;
  EXPECT_TRUE(alignment.at("aligned_end").get<bool>()) << alignment;
  // Both ends just after an update: the window lasts whole steps (within the latency), and its
  // energy is exactly those steps'.
  const double window_s = *measurement.energy_window_s;
  const double steps = std::round(window_s / kRefreshS);
  EXPECT_GE(steps, 3);
  EXPECT_NEAR(window_s, steps * kRefreshS, kLatencyS) << alignment;
  EXPECT_NEAR(*measurement.energy_j * static_cast<double>(*measurement.energy_window_inferences),
              steps * ClockedNvmlCounter::step_j(), 1e-6);
  EXPECT_NEAR(implied_power_w(measurement), 250, 250 * kLatencyS / (3 * kRefreshS)) << alignment;
  // The refresh the window saw: the time from the first update to the second.
  EXPECT_NEAR(alignment.at("counter_refresh_s").get<double>(), kRefreshS, kLatencyS) << alignment;
}

TEST(EnergyWindow, WindowShorterThanTheCounterRefreshLastsOneWholeStep) {
  // 20 ms asked of a counter that moves every 250 ms: unaligned, most such windows would read no
  // change at all (0 J, an impossible figure) and the rest a whole step in 20 ms (12x the power).
  ClockedNvmlCounter counter(250, kRefreshS);
  auto meter = counter.open_meter();
  const Measurement measurement = measure_with(*meter, 0.02);
  ASSERT_EQ(measurement.status, MeasurementStatus::kOk) << measurement.detail;
  ASSERT_TRUE(measurement.energy_j.has_value()) << measurement.energy_null_reason;
  const nlohmann::json& alignment = measurement.provenance.at("energy_window");
  EXPECT_TRUE(alignment.at("aligned_end").get<bool>()) << alignment;
  // Exactly one step of 62.5 J over about 250 ms.
  EXPECT_NEAR(*measurement.energy_j * static_cast<double>(*measurement.energy_window_inferences),
              62.5, 1e-6);
  EXPECT_NEAR(*measurement.energy_window_s, kRefreshS, kLatencyS) << alignment;
}

TEST(EnergyWindow, RaplLikeCounterThatWrapsInsideTheWindowIsCountedWhole) {
  // A 250 J range at 250 W wraps every second, twice or more in a 2.1 s window. Its wrap-safe
  // interval (250 J at the assumed 500 W: 0.5 s) makes the meter read at least every 0.25 s, so
  // no wrap is lost, and a read delayed by up to 0.25 s on a busy machine still counts (a 100 J
  // range left only 0.1 s, which a loaded CI machine once overran: the energy was then rightly
  // NULL, and the test failed).
  ThreadedRaplCounter counter(250, 250'000'000);
  auto meter = open_rapl_meter(counter.root());
  ASSERT_TRUE(meter->available()) << meter->unavailable_reason();
  EXPECT_NEAR(meter->max_poll_interval_s(), 0.5, 1e-8);
  const Measurement measurement = measure_with(*meter, 2.1);
  ASSERT_EQ(measurement.status, MeasurementStatus::kOk) << measurement.detail;
  ASSERT_TRUE(measurement.energy_j.has_value()) << measurement.energy_null_reason;
  EXPECT_EQ(measurement.energy_method, "rapl");
  // Counted modulo the range, the window's energy is the power times its length: more than two
  // ranges, which a reader that missed the wraps could never report.
  const double window_j =
      *measurement.energy_j * static_cast<double>(*measurement.energy_window_inferences);
  EXPECT_GT(window_j, 500);
  EXPECT_NEAR(implied_power_w(measurement), 250, 250 * 0.1);
  EXPECT_TRUE(measurement.provenance.at("energy_window").at("aligned_start").get<bool>());
}

TEST(EnergyWindow, IdlePowerOfAnAlignedWindowIsThePower) {
  ClockedNvmlCounter counter(90, kRefreshS);
  auto meter = counter.open_meter();
  std::string why;
  const auto idle_w = measure_idle_power_w(*meter, 0.6, &why);
  ASSERT_TRUE(idle_w.has_value()) << why;
  EXPECT_NEAR(*idle_w, 90, 90 * kLatencyS / (3 * kRefreshS));
}

TEST(EnergyWindow, NoSensorLeavesEnergyNullWithTheReasonAndNoAlignment) {
  NoSensorMeter meter("no sensor in this test");
  const Measurement measurement = measure_with(meter, quick_protocol().energy_window_min_s);
  ASSERT_EQ(measurement.status, MeasurementStatus::kOk) << measurement.detail;
  EXPECT_FALSE(measurement.energy_j.has_value());
  EXPECT_EQ(measurement.energy_null_reason, "no sensor in this test");
  EXPECT_FALSE(measurement.provenance.contains("energy_window"));
  EXPECT_FALSE(measurement.energy_window_s.has_value());
}

}  // namespace
}  // namespace carb
