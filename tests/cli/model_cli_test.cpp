// carb fit / predict / evaluate as a user runs them, on the reference CPU campaign (real
// measurements, data/cpu-reference.sqlite.xz) and on small tables.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "run.hpp"

namespace {

using carb_test::CommandResult;
using carb_test::lines;
using carb_test::run;
using carb_test::sql;

// Writes the configuration keys of a database's measurements to `path`, one per line.
void write_keys(const std::string& db, const std::string& path) {
  std::ofstream out(path);
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(handle, "SELECT configuration_key FROM measurements", -1, &statement,
                               nullptr),
            SQLITE_OK);
  while (sqlite3_step(statement) == SQLITE_ROW) {
    out << reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)) << "\n";
  }
  sqlite3_finalize(statement);
  sqlite3_close(handle);
}

// One fit of the reference campaign shared by the tests (it takes seconds).
class ModelCli : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    // ctest runs each test in its own process, two at a time: names unique to this process.
    const std::string pid = std::to_string(::getpid());
    db = testing::TempDir() + "model-cli-reference-" + pid + ".sqlite";
    model = testing::TempDir() + "model-cli-reference-" + pid + ".json";
    std::filesystem::remove(model);
    const std::string unpack =
        "xz -dc " + std::string(CARB_SOURCE_DIR) + "/data/cpu-reference.sqlite.xz > " + db;
    ASSERT_EQ(std::system(unpack.c_str()), 0);
    fit = run("fit --db " + db + " -o " + model + " --forest-trees 16 --threads 1 --format json",
              false);
  }
  static std::string db, model;
  static CommandResult fit;
};
std::string ModelCli::db, ModelCli::model;
CommandResult ModelCli::fit;

TEST_F(ModelCli, FitsTheReferenceCampaignAndReportsTestScores) {
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  const auto summary = nlohmann::json::parse(fit.out);
  EXPECT_EQ(summary.at("model"), model);
  EXPECT_EQ(summary.at("rows"), 1600);
  double memory_r2 = 0, latency_r2 = 0, latency_coverage = 0;
  bool flops_baseline = false, specialist = false;
  for (const auto& s : summary.at("scores")) {
    if (s.at("method") == "carb" && s.at("target") == "memory") memory_r2 = s["metrics"]["r2"];
    if (s.at("method") == "carb" && s.at("target") == "latency") {
      latency_r2 = s["metrics"]["r2"];
      latency_coverage = s["metrics"]["coverage"];
    }
    flops_baseline |= s.at("method") == "flops-loglinear";
    specialist |= s.at("method") == "specialist";
  }
  EXPECT_GT(memory_r2, 0.999);
  EXPECT_GT(latency_r2, 0.9);
  EXPECT_GT(latency_coverage, 80);
  EXPECT_TRUE(flops_baseline);
  EXPECT_TRUE(specialist);
  // No energy sensor on the reference machine: energy is left out with the reason.
  bool energy_note = false;
  for (const auto& note : summary.at("notes")) {
    energy_note |= note.get<std::string>().rfind("energy: unavailable, no energy measured", 0) == 0;
  }
  EXPECT_TRUE(energy_note) << summary.at("notes").dump();
}

TEST_F(ModelCli, PredictsKeysAndSpecSamplesWithIntervals) {
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  CommandResult keys = run("predict --model " + model +
                               " basic18_w1_ds_r64_b1_fp32 bottleneck50_w0.5_nods_r32_b8_fp32 "
                               "--format csv",
                           false);
  ASSERT_EQ(keys.exit_code, 0) << keys.out;
  std::istringstream csv(keys.out);
  std::string header, row;
  std::getline(csv, header);
  EXPECT_EQ(header,
            "key,architecture,memory_B,memory_B_low,memory_B_high,energy_J,energy_J_low,"
            "energy_J_high,latency_ms,latency_ms_low,latency_ms_high");
  std::getline(csv, row);
  // A ResNet has no architecture name: an empty field.
  EXPECT_EQ(row.rfind("basic18_w1_ds_r64_b1_fp32,,", 0), 0U) << row;
  EXPECT_NE(row.find(",,,"), std::string::npos) << "energy is empty, never 0: " << row;
  // In JSON what does not exist is null, never "" or 0.
  CommandResult json =
      run("predict --model " + model + " basic18_w1_ds_r64_b1_fp32 --format json", false);
  ASSERT_EQ(json.exit_code, 0) << json.out;
  const auto parsed = nlohmann::json::parse(json.out);
  ASSERT_EQ(parsed.size(), 1U) << json.out;
  for (const char* column : {"architecture", "energy_J", "energy_J_low", "energy_J_high"}) {
    EXPECT_TRUE(parsed.at(0).at(column).is_null()) << column << ": " << json.out;
  }
  EXPECT_GT(parsed.at(0).at("latency_ms").get<double>(), 0) << json.out;
  CommandResult with_note = run("predict --model " + model + " basic18_w1_ds_r64_b1_fp32");
  EXPECT_NE(with_note.out.find("note: energy is unavailable: no energy measured"),
            std::string::npos);

  CommandResult spec = run("predict --model " + model + " --spec " + std::string(CARB_SOURCE_DIR) +
                               "/examples/spaces/cpu-demo.yaml --sample 7 --seed 3 --format csv",
                           false);
  ASSERT_EQ(spec.exit_code, 0) << spec.out;
  EXPECT_EQ(lines(spec.out), 8);
}

