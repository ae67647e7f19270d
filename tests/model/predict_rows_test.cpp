// What carb predict and the Python module share: a table model's rows by column name, and memory
// from the engine's own plan for a few configurations.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "carb/backend.hpp"
#include "carb/engine_plan.hpp"
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

// The IR layers of each kernel an engine runs for `network`: carb's CPU engine its plan's ops,
// PyTorch (`per_layer`) one ATen operator per layer.
std::vector<std::vector<int>> kernel_layers(const Network& network, bool per_layer) {
  std::vector<std::vector<int>> kernels;
  if (per_layer) {
    for (std::size_t i = 0; i < network.layers.size(); ++i)
      kernels.push_back({static_cast<int>(i)});
    return kernels;
  }
  for (const engine::Op& op : engine::plan_execution(network).ops) {
    kernels.push_back(engine::op_layers(op));
  }
  return kernels;
}

engine::KernelEngine engine_of(bool per_layer) {
  return per_layer ? engine::KernelEngine::kTorch : engine::KernelEngine::kCarb;
}

// Kernel timings as `carb kernels` writes them (the columns dataset_from_kernels reads), for the
// kernels of `configs` (kernel_layers'), each kernel's time `time_of(features)` ms.
template <typename Time>
std::string kernel_timings(const std::vector<Config>& configs, Time&& time_of,
                           bool per_layer = false) {
  std::ostringstream csv;
  csv << "key,index,kernel,implementation,share,pass_ms";
  for (const std::string& name : engine::kernel_feature_names()) csv << "," << name;
  csv << "\n";
  csv.precision(17);
  for (const Config& config : configs) {
    const Network network = build_network(config);
    std::vector<std::vector<double>> kernels;
    double pass = 0;
    for (const std::vector<int>& layers : kernel_layers(network, per_layer)) {
      kernels.push_back(engine::kernel_features(network, layers, engine_of(per_layer)));
      pass += time_of(kernels.back());
    }
    for (std::size_t k = 0; k < kernels.size(); ++k) {
      csv << to_key(config) << "," << k << ",k" << k << ",jit:avx512_core,"
          << time_of(kernels[k]) / pass << "," << pass;
      for (const double value : kernels[k]) csv << "," << value;
      csv << "\n";
    }
  }
  return csv.str();
}

// A kernel's made-up time, ms: a nanosecond per MAC and per 4 bytes moved, and 2 us to launch.
double made_up_ms(const std::vector<double>& features) {
  return 1e-6 * features[3] + 2.5e-7 * (features[0] + features[1]) + 0.002;
}

// A PyTorch kernel's made-up time, ms: made_up_ms, 30 times over on ATen's native path, and 10 ns
// per byte moved (eager ATen passes over every tensor it writes).
double torch_ms(const std::vector<double>& features) {
  return made_up_ms(features) * (features.back() > 0 ? 30 : 1) + 1e-5 * (features[0] + features[1]);
}

// Half-width networks of `architectures` at 32, 48 and 64 px and batches 1 and 4.
std::vector<Config> half_width(std::initializer_list<const char*> architectures) {
  std::vector<Config> configs;
  for (const char* architecture : architectures) {
    for (const int resolution : {32, 48, 64}) {
      for (const int batch : {1, 4}) {
        configs.push_back(parse_key(std::string(architecture) + "_w0.5_ds_r" +
                                    std::to_string(resolution) + "_b" + std::to_string(batch) +
                                    "_fp32"));
      }
    }
  }
  return configs;
}

// The made-up pass of `config`: its kernels' (kernel_layers') times `time_of` summed.
double made_up_pass(const Config& config, bool per_layer = false,
                    double (*time_of)(const std::vector<double>&) = made_up_ms) {
  const Network network = build_network(config);
  double pass = 0;
  for (const std::vector<int>& layers : kernel_layers(network, per_layer)) {
    pass += time_of(engine::kernel_features(network, layers, engine_of(per_layer)));
  }
  return pass;
}

