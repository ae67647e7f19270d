// carb screen --refine measuring for real: a small campaign on this machine's CPU, a model of
// it, and one round of active profiling that measures into the same database.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run.hpp"

namespace {

using carb_test::CommandResult;
using carb_test::run;

TEST(RefineCli, MeasuresTheChosenConfigurationsIntoTheCampaignAndRefits) {
  const std::string base = testing::TempDir() + "refine-live-" + std::to_string(::getpid());
  const std::string db = base + ".sqlite", model = base + ".json", keys = base + "-pool.txt",
                    measured = base + "-measured.txt", json = base + "-screen.json";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  // 64 tiny networks; the first 48 are the campaign the model is fitted on.
  {
    std::ofstream pool(keys), first(measured);
    int n = 0;
    for (const char* downsample : {"nods", "ds"}) {
      for (int resolution : {32, 40, 48, 56}) {
        for (int batch = 1; batch <= 8; ++batch) {
          const std::string key = std::string("basic10_w0.25_") + downsample + "_r" +
                                  std::to_string(resolution) + "_b" + std::to_string(batch) +
                                  "_fp32_k10";
          pool << key << "\n";
          if (n++ < 48) first << key << "\n";
        }
      }
    }
  }
  const std::string quick = " --max-time 0.2 --target-ci 0.5";
  CommandResult profile = run("profile --keys " + measured + " --db " + db + quick +
                              " --min-time 0.02 --idle-window 0.1");
  ASSERT_EQ(profile.exit_code, 0) << profile.out;
  CommandResult fit =
      run("fit --db " + db + " -o " + model + " --forest-trees 8 --threads 1 --coverage 0.5");
  ASSERT_EQ(fit.exit_code, 0) << fit.out;

  // A budget nothing breaks: on a loaded machine even these tiny networks can time at 300 ms
  // (the rows say contended), and the round must still find unmeasured candidates in stage 2.
  CommandResult screen = run("screen --model " + model + " --keys " + keys +
                             " --budget 'latency<=100s' --refine 4 --rounds 1 --db " + db +
                             " --threads 1 --json " + json + quick);
  ASSERT_EQ(screen.exit_code, 0) << screen.out;
  EXPECT_NE(screen.out.find("refine round 1: measured 4 of 4 chosen (on cpu"), std::string::npos)
      << screen.out;
  std::ifstream in(json);
  const auto result = nlohmann::json::parse(in);
  const auto& rounds = result.at("refine").at("rounds");
  ASSERT_EQ(rounds.size(), 2U);
  EXPECT_EQ(rounds[1].at("training_rows").get<int>(), 52);
  // --db covers only 52 of the 64 candidates: no truth to score the front against.
  EXPECT_TRUE(rounds[1].at("recall_pct").is_null());
  EXPECT_TRUE(result.at("refine").at("true_front").is_null());
  // The four new measurements joined the campaign database.
  CommandResult exported = run("export --db " + db + " --ok-only --format csv");
  EXPECT_EQ(std::count(exported.out.begin(), exported.out.end(), '\n'), 53) << exported.out;
  // The refitted model sits next to the given one.
  EXPECT_TRUE(std::filesystem::exists(base + ".refined.json"));
}

}  // namespace