TEST_F(ModelCli, EvaluatesOnItsOwnDeviceAndAcrossDevices) {
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  CommandResult own = run("evaluate --model " + model + " --db " + db);
  ASSERT_EQ(own.exit_code, 0) << own.out;
  EXPECT_NE(own.out.find("model scored on its own device (1600 rows)"), std::string::npos);

  // The same measurements under another device's name: a transfer evaluation.
  const std::string other = db + "-other.sqlite";
  std::filesystem::copy_file(db, other, std::filesystem::copy_options::overwrite_existing);
  sql(other, "UPDATE devices SET fingerprint = 'other-cpu', name = 'Other CPU'");
  CommandResult transfer = run("evaluate --model " + model + " --db " + other + " --format json");
  ASSERT_EQ(transfer.exit_code, 0) << transfer.out;
  EXPECT_NE(transfer.out.find("transfer: model of "), std::string::npos) << transfer.out;
  EXPECT_NE(transfer.out.find("\"slope\""), std::string::npos);

  // Two devices in one database: fit must be told which.
  sql(other,
      "INSERT INTO devices (fingerprint, kind, name, details) VALUES ('third-cpu', 'cpu', "
      "'Third CPU', '{}'); UPDATE measurements SET device_id = (SELECT id FROM devices WHERE "
      "fingerprint = 'third-cpu') WHERE id % 2 = 0");
  const std::string out = testing::TempDir() + "model-cli-two.json";
  CommandResult two = run("fit --db " + other + " -o " + out);
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.out.find("carb: error: --device: " + other +
                         " holds 2 devices; choose one by its fingerprint: other-cpu (Other CPU), "
                         "third-cpu (Third CPU)"),
            std::string::npos)
      << two.out;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST_F(ModelCli, DividesLatencyByTheDriftItsProbesMeasured) {
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  // The reference campaign has no probes: auto says so and fits as measured; on refuses.
  EXPECT_NE(fit.out.find("\"drift\": null"), std::string::npos) << fit.out;
  const std::string out = testing::TempDir() + "model-cli-drift.json";
  std::filesystem::remove(out);
  CommandResult refused = run("fit --db " + db + " -o " + out + " --drift on");
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.out.find("--drift on: no drift probes of this device in " + db),
            std::string::npos)
      << refused.out;
  EXPECT_FALSE(std::filesystem::exists(out));

  // Made-up probes (a test fixture, not measurements) every 30 s across the campaign
  // (21:21:22-21:41:48), slowing linearly from 1.000 to 1.210 ms.
  const std::string probed = db + "-probed.sqlite";
  std::filesystem::copy_file(db, probed, std::filesystem::copy_options::overwrite_existing);
  sql(probed,
      "WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n < 42) "
      "INSERT INTO drift_probes (campaign_id, device_id, configuration_key, software_versions, "
      "protocol, measured_at, status, detail, clock, median_ms, ci_half_width_ms, sample_count, "
      "cv, converged, contended) SELECT 1, 1, 'basic18_w0.5_ds_r64_b1_fp32', 'test', '{}', "
      "strftime('%Y-%m-%dT%H:%M:%fZ', '2026-11-29T21:21:00', '+' || (30 * n) || ' seconds'), "
      "'ok', '', 'wall', 1.0 + 0.005 * n, 0.01, 100, 0.05, 1, 0 FROM i");
  CommandResult corrected = run("fit --db " + probed + " -o " + out +
                                " --forest-trees 16 --threads 1 --drift on --format json");
  ASSERT_EQ(corrected.exit_code, 0) << corrected.out;
  // Smoothed, the probes run from 1.005 to 1.205 ms; their median, 1.105 ms, is factor 1.
  EXPECT_NE(corrected.out.find("latency divided by the device's drift: 43 probes of "
                               "basic18_w0.5_ds_r64_b1_fp32, factors 0.9"),
            std::string::npos)
      << corrected.out;
  EXPECT_NE(corrected.out.find("of the probe's 1.105 ms"), std::string::npos) << corrected.out;
  EXPECT_NE(corrected.out.find("\"reference_ms\": 1.10"), std::string::npos) << corrected.out;

  // evaluate follows the model: the same correction, relative to the model's reference.
  CommandResult evaluated = run("evaluate --model " + out + " --db " + probed);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.out;
  EXPECT_NE(evaluated.out.find("latency divided by the device's drift: 43 probes"),
            std::string::npos)
      << evaluated.out;
  // Another device's measurements (its probe three times slower, as its every latency) are
  // corrected relative to its own probes' median, not scaled by the model's probe: the model
  // is then 3x off, as it is on that device, not right.
  const std::string slower = db + "-probed-slower.sqlite";
  std::filesystem::copy_file(probed, slower, std::filesystem::copy_options::overwrite_existing);
  sql(slower,
      "UPDATE devices SET fingerprint = 'slower-cpu', name = 'Slower CPU'; "
      "UPDATE drift_probes SET median_ms = 3 * median_ms; "
      "UPDATE measurements SET device_median_ms = 3 * device_median_ms, "
      "device_mean_ms = 3 * device_mean_ms, device_p5_ms = 3 * device_p5_ms, "
      "device_p95_ms = 3 * device_p95_ms, wall_median_ms = 3 * wall_median_ms, "
      "wall_mean_ms = 3 * wall_mean_ms, wall_p5_ms = 3 * wall_p5_ms, "
      "wall_p95_ms = 3 * wall_p95_ms");
  CommandResult other_device =
      run("evaluate --model " + out + " --db " + slower + " --format json");
  ASSERT_EQ(other_device.exit_code, 0) << other_device.out;
  EXPECT_NE(other_device.out.find("of the probe's 3.315 ms"), std::string::npos)
      << other_device.out;
  const auto scored = nlohmann::json::parse(other_device.out.substr(other_device.out.find('{')));
  for (const auto& distance : scored.at("distance")) {
    if (distance.at("target") == "latency") {
      EXPECT_NEAR(distance.at("ratio"), 3.0, 0.3);
    }
  }
  // ...and on measurements without probes it says it cannot.
  CommandResult unprobed = run("evaluate --model " + out + " --db " + db);
  ASSERT_EQ(unprobed.exit_code, 0) << unprobed.out;
  EXPECT_NE(unprobed.out.find("note: latency not corrected for drift: no drift probes"),
            std::string::npos)
      << unprobed.out;
  CommandResult predicted = run("predict --model " + out + " basic18_w0.5_ds_r64_b1_fp32");
  ASSERT_EQ(predicted.exit_code, 0) << predicted.out;
  EXPECT_NE(predicted.out.find("took 1.105 ms"), std::string::npos) << predicted.out;
  EXPECT_EQ(run("fit --db " + probed + " -o " + out + " --drift sometimes").exit_code, 2);
}

