// Drift probes: stored and read back, refused when malformed, merged once, and the speed curve
// they give (median-of-three smoothing, linear interpolation, gaps). The probe latencies here
// are made-up numbers chosen to check the arithmetic, not measurements.
#include <gtest/gtest.h>

#include <string>

#include "carb/error.hpp"
#include "carb/store.hpp"
#include "test_support.hpp"

namespace carb {
namespace {

using store_test::contains;
using store_test::error_of;
using store_test::ScratchDir;
using store_test::StoreFixture;

constexpr const char* kProbeKey = "basic18_w0.5_ds_r64_b1_fp32";
const Timestamp kStart{std::chrono::seconds(1'700'000'000)};

DriftProbeRecord probe_at(double seconds, double median_ms, std::int64_t campaign_id,
                          const std::string& key = kProbeKey) {
  DriftProbeRecord probe;
  probe.campaign_id = campaign_id;
  probe.device_fingerprint = store_test::kDeviceFingerprint;
  probe.configuration_key = key;
  probe.software_versions = store_test::kSoftwareVersions;
  probe.protocol_json = R"({"min_time_s":0.15})";
  probe.measured_at = kStart + std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
  probe.status = MeasurementStatus::kOk;
  probe.clock = "wall";
  LatencyStats stats;
  stats.median_ms = median_ms;
  stats.ci_half_width_ms = 0.01 * median_ms;
  stats.count = 200;
  stats.cv = 0.05;
  stats.converged = true;
  probe.latency = stats;
  return probe;
}

Timestamp at(double seconds) {
  return kStart + std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

using StoreDrift = StoreFixture;

TEST_F(StoreDrift, ProbesRoundTripInTimeOrder) {
  store.write_probe(probe_at(60, 1.2, campaign_id));
  DriftProbeRecord failed = probe_at(30, 1.0, campaign_id);
  failed.status = MeasurementStatus::kCrashed;
  failed.detail = "signal 11";
  failed.latency.reset();
  store.write_probe(failed);
  store.write_probe(probe_at(0, 1.0, campaign_id));
  // The same probe at the same moment again is one row.
  store.write_probe(probe_at(0, 1.0, campaign_id));

  const std::vector<DriftProbeRecord> probes = store.drift_probes();
  ASSERT_EQ(probes.size(), 3u);
  EXPECT_EQ(probes[0].measured_at, at(0));
  EXPECT_EQ(probes[1].status, MeasurementStatus::kCrashed);
  EXPECT_EQ(probes[1].detail, "signal 11");
  EXPECT_FALSE(probes[1].latency.has_value());
  ASSERT_TRUE(probes[2].latency.has_value());
  EXPECT_DOUBLE_EQ(probes[2].latency->median_ms, 1.2);
  EXPECT_EQ(probes[2].latency->count, 200);
  EXPECT_EQ(probes[2].clock, "wall");
  EXPECT_EQ(probes[2].configuration_key, kProbeKey);
  EXPECT_EQ(probes[2].protocol_json, R"({"min_time_s":0.15})");
  EXPECT_TRUE(store.drift_probes("another device").empty());
  EXPECT_EQ(store.drift_probes(store_test::kDeviceFingerprint).size(), 3u);
}

TEST_F(StoreDrift, MalformedProbesAreInputErrorsAndWriteNothing) {
  DriftProbeRecord no_latency = probe_at(0, 1.0, campaign_id);
  no_latency.latency.reset();
  EXPECT_TRUE(contains(error_of([&] { store.write_probe(no_latency); }, ErrorCategory::kInput),
                       "ok without a latency"));
  DriftProbeRecord unknown_device = probe_at(0, 1.0, campaign_id);
  unknown_device.device_fingerprint = "nobody";
  EXPECT_TRUE(contains(error_of([&] { store.write_probe(unknown_device); }, ErrorCategory::kInput),
                       "device 'nobody' is not recorded"));
  EXPECT_TRUE(contains(
      error_of([&] { store.write_probe(probe_at(0, 1.0, campaign_id + 7)); }, ErrorCategory::kInput),
      "is not recorded"));
  EXPECT_TRUE(contains(error_of([&] { store.write_probe(probe_at(0, std::nan(""), campaign_id)); },
                                ErrorCategory::kInput),
                       "not a finite number"));
  EXPECT_TRUE(contains(error_of([&] { store.write_probe(probe_at(0, 1.0, campaign_id, "basic18")); },
                                ErrorCategory::kInput),
                       "drift probe basic18: "));
  EXPECT_TRUE(store.drift_probes().empty());
}

TEST(DriftCurve, SmoothsInterpolatesAndKnowsItsGaps) {
  // A probe every 30 s; the one at 60 s is an outlier the median of three removes.
  std::vector<DriftProbeRecord> probes = {probe_at(0, 1.0, 1),   probe_at(30, 1.1, 1),
                                          probe_at(60, 3.0, 1),  probe_at(90, 1.2, 1),
                                          probe_at(120, 1.2, 1), probe_at(500, 1.0, 1)};
  DriftProbeRecord contended = probe_at(45, 9.0, 1);
  contended.contended = true;
  DriftProbeRecord failed = probe_at(50, 9.0, 1);
  failed.status = MeasurementStatus::kTimeout;
  DriftProbeRecord other = probe_at(55, 9.0, 1, "basic10_w0.25_nods_r32_b1_fp32");
  probes.insert(probes.begin() + 2, {contended, failed, other});

  const DriftCurve curve = drift_curve(probes);
  EXPECT_EQ(curve.probe_key, kProbeKey);  // the most frequent probe; others are left out
  ASSERT_EQ(curve.points.size(), 6u);      // neither contended nor failed probes count
  // Medians of three: 0 s and 30 s take {1.0, 1.1, 3.0}; 60 s {1.1, 3.0, 1.2}; ...
  const double expected[] = {1.1, 1.1, 1.2, 1.2, 1.2, 1.2};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(curve.points[i].second, expected[i]) << i;
  EXPECT_DOUBLE_EQ(curve.reference_ms, 1.2);  // the median of the smoothed probes

  EXPECT_NEAR(*curve.factor_at(at(15)), 1.1 / 1.2, 1e-12);
  EXPECT_NEAR(*curve.factor_at(at(45)), 1.15 / 1.2, 1e-12);  // halfway from 1.1 to 1.2
  EXPECT_NEAR(*curve.factor_at(at(120)), 1.0, 1e-12);
  // Before the first probe and after the last: the nearest, within half the gap limit.
  EXPECT_NEAR(*curve.factor_at(at(-100)), 1.1 / 1.2, 1e-12);
  EXPECT_FALSE(curve.factor_at(at(-200)).has_value());
  EXPECT_TRUE(curve.factor_at(at(640)).has_value());
  EXPECT_FALSE(curve.factor_at(at(700)).has_value());
  // 120 s to 500 s is more than max_gap_s (300 s) without a probe: no factor in between.
  EXPECT_FALSE(curve.factor_at(at(300)).has_value());

  const DriftCurve given = drift_curve(probes, 2.2);
  EXPECT_NEAR(*given.factor_at(at(90)), 1.2 / 2.2, 1e-12);
  EXPECT_TRUE(drift_curve({}).empty());
  EXPECT_FALSE(drift_curve({}).factor_at(at(0)).has_value());
}

TEST(StoreDriftMerge, ProbesAreCopiedOnceAndKeepTheirDevice) {
  ScratchDir dir;
  const std::string source_path = dir.file("source.db");
  {
    Store source = Store::create_or_open(source_path);
    const std::int64_t campaign = store_test::ensure_test_campaign(source, "unit");
    for (int i = 0; i < 4; ++i) source.write_probe(probe_at(30.0 * i, 1.0 + 0.1 * i, campaign));
  }
  Store target = Store::create_or_open(dir.file("target.db"));
  const MergeReport first = target.merge(source_path);
  EXPECT_EQ(first.probes_added, 4);
  const MergeReport again = target.merge(source_path);
  EXPECT_EQ(again.probes_added, 0);
  const auto probes = target.drift_probes(store_test::kDeviceFingerprint);
  ASSERT_EQ(probes.size(), 4u);
  EXPECT_DOUBLE_EQ(probes[3].latency->median_ms, 1.3);
  EXPECT_EQ(probes[3].measured_at, at(90));
}

}  // namespace
}  // namespace carb
