// Campaigns on the real CPU engine with real worker processes, into a real SQLite file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "carb/campaign.hpp"
#include "carb/error.hpp"

namespace carb {
namespace {

std::vector<Config> tiny_configs(int count) {
  std::vector<Config> configs;
  for (int i = 0; i < count; ++i) {
    configs.push_back(parse_key("basic10_w0.25_nods_r32_b" + std::to_string(i + 1) + "_fp32_k10"));
  }
  return configs;
}

CampaignOptions quick_options(const std::string& db) {
  CampaignOptions options;
  options.name = "test";
  options.spec_text = "tiny configurations";
  options.db_path = db;
  options.device = "cpu";
  options.protocol.warmup_min_s = 0.01;
  options.protocol.min_time_s = 0.02;
  options.protocol.max_time_s = 0.2;
  options.protocol.target_relative_ci = 0.5;
  options.protocol.timeout_s = 60;
  options.worker = {CARB_BINARY, {"__worker"}};
  options.idle_window_s = 0.1;
  return options;
}

std::string fresh_db(const std::string& name) {
  const std::string path = testing::TempDir() + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return path;
}

TEST(Campaign, MeasuresThenResumesWithoutRepeating) {
  const std::string db = fresh_db("resume.sqlite");
  const auto configs = tiny_configs(3);
  std::int64_t progress_calls = 0;
  const CampaignSummary first =
      run_campaign(configs, quick_options(db), [&](const CampaignProgress&) { ++progress_calls; });
  EXPECT_EQ(first.selected, 3);
  EXPECT_EQ(first.measured.at("ok"), 3);
  EXPECT_EQ(first.already_done, 0);
  EXPECT_EQ(progress_calls, 3);
  // An idle baseline exactly when the machine has an energy sensor, else its reason.
  if (open_cpu_energy_meter()->available()) {
    EXPECT_TRUE(first.idle_power_w.has_value()) << first.idle_power_null_reason;
  } else {
    EXPECT_FALSE(first.idle_power_w.has_value());
    EXPECT_FALSE(first.idle_power_null_reason.empty());
  }
  EXPECT_GT(first.inference_s, 0);
  EXPECT_LT(first.inference_s, first.wall_s);

  const CampaignSummary second = run_campaign(configs, quick_options(db), {});
  EXPECT_TRUE(second.measured.empty());
  EXPECT_EQ(second.already_done, 3);
  EXPECT_EQ(second.campaign_id, first.campaign_id);

  const Store store = Store::open(db);
  EXPECT_EQ(store.integrity_check(), "ok");
  std::ostringstream csv;
  EXPECT_EQ(store.export_measurements(csv, ExportFormat::kCsv), 3);
}

TEST(Campaign, FailuresAreRowsAndTheCampaignGoesOn) {
  const std::string db = fresh_db("failures.sqlite");
  std::vector<Config> configs = tiny_configs(1);
  configs.push_back(parse_key("basic10_w0.25_nods_r32_b1_fp16_k10"));  // no fp16 on any CPU
  const CampaignSummary summary = run_campaign(configs, quick_options(db), {});
  EXPECT_EQ(summary.measured.at("ok"), 1);
  EXPECT_EQ(summary.measured.at("unsupported"), 1);
}

TEST(Campaign, TimeBudgetStopsStartingConfigurations) {
  const std::string db = fresh_db("budget.sqlite");
  CampaignOptions options = quick_options(db);
  options.time_budget_s = 0;
  const CampaignSummary summary = run_campaign(tiny_configs(4), options, {});
  EXPECT_TRUE(summary.measured.empty());
  EXPECT_EQ(summary.not_started, 4);
}

TEST(Campaign, UnknownDeviceIsAUsageError) {
  CampaignOptions options = quick_options(fresh_db("nodevice.sqlite"));
  options.device = "cuda:3";
  try {
    run_campaign(tiny_configs(1), options, {});
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.exit_code(), 2);
    EXPECT_NE(std::string(error.what()).find("no device 'cuda:3' on this machine (devices: cpu:0)"),
              std::string::npos)
        << error.what();
  }
}

TEST(Shard, PartitionsKeysExactly) {
  std::vector<std::string> keys;
  for (int batch = 1; batch <= 200; ++batch) {
    keys.push_back("basic18_w1_ds_r64_b" + std::to_string(batch) + "_fp32");
  }
  std::multiset<std::string> seen;
  for (int index = 0; index < 3; ++index) {
    const Shard shard = Shard::parse(std::to_string(index) + "/3");
    int taken = 0;
    for (const auto& key : keys) {
      if (shard.contains(key)) {
        seen.insert(key);
        ++taken;
      }
    }
    EXPECT_GT(taken, 40) << index;  // roughly a third each
  }
  EXPECT_EQ(seen.size(), keys.size());
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), keys.size());
}

TEST(Shard, ParsesTextAndTheEnvironment) {
  EXPECT_EQ(Shard::parse("2/5").index, 2);
  EXPECT_EQ(Shard::parse("2/5").count, 5);
  for (const char* bad : {"5/5", "-1/3", "1", "a/b", "1/0", "1/2/3"}) {
    EXPECT_THROW(Shard::parse(bad), Error) << bad;
  }
  ::setenv("SLURM_ARRAY_TASK_ID", "3", 1);
  ::setenv("SLURM_ARRAY_TASK_COUNT", "8", 1);
  EXPECT_EQ(Shard::parse("auto").index, 3);
  EXPECT_EQ(Shard::parse("auto").count, 8);
  ::unsetenv("SLURM_ARRAY_TASK_ID");
  ::unsetenv("SLURM_ARRAY_TASK_COUNT");
  EXPECT_EQ(Shard::parse("auto").count, 1);
}

TEST(Duration, ParsesUnits) {
  EXPECT_DOUBLE_EQ(parse_duration_s("90"), 90);
  EXPECT_DOUBLE_EQ(parse_duration_s("90s"), 90);
  EXPECT_DOUBLE_EQ(parse_duration_s("30m"), 1800);
  EXPECT_DOUBLE_EQ(parse_duration_s("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(parse_duration_s("0.5h"), 1800);
  for (const char* bad : {"", "soon", "5d", "-3m", "m"}) {
    EXPECT_THROW(parse_duration_s(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace carb