TEST_F(ModelCli, BadModelFilesAreOneLineAndExitTwo) {
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  std::ifstream in(model);
  std::stringstream text;
  text << in.rdbuf();
  const std::string truncated = testing::TempDir() + "model-cli-truncated.json";
  std::ofstream(truncated) << text.str().substr(0, text.str().size() / 3);
  CommandResult result = run("predict --model " + truncated + " basic18_w1_ds_r64_b1_fp32");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(lines(result.out), 1) << result.out;
  EXPECT_NE(result.out.find("not a carb model file (truncated or not JSON"), std::string::npos);

  // A model of a table cannot score configurations.
  const std::string table = testing::TempDir() + "model-cli-table.csv";
  {
    std::ofstream csv(table);
    csv << "x,y\n";
    for (int i = 1; i <= 60; ++i) csv << i << "," << 3 * i + (i % 7) << "\n";
  }
  const std::string table_model = testing::TempDir() + "model-cli-table.json";
  ASSERT_EQ(run("fit --table " + table + " --features x --target y --threads 1 -o " + table_model)
                .exit_code,
            0);
  result = run("evaluate --model " + table_model + " --db " + db);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.out.find("was fitted on a table, not on carb measurements"), std::string::npos)
      << result.out;
  result = run("predict --model " + table_model + " --table " + table + " --format csv");
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_EQ(lines(result.out), 61);
  // evaluate --table reads the columns the model was fitted on, in its layout: x spans 1-60
  // there (log_x), 40-60 here; --features and --target may be left out.
  const std::string narrow = testing::TempDir() + "model-cli-narrow.csv";
  {
    std::ofstream csv(narrow);
    csv << "x,y\n";
    for (int i = 40; i <= 60; ++i) csv << i << "," << 3 * i + (i % 7) << "\n";
  }
  result = run("evaluate --model " + table_model + " --table " + narrow + " --format csv");
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_NE(result.out.find("y,carb,21,"), std::string::npos) << result.out;
  // A table has no device: the scores say what they were scored on.
  result =
      run("evaluate --model " + table_model + " --table " + narrow + " --features x --target y");
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_NE(result.out.find("table model scored on " + narrow + " (21 rows)"), std::string::npos)
      << result.out;
  EXPECT_EQ(result.out.find("own device"), std::string::npos) << result.out;
  result = run("evaluate --model " + table_model + " --table " + narrow + " --features z");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(lines(result.out), 1) << result.out;
  EXPECT_NE(result.out.find("was fitted on features log_x and targets y=y"), std::string::npos)
      << result.out;
  result = run("evaluate --model " + model + " --table " + narrow);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.out.find("was fitted on carb measurements, not on a table"), std::string::npos)
      << result.out;
}

TEST_F(ModelCli, ScreensToAParetoShortlistAndValidatesItOnMeasurements) {
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  const std::string keys = db + "-keys.txt";
  write_keys(db, keys);
  const std::string shortlist = db + "-shortlist.csv", json = db + "-shortlist.json";
  const std::string budget = "'latency<=5ms,memory<=64MiB'";
  CommandResult screen = run("screen --model " + model + " --keys " + keys + " --budget " + budget +
                             " -o " + shortlist + " --json " + json);
  ASSERT_EQ(screen.exit_code, 0) << screen.out;
  EXPECT_NE(screen.out.find("screened 1600 configurations"), std::string::npos) << screen.out;
  // The model was fitted on all of them: nothing extrapolates.
  EXPECT_EQ(screen.out.find("extrapolate"), std::string::npos) << screen.out;
  std::ifstream in(json);
  const auto result = nlohmann::json::parse(in);
  const auto& counts = result.at("counts");
  EXPECT_EQ(counts.at("configurations").get<int>(), 1600);
  EXPECT_EQ(counts.at("stage1_over_budget").get<int>() + counts.at("stage1_outranked").get<int>() +
                counts.at("stage2_scored").get<int>(),
            1600);
  // The front over macs (the default value) and the costs: several configurations, each within
  // budget, ranked by value, the most capable first.
  std::vector<nlohmann::json> front;
  for (const auto& entry : result.at("candidates")) {
    if (!entry.at("front_rank").is_null()) front.push_back(entry);
  }
  std::sort(front.begin(), front.end(), [](const auto& a, const auto& b) {
    return a.at("front_rank").template get<int>() < b.at("front_rank").template get<int>();
  });
  ASSERT_GE(front.size(), 3U);
  EXPECT_EQ(front.size(), counts.at("front").get<std::size_t>());
  for (std::size_t r = 0; r < front.size(); ++r) {
    const auto& entry = front[r];
    EXPECT_EQ(entry.at("front_rank").get<std::size_t>(), r + 1);
    EXPECT_LE(entry.at("predictions").at("latency").at("value").get<double>(), 5.0);
    EXPECT_LE(entry.at("predictions").at("memory").at("value").get<double>(), 64.0 * 1024 * 1024);
    EXPECT_GT(entry.at("p_feasible").get<double>(), 0.0);
    EXPECT_TRUE(entry.at("inside_domain").get<bool>());
    EXPECT_TRUE(entry.at("features").contains("log_flops"));
    if (r > 0) {
      EXPECT_LE(entry.at("value").get<double>(), front[r - 1].at("value").get<double>());
    }
  }
  EXPECT_EQ(result.at("value").at("name"), "macs");

  CommandResult validate = run("validate --shortlist " + shortlist + " --db " + db + " --budget " +
                               budget + " --model " + model + " --keys " + keys);
  ASSERT_EQ(validate.exit_code, 0) << validate.out;
  EXPECT_NE(validate.out.find("budget classification over 1600 measured configurations"),
            std::string::npos)
      << validate.out;
  EXPECT_NE(validate.out.find("shortlist recall"), std::string::npos) << validate.out;
  // Validate's classification plans memory only where screening does: on a machine that runs
  // the model's engine.
  if (validate.out.find("as screening takes it") != std::string::npos) {
    EXPECT_NE(screen.out.find("from the engine's own plan on this machine"), std::string::npos)
        << screen.out;
  }

  CommandResult bad =
      run("screen --model " + model + " --keys " + keys + " --budget 'latency<=5Jz'");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(lines(bad.out), 1) << bad.out;
  EXPECT_NE(bad.out.find("--budget:1:"), std::string::npos) << bad.out;
  bad = run("screen --model " + model + " --keys " + keys + " --budget 'latency<=1us'");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(lines(bad.out), 1) << bad.out;
  EXPECT_NE(bad.out.find("no configuration meets the budgets: latency <= 0.001 ms rules out all "
                         "1600 configurations (closest: "),
            std::string::npos)
      << bad.out;
  bad = run("screen --model " + model + " --keys " + keys + " --budget 'energy<=1J'");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("energy, which the model cannot predict: no energy measured"),
            std::string::npos)
      << bad.out;
}