TEST(KernelModel, SumsTheKernelsOfEachConfigurationsPlanAsTheTimingsPricedThem) {
  const std::vector<Config> train =
      half_width({"basic10", "basic26", "basic34", "bottleneck14", "bottleneck38", "bottleneck50"});
  const Dataset data =
      dataset_from_kernels({parse_csv(kernel_timings(train, made_up_ms), "kernels.csv")});
  EXPECT_EQ(data.schema, kKernelSchema);
  ASSERT_EQ(data.targets.size(), 1u);
  EXPECT_EQ(data.targets[0].name, "latency");
  EXPECT_EQ(data.ids.front(), to_key(train.front()) + " kernel 0");
  FitOptions options = small_fit();
  options.prior = PriorMode::kNone;
  options.fixed_rounds = 200;
  FitReport report;
  const Predictor fitted = fit_kernel_model(data, options, &report);
  // Whole-pass intervals from 2 of the 6 architectures held out of a first fit: 12 configurations.
  ASSERT_TRUE(fitted.kernel_pass_interval().has_value());
  EXPECT_EQ(fitted.kernel_pass_interval()->architectures, 2u);
  EXPECT_EQ(fitted.kernel_pass_interval()->configurations, 12u);
  EXPECT_GT(fitted.kernel_pass_interval()->half_width, 0);
  EXPECT_LT(fitted.kernel_pass_interval()->half_width, 0.3);
  // The model file keeps it.
  const Predictor model = Predictor::from_json_text(fitted.to_json_text(), "kernels.json");
  ASSERT_TRUE(model.kernel_pass_interval().has_value());
  EXPECT_EQ(model.kernel_pass_interval()->half_width, fitted.kernel_pass_interval()->half_width);
  // Networks never timed, of depths between the trained ones: their kernels are priced one by
  // one and summed, near the made-up pass.
  for (const char* key : {"basic18_w0.5_ds_r48_b4_fp32", "bottleneck26_w0.5_ds_r64_b1_fp32"}) {
    const Config config = parse_key(key);
    const double pass = made_up_pass(config);
    const std::vector<TargetPrediction> p = predict_by_kernels(model, {config});
    ASSERT_EQ(p.size(), 1u);
    ASSERT_TRUE(p[0].available) << p[0].reason;
    EXPECT_NEAR(p[0].value / pass, 1.0, 0.1) << key;
    const double half_width = model.kernel_pass_interval()->half_width;
    EXPECT_NEAR(p[0].low, p[0].value * std::exp(-half_width), 1e-9 * p[0].value);
    EXPECT_NEAR(p[0].high, p[0].value * std::exp(half_width), 1e-9 * p[0].value);
  }
  // Too few architectures to hold any out: no whole-pass interval, a note says so, and a
  // configuration's interval is its kernels' bounds summed.
  const std::vector<Config> few(train.begin(), train.begin() + 12);  // 2 architectures
  FitReport few_report;
  const Predictor narrow = fit_kernel_model(
      dataset_from_kernels({parse_csv(kernel_timings(few, made_up_ms), "few.csv")}), options,
      &few_report);
  EXPECT_FALSE(narrow.kernel_pass_interval().has_value());
  ASSERT_FALSE(few_report.notes.empty());
  EXPECT_NE(few_report.notes.back().find("not calibrated"), std::string::npos);
  const TargetPrediction summed = predict_by_kernels(narrow, {few.front()}).front();
  EXPECT_LT(summed.low, summed.value);
  EXPECT_GT(summed.high, summed.value);
  // A model of configurations' features is no kernel model, nor a table a kernel dataset.
  EXPECT_THROW((void)predict_by_kernels(table_model(), {train.front()}), Error);
  TableSpec spec;
  spec.features = {"a"};
  spec.targets = {parse_table_target("y")};
  EXPECT_THROW((void)fit_kernel_model(dataset_from_table(parse_csv("a,y\n1,2\n", "t.csv"), spec),
                                      options, nullptr),
               Error);
}

// `text` (kernel_timings') with carb kernels' drift probe columns: probe `probe` at the
// probe_ms that `probe_ms_of(row)` gives (row 0 the first kernel row; empty: none).
template <typename ProbeMs>
std::string with_probe(const std::string& text, const std::string& probe, ProbeMs&& probe_ms_of) {
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);
  std::string out = line + ",drift_probe,probe_ms\n";
  for (int row = 0; std::getline(lines, line); ++row) {
    out += line + "," + probe + "," + probe_ms_of(row) + "\n";
  }
  return out;
}

