// Characterization (method.md §6) on small hand-made databases whose statistics are worked out
// by hand below. The values are test data written through the store, not measurements.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/report.hpp"
#include "carb/store.hpp"

namespace carb {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// One row to write: a configuration's outcome and values.
struct Row {
  std::string key;
  double latency_ms = 1;
  std::optional<double> energy_j;
  std::optional<double> memory_mib;
  MeasurementStatus status = MeasurementStatus::kOk;
  int finished_s = 0;  ///< seconds after a fixed start: orders repeats
};

std::string key(const std::string& text) { return to_key(parse_key(text)); }

double gflops(const std::string& text) {
  return static_cast<double>(compute_features(build_network(parse_key(text))).flops) / 1e9;
}

class Databases : public testing::Test {
 protected:
  std::string path(const std::string& name) {
    const std::string file =
        testing::TempDir() + "characterize-" + std::to_string(::getpid()) + "-" + name + ".sqlite";
    created_.push_back(file);
    return file;
  }
  void TearDown() override {
    for (const std::string& file : created_) {
      for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(file + suffix);
    }
  }

  // Writes rows of one device into a database (created when missing). `protocol` tells
  // repeated measurements of a key apart.
  static void write(const std::string& db, const std::string& fingerprint, const std::string& name,
                    const std::vector<Row>& rows, const std::string& protocol = "{}") {
    Store store = Store::create_or_open(db);
    CampaignRecord campaign;
    campaign.name = "hand-made";
    campaign.protocol_json = protocol;
    const std::int64_t campaign_id = store.ensure_campaign(campaign);
    store.ensure_device({0, fingerprint, "cpu", name, "{}"});
    const auto start = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
    for (const Row& row : rows) {
      MeasurementRecord record;
      record.configuration_key = key(row.key);
      record.device_fingerprint = fingerprint;
      record.software_versions = "test";
      record.protocol_json = protocol;
      record.measurement_key =
          measurement_key(record.configuration_key, fingerprint, "test", protocol);
      record.campaign_id = campaign_id;
      record.status = row.status;
      record.attempts = 1;
      record.finished_at = start + std::chrono::seconds(row.finished_s);
      record.started_at = record.finished_at - std::chrono::milliseconds(1);
      if (row.status != MeasurementStatus::kOk) {
        record.detail = "failed on purpose";
      } else {
        LatencyStats stats;
        stats.median_ms = stats.mean_ms = stats.p5_ms = stats.p95_ms = row.latency_ms;
        stats.count = 1;
        stats.converged = true;
        record.wall_latency = stats;
        record.wall_samples_ms = {row.latency_ms};
        if (row.energy_j) {
          record.energy_j = row.energy_j;
          record.energy_method = "test";
        } else {
          record.energy_null_reason = "no sensor on the test machine";
        }
        if (row.memory_mib) {
          record.engine_peak_bytes = static_cast<std::int64_t>(*row.memory_mib * kMiB);
        }
      }
      store.write_measurement(record);
    }
  }