TEST_F(ModelCli, ScreensTheMillionPointSpaceInChunks) {
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  CommandResult screen = run("screen --model " + model + " --spec " + std::string(CARB_SOURCE_DIR) +
                             "/examples/spaces/million.yaml --budget 'latency<=20ms' --top 3");
  ASSERT_EQ(screen.exit_code, 0) << screen.out;
  EXPECT_NE(screen.out.find("screened 1399680 configurations"), std::string::npos) << screen.out;
  // A CPU model of cpu-demo.yaml knows nothing of 224 px or fp16: screening says so.
  EXPECT_NE(
      screen.out.find(" candidates (those not confidently over budget) lie outside the data " +
                      model + " was fitted on (first: "),
      std::string::npos)
      << screen.out;
  // By default they are kept with wider intervals and judged by their upper ends.
  EXPECT_NE(screen.out.find("kept with intervals widened by their distance, feasible only when "
                            "the upper ends meet the budgets"),
            std::string::npos)
      << screen.out;
}

TEST(ModelCliInput, BadTablesAreOneLineAndWriteNothing) {
  const std::string dir = testing::TempDir();
  const std::string out = dir + "model-cli-bad.json";
  const auto fit = [&](const std::string& csv, const std::string& arguments) {
    const std::string path = dir + "model-cli-bad.csv";
    std::ofstream(path) << csv;
    std::filesystem::remove(out);
    CommandResult result = run("fit --table " + path + " " + arguments + " --threads 1 -o " + out);
    EXPECT_EQ(result.exit_code, 2) << result.out;
    EXPECT_EQ(lines(result.out), 1) << result.out;
    EXPECT_FALSE(std::filesystem::exists(out));
    return result.out;
  };
  std::string rows = "x,y\n";
  for (int i = 1; i <= 20; ++i) rows += std::to_string(i) + "," + std::to_string(2 * i) + "\n";
  EXPECT_NE(fit(rows, "--features x --target y").find("too few rows to split: 20 measured rows"),
            std::string::npos);
  EXPECT_NE(fit(rows, "--features x,z --target y").find("model-cli-bad.csv:1:1: no column 'z'"),
            std::string::npos);
  EXPECT_NE(fit("x,y\n1,2\n2,-4\n", "--features x --target y")
                .find("model-cli-bad.csv:3:2: target 'y' is negative"),
            std::string::npos);
  EXPECT_NE(fit("x,y\n1,2\n2,NaN\n", "--features x --target y")
                .find("model-cli-bad.csv:3:2: column 'y': 'NaN' is not a finite number"),
            std::string::npos);
  EXPECT_NE(
      fit("x,y\n1,\n2,\n", "--features x --target y").find("target 'y' (column 'y') has no values"),
      std::string::npos);
  EXPECT_NE(fit(rows, "--features x").find("--target: name at least one target"),
            std::string::npos);
}

// A kernel model as a user builds one: carb kernels times some ResNets, carb fit --kernels fits
// it, carb predict sums the planned kernels of configurations it never timed.
// Times the keys' kernels briefly into `timings` (carb kernels) and fits a kernel model on them
// into `model` (carb fit --kernels, quick options): the fit's output, or the timing's failure.
CommandResult time_and_fit_kernels(const std::string& keys, const std::string& timings,
                                   const std::string& model) {
  const CommandResult timed =
      run("kernels --keys " + keys + " --passes 2 --warmup 1 --format csv > " + timings, false);
  if (timed.exit_code != 0) return timed;
  return run("fit --kernels " + timings + " --threads 1 --forest-trees 8 -o " + model);
}

