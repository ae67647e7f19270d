// Times `carb merge`'s work (Store::merge): shard databases of synthetic measurements (distinct
// configurations of examples/spaces/million.yaml, wall-clock samples like a CPU campaign's) are
// written first, untimed; then merged into a fresh database (every key new), merged again
// (every key identical, compared whole), and a shard re-measured with other numbers is merged
// (every key a conflict). Prints one row per pass: measurement rows/s and sample rows/s.
// Usage: bench_merge [--shards N] [--rows R] [--samples S] [--dir D]
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_clock.hpp"
#include "carb/error.hpp"
#include "carb/space.hpp"
#include "carb/store.hpp"

using carb_bench::Clock;
using carb_bench::seconds_since;

namespace {

constexpr const char* kFingerprint = "bench-cpu;logical_cpus=2";
constexpr const char* kSoftware = "carb bench; oneDNN 2.6.3";
constexpr const char* kProtocol = R"({"max_time_s":5,"min_samples":10})";

// A measurement of `config` with `samples` wall samples around `base_ms`.
carb::MeasurementRecord synthetic(const carb::Config& config, std::int64_t campaign_id, int samples,
                                  double base_ms) {
  carb::MeasurementRecord record;
  record.configuration_key = carb::to_key(config);
  record.device_fingerprint = kFingerprint;
  record.software_versions = kSoftware;
  record.protocol_json = kProtocol;
  record.measurement_key =
      carb::measurement_key(record.configuration_key, kFingerprint, kSoftware, kProtocol);
  record.campaign_id = campaign_id;
  record.status = carb::MeasurementStatus::kOk;
  record.started_at = std::chrono::system_clock::now();
  record.finished_at = record.started_at + std::chrono::milliseconds(500);
  for (int sample = 0; sample < samples; ++sample) {
    record.wall_samples_ms.push_back(base_ms + 0.001 * (sample % 37));
  }
  carb::LatencyStats stats;
  stats.median_ms = stats.mean_ms = stats.p5_ms = stats.p95_ms = base_ms + 0.018;
  stats.count = samples;
  record.wall_latency = stats;
  record.energy_null_reason = "bench: no sensor";
  record.engine_peak_bytes = 1 << 20;
  record.provenance_json = R"({"host":"bench","kernels":["conv","pool","fc"]})";
  return record;
}

std::string write_shard(const std::string& path, const carb::Space& space, std::uint64_t first,
                        int rows, int samples, double base_ms) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  carb::Store store = carb::Store::create_or_open(path);
  carb::CampaignRecord campaign;
  campaign.name = "bench";
  campaign.spec_text = "bench";
  campaign.protocol_json = kProtocol;
  const std::int64_t campaign_id = store.ensure_campaign(campaign);
  store.ensure_device({0, kFingerprint, "cpu", "bench CPU", "{}"});
  for (int row = 0; row < rows; ++row) {
    store.write_measurement(synthetic(space.at(first + static_cast<std::uint64_t>(row)),
                                      campaign_id, samples, base_ms + 0.01 * row));
  }
  return path;
}

void print_pass(const char* pass, const std::vector<carb::MergeReport>& reports, int samples,
                double seconds) {
  std::int64_t rows = 0, added = 0, identical = 0, conflicts = 0;
  for (const auto& report : reports) {
    rows += report.measurements;
    added += report.added;
    identical += report.identical;
    conflicts += static_cast<std::int64_t>(report.conflicts.size());
  }
  std::printf("%-22s %8lld %8lld %9lld %9lld %9.3f %12.0f %14.0f\n", pass,
              static_cast<long long>(rows), static_cast<long long>(added),
              static_cast<long long>(identical), static_cast<long long>(conflicts), seconds,
              static_cast<double>(rows) / seconds, static_cast<double>(rows) * samples / seconds);
}

}  // namespace

int main(int argc, char** argv) {
  int shards = 8;
  int rows = 2000;
  int samples = 100;
  std::string dir = std::filesystem::temp_directory_path().string() + "/carb-merge-bench";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i];
    if (option == "--shards") {
      shards = std::stoi(argv[i + 1]);
    } else if (option == "--rows") {
      rows = std::stoi(argv[i + 1]);
    } else if (option == "--samples") {
      samples = std::stoi(argv[i + 1]);
    } else if (option == "--dir") {
      dir = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: bench_merge [--shards N] [--rows R] [--samples S] [--dir D]\n");
      return 2;
    }
  }
  try {
    std::filesystem::create_directories(dir);
    const carb::Space space =
        carb::Space::from_file(CARB_SOURCE_DIR "/examples/spaces/million.yaml");
    std::vector<std::string> paths;
    for (int shard = 0; shard < shards; ++shard) {
      paths.push_back(write_shard(dir + "/shard-" + std::to_string(shard) + ".sqlite", space,
                                  static_cast<std::uint64_t>(shard) * rows, rows, samples, 1.0));
    }
    // The first shard measured again on another node: every key the same, the numbers not.
    const std::string remeasured =
        write_shard(dir + "/remeasured.sqlite", space, 0, rows, samples, 1.5);
    const std::string out = dir + "/merged.sqlite";
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(out + suffix);

    std::printf("%d shards x %d measurements x %d samples\n", shards, rows, samples);
    std::printf("%-22s %8s %8s %9s %9s %9s %12s %14s\n", "pass", "rows", "added", "identical",
                "conflicts", "seconds", "rows_per_s", "samples_per_s");
    carb::Store store = carb::Store::create_or_open(out);
    const auto merge_all = [&](const char* pass, const std::vector<std::string>& sources) {
      std::vector<carb::MergeReport> reports;
      const auto start = Clock::now();
      for (const std::string& path : sources) reports.push_back(store.merge(path));
      print_pass(pass, reports, samples, seconds_since(start));
    };
    merge_all("new keys", paths);
    merge_all("again (identical)", paths);
    merge_all("re-measured (conflict)", {remeasured});
    std::printf("integrity_check: %s\n", store.integrity_check().c_str());
  } catch (const carb::Error& error) {
    std::fprintf(stderr, "bench_merge: %s\n", error.what());
    return 1;
  }
  return 0;
}
