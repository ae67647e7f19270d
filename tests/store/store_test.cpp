// Campaigns, devices, measurement writes (round trip, idempotency, validation, constraints),
// resume (pending) and claims.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/store.hpp"
#include "test_support.hpp"

namespace carb {
namespace {

using store_test::contains;
using store_test::error_of;
using store_test::key_of;
using store_test::make_record;
using store_test::RawDb;
using store_test::StoreFixture;

using StoreCampaigns = StoreFixture;
using StoreWrites = StoreFixture;
using StoreResume = StoreFixture;

TEST_F(StoreCampaigns, SameNameSpecAndProtocolIsOneCampaign) {
  CampaignRecord campaign;
  campaign.name = "unit";
  campaign.spec_text = store_test::kSpecText;
  // The same protocol spelt differently is the same campaign.
  campaign.protocol_json = R"({ "warmup": 10, "target_ci": 0.01, "min_samples": 10 })";
  EXPECT_EQ(store.ensure_campaign(campaign), campaign_id);
  campaign.spec_text += "batch: [1, 2]\n";
  const std::int64_t other = store.ensure_campaign(campaign);
  EXPECT_NE(other, campaign_id);

  const auto found = store.find_campaign(campaign_id);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->name, "unit");
  EXPECT_EQ(found->spec_text, store_test::kSpecText);
  EXPECT_EQ(found->spec_hash, sha256_hex(store_test::kSpecText));
  EXPECT_EQ(found->protocol_json, R"({"min_samples":10,"target_ci":0.01,"warmup":10})");
  EXPECT_FALSE(found->carb_version.empty());
  EXPECT_FALSE(found->git_commit.empty());
  EXPECT_LE(std::chrono::system_clock::now() - found->created_at, std::chrono::minutes(1));
  EXPECT_FALSE(store.find_campaign(other + 1).has_value());
}

TEST_F(StoreCampaigns, DevicesAreKeptByFingerprintAsFirstRecorded) {
  DeviceRecord device;
  device.fingerprint = store_test::kDeviceFingerprint;
  device.kind = "cpu";
  device.name = "renamed";
  const std::int64_t id = store.ensure_device(device);
  const auto found = store.find_device(store_test::kDeviceFingerprint);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, id);
  EXPECT_EQ(found->name, "Fake 9000");
  EXPECT_EQ(found->details_json, R"({"cores":2,"model":"Fake 9000"})");
  EXPECT_FALSE(store.find_device("no-such-device").has_value());
  device.fingerprint = "gpu:GPU-1";
  device.details_json = "{not json";
  EXPECT_TRUE(contains(error_of([&] { store.ensure_device(device); }, ErrorCategory::kInput),
                       "details of device 'gpu:GPU-1' is not valid JSON"));
}

TEST_F(StoreWrites, RoundTripsEveryField) {
  MeasurementRecord record = make_record(3, campaign_id, 40);
  record.energy_null_reason.reset();
  record.energy_j = 0.125;
  record.energy_method = "rapl-powercap";
  record.energy_sensor = "intel-rapl:0";
  record.energy_window_s = 1.25;
  record.energy_window_inferences = 300;
  record.idle_power_w = 12.5;
  record.dynamic_energy_j = -0.001;  // noise below the idle baseline is kept as measured
  record.engine_peak_bytes = 123456789;
  record.engine_weight_bytes = 11689512;
  record.engine_activation_bytes = 4000000;
  record.engine_scratchpad_bytes = 0;
  record.process_peak_rss_bytes = 300000000;
  record.baseline_rss_bytes = 200000000;
  record.detail = "note";
  ASSERT_EQ(store.write_measurement(record), WriteOutcome::kInserted);

  const auto found = store.find_measurement(record.measurement_key);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->configuration_key, record.configuration_key);
  EXPECT_EQ(found->device_fingerprint, store_test::kDeviceFingerprint);
  EXPECT_EQ(found->campaign_id, campaign_id);
  EXPECT_EQ(found->software_versions, store_test::kSoftwareVersions);
  EXPECT_EQ(found->status, MeasurementStatus::kOk);
  EXPECT_EQ(found->detail, "note");
  EXPECT_EQ(found->attempts, 1);
  // Timestamps are kept to the millisecond.
  EXPECT_EQ(found->started_at, std::chrono::floor<std::chrono::milliseconds>(record.started_at));
  EXPECT_EQ(found->finished_at - found->started_at, std::chrono::milliseconds(5));
  ASSERT_TRUE(found->wall_latency && found->device_latency);
  EXPECT_EQ(found->wall_latency->median_ms, record.wall_latency->median_ms);
  EXPECT_EQ(found->wall_latency->p95_ms, record.wall_latency->p95_ms);
  EXPECT_EQ(found->wall_latency->cv, record.wall_latency->cv);
  EXPECT_EQ(found->wall_latency->count, 40);
  EXPECT_TRUE(found->wall_latency->converged);
  EXPECT_EQ(found->device_latency->mean_ms, record.device_latency->mean_ms);
  EXPECT_EQ(found->wall_samples_ms, record.wall_samples_ms);
  EXPECT_EQ(found->device_samples_ms, record.device_samples_ms);
  EXPECT_EQ(found->energy_j, 0.125);
  EXPECT_EQ(found->energy_method, "rapl-powercap");
  EXPECT_EQ(found->energy_sensor, "intel-rapl:0");
  EXPECT_FALSE(found->energy_null_reason.has_value());
  EXPECT_EQ(found->energy_window_s, 1.25);
  EXPECT_EQ(found->energy_window_inferences, 300);
  EXPECT_EQ(found->idle_power_w, 12.5);
  EXPECT_EQ(found->dynamic_energy_j, -0.001);
  EXPECT_EQ(found->engine_peak_bytes, 123456789);
  EXPECT_EQ(found->engine_weight_bytes, 11689512);
  EXPECT_EQ(found->engine_activation_bytes, 4000000);
  EXPECT_EQ(found->engine_scratchpad_bytes, 0);
  EXPECT_EQ(found->process_peak_rss_bytes, 300000000);
  EXPECT_EQ(found->baseline_rss_bytes, 200000000);
  EXPECT_EQ(found->provenance_json, R"({"host":"test"})");
  EXPECT_EQ(found->protocol_json, R"({"min_samples":10,"target_ci":0.01,"warmup":10})");

  RawDb raw(path);
  EXPECT_EQ(raw.text("SELECT block || depth || ' ' || width_multiplier || ' ' || resolution || "
                     "' ' || stage_blocks || ' ' || precision FROM configurations"),
            "basic18 0.25 56 [2,2,2,2] fp32");
  EXPECT_EQ(raw.integer("SELECT count(*) FROM samples"), 80);
  EXPECT_FALSE(store.find_measurement(key_of(4)).has_value());
}