TEST(ModelCliInput, FitsAKernelModelAndPredictsConfigurationsByTheirKernels) {
  const std::string dir = testing::TempDir();
  const std::string timings = dir + "kernel-cli.csv";
  const std::string model = dir + "kernel-cli.json";
  std::filesystem::remove(model);
  // Small networks of 6 architectures, so that the fit holds 2 out to calibrate its intervals.
  const std::string keys = dir + "kernel-cli-keys.txt";
  {
    std::ofstream out(keys);
    for (const char* architecture :
         {"basic10", "basic18", "basic26", "basic34", "bottleneck14", "bottleneck26"}) {
      for (const int resolution : {32, 40, 48}) {
        for (const int batch : {1, 2}) {
          out << architecture << "_w0.25_nods_r" << resolution << "_b" << batch << "_fp32\n";
        }
      }
    }
  }
  const CommandResult fitted = time_and_fit_kernels(keys, timings, model);
  ASSERT_EQ(fitted.exit_code, 0) << fitted.out;
  EXPECT_NE(fitted.out.find("whole-pass intervals: x/"), std::string::npos) << fitted.out;
  const nlohmann::json file = nlohmann::json::parse(std::ifstream(model));
  EXPECT_EQ(file.at("feature_schema").at("name"), "kernels");
  // A kernel model's default base: the kernels' layer-cost prior (not the ridge).
  EXPECT_EQ(file.at("options").at("prior"), "additive");
  EXPECT_EQ(file.at("targets").at(0).at("prior_mode"), "additive");
  // Fitted as measured unless asked: the timings' probe has moved without their passes.
  EXPECT_TRUE(file.at("drift").is_null()) << file.at("drift");
  EXPECT_NE(fitted.out.find("note: kernel timings fitted as measured, not divided by their drift "
                            "probe (--drift on divides them"),
            std::string::npos)
      << fitted.out;
  const std::string divided_model = dir + "kernel-cli-divided.json";
  const CommandResult divided = run("fit --kernels " + timings +
                                    " --threads 1 --forest-trees 8 --drift on -o " + divided_model);
  ASSERT_EQ(divided.exit_code, 0) << divided.out;
  EXPECT_NE(divided.out.find("latency divided by the device's drift: the kernel timings' probe of "
                             "basic18_w0.5_ds_r64_b1_fp32"),
            std::string::npos)
      << divided.out;
  EXPECT_EQ(divided.out.find("fitted as measured"), std::string::npos) << divided.out;

  // Configurations the timings never held: a latency each, inside its interval, of the size
  // such networks have (tens of microseconds to tens of milliseconds).
  const CommandResult predicted = run("predict --model " + model +
                                          " basic18_w0.25_nods_r56_b4_fp32 "
                                          "bottleneck26_w0.25_nods_r36_b1_fp32 --format csv",
                                      false);
  ASSERT_EQ(predicted.exit_code, 0) << predicted.out;
  std::istringstream text(predicted.out);
  std::string line;
  std::getline(text, line);
  EXPECT_EQ(line, "key,architecture,latency_ms,latency_ms_low,latency_ms_high");
  int rows = 0;
  while (std::getline(text, line)) {
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    ASSERT_EQ(cells.size(), 5u) << line;
    const double value = std::stod(cells[2]);
    EXPECT_GT(value, 0.01) << line;
    EXPECT_LT(value, 100) << line;
    EXPECT_LT(std::stod(cells[3]), value) << line;
    EXPECT_GT(std::stod(cells[4]), value) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 2);

  // Scored on kernel timings, and said so: a kernel table is not a device's measurements.
  const CommandResult scored = run("evaluate --model " + model + " --kernels " + timings);
  ASSERT_EQ(scored.exit_code, 0) << scored.out;
  EXPECT_NE(scored.out.find("kernel model scored on the kernel timings of " + timings + " ("),
            std::string::npos)
      << scored.out;
  EXPECT_EQ(scored.out.find("own device"), std::string::npos) << scored.out;

  // Bad input: one line, exit 2.
  const auto fails = [&](const std::string& arguments, const std::string& expected) {
    const CommandResult result = run(arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments << ": " << result.out;
    EXPECT_EQ(lines(result.out), 1) << result.out;
    EXPECT_NE(result.out.find(expected), std::string::npos) << result.out;
  };
  fails("fit --kernels " + timings + " --features a --target b -o " + dir + "x.json",
        "--kernels fixes its features and target");
  fails("fit --kernels " + timings + " --table t.csv -o " + dir + "x.json",
        "give one of --db, --table or --kernels");
  const std::string old = dir + "kernel-cli-old.csv";
  std::ofstream(old) << "key,index,kernel,share,pass_ms\nk,0,a,1,2\n";
  fails("fit --kernels " + old + " -o " + dir + "x.json", old);
  fails("screen --model " + model + " --spec " + std::string(CARB_SOURCE_DIR) +
            "/examples/spaces/cpu-demo.yaml --budget 'latency<=5ms'",
        "kernel");
  // Named as what it is, before any database is read.
  fails("fit --from " + model + " --db " + dir + "kernel-cli-none.sqlite -o " + dir + "x.json",
        model + " was fitted on kernel timings; a transfer needs a model of carb's measurements");
}

// A CSV text's rows as cells split at every comma (its columns before any quoted cell are whole),
// the header first.
std::vector<std::vector<std::string>> cells_of(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines_in(text);
  for (std::string line; std::getline(lines_in, line);) {
    std::vector<std::string>& cells = rows.emplace_back();
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
  }
  return rows;
}

// The index of column `name` in `header`.
std::size_t column_of(const std::vector<std::string>& header, const std::string& name) {
  const auto at = std::find(header.begin(), header.end(), name);
  EXPECT_NE(at, header.end()) << name;
  return static_cast<std::size_t>(at - header.begin());
}

// A kernel model of the PyTorch backend: its kernels are IR layers, the batch-1 convs ATen runs
// off oneDNN say so, and carb predict sums a configuration's layers as PyTorch runs them.
TEST(ModelCliInput, FitsAKernelModelOfPyTorchAndPredictsByItsLayers) {
  const CommandResult devices = run("devices", false);
  if (devices.out.find("\ntorch:0 ") == std::string::npos) {
    GTEST_SKIP() << "no torch:0 in this build: " << devices.out;
  }
  const std::string dir = testing::TempDir();
  const std::string keys = dir + "torch-kernel-keys.txt";
  {
    std::ofstream out(keys);
    for (const char* architecture :
         {"basic10", "basic18", "basic26", "basic34", "bottleneck14", "bottleneck26"}) {
      for (const int batch : {1, 2})
        out << architecture << "_w0.25_nods_r32_b" << batch << "_fp32\n";
    }
  }
  const std::string timings = dir + "torch-kernels.csv";
  const std::string model = dir + "torch-kernels.json";
  const CommandResult timed = run("kernels --device torch:0 --keys " + keys +
                                      " --passes 2 --warmup 1 --format csv > " + timings,
                                  false);
  ASSERT_EQ(timed.exit_code, 0) << timed.out;
  const std::vector<std::vector<std::string>> table = cells_of(carb_test::slurp(timings));
  ASSERT_GT(table.size(), 1u);
  const std::size_t key = column_of(table[0], "key"), kernel = column_of(table[0], "kernel");
  const std::size_t implementation = column_of(table[0], "implementation");
  const std::size_t native = column_of(table[0], "is_torch_native");
  std::map<std::string, std::string> layer1;  // key -> its first block's first conv's flag
  for (std::size_t r = 1; r < table.size(); ++r) {
    const std::vector<std::string>& row = table[r];
    EXPECT_EQ(row[implementation].rfind("aten::", 0), 0u) << row[kernel];
    if (row[kernel] == "layer1.0.conv1") layer1[row[key]] = row[native];
  }
  // 16 channels of 32 x 32 at batch 1: 16,384 input values, on ATen's native path; at batch 2 not.
  EXPECT_EQ(layer1.at("basic10_w0.25_nods_r32_b1_fp32"), "1");
  EXPECT_EQ(layer1.at("basic10_w0.25_nods_r32_b2_fp32"), "0");
  const CommandResult fitted =
      run("fit --kernels " + timings + " --threads 1 --forest-trees 8 -o " + model);
  ASSERT_EQ(fitted.exit_code, 0) << fitted.out;
  // A network it never timed, against its pass timed now: the right size, within what a loaded
  // machine moves a pass by (exact sums are the library tests': KernelModel.OfPyTorch...).
  const std::string unseen = "basic18_w0.25_nods_r40_b1_fp32";
  const std::string unseen_keys = dir + "torch-unseen.txt";
  std::ofstream(unseen_keys) << unseen << "\n";
  const CommandResult again =
      run("kernels --device torch:0 --keys " + unseen_keys +
              " --passes 3 --warmup 1 --format csv > " + dir + "torch-unseen.csv",
          false);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  const std::vector<std::vector<std::string>> pass =
      cells_of(carb_test::slurp(dir + "torch-unseen.csv"));
  ASSERT_GT(pass.size(), 1u);
  const double pass_ms = std::stod(pass[1][column_of(pass[0], "pass_ms")]);
  const CommandResult predicted =
      run("predict --model " + model + " " + unseen + " --format csv", false);
  ASSERT_EQ(predicted.exit_code, 0) << predicted.out;
  const std::vector<std::vector<std::string>> prediction = cells_of(predicted.out);
  ASSERT_EQ(prediction.size(), 2u) << predicted.out;
  const double value = std::stod(prediction[1][column_of(prediction[0], "latency_ms")]);
  EXPECT_GT(value / pass_ms, 1.0 / 3) << predicted.out << " against " << pass_ms << " ms";
  EXPECT_LT(value / pass_ms, 3.0) << predicted.out << " against " << pass_ms << " ms";
  EXPECT_LT(std::stod(prediction[1][column_of(prediction[0], "latency_ms_low")]), value);
  EXPECT_GT(std::stod(prediction[1][column_of(prediction[0], "latency_ms_high")]), value);
}

}  // namespace