 private:
  std::vector<std::string> created_;
};

const TargetCharacterization& target_of(const Characterization& c, Target target,
                                        std::size_t device = 0) {
  return c.devices.at(device).targets[static_cast<std::size_t>(target)];
}

// Two networks, A (basic18 at width 0.25) and B (basic10 at width 0.5), at batch sizes in all
// three regimes (1-8, 9-32, 33+).
const std::string kA1 = "basic18_w0.25_ds_r32_b1_fp32", kA2 = "basic18_w0.25_ds_r32_b2_fp32",
                  kA16 = "basic18_w0.25_ds_r32_b16_fp32", kA64 = "basic18_w0.25_ds_r32_b64_fp32",
                  kB1 = "basic10_w0.5_ds_r32_b1_fp32", kB64 = "basic10_w0.5_ds_r32_b64_fp32";

std::vector<Row> regime_rows() {
  // latency: lowest regime {1, 1.5, 2} median 1.5, highest {24, 40} median 32.
  // energy:  lowest {0.5, 0.6, 1} median 0.6, highest {20, 40} median 30.
  return {{kA1, 1.0, 0.5, 10.0},    {kA2, 1.5, 0.6, 11.0}, {kA16, 8.0, 4.0, 20.0},
          {kA64, 24.0, 20.0, 60.0}, {kB1, 2.0, 1.0, 12.0}, {kB64, 40.0, 40.0, 90.0}};
}

TEST_F(Databases, RegimeRatiosDivergenceAndEnergyPerGflop) {
  const std::string db = path("regimes");
  write(db, "dev-a", "Device A", regime_rows());
  const CampaignData data = load_campaigns({db});
  ASSERT_EQ(data.devices.size(), 1U);
  EXPECT_EQ(data.devices[0].rows.size(), 6U);
  const Characterization c = characterize(data, {});

  const TargetCharacterization& latency = target_of(c, Target::kLatency);
  ASSERT_TRUE(latency.available);
  ASSERT_EQ(latency.regimes.size(), 3U);
  EXPECT_EQ(latency.regimes[0].name, "batch 1-8");
  EXPECT_EQ(latency.regimes[0].rows, 3U);
  EXPECT_EQ(latency.regimes[0].batch_min, 1);
  EXPECT_EQ(latency.regimes[0].batch_max, 2);
  EXPECT_DOUBLE_EQ(latency.regimes[0].median, 1.5);
  EXPECT_DOUBLE_EQ(latency.regimes[1].median, 8.0);
  EXPECT_DOUBLE_EQ(latency.regimes[2].median, 32.0);  // (24 + 40) / 2
  ASSERT_TRUE(latency.regime_ratio.has_value());
  EXPECT_DOUBLE_EQ(*latency.regime_ratio, 32.0 / 1.5);
  // The same networks: A 24 / median(1, 1.5) = 19.2, B 40 / 2 = 20; median 19.6.
  EXPECT_EQ(latency.matched_networks, 2U);
  EXPECT_DOUBLE_EQ(*latency.matched_regime_ratio, 19.6);

  const TargetCharacterization& energy = target_of(c, Target::kEnergy);
  ASSERT_TRUE(energy.available);
  EXPECT_DOUBLE_EQ(*energy.regime_ratio, 30.0 / 0.6);
  // A 20 / 0.55, B 40 / 1.
  EXPECT_NEAR(*energy.matched_regime_ratio, (20.0 / 0.55 + 40.0) / 2, 1e-12);
  ASSERT_TRUE(c.devices[0].energy_latency_divergence.has_value());
  EXPECT_NEAR(*c.devices[0].energy_latency_divergence, 50.0 / (32.0 / 1.5), 1e-12);
  EXPECT_NEAR(*c.devices[0].matched_energy_latency_divergence, ((20.0 / 0.55 + 40.0) / 2) / 19.6,
              1e-12);

  // Energy per GFLOP: batch 1 median of A and B, batch 64 likewise; FLOPs scale with batch.
  const double a = gflops(kA1), b = gflops(kB1);
  ASSERT_EQ(energy.by_batch.size(), 4U);
  EXPECT_EQ(energy.by_batch[0].batch, 1);
  EXPECT_EQ(energy.by_batch[0].rows, 2U);
  EXPECT_NEAR(*energy.by_batch[0].median_per_gflop, (0.5 / a + 1.0 / b) / 2, 1e-9);
  EXPECT_EQ(energy.by_batch[3].batch, 64);
  const double large = (20.0 / (64 * a) + 40.0 / (64 * b)) / 2;
  EXPECT_NEAR(*energy.by_batch[3].median_per_gflop, large, 1e-9);
  EXPECT_NEAR(*energy.small_batch_penalty, ((0.5 / a + 1.0 / b) / 2) / large, 1e-9);
  EXPECT_NEAR(energy.by_batch[1].median, 0.6, 1e-12);

  // Memory: regimes in MiB as written, and no per-GFLOP figure.
  const TargetCharacterization& memory = target_of(c, Target::kMemory);
  EXPECT_NEAR(memory.regimes[0].median, 11.0 * kMiB, 1);
  EXPECT_FALSE(memory.by_batch[0].median_per_gflop.has_value());
  EXPECT_FALSE(memory.small_batch_penalty.has_value());
  EXPECT_EQ(memory.precision_reason, "only fp32 measured");
}

TEST_F(Databases, OneRegimeHasNoRatioAndSaysWhy) {
  const std::string db = path("one-regime");
  write(db, "dev-a", "Device A", {{kA1, 1.0, 0.5, 10.0}, {kA2, 2.0, 0.7, 11.0}});
  const Characterization c = characterize(load_campaigns({db}), {});
  const TargetCharacterization& latency = target_of(c, Target::kLatency);
  EXPECT_FALSE(latency.regime_ratio.has_value());
  EXPECT_EQ(latency.regime_ratio_reason, "only one batch regime measured (batch 1-8)");
  EXPECT_FALSE(c.devices[0].energy_latency_divergence.has_value());
  EXPECT_EQ(c.devices[0].divergence_reason, "only one batch regime measured (batch 1-8)");
  EXPECT_EQ(target_of(c, Target::kLatency).flops_reason, "fewer than 3 rows with a positive value");
}

TEST_F(Databases, EnergyWithoutASensorIsUnavailableWithItsReasonNeverZero) {
  const std::string db = path("no-energy");
  write(db, "dev-b", "Device B",
        {{kA1, 1.0, std::nullopt, 10.0},
         {kA16, 8.0, std::nullopt, 20.0},
         {kA64, 24.0, std::nullopt, 60.0}});
  const CampaignData data = load_campaigns({db});
  EXPECT_EQ(data.devices[0].missing_reason[static_cast<std::size_t>(Target::kEnergy)],
            "no energy measured on Device B: no sensor on the test machine");
  const Characterization c = characterize(data, {});
  const TargetCharacterization& energy = target_of(c, Target::kEnergy);
  EXPECT_FALSE(energy.available);
  EXPECT_EQ(energy.reason, "no energy measured on Device B: no sensor on the test machine");
  EXPECT_TRUE(energy.regimes.empty());
  EXPECT_TRUE(energy.by_batch.empty());
  EXPECT_EQ(c.devices[0].divergence_reason,
            "energy: no energy measured on Device B: no sensor on the test machine");
  EXPECT_TRUE(target_of(c, Target::kLatency).available);

  const auto json = nlohmann::json::parse(characterization_json(c));
  const auto& entry = json.at("devices").at(0).at("targets").at(1);
  EXPECT_EQ(entry.at("target"), "energy");
  EXPECT_EQ(entry.at("available"), false);
  EXPECT_EQ(entry.at("reason"), "no energy measured on Device B: no sensor on the test machine");
  EXPECT_FALSE(entry.contains("regimes"));
  EXPECT_TRUE(json.at("devices").at(0).at("energy_latency_divergence").is_null());
}

TEST_F(Databases, FlopsFitRecoversAnExactPowerLaw) {
  const std::string db = path("power-law");
  std::vector<Row> rows;
  for (const std::string& text : {kA1, kA2, kA16, kA64, kB1, kB64}) {
    rows.push_back({text, 2.0 * std::pow(gflops(text), 0.8), std::nullopt, 10.0});
  }
  write(db, "dev-a", "Device A", rows);
  const Characterization c = characterize(load_campaigns({db}), {});
  const TargetCharacterization& latency = target_of(c, Target::kLatency);
  ASSERT_TRUE(latency.flops.has_value());
  EXPECT_EQ(latency.flops->rows, 6U);
  EXPECT_NEAR(latency.flops->exponent, 0.8, 1e-9);
  EXPECT_NEAR(latency.flops->intercept, std::log(2.0), 1e-9);
  EXPECT_NEAR(latency.flops->r2, 1.0, 1e-12);
  // Memory is one value everywhere: no fit, and it says so.
  EXPECT_FALSE(target_of(c, Target::kMemory).flops.has_value());
  EXPECT_EQ(target_of(c, Target::kMemory).flops_reason,
            "every row has the same FLOPs or the same value");
}

TEST_F(Databases, PrecisionUsesMatchedPairsElseGroupMedians) {
  const std::string db = path("precision");
  write(db, "dev-a", "Device A",
        {{kA1, 1.0, 0.5, 10.0},
         {"basic18_w0.25_ds_r32_b1_fp16", 0.8, 0.45, 6.0},
         {kA2, 1.6, 0.6, 12.0},
         {"basic18_w0.25_ds_r32_b2_fp16", 1.0, 0.5, 8.0},
         {kB1, 2.0, 1.0, 20.0},
         {"basic10_w0.5_ds_r32_b4_bf16", 3.0, 2.0, 10.0}});
  const Characterization c = characterize(load_campaigns({db}), {});
  const TargetCharacterization& memory = target_of(c, Target::kMemory);
  ASSERT_EQ(memory.precision.size(), 2U);
  // fp16: pairs 10/6 and 12/8, median 1.5833.
  EXPECT_EQ(memory.precision[0].precision, Precision::kFp16);
  EXPECT_EQ(memory.precision[0].method, "matched pairs");
  EXPECT_EQ(memory.precision[0].pairs, 2U);
  EXPECT_NEAR(memory.precision[0].ratio, (10.0 / 6 + 12.0 / 8) / 2, 1e-9);
  // bf16 has no fp32 twin: fp32 median of {10, 12, 20} = 12 over 10.
  EXPECT_EQ(memory.precision[1].precision, Precision::kBf16);
  EXPECT_EQ(memory.precision[1].method, "group medians");
  EXPECT_EQ(memory.precision[1].pairs, 0U);
  EXPECT_EQ(memory.precision[1].fp32_rows, 3U);
  EXPECT_NEAR(memory.precision[1].ratio, 1.2, 1e-9);
  const TargetCharacterization& energy = target_of(c, Target::kEnergy);
  EXPECT_NEAR(energy.precision[0].ratio, (0.5 / 0.45 + 0.6 / 0.5) / 2, 1e-9);
}

TEST_F(Databases, TransferBetweenTwoDevicesOnSharedConfigurations) {
  const std::string db = path("transfer");
  const std::vector<Row> first = regime_rows();
  std::vector<Row> second;
  for (const Row& row : first) {
    // Latency: 2x + 1 (ranks kept, values not); memory: the same; energy: no sensor.
    second.push_back({row.key, 2 * row.latency_ms + 1, std::nullopt, row.memory_mib});
  }
  second.push_back({"bottleneck50_w0.25_ds_r32_b1_fp32", 5.0, std::nullopt, 30.0});  // not shared
  write(db, "dev-a", "Device A", first);
  write(db, "dev-b", "Device B", second);
  const Characterization c = characterize(load_campaigns({db}), {});
  ASSERT_EQ(c.transfers.size(), 1U);
  const DeviceTransfer& transfer = c.transfers[0];
  EXPECT_EQ(transfer.from_name, "Device A");
  EXPECT_EQ(transfer.to_name, "Device B");
  EXPECT_EQ(transfer.relation, "devices");
  const TargetTransfer& latency = transfer.targets[static_cast<std::size_t>(Target::kLatency)];
  ASSERT_TRUE(latency.available);
  EXPECT_EQ(latency.shared, 6U);
  EXPECT_NEAR(latency.slope, 2.0, 1e-9);
  EXPECT_NEAR(latency.intercept, 1.0, 1e-9);
  EXPECT_NEAR(latency.spearman, 1.0, 1e-12);
  EXPECT_EQ(latency.verdict, "ranks transfer");
  const TargetTransfer& memory = transfer.targets[static_cast<std::size_t>(Target::kMemory)];
  EXPECT_NEAR(memory.slope, 1.0, 1e-9);
  EXPECT_NEAR(memory.median_ratio, 1.0, 1e-9);
  EXPECT_EQ(memory.verdict, "transfers");
  const TargetTransfer& energy = transfer.targets[static_cast<std::size_t>(Target::kEnergy)];
  EXPECT_FALSE(energy.available);
  EXPECT_EQ(energy.reason, "no energy measured on Device B: no sensor on the test machine");
}

TEST_F(Databases, TheGapBetweenTwoEnginesOnOneMachineByKnob) {
  const std::string db = path("engines");
  const std::string host = "cpu=Test CPU;logical_cpus=2|";
  const std::string onednn = host + "cpu|oneDNN 2.6.3 (N/A)|isa=avx2|threads=2";
  const std::string torch = host + "cpu|PyTorch 1.13.0 (ATen eager, mkldnn on)|isa=avx2|threads=2";
  const std::vector<Row> first = regime_rows();
  // The second engine: latency x4 at batch 1, x2 at batch 2 and 16, x0.5 at batch 64 (faster
  // there); memory x0.5 on network A, x1 on B.
  std::vector<Row> second;
  for (const Row& row : first) {
    const int batch = parse_key(row.key).batch;
    const double factor = batch == 1 ? 4 : batch == 64 ? 0.5 : 2;
    const double memory = row.key.starts_with("basic18") ? 0.5 : 1.0;
    second.push_back({row.key, factor * row.latency_ms, std::nullopt, memory * *row.memory_mib});
  }
  write(db, onednn, "Test CPU", first);
  write(db, torch, "Test CPU", second);
  const CampaignData data = load_campaigns({db});
  ASSERT_EQ(data.devices.size(), 2U);
  // One name, two engines: told apart by their libraries, not by a hash.
  EXPECT_EQ(data.devices[0].name, "Test CPU [oneDNN 2.6.3]");
  EXPECT_EQ(data.devices[1].name, "Test CPU [PyTorch 1.13.0]");
  const Characterization c = characterize(data, {});
  ASSERT_EQ(c.transfers.size(), 1U);
  EXPECT_EQ(c.transfers[0].relation, "engines");
  const TargetTransfer& latency =
      c.transfers[0].targets[static_cast<std::size_t>(Target::kLatency)];
  ASSERT_TRUE(latency.available);
  // Ratios {4, 2, 2, 0.5, 4, 0.5}: geometric mean (4 * 2 * 2 * 0.5 * 4 * 0.5)^(1/6) = 16^(1/6).
  EXPECT_NEAR(latency.geomean_ratio, std::pow(16.0, 1.0 / 6), 1e-12);
  EXPECT_DOUBLE_EQ(latency.min_ratio, 0.5);
  EXPECT_DOUBLE_EQ(latency.max_ratio, 4.0);
  EXPECT_EQ(latency.second_lower, 2U);  // batch 64, both networks
  // By batch: 1 -> 4 (two rows), 2 -> 2, 16 -> 2, 64 -> 0.5 (two rows); then width and depth
  // (A and B differ in both); one block type, resolution and precision: no groups.
  std::vector<std::string> groups;
  for (const RatioGroup& g : latency.by_knob) {
    groups.push_back(g.knob + " " + g.value + " " + std::to_string(g.rows));
  }
  EXPECT_EQ(groups,
            (std::vector<std::string>{"batch 1 2", "batch 2 1", "batch 16 1", "batch 64 2",
                                      "width 0.25 4", "width 0.5 2", "depth 10 2", "depth 18 4"}));
  EXPECT_NEAR(latency.by_knob[0].geomean_ratio, 4.0, 1e-12);
  EXPECT_NEAR(latency.by_knob[3].geomean_ratio, 0.5, 1e-12);
  // Width 0.25 is network A: ratios {4, 2, 2, 0.5}, geometric mean 8^(1/4).
  EXPECT_NEAR(latency.by_knob[4].geomean_ratio, std::pow(8.0, 0.25), 1e-12);
  const TargetTransfer& memory = c.transfers[0].targets[static_cast<std::size_t>(Target::kMemory)];
  EXPECT_EQ(memory.second_lower, 4U);
  EXPECT_NEAR(memory.by_knob[4].geomean_ratio, 0.5, 1e-12);  // width 0.25
  const auto json = nlohmann::json::parse(characterization_json(c));
  EXPECT_EQ(json.at("transfers").at(0).at("relation"), "engines");
  EXPECT_EQ(json.at("transfers").at(0).at("targets").at(2).at("by_knob").size(), 8U);
}

TEST_F(Databases, TwoMachinesOfOneNameAndEngineAreToldApartByAHash) {
  const std::string db = path("machines");
  const std::string engine = "|cpu|oneDNN 2.6.3 (N/A)|isa=avx2|threads=2";
  write(db, "cpu=Test CPU;stepping=1" + engine, "Test CPU", regime_rows());
  write(db, "cpu=Test CPU;stepping=2" + engine, "Test CPU", regime_rows());
  const CampaignData data = load_campaigns({db});
  ASSERT_EQ(data.devices.size(), 2U);
  EXPECT_EQ(data.devices[0].name.rfind("Test CPU [", 0), 0U);
  EXPECT_EQ(data.devices[0].name.size(), std::string("Test CPU [12345678]").size());
  EXPECT_NE(data.devices[0].name, data.devices[1].name);
  EXPECT_EQ(characterize(data, {}).transfers.at(0).relation, "machines");
}

TEST_F(Databases, RanksThatReverseDoNotTransferAndFewSharedAreNotJudged) {
  const std::string db = path("reversed");
  write(db, "dev-a", "Device A",
        {{kA1, 1.0, 1.0, 10.0}, {kA2, 2.0, 2.0, 20.0}, {kA16, 3.0, 3.0, 30.0}});
  write(db, "dev-b", "Device B",
        {{kA1, 3.0, 1.0, 10.0}, {kA2, 2.0, 2.0, 20.0}, {kA16, 1.0, 3.0, 30.0}});
  write(db, "dev-c", "Device C", {{kA1, 3.0, 1.0, 10.0}, {kA2, 2.0, 2.0, 20.0}});
  const Characterization c = characterize(load_campaigns({db}), {});
  ASSERT_EQ(c.transfers.size(), 3U);  // A-B, A-C, B-C
  const TargetTransfer& reversed =
      c.transfers[0].targets[static_cast<std::size_t>(Target::kLatency)];
  EXPECT_NEAR(reversed.spearman, -1.0, 1e-12);
  EXPECT_NEAR(reversed.slope, -1.0, 1e-12);
  EXPECT_EQ(reversed.verdict, "does not transfer");
  const TargetTransfer& few = c.transfers[1].targets[static_cast<std::size_t>(Target::kLatency)];
  EXPECT_FALSE(few.available);
  EXPECT_EQ(few.shared, 2U);
  EXPECT_EQ(few.reason, "2 configurations measured on both devices; need 3");
}

TEST_F(Databases, PoolsDatabasesByDeviceAndCountsFailures) {
  const std::string first = path("pool-1"), second = path("pool-2");
  write(first, "dev-a", "Device A",
        {{kA1, 1.0, 0.5, 10.0, MeasurementStatus::kOk, 10},
         {kA2, 0, std::nullopt, std::nullopt, MeasurementStatus::kOom, 11},
         {kB1, 0, std::nullopt, std::nullopt, MeasurementStatus::kCrashed, 12}});
  // The same device in another database: a later measurement of A1, and A2 succeeds there.
  write(second, "dev-a", "Device A",
        {{kA1, 3.0, 0.9, 10.0, MeasurementStatus::kOk, 20},
         {kA2, 2.0, 0.6, 11.0, MeasurementStatus::kOk, 21},
         {kB64, 0, std::nullopt, std::nullopt, MeasurementStatus::kUnsupported, 22}},
        R"({"other":"protocol"})");
  const CampaignData data = load_campaigns({first, second});
  ASSERT_EQ(data.devices.size(), 1U);
  const DeviceCampaign& device = data.devices[0];
  EXPECT_EQ(device.sources, (std::vector<std::string>{first, second}));
  ASSERT_EQ(device.rows.size(), 2U);
  EXPECT_EQ(device.repeated.configurations, 1U);
  EXPECT_EQ(device.repeated.measurements, 2U);
  EXPECT_DOUBLE_EQ(*device.rows[0].values[static_cast<std::size_t>(Target::kLatency)], 2.0)
      << "a configuration measured twice is the median (here the mean) of both";
  EXPECT_DOUBLE_EQ(*device.rows[0].values[static_cast<std::size_t>(Target::kEnergy)], 0.7);
  EXPECT_EQ(device.rows[0].source, second) << "the database of its latest measurement";
  EXPECT_EQ(device.status_counts[static_cast<std::size_t>(MeasurementStatus::kOk)], 3U);
  EXPECT_EQ(device.status_counts[static_cast<std::size_t>(MeasurementStatus::kOom)], 1U);
  EXPECT_EQ(device.status_counts[static_cast<std::size_t>(MeasurementStatus::kCrashed)], 1U);
  EXPECT_EQ(device.status_counts[static_cast<std::size_t>(MeasurementStatus::kUnsupported)], 1U);
  // A2 failed, then succeeded: not a failure. B1 crashed and B64 is unsupported.
  ASSERT_EQ(device.failures.size(), 2U);
  EXPECT_EQ(device.failures[0].configuration_key, key(kB1));
  EXPECT_EQ(device.failures[0].status, MeasurementStatus::kCrashed);
  EXPECT_EQ(device.failures[1].configuration_key, key(kB64));
  EXPECT_EQ(device.failures[1].detail, "failed on purpose");
}

TEST_F(Databases, DevicesAreFoundByFingerprintOrName) {
  const std::string db = path("devices");
  write(db, "dev-a", "Twin", {{kA1, 1.0, 0.5, 10.0}});
  write(db, "dev-b", "Twin", {{kA1, 1.0, 0.5, 10.0}});
  write(db, "dev-c", "Solo", {{kA1, 1.0, 0.5, 10.0}});
  const CampaignData data = load_campaigns({db});
  EXPECT_EQ(find_device(data, "dev-b").fingerprint, "dev-b");
  EXPECT_EQ(find_device(data, "Solo").fingerprint, "dev-c");
  // Two devices of one name are told apart by a hash of their fingerprints.
  EXPECT_EQ(data.devices[0].name, "Twin [" + sha256_hex("dev-a").substr(0, 8) + "]");
  EXPECT_EQ(find_device(data, data.devices[1].name).fingerprint, "dev-b");
  try {
    find_device(data, "Solo ");
    FAIL() << "a name no device has must be an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.exit_code(), 2);
    EXPECT_EQ(
        std::string(error.what())
            .find("device 'Solo ' names no device; give a fingerprint or a name: dev-a (Twin ["),
        0U)
        << error.what();
    EXPECT_EQ(error.subject(), "device");
  }
  try {
    (void)load_campaigns({});
    FAIL() << "no databases must be an error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), "give at least one database");
    EXPECT_EQ(error.subject(), "databases");
  }
  EXPECT_THROW(load_campaigns({testing::TempDir() + "no-such-database.sqlite"}), Error);
}

TEST_F(Databases, KeepsTheNamedDevicesOnceInTheOrderNamed) {
  const std::string db = path("keep");
  write(db, "dev-a", "Device A", {{kA1, 1.0, 0.5, 10.0}});
  write(db, "dev-b", "Device B", {{kA1, 2.0, 0.5, 10.0}});
  write(db, "dev-c", "Device C", {{kA1, 3.0, 0.5, 10.0}});
  CampaignData all = load_campaigns({db});
  keep_devices(all, {});
  EXPECT_EQ(all.devices.size(), 3U);
  CampaignData kept = load_campaigns({db});
  keep_devices(kept, {"dev-c", "Device A", "dev-c"});
  ASSERT_EQ(kept.devices.size(), 2U);
  EXPECT_EQ(kept.devices[0].fingerprint, "dev-c");
  EXPECT_EQ(kept.devices[1].fingerprint, "dev-a");
  EXPECT_THROW(keep_devices(kept, {"dev-z"}), Error);
}

TEST_F(Databases, TheReportIsWrittenWholeWithItsChartsCounted) {
  try {
    require_html_report();
  } catch (const Error& error) {
    GTEST_SKIP() << error.what();
  }
  const std::string db = path("report");
  write(db, "dev-a", "Device A", regime_rows());
  const CampaignData data = load_campaigns({db});
  const std::vector<DeviceModel> models = device_models(data, nullptr, "", std::nullopt);
  const Characterization characterization = characterize(data, models);
  ReportInput input;
  input.data = &data;
  input.characterization = &characterization;
  input.models = models;
  input.generated_at = "2026-12-02T00:00:00Z";
  const std::string html = testing::TempDir() + "report-" + std::to_string(::getpid()) + ".html";
  const ReportFile file = write_report(input, html);
  const std::string rendered = render_report(input);
  EXPECT_EQ(file.bytes, rendered.size());
  EXPECT_EQ(std::filesystem::file_size(html), rendered.size());
  EXPECT_FALSE(std::filesystem::exists(html + ".tmp"));
  std::size_t charts = 0;
  for (auto at = rendered.find("class=\"chart\""); at != std::string::npos;
       at = rendered.find("class=\"chart\"", at + 1)) {
    ++charts;
  }
  EXPECT_GT(charts, 0U);
  EXPECT_EQ(file.charts, charts);
  std::filesystem::remove(html);
  // A folder that does not exist: a runtime error naming the file, nothing written.
  const std::string nowhere = testing::TempDir() + "no-such-folder/report.html";
  try {
    (void)write_report(input, nowhere);
    FAIL() << "wrote into a missing folder";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kRuntime);
    EXPECT_EQ(std::string(error.what()), nowhere + ": cannot write");
  }
}