TEST_F(StoreWrites, AMissingEnergyStaysNullWithItsReason) {
  const MeasurementRecord record = make_record(0, campaign_id, 10);
  store.write_measurement(record);
  const auto found = store.find_measurement(record.measurement_key);
  ASSERT_TRUE(found.has_value());
  EXPECT_FALSE(found->energy_j.has_value());
  EXPECT_EQ(found->energy_null_reason, "no energy sensor on the test device");
  RawDb raw(path);
  EXPECT_EQ(raw.text("SELECT typeof(energy_j) FROM measurements"), "null");
}

TEST_F(StoreWrites, AnOkRowIsWrittenOnceAndNeverOverwrittenByAFailure) {
  const MeasurementRecord ok = make_record(1, campaign_id, 20);
  EXPECT_EQ(store.write_measurement(ok), WriteOutcome::kInserted);
  EXPECT_EQ(store.write_measurement(make_record(1, campaign_id, 30)), WriteOutcome::kKept);
  EXPECT_EQ(store.write_measurement(make_record(1, campaign_id, 0, MeasurementStatus::kCrashed)),
            WriteOutcome::kKept);
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurements"), 1);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM samples"), 40);
  const auto found = store.find_measurement(ok.measurement_key);
  EXPECT_EQ(found->status, MeasurementStatus::kOk);
  EXPECT_EQ(found->attempts, 1);
  EXPECT_EQ(found->wall_latency->count, 20);
}

TEST_F(StoreWrites, AFailureIsReplacedAndItsAttemptsCounted) {
  const std::string key = key_of(2);
  EXPECT_EQ(store.write_measurement(make_record(2, campaign_id, 0, MeasurementStatus::kTimeout)),
            WriteOutcome::kInserted);
  EXPECT_EQ(store.write_measurement(make_record(2, campaign_id, 0, MeasurementStatus::kOom)),
            WriteOutcome::kReplaced);
  auto found = store.find_measurement(key);
  EXPECT_EQ(found->status, MeasurementStatus::kOom);
  EXPECT_EQ(found->attempts, 2);
  EXPECT_FALSE(found->wall_latency.has_value());
  EXPECT_EQ(store.write_measurement(make_record(2, campaign_id, 15)), WriteOutcome::kReplaced);
  found = store.find_measurement(key);
  EXPECT_EQ(found->status, MeasurementStatus::kOk);
  EXPECT_EQ(found->attempts, 3);
  EXPECT_EQ(found->wall_samples_ms.size(), 15u);
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurements"), 1);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM samples"), 30);
}