// A kernel model beside the reference model prices stage 2's latency: each candidate's is what
// carb predict gives for it by its kernels, and the screening says so.
TEST_F(ModelCli, ScreensWithAKernelModelPricingLatency) {
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  const std::string base = testing::TempDir() + "screen-kernels-" + std::to_string(::getpid());
  const std::string keys = base + "-keys.txt", timings = base + ".csv", kernels = base + ".json",
                    json = base + "-screen.json";
  {
    std::ofstream out(keys);
    for (const char* architecture : {"basic10", "basic18", "basic26", "bottleneck14"}) {
      for (const int resolution : {32, 48}) {
        out << architecture << "_w0.25_nods_r" << resolution << "_b1_fp32\n";
      }
    }
  }
  const CommandResult fitted = time_and_fit_kernels(keys, timings, kernels);
  ASSERT_EQ(fitted.exit_code, 0) << fitted.out;

  const CommandResult screened =
      run("screen --model " + model + " --kernel-model " + kernels + " --keys " + keys +
          " --budget 'latency<=10s' --top 100 --json " + json);
  ASSERT_EQ(screened.exit_code, 0) << screened.out;
  EXPECT_NE(screened.out.find("  latency: 8 of 8 stage-2 candidates from the kernel model " +
                              kernels + " ("),
            std::string::npos)
      << screened.out;
  // The timings ran here, the reference campaign on another host (or device): a note says so.
  EXPECT_NE(screened.out.find("the kernel timings of " + kernels + " "), std::string::npos)
      << screened.out;
  const nlohmann::json result = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(result.at("kernel_model"), kernels);
  EXPECT_EQ(result.at("counts").at("stage2_latency_by_kernels"), 8);
  EXPECT_EQ(result.at("counts").at("stage2_scored"), 8);
  // Each candidate's latency and interval: carb predict's by the kernels.
  std::map<std::string, std::array<double, 3>> predicted;
  {
    const CommandResult out =
        run("predict --model " + kernels + " --keys " + keys + " --format json", false);
    ASSERT_EQ(out.exit_code, 0) << out.out;
    for (const auto& row : nlohmann::json::parse(out.out)) {
      predicted[row.at("key")] = {row.at("latency_ms").get<double>(),
                                  row.at("latency_ms_low").get<double>(),
                                  row.at("latency_ms_high").get<double>()};
    }
  }
  ASSERT_EQ(predicted.size(), 8U);
  for (const auto& candidate : result.at("candidates")) {
    const auto& latency = candidate.at("predictions").at("latency");
    const auto& expected = predicted.at(candidate.at("key").get<std::string>());
    EXPECT_NEAR(latency.at("value").get<double>(), expected[0], 1e-6 * expected[0]);
    EXPECT_NEAR(latency.at("low").get<double>(), expected[1], 1e-6 * expected[1]);
    EXPECT_NEAR(latency.at("high").get<double>(), expected[2], 1e-6 * expected[2]);
  }
  // A model of measurements as the kernel model: one line, exit 2.
  const CommandResult wrong = run("screen --model " + model + " --kernel-model " + model +
                                  " --keys " + keys + " --budget 'latency<=10s'");
  EXPECT_EQ(wrong.exit_code, 2) << wrong.out;
  EXPECT_EQ(lines(wrong.out), 1) << wrong.out;
  EXPECT_NE(wrong.out.find("the kernel model is not one"), std::string::npos) << wrong.out;
}

