// What the campaign tests share: tiny configurations, a quick protocol and fresh databases.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "carb/campaign.hpp"

namespace carb::testing {

/// `count` tiny networks (batch 1..count) that run in well under a millisecond.
inline std::vector<Config> tiny_configs(int count) {
  std::vector<Config> configs;
  for (int i = 0; i < count; ++i) {
    configs.push_back(parse_key("basic10_w0.25_nods_r32_b" + std::to_string(i + 1) + "_fp32_k10"));
  }
  return configs;
}

/// A campaign into `db` on the CPU with a protocol of hundredths of a second.
inline CampaignOptions quick_options(const std::string& db) {
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

/// A path for a new database under the test folder, with nothing left there from a run before.
inline std::string fresh_db(const std::string& name) {
  const std::string path = ::testing::TempDir() + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return path;
}

}  // namespace carb::testing