TEST(KernelModel, ItsLayerCostPriorPricesKernelsFarLargerThanAnyItWasFittedOn) {
  // Timed: half-width networks at 32-64 px, batches 1-4. Priced: a full-width one at 128 px,
  // batch 16, whose kernels are up to 30 times any timed one's MACs.
  const std::vector<Config> train =
      half_width({"basic10", "basic26", "bottleneck14", "bottleneck50"});
  const Dataset data =
      dataset_from_kernels({parse_csv(kernel_timings(train, made_up_ms), "kernels.csv")});
  const Config large = parse_key("basic18_w1_ds_r128_b16_fp32");
  const double pass = made_up_pass(large);
  FitOptions options = small_fit();
  options.fixed_rounds = 200;
  options.prior = PriorMode::kAdditive;
  const std::string text = fit_kernel_model(data, options, nullptr).to_json_text();
  // The base is the kernels' own prior (not the ridge): per kind, MACs and bytes, and the
  // terms every kind shares; the model file keeps each by name.
  const nlohmann::json latency = nlohmann::json::parse(text).at("targets").at(0);
  EXPECT_EQ(latency.at("prior_mode"), "additive");
  const nlohmann::json& terms = latency.at("additive_prior").at("coef");
  EXPECT_TRUE(terms.contains("log_macs*is_pw")) << terms.dump();
  EXPECT_TRUE(terms.contains("log_in_bytes*is_add")) << terms.dump();
  EXPECT_TRUE(terms.contains("log_macs")) << terms.dump();
  EXPECT_TRUE(terms.contains("is_fc")) << terms.dump();
  const Predictor additive = Predictor::from_json_text(text, "kernels.json");
  const TargetPrediction priced = predict_by_kernels(additive, {large}).front();
  ASSERT_TRUE(priced.available) << priced.reason;
  EXPECT_NEAR(priced.value / pass, 1.0, 0.05);
  // Trees alone cannot price past the largest kernel they saw.
  options.prior = PriorMode::kNone;
  const TargetPrediction trees =
      predict_by_kernels(fit_kernel_model(data, options, nullptr), {large}).front();
  EXPECT_LT(trees.value / pass, 0.5);
}