// Active profiling in replay mode: a model of 200 of the reference configurations refines itself
// with measurements the reference campaign holds, and scores its shortlist against the truth.
TEST_F(ModelCli, RefinesByReplayingAFinishedCampaign) {
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  const std::string pid = std::to_string(::getpid());
  const std::string start = testing::TempDir() + "refine-start-" + pid + ".sqlite";
  const std::string start_model = start + ".json", refined = start + ".refined.json";
  const std::string keys = start + "-keys.txt", json = start + "-screen.json";
  ASSERT_EQ(std::system(("cp " + db + " " + start).c_str()), 0);
  sql(start,
      "DELETE FROM measurements WHERE id NOT IN (SELECT id FROM measurements ORDER BY "
      "configuration_key LIMIT 200); DELETE FROM samples WHERE measurement_id NOT IN (SELECT id "
      "FROM measurements)");
  write_keys(db, keys);
  CommandResult start_fit =
      run("fit --db " + start + " -o " + start_model + " --forest-trees 16 --threads 1");
  ASSERT_EQ(start_fit.exit_code, 0) << start_fit.out;

  const std::string refine =
      "screen --model " + start_model + " --keys " + keys +
      " --budget 'latency<=2ms,memory<=32MiB' --outside-domain allow --refine 30 --rounds 2 --db " +
      start + " --replay " + db + " --threads 1 --json " + json;
  CommandResult screen = run(refine);
  ASSERT_EQ(screen.exit_code, 0) << screen.out;
  std::ifstream in(json);
  const auto result = nlohmann::json::parse(in);
  const auto& rounds = result.at("refine").at("rounds");
  ASSERT_EQ(rounds.size(), 3U) << screen.out;
  // Each round measured 30 configurations the model had not seen: the training set grows by 30.
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(rounds[r].at("training_rows").get<int>(), 200 + 30 * r) << screen.out;
    EXPECT_EQ(rounds[r].at("measured").get<int>(), r == 0 ? 0 : 30);
    // The replay covers the whole pool: the front and the budget decisions are scored.
    EXPECT_GE(rounds[r].at("budget_accuracy_pct").get<double>(), 90.0) << screen.out;
    // Recall and precision are shares of whole configurations: hits / true front and
    // hits / front, the same hits.
    const double true_front = result.at("refine").at("true_front").get<double>();
    const double front = rounds[r].at("front").get<double>();
    const double hits = rounds[r].at("recall_pct").get<double>() * true_front / 100;
    EXPECT_NEAR(hits, std::round(hits), 1e-6) << screen.out;
    EXPECT_NEAR(rounds[r].at("precision_pct").get<double>(), 100 * std::round(hits) / front, 1e-6);
    EXPECT_LE(hits, std::min(true_front, front) + 1e-6);
  }
  EXPECT_TRUE(rounds[1].at("new_errors").contains("latency"));
  EXPECT_EQ(rounds[1].at("new_errors").at("latency").at("n").get<int>(), 30);
  EXPECT_FALSE(rounds[1].at("new_errors").contains("energy"));
  EXPECT_GE(result.at("refine").at("true_front").get<int>(), 1);
  // Measured configurations on the shortlist carry their measurements, as points.
  for (const auto& entry : result.at("candidates")) {
    if (!entry.at("measured").get<bool>()) continue;
    EXPECT_EQ(entry.at("predictions").at("latency").at("low").get<double>(),
              entry.at("predictions").at("latency").at("high").get<double>());
  }
  // The refitted model loads and predicts; replay wrote nothing into --db.
  EXPECT_EQ(run("predict --model " + refined + " basic10_w0.25_ds_r32_b1_fp32").exit_code, 0);
  CommandResult count = run("export --db " + start + " --ok-only --format csv");
  EXPECT_EQ(lines(count.out), 201);

  // A fixed seed and one thread: a second run chooses and scores the same.
  CommandResult again = run(refine);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  std::ifstream in_again(json);
  const auto rounds_again = nlohmann::json::parse(in_again).at("refine").at("rounds");
  ASSERT_EQ(rounds_again.size(), rounds.size());
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    for (const char* timing : {"measure_s", "fit_s", "screen_s"}) {
      EXPECT_TRUE(rounds[r].contains(timing));
    }
    auto a = rounds[r], b = rounds_again[r];
    for (const char* timing : {"measure_s", "fit_s", "screen_s"}) {
      a.erase(timing);
      b.erase(timing);
    }
    EXPECT_EQ(a, b) << r;
  }

  // Bad input: one line, exit 2.
  for (const std::string& bad :
       {std::string("screen --model " + start_model + " --keys " + keys + " --refine 5"),
        refine + " --acquire guess", refine + " --rounds 0"}) {
    CommandResult result_bad = run(bad);
    EXPECT_EQ(result_bad.exit_code, 2) << bad;
    EXPECT_EQ(lines(result_bad.out), 1) << result_bad.out;
  }
}

