// Synthetic measurements for the store's tests only: deterministic latency samples and the
// statistics that summarise them, so tests can check that rows and samples agree.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "carb/space.hpp"
#include "carb/store.hpp"

namespace carb::store_test {

inline constexpr const char* kDeviceFingerprint = "test-cpu:model=Fake 9000:cores=2";
inline constexpr const char* kSoftwareVersions = "carb-test 1; fake-engine 2.0";
inline constexpr const char* kProtocolJson = R"({"min_samples":10,"target_ci":0.01,"warmup":10})";
inline constexpr const char* kSpecText = "name: crash-test\nresolution: [32, 40]\n";

/// The configuration key of the index-th test configuration (ResNet-18, varying resolution).
inline std::string configuration_key(int index) {
  Config config;
  config.block = BlockType::kBasic;
  config.stage_blocks = {2, 2, 2, 2};
  config.stage_widths = default_stage_widths();
  config.width_multiplier = 0.25;
  config.resolution = 32 + 8 * index;
  return to_key(config);
}

inline std::string key_of(int index) {
  return measurement_key(configuration_key(index), kDeviceFingerprint, kSoftwareVersions,
                         kProtocolJson);
}

/// Records the test campaign (named `name`) and the test device in `store`; returns the
/// campaign's id.
inline std::int64_t ensure_test_campaign(Store& store, const std::string& name) {
  CampaignRecord campaign;
  campaign.name = name;
  campaign.spec_text = kSpecText;
  campaign.protocol_json = kProtocolJson;
  const std::int64_t campaign_id = store.ensure_campaign(campaign);
  DeviceRecord device;
  device.fingerprint = kDeviceFingerprint;
  device.kind = "cpu";
  device.name = "Fake 9000";
  device.details_json = R"({"cores":2,"model":"Fake 9000"})";
  store.ensure_device(device);
  return campaign_id;
}

/// Nearest-rank percentile of sorted values.
inline double percentile(const std::vector<double>& sorted, double fraction) {
  const auto rank =
      static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(sorted.size())));
  return sorted[std::max<std::size_t>(rank, 1) - 1];
}

inline LatencyStats summarise(const std::vector<double>& samples_ms) {
  std::vector<double> sorted = samples_ms;
  std::sort(sorted.begin(), sorted.end());
  LatencyStats stats;
  stats.count = static_cast<std::int64_t>(sorted.size());
  stats.mean_ms =
      std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(stats.count);
  double squares = 0;
  for (double value : sorted) squares += (value - stats.mean_ms) * (value - stats.mean_ms);
  stats.cv = std::sqrt(squares / static_cast<double>(stats.count)) / stats.mean_ms;
  stats.median_ms = percentile(sorted, 0.5);
  stats.p5_ms = percentile(sorted, 0.05);
  stats.p95_ms = percentile(sorted, 0.95);
  stats.ci_half_width_ms = 0.01 * stats.median_ms;
  stats.converged = true;
  return stats;
}

/// A measurement of the index-th configuration with `samples` raw samples per clock.
inline MeasurementRecord make_record(int index, std::int64_t campaign_id, int samples,
                                     MeasurementStatus status = MeasurementStatus::kOk) {
  MeasurementRecord record;
  record.configuration_key = configuration_key(index);
  record.device_fingerprint = kDeviceFingerprint;
  record.software_versions = kSoftwareVersions;
  record.protocol_json = kProtocolJson;
  record.measurement_key = key_of(index);
  record.campaign_id = campaign_id;
  record.status = status;
  record.started_at = std::chrono::system_clock::now();
  record.finished_at = record.started_at + std::chrono::milliseconds(5);
  if (status != MeasurementStatus::kOk) {
    record.detail = "synthetic failure";
    return record;
  }
  for (int sample = 0; sample < samples; ++sample) {
    record.wall_samples_ms.push_back(1.0 + 0.001 * index + 0.0001 * (sample % 17));
    record.device_samples_ms.push_back(0.9 + 0.001 * index + 0.0001 * (sample % 13));
  }
  record.wall_latency = summarise(record.wall_samples_ms);
  record.device_latency = summarise(record.device_samples_ms);
  record.energy_null_reason = "no energy sensor on the test device";
  record.provenance_json = R"({"host":"test"})";
  return record;
}

}  // namespace carb::store_test