TEST(KernelModel, TimingsAreDividedByTheDriftTheirProbeMeasuredAsTheModeSays) {
  const std::vector<Config> three = {parse_key("basic10_w0.25_ds_r32_b1_fp32"),
                                     parse_key("basic18_w0.25_ds_r32_b1_fp32"),
                                     parse_key("basic26_w0.25_ds_r32_b1_fp32")};
  const std::string plain_text = kernel_timings(three, made_up_ms);
  const Dataset plain = dataset_from_kernels({parse_csv(plain_text, "plain.csv")});
  // The probe took 2, 3 and 6 ms at the three configurations' moments: the median, 3 ms, is
  // factor 1.
  std::map<std::string, std::string> probe_ms = {
      {to_key(three[0]), "2"}, {to_key(three[1]), "3"}, {to_key(three[2]), "6"}};
  const auto key_of = [&](std::size_t row) {
    return plain.ids[row].substr(0, plain.ids[row].find(' '));
  };
  const auto probed_text = with_probe(plain_text, "basic18_w0.5_ds_r64_b1_fp32", [&](int row) {
    return probe_ms.at(key_of(static_cast<std::size_t>(row)));
  });
  const Dataset probed = dataset_from_kernels({parse_csv(probed_text, "probed.csv")});
  ASSERT_EQ(probed.rows(), plain.rows());
  ASSERT_TRUE(probed.drift.applied) << probed.drift.reason;
  EXPECT_EQ(probed.drift.probe_key, "basic18_w0.5_ds_r64_b1_fp32");
  EXPECT_DOUBLE_EQ(probed.drift.reference_ms, 3);
  EXPECT_DOUBLE_EQ(probed.drift.min_factor, 2.0 / 3);
  EXPECT_DOUBLE_EQ(probed.drift.max_factor, 2);
  for (std::size_t i = 0; i < plain.rows(); ++i) {
    const double factor = std::stod(probe_ms.at(key_of(i))) / 3;
    EXPECT_NEAR(probed.y[0][i], plain.y[0][i] / factor, 1e-12 * plain.y[0][i]) << plain.ids[i];
  }
  // Off: as measured.
  const Dataset off =
      dataset_from_kernels({parse_csv(probed_text, "probed.csv")}, nullptr, DriftMode::kOff);
  EXPECT_FALSE(off.drift.applied);
  EXPECT_EQ(off.y[0], plain.y[0]);
  // Timings without the columns, or a row without a probe latency: auto fits them as measured
  // and says why; on is an input error saying the same.
  EXPECT_FALSE(plain.drift.applied);
  EXPECT_NE(plain.drift.reason.find("plain.csv has no drift probe columns"), std::string::npos)
      << plain.drift.reason;
  const std::string gap = with_probe(plain_text, "basic18_w0.5_ds_r64_b1_fp32",
                                     [](int row) { return std::string(row == 1 ? "" : "2"); });
  const Dataset gapped = dataset_from_kernels({parse_csv(gap, "gap.csv")});
  EXPECT_FALSE(gapped.drift.applied);
  EXPECT_EQ(
      gapped.drift.reason.rfind("gap.csv:3: " + to_key(three[0]) + " has no probe latency", 0), 0u)
      << gapped.drift.reason;
  EXPECT_EQ(gapped.y[0], plain.y[0]);
  try {
    (void)dataset_from_kernels({parse_csv(gap, "gap.csv")}, nullptr, DriftMode::kOn);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("drift on: gap.csv:3:"), std::string::npos)
        << error.what();
  }
  // Two tables of different probes compare no latencies.
  const std::string other =
      with_probe(plain_text, "basic10_w0.5_ds_r64_b1_fp32", [](int) { return std::string("1"); });
  const Dataset mixed =
      dataset_from_kernels({parse_csv(probed_text, "probed.csv"), parse_csv(other, "other.csv")});
  EXPECT_FALSE(mixed.drift.applied);
  EXPECT_NE(mixed.drift.reason.find("other.csv:2: probe basic10_w0.5_ds_r64_b1_fp32"),
            std::string::npos)
      << mixed.drift.reason;
  // The same configurations timed again in a second table, the probe at 12 ms then: each row is
  // divided by its own table's probe (the median of 2, 3, 6, 12, 12, 12 ms is 9 ms).
  const std::string again =
      with_probe(plain_text, "basic18_w0.5_ds_r64_b1_fp32", [](int) { return std::string("12"); });
  const Dataset twice =
      dataset_from_kernels({parse_csv(probed_text, "probed.csv"), parse_csv(again, "again.csv")});
  ASSERT_TRUE(twice.drift.applied) << twice.drift.reason;
  ASSERT_EQ(twice.rows(), 2 * plain.rows());
  EXPECT_DOUBLE_EQ(twice.drift.reference_ms, 9);
  for (std::size_t i = 0; i < plain.rows(); ++i) {
    const double first = std::stod(probe_ms.at(key_of(i))) / 9;
    EXPECT_NEAR(twice.y[0][i], plain.y[0][i] / first, 1e-12 * plain.y[0][i]) << plain.ids[i];
    const std::size_t j = plain.rows() + i;
    EXPECT_NEAR(twice.y[0][j], plain.y[0][i] / (12.0 / 9), 1e-12 * plain.y[0][i]) << twice.ids[j];
  }
}

