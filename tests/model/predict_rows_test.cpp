// What carb predict and the Python module share: a table model's rows by column name, and memory
// from the engine's own plan for a few configurations.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "carb/backend.hpp"
#include "carb/error.hpp"
#include "carb/model.hpp"
#include "carb/telemetry.hpp"

namespace carb {
namespace {

FitOptions small_fit() {
  FitOptions options;
  options.threads = 1;
  options.forest_trees = 8;
  options.fixed_rounds = 10;
  options.baselines = false;
  return options;
}

// A table model of columns a (spanning under 1.5 decades: linear) and b (4 decades: log1p).
Predictor table_model() {
  std::ostringstream csv;
  csv << "a,b,y\n";
  for (int i = 0; i < 120; ++i) {
    const double a = 10 + i % 7;
    const double b = std::pow(10.0, (i % 5));
    csv << a << "," << b << "," << a * std::log1p(b) + 1 << "\n";
  }
  TableSpec spec;
  spec.features = {"a", "b"};
  spec.targets = {parse_table_target("y")};
  return Predictor::fit(dataset_from_table(parse_csv(csv.str(), "fit.csv"), spec), small_fit(),
                        nullptr);
}

TEST(TableFeatureRows, ReadsTheModelsColumnsByNameThroughLog1pWhereTheModelLogs) {
  const Predictor model = table_model();
  ASSERT_EQ(model.feature_names(), (std::vector<std::string>{"a", "log_b"}));
  // Columns in another order, one extra: found by name.
  const FeatureRows rows =
      table_feature_rows(model, parse_csv("b,extra,a\n99,x,12\n0,y,10.5\n", "new.csv"));
  EXPECT_EQ(rows.x, (std::vector<float>{12.0f, static_cast<float>(std::log1p(99.0)), 10.5f, 0.0f}));
  EXPECT_EQ(rows.batch, (std::vector<int>{0, 0}));
  // A column named as the logged feature itself is taken as it is.
  const FeatureRows logged = table_feature_rows(model, parse_csv("a,log_b\n12,3\n", "log.csv"));
  EXPECT_EQ(logged.x, (std::vector<float>{12.0f, 3.0f}));
  // The predictions of those rows are the model's of the same numbers.
  const auto p = model.predict(rows.x.data(), 2, rows.batch.data());
  ASSERT_EQ(p.size(), 1u);
  EXPECT_TRUE(p[0][0].available);
}

TEST(TableFeatureRows, ACellThatIsNoNumberOrAMissingColumnIsAnInputErrorAtItsPlace) {
  const Predictor model = table_model();
  const auto message = [&](const std::string& text) -> std::string {
    try {
      (void)table_feature_rows(model, parse_csv(text, "new.csv"));
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::kInput);
      return error.what();
    }
    return "no error";
  };
  EXPECT_EQ(message("a,b\n1,2\n3,x\n"), "new.csv:3:2: 'x' is not a finite number");
  EXPECT_EQ(message("a,b\n1,inf\n"), "new.csv:2:2: 'inf' is not a finite number");
  EXPECT_EQ(message("a,b\n,2\n"), "new.csv:2:1: '' is not a finite number");
  EXPECT_NE(message("a,c\n1,2\n").find("new.csv"), std::string::npos);
  EXPECT_NE(message("a,c\n1,2\n").find("'b'"), std::string::npos) << message("a,c\n1,2\n");
}

// A model of this machine's CPU engine, fitted on made-up measurements of a few configurations.
Predictor model_of(const std::string& fingerprint) {
  std::vector<MeasuredTargets> rows;
  const Space space =
      Space::from_file(std::string(CARB_SOURCE_DIR) + "/examples/spaces/cpu-demo.yaml");
  for (std::uint64_t index : sample_random(space, 120, 5)) {
    const Config config = space.at(index);
    const Features features = compute_features(build_network(config));
    MeasuredTargets row;
    row.configuration_key = to_key(config);
    row.device_fingerprint = fingerprint;
    row.latency_ms = 1e-8 * static_cast<double>(features.macs) + 0.1;
    row.engine_peak_bytes = features.param_bytes + features.peak_activation_bytes;
    row.energy_null_reason = "no sensor";
    rows.push_back(row);
  }
  return Predictor::fit(dataset_from_measurements(rows, fingerprint, "test CPU"), small_fit(),
                        nullptr);
}

TEST(PlanMemory, PlansAFewConfigurationsWhereThisMachineRunsTheModelsEngine) {
  const std::unique_ptr<Backend> backend = make_backend_for("cpu");
  ASSERT_FALSE(backend->devices().empty());
  const Device& device = *backend->devices().front();
  const Predictor model =
      model_of(device_fingerprint(read_host_info()) + "|" + engine_fingerprint(device.info()));
  const std::vector<Config> configs = {parse_key("basic10_w0.5_ds_r64_b1_fp32"),
                                       parse_key("bottleneck26_w0.25_nods_r32_b4_fp32")};
  const FeatureRows rows = feature_rows(configs);
  auto predictions = model.predict(rows.x.data(), configs.size(), rows.batch.data());
  const auto unplanned = predictions;
  std::string engine;
  EXPECT_EQ(plan_memory(model, configs, predictions, &engine), 2u);
  EXPECT_EQ(engine, engine_fingerprint(device.info()));
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const auto plan = device.plan_memory(configs[i]);
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(predictions[0][i].value, static_cast<double>(plan->peak_bytes));
    EXPECT_EQ(predictions[0][i].low, predictions[0][i].high);
    EXPECT_NE(predictions[0][i].value, unplanned[0][i].value);
    // Only memory changes.
    EXPECT_EQ(predictions[2][i].value, unplanned[2][i].value);
  }

  // Too many configurations: the model's memory stands.
  const std::vector<Config> many(kMostPlannedConfigurations + 1, configs[0]);
  std::vector<std::vector<TargetPrediction>> untouched = {
      std::vector<TargetPrediction>(many.size()), {}, {}};
  EXPECT_EQ(plan_memory(model, many, untouched, &engine), 0u);
  EXPECT_FALSE(untouched[0][0].available);

  // A model of an engine this machine lacks: none planned.
  const Predictor other =
      model_of("cpu=Other;logical_cpus=64|cpu|oneDNN 2.6.3 (N/A)|isa=avx2|threads=64");
  auto elsewhere = other.predict(rows.x.data(), configs.size(), rows.batch.data());
  const auto before = elsewhere;
  std::string none;
  EXPECT_EQ(plan_memory(other, configs, elsewhere, &none), 0u);
  EXPECT_EQ(none, "");
  EXPECT_EQ(elsewhere[0][0].value, before[0][0].value);
}

}  // namespace
}  // namespace carb