TEST_F(StoreWrites, UnsupportedIsFinal) {
  EXPECT_EQ(
      store.write_measurement(make_record(5, campaign_id, 0, MeasurementStatus::kUnsupported)),
      WriteOutcome::kInserted);
  EXPECT_EQ(store.write_measurement(make_record(5, campaign_id, 0, MeasurementStatus::kError)),
            WriteOutcome::kKept);
  EXPECT_EQ(store.find_measurement(key_of(5))->status, MeasurementStatus::kUnsupported);
}

TEST_F(StoreWrites, RejectsRecordsThatDisagreeWithThemselves) {
  MeasurementRecord record = make_record(0, campaign_id, 10);
  record.wall_latency->median_ms = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(contains(error_of([&] { store.write_measurement(record); }, ErrorCategory::kInput),
                       "wall median_ms is not a finite number"));

  record = make_record(0, campaign_id, 10);
  record.wall_samples_ms.pop_back();
  EXPECT_TRUE(contains(error_of([&] { store.write_measurement(record); }, ErrorCategory::kInput),
                       "wall latency counts 10 samples but 9 raw samples were given"));

  record = make_record(0, campaign_id, 10);
  record.device_latency.reset();
  EXPECT_TRUE(contains(error_of([&] { store.write_measurement(record); }, ErrorCategory::kInput),
                       "device latency counts 0 samples but 10 raw samples were given"));

  record = make_record(0, campaign_id, 10);
  record.energy_j = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(contains(error_of([&] { store.write_measurement(record); }, ErrorCategory::kInput),
                       "energy_j is not a finite number"));

  record = make_record(0, campaign_id, 10);
  record.measurement_key = key_of(1);
  EXPECT_TRUE(contains(error_of([&] { store.write_measurement(record); }, ErrorCategory::kInput),
                       "does not match its fields (" + key_of(0) + ")"));

  record = make_record(0, campaign_id, 10);
  record.configuration_key = "basic18_w0.250_ds_r32_b1_fp32";
  record.measurement_key = measurement_key(record.configuration_key, record.device_fingerprint,
                                           record.software_versions, record.protocol_json);
  EXPECT_TRUE(contains(error_of([&] { store.write_measurement(record); }, ErrorCategory::kInput),
                       "is not canonical (carb::to_key gives 'basic18_w0.25_ds_r32_b1_fp32')"));

  record = make_record(0, campaign_id, 10);
  record.device_fingerprint = "unknown-device";
  record.measurement_key = measurement_key(record.configuration_key, record.device_fingerprint,
                                           record.software_versions, record.protocol_json);
  EXPECT_TRUE(contains(error_of([&] { store.write_measurement(record); }, ErrorCategory::kInput),
                       "device 'unknown-device' is not recorded"));

  record = make_record(0, campaign_id + 100, 10);
  EXPECT_TRUE(contains(error_of([&] { store.write_measurement(record); }, ErrorCategory::kInput),
                       "campaign " + std::to_string(campaign_id + 100) + " is not recorded"));

  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurements"), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM configurations"), 0);
}

TEST_F(StoreWrites, SchemaConstraintsRejectImpossibleValuesAndRollBack) {
  const auto rejected = [&](const MeasurementRecord& record, const std::string& constraint) {
    const std::string message =
        error_of([&] { store.write_measurement(record); }, ErrorCategory::kRuntime);
    EXPECT_TRUE(contains(message, "CHECK constraint failed: " + constraint)) << message;
    // The check names the call, the statement, the place and the file.
    EXPECT_TRUE(contains(message, "sqlite3_step(\"INSERT INTO ")) << message;
    EXPECT_TRUE(contains(message, "src/store/store.cpp:")) << message;
    EXPECT_TRUE(contains(message, " on " + path + ": ")) << message;
  };
  MeasurementRecord record = make_record(0, campaign_id, 10);
  record.energy_null_reason.reset();
  rejected(record, "status <> 'ok' OR energy_j IS NOT NULL OR energy_null_reason IS NOT NULL");

  record = make_record(0, campaign_id, 10);
  record.energy_null_reason.reset();
  record.energy_j = -1.0;
  record.energy_method = "nvml-total-energy";
  rejected(record, "energy_j >= 0");

  record = make_record(0, campaign_id, 10);
  record.energy_j = 1.0;
  record.energy_method = "nvml-total-energy";
  rejected(record, "energy_j IS NULL OR energy_null_reason IS NULL");

  record = make_record(0, campaign_id, 10);
  record.wall_latency.reset();
  record.wall_samples_ms.clear();
  rejected(record, "status <> 'ok' OR wall_median_ms IS NOT NULL");

  record = make_record(0, campaign_id, 10);
  record.wall_latency->p5_ms = record.wall_latency->median_ms + 1;
  rejected(record, "wall_p5_ms <= wall_median_ms AND wall_median_ms <= wall_p95_ms");

  record = make_record(0, campaign_id, 10);
  record.wall_samples_ms[3] = -0.5;
  rejected(record, "value_ms >= 0");

  record = make_record(0, campaign_id, 10);
  record.engine_scratchpad_bytes = -4096;
  rejected(record, "engine_scratchpad_bytes >= 0");

  record = make_record(0, campaign_id, 10);
  record.finished_at = record.started_at - std::chrono::seconds(1);
  rejected(record, "finished_at >= started_at");

  // Nothing of the failed writes remains, not even the configuration row.
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurements"), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM samples"), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM configurations"), 0);
  // The store is still usable.
  EXPECT_EQ(store.write_measurement(make_record(0, campaign_id, 10)), WriteOutcome::kInserted);
}