TEST(KernelModel, AStepCountsInItsKernelAndAKernelWithoutFeaturesIsAnInputErrorAtItsPlace) {
  const std::vector<Config> one = {parse_key("basic10_w0.25_ds_r32_b1_fp32")};
  std::string text = kernel_timings(one, made_up_ms);
  const std::size_t rows = std::count(text.begin(), text.end(), '\n') - 1;
  // The last kernel, then an eltwise step after it: one row of both times.
  const std::size_t last = text.rfind('\n', text.size() - 2) + 1;
  std::string step = text.substr(last);
  step.replace(step.find(",k"), step.find(',', step.find(",k") + 1) - step.find(",k"), ",fc(clip)");
  const Dataset plain = dataset_from_kernels({parse_csv(text, "plain.csv")});
  const Dataset stepped = dataset_from_kernels({parse_csv(text + step, "stepped.csv")});
  ASSERT_EQ(plain.rows(), rows);
  ASSERT_EQ(stepped.rows(), rows);
  EXPECT_NEAR(stepped.y[0].back(), 2 * plain.y[0].back(), 1e-12);
  EXPECT_EQ(stepped.y[0].front(), plain.y[0].front());

  // A configuration that ran a reference kernel is left out, and a note says so.
  const std::vector<Config> two = {one.front(), parse_key("basic18_w0.25_ds_r32_b1_fp32")};
  std::string slow = kernel_timings(two, made_up_ms);
  slow.replace(slow.find("jit:avx512_core", slow.find('\n', slow.find('\n') + 1)), 15, "ref:any");
  std::vector<std::string> notes;
  const Dataset fast = dataset_from_kernels({parse_csv(slow, "slow.csv")}, &notes);
  EXPECT_EQ(fast.rows() + rows,
            dataset_from_kernels({parse_csv(kernel_timings(two, made_up_ms), "both.csv")}).rows());
  EXPECT_EQ(fast.ids.front(), to_key(two[1]) + " kernel 0");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind("left out 1 of 2 configurations that ran one of oneDNN's reference "
                           "kernels (first: " +
                               to_key(one.front()),
                           0),
            0u)
      << notes[0];

  // A kernel whose features are empty (it named no IR layers).
  std::string blank = text;
  const std::size_t second = blank.find('\n', blank.find('\n') + 1) + 1;  // the second kernel
  std::size_t cell = second;
  for (int comma = 0; comma < 6; ++comma) cell = blank.find(',', cell) + 1;
  --cell;  // the comma before its first feature, column 7
  blank.erase(cell + 1, blank.find(',', cell + 1) - cell - 1);
  try {
    (void)dataset_from_kernels({parse_csv(blank, "blank.csv")});
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()).rfind("blank.csv:3:7: kernel k1 has no features", 0), 0u)
        << error.what();
  }
  // A file without the features (carb kernels before it wrote them).
  try {
    (void)dataset_from_kernels(
        {parse_csv("key,index,kernel,implementation,share,pass_ms\nk,0,a,jit,1,2\n", "old.csv")});
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("old.csv"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("in_bytes"), std::string::npos) << error.what();
  }
}

// `text` (kernel_timings') with carb kernels' device columns: every row timed on `device` of host
// instance `instance`.
std::string with_device(const std::string& text, const std::string& device,
                        const std::string& instance) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  std::getline(in, line);
  out << line << ",device,device_name,instance\n";
  while (std::getline(in, line))
    out << line << "," << device << ",CPU " << device << "," << instance << "\n";
  return out.str();
}

TEST(KernelModel, KnowsTheDeviceAndHostsItsTimingsRanOnAndNeverMixesDevices) {
  const std::vector<Config> one = half_width({"basic10"});
  const std::vector<Config> two = half_width({"basic18"});
  const std::string a = with_device(kernel_timings(one, made_up_ms), "fp-a", "aaaa:1111");
  const std::string b = with_device(kernel_timings(two, made_up_ms), "fp-a", "bbbb:2222");
  const Dataset data = dataset_from_kernels({parse_csv(a, "a.csv"), parse_csv(b, "b.csv")});
  EXPECT_EQ(data.device_fingerprint, "fp-a");
  EXPECT_EQ(data.device_name, "CPU fp-a");
  const std::size_t rows_a = std::count(a.begin(), a.end(), '\n') - 1;
  ASSERT_EQ(data.row_instance.size(), data.rows());
  EXPECT_EQ(data.row_instance.front(), "aaaa:1111");
  EXPECT_EQ(data.row_instance.back(), "bbbb:2222");
  EXPECT_EQ(data.instances.at("aaaa:1111"), rows_a);
  EXPECT_EQ(data.instances.at("bbbb:2222"), data.rows() - rows_a);
  FitOptions options;
  options.threads = 1;
  options.forest_trees = 4;
  options.baselines = false;
  const Predictor model = fit_kernel_model(data, options, nullptr);
  EXPECT_EQ(model.device_fingerprint(), "fp-a");
  EXPECT_EQ(model.device_instances(), data.instances);

  // Timings of another device: an error at the first row of it, naming where the first was.
  const std::string other = with_device(kernel_timings(two, made_up_ms), "fp-b", "bbbb:2222");
  const std::size_t column = engine::kernel_feature_names().size() + 7;
  try {
    (void)dataset_from_kernels({parse_csv(a, "a.csv"), parse_csv(other, "b.csv")});
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "b.csv:2:" + std::to_string(column) +
                  ": timed on fp-b, where a.csv:2:" + std::to_string(column) +
                  " was timed on fp-a: a kernel model is of one device; fit each device's "
                  "timings apart");
  }
  // Timings of carbs before the columns: no device, every row's instance unrecorded.
  const Dataset old = dataset_from_kernels({parse_csv(kernel_timings(one, made_up_ms), "o.csv")});
  EXPECT_EQ(old.device_fingerprint, "");
  EXPECT_EQ(old.instances.size(), 1u);
  EXPECT_EQ(old.instances.count(""), 1u);
}