// carb fit --from: a model of the reference adapted from 16 chosen rows of a campaign, scored on
// the rest; and what fit, evaluate and report say of rows from two host instances.
TEST_F(ModelCli, TransfersFromFewRowsAndTellsHostInstancesApart) {
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  const std::string pid = std::to_string(::getpid());
  const std::string two = testing::TempDir() + "transfer-two-hosts-" + pid + ".sqlite";
  ASSERT_EQ(std::system(("cp " + db + " " + two).c_str()), 0);
  // Two hosts of one device: the first 800 rows measured on one, the rest on another.
  sql(two,
      "UPDATE measurements SET provenance = json_set(provenance, '$.host.instance', CASE WHEN id "
      "<= (SELECT min(id) + 799 FROM measurements) THEN 'aaaa1111:b0000001' ELSE "
      "'cccc2222:b0000002' END)");

  const std::string out = two + ".transfer.json";
  CommandResult result =
      run("fit --from " + model + " --db " + two + " --instance cccc --rows 16 " +
              "--seed 3 --threads 1 --format json -o " + out,
          false);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  auto summary = nlohmann::json::parse(result.out);
  EXPECT_EQ(summary.at("rows"), 16);
  EXPECT_EQ(summary.at("scored_rows"), 800 - 16);
  ASSERT_EQ(summary.at("targets").size(), 3u);
  EXPECT_EQ(summary.at("targets")[1].at("available"), false);  // energy: NULL in the campaign
  double latency_mape = -1;
  for (const auto& s : summary.at("scores")) {
    if (s.at("target") == "latency" && s.at("method") == "carb") latency_mape = s.at("mape");
  }
  // The same machine's rows: the transfer has little to learn, and must not unlearn.
  EXPECT_GT(latency_mape, 0);
  EXPECT_LT(latency_mape, 15);
  {
    std::ifstream in(out);
    const auto file = nlohmann::json::parse(in);
    EXPECT_EQ(file.at("device").at("instances"), nlohmann::json({{"cccc2222:b0000002", 16}}));
    EXPECT_EQ(file.at("transfer").at("rows"), 16);
  }

  // Pooled rows of two hosts: fit says so; --instance keeps one; a wrong one is one error line.
  result = run("fit --db " + two + " --fixed-rounds 5 --forest-trees 4 --threads 1 -o " + out);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_NE(result.out.find("the rows come from 2 host instances, pooled as one device"),
            std::string::npos)
      << result.out;
  result = run("fit --db " + two + " --instance dddd --threads 1 -o " + out);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(lines(result.out), 1) << result.out;
  EXPECT_NE(result.out.find("no measurements of host instance 'dddd'"), std::string::npos);
  EXPECT_NE(result.out.find("aaaa1111:b0000001 (800 rows)"), std::string::npos) << result.out;

  // A model of one host scored on the other's rows: the same fingerprint, another host.
  const std::string first_host = two + ".aaaa.json";
  ASSERT_EQ(run("fit --db " + two +
                " --instance aaaa --fixed-rounds 5 --forest-trees 4 "
                "--threads 1 -o " +
                first_host)
                .exit_code,
            0);
  result = run("evaluate --model " + first_host + " --db " + two + " --instance cccc --format json",
               false);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  const auto evaluation = nlohmann::json::parse(result.out);
  EXPECT_EQ(evaluation.at("transfer"), true);
  EXPECT_EQ(evaluation.at("same_fingerprint"), true);
  EXPECT_NE(evaluation.at("hosts").get<std::string>().find("did not measure"), std::string::npos);
  EXPECT_EQ(evaluation.at("distance")[2].at("rows"), 800);
  result = run("evaluate --model " + first_host + " --db " + two + " --instance aaaa --format json",
               false);
  EXPECT_EQ(nlohmann::json::parse(result.out).at("transfer"), false);

  // A transfer from the first host's model to both hosts' rows: the held-out rows of the 800
  // configurations its data does not have are scored apart too.
  result = run("fit --from " + first_host + " --db " + two +
                   " --rows 16 --seed 3 --threads 1 --format json -o " + out,
               false);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  summary = nlohmann::json::parse(result.out);
  EXPECT_EQ(summary.at("scored_rows"), 1600 - 16);
  std::size_t chosen_new = 0;
  {
    std::ifstream in(out);
    const auto file = nlohmann::json::parse(in);
    const auto& ids = file.at("training_domain").at("joint").at("ids");
    ASSERT_EQ(ids.size(), 800u + 16);  // the source's rows, then the transfer's
    for (std::size_t i = 800; i < ids.size(); ++i) {
      chosen_new += std::count(ids.begin(), ids.begin() + 800, ids[i]) == 0 ? 1 : 0;
    }
  }
  EXPECT_EQ(summary.at("scored_rows_new_to_source"), 800 - chosen_new);
  std::size_t new_rows = 0;
  for (const auto& s : summary.at("scores_new_to_source")) {
    if (s.at("target") == "latency" && s.at("method") == "carb") new_rows = s.at("n");
  }
  EXPECT_EQ(new_rows, 800 - chosen_new);

  // Bad input: a table model as the source, a database without rows, K above what is measured.
  const std::string table = testing::TempDir() + "transfer-table-" + pid + ".csv";
  {
    std::ofstream csv(table);
    csv << "x,y\n";
    for (int i = 1; i <= 60; ++i) csv << i << "," << 3 * i + (i % 7) << "\n";
  }
  const std::string table_model = table + ".json";
  ASSERT_EQ(run("fit --table " + table + " --features x --target y --threads 1 -o " + table_model)
                .exit_code,
            0);
  result = run("fit --from " + table_model + " --db " + two + " -o " + out);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(lines(result.out), 1) << result.out;
  EXPECT_NE(result.out.find("was fitted on a table"), std::string::npos) << result.out;
  const std::string empty = testing::TempDir() + "transfer-empty-" + pid + ".sqlite";
  ASSERT_EQ(std::system(("cp " + db + " " + empty).c_str()), 0);
  sql(empty, "DELETE FROM measurements");
  result = run("fit --from " + model + " --db " + empty + " -o " + out);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(lines(result.out), 1) << result.out;
  result = run("fit --from " + model + " --db " + two +
               " --instance aaaa --rows 5000 --threads 1 "
               "-o " +
               out);
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_NE(result.out.find("--rows 5000 but the database holds 800 measured configurations"),
            std::string::npos)
      << result.out;
  for (const std::string& path : {two, empty, table, table_model, out, first_host}) {
    std::filesystem::remove(path);
  }
}