TEST_F(Databases, AModelOfATableIsNoModelOfADevice) {
  std::string csv = "a,y\n";
  for (int i = 0; i < 60; ++i) csv += std::to_string(i) + "," + std::to_string(2 * i + 1) + "\n";
  TableSpec spec;
  spec.features = {"a"};
  spec.targets = {parse_table_target("y")};
  FitOptions options;
  options.threads = 1;
  options.forest_trees = 4;
  options.fixed_rounds = 4;
  options.baselines = false;
  const std::string model = path("table-model") + ".json";
  Predictor::fit(dataset_from_table(parse_csv(csv, "t.csv"), spec), options, nullptr).save(model);
  try {
    (void)load_device_model(model);
    FAIL() << "a table model was taken for a device's";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    EXPECT_EQ(std::string(error.what()),
              model + " was fitted on a table, not on carb measurements");
  }
  std::filesystem::remove(model);
  EXPECT_THROW((void)load_device_model(model), Error);  // no such file
}

TEST_F(Databases, CarbAccuracySaysWhyItIsMissing) {
  const std::string db = path("no-model");
  write(db, "dev-a", "Device A", regime_rows());
  const CampaignData data = load_campaigns({db});
  const std::vector<DeviceModel> off = device_models(data, nullptr, "", std::nullopt);
  ASSERT_EQ(off.size(), 1U);
  EXPECT_EQ(off[0].predictor, nullptr);
  Characterization c = characterize(data, off);
  EXPECT_FALSE(target_of(c, Target::kLatency).carb.available);
  EXPECT_EQ(target_of(c, Target::kLatency).carb.reason,
            "no model given, and fitting one now is off");
  // Six rows are too few to fit: the fit's own reason, not an error.
  FitOptions options;
  options.threads = 1;
  const std::vector<DeviceModel> fitted = device_models(data, nullptr, "", options);
  EXPECT_EQ(fitted[0].predictor, nullptr);
  EXPECT_NE(fitted[0].reason.find("CARB could not be fitted on Device A: too few rows to split"),
            std::string::npos)
      << fitted[0].reason;
}

}  // namespace
}  // namespace carb