TEST(KernelModel, OfPyTorchSumsOneKernelPerLayerAsPyTorchRunsThem) {
  EXPECT_EQ(engine_backend("cpu=X|cpu|PyTorch 1.13.0 (ATen eager)|isa=avx2|threads=2"), "torch");
  EXPECT_EQ(engine_backend("cpu=X|cpu|oneDNN 2.6.3 (N/A)|isa=avx2|threads=2"), "cpu");
  EXPECT_EQ(engine_backend("cpu=X|cuda|cuDNN 9|gpu=H200"), "cuda");
  EXPECT_EQ(engine_backend(""), "");
  ASSERT_EQ(engine::kernel_feature_names().back(), "is_torch_native");  // torch_ms reads it
  // PyTorch's timings: every IR layer a kernel (batch norms and ReLUs too, which carb's engine
  // fuses into its convolutions), the convs on its native path 30 times slower, on a PyTorch
  // device.
  const std::string torch =
      "cpu=X;logical_cpus=2|cpu|PyTorch 1.13.0 (ATen eager)|isa=avx2|threads=2";
  const std::vector<Config> train =
      half_width({"basic10", "basic26", "basic34", "bottleneck14", "bottleneck38", "bottleneck50"});
  const std::string text = kernel_timings(train, torch_ms, true);
  FitOptions options = small_fit();
  options.prior = PriorMode::kNone;
  options.fixed_rounds = 200;
  const Predictor model =
      fit_kernel_model(dataset_from_kernels({parse_csv(with_device(text, torch, "i:1"), "t.csv")}),
                       options, nullptr);
  for (const char* key : {"basic18_w0.5_ds_r48_b4_fp32", "bottleneck26_w0.5_ds_r64_b1_fp32",
                          "basic18_w0.5_ds_r32_b1_fp32"}) {
    const Config config = parse_key(key);
    // Run layer by layer, the network costs far more than its fused plan's kernels; at batch 1
    // its native convs more again.
    const double pass = made_up_pass(config, true, torch_ms);
    ASSERT_GT(pass / made_up_pass(config, false, torch_ms), config.batch == 1 ? 3 : 1.3) << key;
    const TargetPrediction p = predict_by_kernels(model, {config}).front();
    ASSERT_TRUE(p.available) << p.reason;
    EXPECT_NEAR(p.value / pass, 1.0, 0.1) << key;
  }
  // Timings without is_torch_native (carbs before it): 0 for carb's engine, which runs no conv
  // natively, and an error for PyTorch's, at the first row.
  std::string before;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    before += line.substr(0, line.rfind(',')) + "\n";
  }
  const Dataset carb_before =
      dataset_from_kernels({parse_csv(with_device(before, "cpu=X|cpu|oneDNN", "i:1"), "c.csv")});
  const auto native =
      static_cast<std::size_t>(std::find(carb_before.feature_names.begin(),
                                         carb_before.feature_names.end(), "is_torch_native") -
                               carb_before.feature_names.begin());
  ASSERT_LT(native, carb_before.feature_names.size());
  for (std::size_t r = 0; r < carb_before.rows(); ++r) {
    EXPECT_EQ(carb_before.x[r * carb_before.feature_names.size() + native], 0.0f);
  }
  try {
    (void)dataset_from_kernels({parse_csv(with_device(before, torch, "i:1"), "t.csv")});
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "t.csv:2: timed on " + torch +
                  " without the column is_torch_native: PyTorch's kernels need it; time them "
                  "again with this carb");
  }
  // A kernel model of a CUDA device: carb does not know the CUDA engine's kernels.
  const Predictor gpu = fit_kernel_model(
      dataset_from_kernels(
          {parse_csv(with_device(text, "cpu=X|cuda|cuDNN 9|gpu=H200", "i:1"), "g.csv")}),
      options, nullptr);
  try {
    (void)predict_by_kernels(gpu, {train.front()});
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "a kernel model of a cuda device (CPU cpu=X|cuda|cuDNN 9|gpu=H200): carb knows the "
              "kernels of its CPU engine and of PyTorch's, not of the cuda engine's");
  }
}

}  // namespace
}  // namespace carb