TEST_F(StoreResume, PendingSkipsFinalKeysAndFailuresOutOfAttempts) {
  store.write_measurement(make_record(0, campaign_id, 10));
  store.write_measurement(make_record(1, campaign_id, 0, MeasurementStatus::kCrashed));
  store.write_measurement(make_record(2, campaign_id, 0, MeasurementStatus::kUnsupported));
  store.write_measurement(make_record(3, campaign_id, 0, MeasurementStatus::kTimeout));
  store.write_measurement(make_record(3, campaign_id, 0, MeasurementStatus::kTimeout));
  const std::vector<std::string> keys = {key_of(4), key_of(3), key_of(2), key_of(1), key_of(0)};
  EXPECT_EQ(store.pending(keys, ResumePolicy{3, std::chrono::seconds(60)}),
            (std::vector<std::string>{key_of(4), key_of(3), key_of(1)}));
  EXPECT_EQ(store.pending(keys, ResumePolicy{2, std::chrono::seconds(60)}),
            (std::vector<std::string>{key_of(4), key_of(1)}));
  EXPECT_EQ(store.pending(keys, ResumePolicy{1, std::chrono::seconds(60)}),
            (std::vector<std::string>{key_of(4)}));
}

TEST_F(StoreResume, ClaimsKeepOtherLiveOwnersOut) {
  const ResumePolicy policy;
  const ClaimOwner self = ClaimOwner::current();
  // pid 1 exists on every Linux system (kill(1, 0) gives 0 or EPERM: alive either way).
  const ClaimOwner neighbour{self.host, 1};
  EXPECT_TRUE(store.claim(key_of(0), neighbour, policy));
  EXPECT_FALSE(store.claim(key_of(0), self, policy));
  EXPECT_TRUE(store.claim(key_of(0), neighbour, policy));  // its own claim, refreshed
  store.release(key_of(0), self);                          // not ours: nothing happens
  EXPECT_FALSE(store.claim(key_of(0), self, policy));
  store.release(key_of(0), neighbour);
  EXPECT_TRUE(store.claim(key_of(0), self, policy));

  // Writing the measurement ends the claim; a final key cannot be claimed again.
  store.write_measurement(make_record(0, campaign_id, 10));
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM claims"), 0);
  EXPECT_FALSE(store.claim(key_of(0), self, policy));

  // A failed key can be claimed until it runs out of attempts.
  store.write_measurement(make_record(1, campaign_id, 0, MeasurementStatus::kOom));
  EXPECT_TRUE(store.claim(key_of(1), self, ResumePolicy{2, std::chrono::seconds(60)}));
  store.release(key_of(1), self);
  EXPECT_FALSE(store.claim(key_of(1), self, ResumePolicy{1, std::chrono::seconds(60)}));
}

TEST_F(StoreResume, ClaimsOfDeadProcessesAreTakenOver) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // reaped: its pid now names no process
  const ClaimOwner self = ClaimOwner::current();
  const ClaimOwner dead{self.host, child};
  ASSERT_TRUE(store.claim(key_of(0), dead, ResumePolicy{}));
  EXPECT_TRUE(store.claim(key_of(0), self, ResumePolicy{}));
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT owner_pid FROM claims"), getpid());
}

TEST_F(StoreResume, ClaimsOlderThanTheTimeoutAreTakenOver) {
  const ClaimOwner self = ClaimOwner::current();
  // On another host its pid cannot be checked, so only the claim's age can free it.
  const ClaimOwner remote{"some-other-host", 4242};
  ASSERT_TRUE(store.claim(key_of(0), remote, ResumePolicy{}));
  EXPECT_FALSE(store.claim(key_of(0), self, ResumePolicy{3, std::chrono::seconds(3600)}));
  RawDb raw(path);
  raw.exec("UPDATE claims SET claimed_at = '2020-01-01T00:00:00.000Z'");
  EXPECT_FALSE(store.claim(key_of(0), self, ResumePolicy{3, std::chrono::hours(24 * 365 * 100)}));
  EXPECT_TRUE(store.claim(key_of(0), self, ResumePolicy{3, std::chrono::seconds(3600)}));
  EXPECT_EQ(raw.text("SELECT owner_host FROM claims"), self.host);
}

}  // namespace
}  // namespace carb
