// The two-stage screening engine (carb/screening.hpp), called directly. The model is fitted on
// configurations of cpu-demo.yaml whose costs are known functions of their analytic features
// (test data, not measurements), so the true front is known exactly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "carb/backend.hpp"
#include "carb/csv.hpp"
#include "carb/engine_plan.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/model.hpp"
#include "carb/screening.hpp"
#include "carb/telemetry.hpp"

namespace carb {
namespace {

// Known costs of a configuration: memory (bytes) and latency (ms).
std::pair<double, double> known_costs(const Config& config) {
  const Features f = compute_features(build_network(config));
  const double memory = static_cast<double>(f.param_bytes + f.peak_activation_bytes) + 1e6;
  const double latency = static_cast<double>(f.flops) / 2e7 + 0.002 * f.kernel_launches;
  return {memory, latency};
}

Dataset known_dataset(const std::vector<Config>& configs) {
  Dataset data;
  data.schema = std::string(kArchitectureSchema);
  data.feature_names = architecture_feature_names();
  data.targets = {{"memory", "B", "engine_peak_bytes"},
                  {"energy", "J", "energy_j"},
                  {"latency", "ms", "wall_median_ms"}};
  data.missing_reason = {"", "test: no energy", ""};
  data.y.assign(3, {});
  const FeatureRows rows = feature_rows(configs);
  data.x = rows.x;
  data.batch = rows.batch;
  data.device_fingerprint = "test-device";
  data.device_name = "Test device";
  for (const Config& config : configs) {
    const auto [memory, latency] = known_costs(config);
    data.ids.push_back(to_key(config));
    data.y[0].push_back(memory);
    data.y[1].push_back(std::nan(""));
    data.y[2].push_back(latency);
    data.stratum.push_back(0);
  }
  return data;
}

// A model of 500 configurations of cpu-demo.yaml, and the space.
class Screening : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    space = new Space(
        Space::from_file(std::string(CARB_SOURCE_DIR) + "/examples/spaces/cpu-demo.yaml"));
    model = new Predictor(Predictor::fit(known_dataset(fitted_configs()), fit_options(), nullptr));
  }
  // The 500 configurations the model is fitted on.
  static std::vector<Config> fitted_configs() {
    SpaceFeatures features(*space);
    std::vector<Config> configs;
    for (std::uint64_t index : sample_random(*space, 500, 3, [&](std::uint64_t i) {
           return features.violated_constraint(i).empty();
         })) {
      configs.push_back(space->at(index));
    }
    return configs;
  }
  static FitOptions fit_options() {
    FitOptions options;
    options.threads = 1;
    options.forest_trees = 16;
    options.baselines = false;
    return options;
  }
  static void TearDownTestSuite() {
    delete model;
    delete space;
  }
  static ScreenRequest request(const std::string& budget) {
    ScreenRequest r;
    r.budgets = parse_budgets(budget);
    r.value = analytic_value("macs");
    check_request(*model, nullptr, r);
    return r;
  }
  static Space* space;
  static Predictor* model;
};
Space* Screening::space = nullptr;
Predictor* Screening::model = nullptr;

bool dominates(const ObjectiveValues& a, const ObjectiveValues& b, std::size_t objectives) {
  bool no_worse = true, better = false;
  for (std::size_t k = 0; k < objectives; ++k) {
    no_worse = no_worse && a[k] <= b[k];
    better = better || a[k] < b[k];
  }
  return no_worse && better;
}

TEST_F(Screening, CheckRequestFillsTheCostsTheModelPredicts) {
  ScreenRequest r = request("latency<=20ms");
  EXPECT_EQ(r.costs, (std::vector<Target>{Target::kMemory, Target::kLatency}));
  ScreenRequest energy;
  energy.budgets = parse_budgets("energy<=1J");
  try {
    check_request(*model, nullptr, energy);
    ADD_FAILURE() << "a budget on energy, which the model cannot predict";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    EXPECT_NE(std::string(error.what()).find("test: no energy"), std::string::npos) << error.what();
  }
}

TEST_F(Screening, ScreenRequestReadsTheOptionsAndNamesTheOneAtFault) {
  ScreenOptions options;
  options.budget = "latency<=20ms, memory<=40MiB";
  options.objectives = "latency";
  options.rank = "knee";
  options.outside_domain = "exclude";
  options.keep = 0;
  options.keep_fraction = 0.5;
  options.safe = true;
  const ScreenRequest r = screen_request(options, *model, nullptr);
  ASSERT_EQ(r.budgets.size(), 2U);
  EXPECT_EQ(r.budgets[1].target, Target::kMemory);
  EXPECT_EQ(r.costs, std::vector<Target>{Target::kLatency});
  EXPECT_EQ(r.rank, RankMethod::kKnee);
  EXPECT_EQ(r.domain, DomainPolicy::kExclude);
  ASSERT_TRUE(r.value.has_value());
  EXPECT_EQ(r.value->name, "macs");  // the default value
  EXPECT_EQ(r.keep_fraction, 0.5);
  EXPECT_TRUE(r.safe);
  // Defaults: every cost the model predicts; none: no value.
  ScreenOptions none;
  none.maximize = "none";
  const ScreenRequest costs_only = screen_request(none, *model, nullptr);
  EXPECT_FALSE(costs_only.value.has_value());
  EXPECT_EQ(costs_only.costs, (std::vector<Target>{Target::kMemory, Target::kLatency}));
  // Values held by key.
  ScreenOptions held;
  held.values = ValueObjective{"top1", "values given by key", {{"basic18_w1_ds_r64", 0.7}}};
  EXPECT_EQ(screen_request(held, *model, nullptr).value->name, "top1");

  // (how the options are wrong, the message, its subject)
  const auto wrong = [](auto change) {
    ScreenOptions bad;
    change(bad);
    return bad;
  };
  const std::vector<std::tuple<ScreenOptions, std::string, std::string>> cases = {
      {wrong([](ScreenOptions& o) { o.rank = "best"; }), "rank must be ideal, knee or value",
       "rank"},
      {wrong([](ScreenOptions& o) { o.outside_domain = "ignore"; }),
       "outside_domain must be exclude, widen or allow", "outside_domain"},
      {wrong([](ScreenOptions& o) { o.maximize = "speed"; }),
       "maximize 'speed': expected params, macs, flops, depth, width, or none", "maximize"},
      {wrong([](ScreenOptions& o) {
         o.maximize = "params";
         o.value = "accuracy.csv:top1";
       }),
       "maximize 'params' and a value to maximise: give one of them, not both", "maximize"},
      {wrong([](ScreenOptions& o) { o.value = "accuracy.csv"; }),
       "value takes FILE:COLUMN, e.g. accuracy.csv:top1 (got 'accuracy.csv')", "value"},
      {wrong([](ScreenOptions& o) {
         o.maximize = "none";
         o.rank = "value";
       }),
       "rank value needs a value to maximise", "rank"},
      {wrong([](ScreenOptions& o) { o.budget = "latency<=2xs"; }),
       "budget:1:11: unknown unit 'xs' for latency (use s, ms or us)", "budget"},
      {wrong([](ScreenOptions& o) { o.objectives = "speed"; }), "", "objectives"},
      {wrong([](ScreenOptions& o) { o.keep = 0; }), "keep must be at least 1", "keep"},
  };
  for (const auto& [bad, message, subject] : cases) {
    try {
      (void)screen_request(bad, *model, nullptr);
      ADD_FAILURE() << "no error for " << subject;
    } catch (const Error& error) {
      if (!message.empty()) {
        EXPECT_EQ(std::string(error.what()), message);
      }
      EXPECT_EQ(error.subject(), subject) << error.what();
      EXPECT_NE(error.category(), ErrorCategory::kRuntime) << error.what();
    }
  }
}

// The front within budget over value (up) and costs (down): every member feasible, none
// dominated by a feasible candidate, several members, ranked by value.
TEST_F(Screening, TheValueCostFrontIsNonDominatedWithinBudgetAndRankedByValue) {
  CandidateSet all;
  all.space = space;
  const ScreenRequest r = request("latency<=20ms,memory<=40MiB");
  const ScreenResult result = screen(*model, nullptr, all, r);
  EXPECT_EQ(result.counts.configurations, space->size());
  EXPECT_GT(result.counts.outside_constraints, 0U);
  ASSERT_GE(result.front.size(), 3U);
  EXPECT_EQ(result.objectives(), 3U);
  EXPECT_EQ(result.rank, RankMethod::kValue);
  std::vector<ObjectiveValues> feasible;
  for (std::size_t i : result.feasible) feasible.push_back(result.objective_values(i));
  double previous_value = std::numeric_limits<double>::infinity();
  for (std::size_t r_index = 0; r_index < result.ranked.size(); ++r_index) {
    const std::size_t i = result.ranked_pool_index(r_index);
    ASSERT_TRUE(result.assessed[i].feasible);
    ASSERT_TRUE(result.pool[i].value.has_value());
    EXPECT_LE(*result.pool[i].value, previous_value) << "ranked by value, the largest first";
    previous_value = *result.pool[i].value;
    const ObjectiveValues own = result.objective_values(i);
    for (const ObjectiveValues& other : feasible) {
      EXPECT_FALSE(dominates(other, own, 3)) << result.pool[i].key;
    }
  }
  // The value is the network's MACs per image, as the graph counts them.
  const std::size_t best = result.ranked_pool_index(0);
  const Config config = parse_key(result.pool[best].key);
  const Features features = compute_features(build_network(config));
  EXPECT_NEAR(*result.pool[best].value, static_cast<double>(features.macs) / config.batch,
              1e-5 * static_cast<double>(features.macs) / config.batch);
  // The most capable network within budget is not the cheapest: it is the largest that fits.
  const std::size_t last = result.ranked_pool_index(result.ranked.size() - 1);
  EXPECT_GT(*result.pool[best].value, 4 * *result.pool[last].value);
  // Against the truth: the predicted best really fits (the model learns known costs well).
  const auto [memory, latency] = known_costs(config);
  EXPECT_LE(latency, 20 * 1.1);
  EXPECT_LE(memory, 40 * 1024 * 1024 * 1.1);
}

TEST_F(Screening, WithoutAValueTheFrontIsOverCostsAndRankedByTheIdeal) {
  CandidateSet all;
  all.space = space;
  ScreenRequest r = request("latency<=20ms");
  r.value.reset();
  const ScreenResult result = screen(*model, nullptr, all, r);
  EXPECT_EQ(result.objectives(), 2U);
  EXPECT_EQ(result.rank, RankMethod::kIdeal);
  for (const ScreenCandidate& c : result.pool) EXPECT_FALSE(c.value.has_value());
}

// A model of this machine's CPU engine: stage 2 takes memory from the engine's own plan for
// the candidates whose memory interval holds the budget and for the whole front, so the front is
// decided on exact memory; a model of another device (the suite's) plans none.
TEST_F(Screening, WhereThisMachineRunsTheEngineTheFrontsMemoryIsItsPlan) {
  const std::unique_ptr<Backend> backend = make_backend_for("cpu");
  ASSERT_FALSE(backend->devices().empty());
  const Device& device = *backend->devices().front();
  Dataset data = known_dataset(fitted_configs());
  data.device_fingerprint =
      device_fingerprint(read_host_info()) + "|" + engine_fingerprint(device.info());
  const Predictor here = Predictor::fit(data, fit_options(), nullptr);
  CandidateSet all;
  all.space = space;
  // A memory budget at the median of what the model says of the candidates under a latency
  // budget alone, so that it lies within many of their intervals.
  ScreenRequest latency_only = request("latency<=20ms");
  check_request(here, nullptr, latency_only);
  std::vector<double> memories;
  for (const ScreenCandidate& c : screen(here, nullptr, all, latency_only).pool) {
    memories.push_back(here.predict(c.x.data(), 1, &c.batch)[0][0].value);
  }
  std::nth_element(memories.begin(), memories.begin() + memories.size() / 2, memories.end());
  const std::string budgets =
      "latency<=20ms,memory<=" + std::to_string(std::llround(memories[memories.size() / 2])) + "B";
  const Budget budget = parse_budgets(budgets).back();
  ScreenRequest r = request(budgets);
  check_request(here, nullptr, r);
  const ScreenResult result = screen(here, nullptr, all, r);
  EXPECT_EQ(result.memory_engine, engine_fingerprint(device.info()));
  ASSERT_FALSE(result.front.empty());
  std::size_t exact = 0;
  for (std::size_t f : result.front) {
    const std::size_t i = result.feasible[f];
    const TargetPrediction& memory = result.predictions[0][i];
    const auto plan = device.plan_memory(parse_key(result.pool[i].key));
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(memory.value, static_cast<double>(plan->peak_bytes)) << result.pool[i].key;
    EXPECT_EQ(memory.low, memory.high);
    EXPECT_LE(memory.value, budget.limit);
    ++exact;
  }
  EXPECT_GE(result.counts.memory_planned, exact);
  EXPECT_LT(result.counts.memory_planned, result.pool.size()) << "not the whole pool";
  // Every candidate whose memory interval, as the model gives it, held the budget's limit was
  // planned: its memory is the plan, and it is feasible only if that fits.
  std::size_t deciding = 0;
  for (std::size_t i = 0; i < result.pool.size(); ++i) {
    const ScreenCandidate& c = result.pool[i];
    const TargetPrediction given = here.predict(c.x.data(), 1, &c.batch)[0][0];
    if (!(given.low <= budget.limit && budget.limit < given.high)) continue;
    ++deciding;
    const auto plan = device.plan_memory(parse_key(c.key));
    ASSERT_TRUE(plan.has_value());
    const auto planned = static_cast<double>(plan->peak_bytes);
    EXPECT_EQ(result.predictions[0][i].value, planned) << c.key;
    if (planned > budget.limit) {
      EXPECT_FALSE(result.assessed[i].feasible) << c.key;
    }
  }
  EXPECT_GT(deciding, 0U) << "the budget lies within some candidates' intervals";
  // Validate's classification plans the same rows (plan_deciding_memory), and only those.
  std::vector<Config> pool_configs;
  std::vector<float> x;
  std::vector<int> batches;
  for (const ScreenCandidate& c : result.pool) {
    pool_configs.push_back(parse_key(c.key));
    x.insert(x.end(), c.x.begin(), c.x.end());
    batches.push_back(c.batch);
  }
  auto predictions = here.predict(x.data(), pool_configs.size(), batches.data());
  const auto before = predictions;
  std::string engine;
  EXPECT_EQ(plan_deciding_memory(here, r.budgets, pool_configs, predictions, &engine), deciding);
  EXPECT_EQ(engine, engine_fingerprint(device.info()));
  std::size_t changed = 0;
  for (std::size_t i = 0; i < pool_configs.size(); ++i) {
    changed += predictions[0][i].low == predictions[0][i].high ? 1 : 0;
    EXPECT_EQ(predictions[2][i].value, before[2][i].value) << "only memory";
  }
  EXPECT_EQ(changed, deciding);
  auto elsewhere_predictions = model->predict(x.data(), pool_configs.size(), batches.data());
  std::string none;
  EXPECT_EQ(plan_deciding_memory(*model, r.budgets, pool_configs, elsewhere_predictions, &none),
            0U);
  EXPECT_EQ(none, "");
  // Kept in the result file.
  const ScreenResult back = screen_result_from_json(
      nlohmann::json::parse(screen_result_json(result, here.feature_names()).dump()), "r.json");
  EXPECT_EQ(back.counts.memory_planned, result.counts.memory_planned);
  EXPECT_EQ(back.memory_engine, result.memory_engine);
  // The suite's model is of a made-up device: nothing planned.
  const ScreenResult elsewhere =
      screen(*model, nullptr, all, request("latency<=20ms,memory<=40MiB"));
  EXPECT_EQ(elsewhere.counts.memory_planned, 0U);
  EXPECT_EQ(elsewhere.memory_engine, "");
}

// Where the plan can change a decision: a memory interval that holds a memory budget's limit
// (its upper end above it, its lower end at or below it); other budgets do not count.
TEST(MemoryDecidingRows, AreThoseWhoseIntervalHoldsAMemoryLimit) {
  const std::vector<Budget> budgets = parse_budgets("latency<=2ms,memory<=100B");
  const auto p = [](double low, double value, double high) {
    return TargetPrediction{true, "", value, low, high};
  };
  std::vector<TargetPrediction> memory = {p(50, 80, 99),    p(90, 99, 110), p(100, 120, 130),
                                          p(101, 120, 130), p(10, 20, 100), TargetPrediction{}};
  EXPECT_EQ(memory_deciding_rows(budgets, memory), (std::vector<std::size_t>{1, 2}));
  EXPECT_TRUE(memory_deciding_rows(parse_budgets("latency<=2ms"), memory).empty());
}

// Outside the training domain: excluded by default, kept with wider intervals by widen, kept as
// predicted by allow.
TEST_F(Screening, TheDomainGuardExcludesWidensOrAllows) {
  CandidateSet set;
  // cpu-demo's own points (inside) and points it never has: 224 px, width 2, depth 101 basic.
  for (const char* key : {"basic18_w0.5_ds_r64_b1_fp32", "basic10_w0.25_nods_r32_b2_fp32",
                          "basic18_w0.5_ds_r224_b1_fp32", "basic34_w2_ds_r96_b4_fp32",
                          "bottleneck50_w0.5_nods_r48_b8_fp32"}) {
    set.configs.push_back(parse_key(key));
  }
  ScreenRequest r = request("latency<=100s");
  r.domain = DomainPolicy::kAllow;
  const ScreenResult allowed = screen(*model, nullptr, set, r);
  EXPECT_EQ(allowed.pool.size(), 5U);
  std::set<std::string> outside;
  for (const ScreenCandidate& c : allowed.pool) {
    if (!c.domain.inside) outside.insert(c.key);
  }
  EXPECT_TRUE(outside.count("basic18_w0.5_ds_r224_b1_fp32"));
  EXPECT_TRUE(outside.count("basic34_w2_ds_r96_b4_fp32"));
  EXPECT_EQ(allowed.counts.outside_domain, outside.size());
  EXPECT_EQ(allowed.counts.excluded_outside_domain, 0U);
  EXPECT_NE(allowed.first_outside.find(", whose "), std::string::npos) << allowed.first_outside;

  r.domain = DomainPolicy::kExclude;
  const ScreenResult excluded = screen(*model, nullptr, set, r);
  EXPECT_EQ(excluded.pool.size(), 5U - outside.size());
  EXPECT_EQ(excluded.counts.excluded_outside_domain, outside.size());
  for (const ScreenCandidate& c : excluded.pool) EXPECT_FALSE(outside.count(c.key)) << c.key;

  r.domain = DomainPolicy::kWiden;
  const ScreenResult widened = screen(*model, nullptr, set, r);
  ASSERT_EQ(widened.pool.size(), 5U);
  const std::size_t latency = 2;  // memory, energy, latency
  for (std::size_t i = 0; i < widened.pool.size(); ++i) {
    const auto at =
        std::find_if(allowed.pool.begin(), allowed.pool.end(),
                     [&](const ScreenCandidate& c) { return c.key == widened.pool[i].key; });
    const std::size_t j = static_cast<std::size_t>(at - allowed.pool.begin());
    const TargetPrediction& wide = widened.predictions[latency][i];
    const TargetPrediction& plain = allowed.predictions[latency][j];
    EXPECT_DOUBLE_EQ(wide.value, plain.value);
    if (widened.pool[i].domain.inside) {
      EXPECT_DOUBLE_EQ(wide.high, plain.high);
    } else {
      // log(high / value) scales by the widening.
      EXPECT_NEAR(std::log(wide.high / wide.value),
                  widened.pool[i].domain.widening() * std::log(plain.high / plain.value), 1e-9);
      EXPECT_GT(wide.high, plain.high);
      EXPECT_LT(wide.low, plain.low);
    }
  }
}

// Kernel timings of `configs` in carb kernels' CSV form whose kernels take known times (test data,
// not measurements): 10 us plus a microsecond per 100,000 multiply-adds.
CsvTable known_kernel_timings(const std::vector<Config>& configs) {
  CsvTable table;
  table.path = "known kernels";
  table.header = {"key", "index", "kernel", "implementation", "share", "pass_ms"};
  const std::vector<std::string>& names = engine::kernel_feature_names();
  table.header.insert(table.header.end(), names.begin(), names.end());
  const auto macs =
      static_cast<std::size_t>(std::find(names.begin(), names.end(), "macs") - names.begin());
  const auto text = [](double v) {
    char cell[32];
    std::snprintf(cell, sizeof cell, "%.17g", v);
    return std::string(cell);
  };
  for (const Config& config : configs) {
    const Network network = build_network(config);
    const engine::ExecutionPlan plan = engine::plan_execution(
        network, engine::ResidualMode::kAccumulateInPlace, engine::OpNames::kUnnamed);
    std::vector<std::vector<double>> features;
    std::vector<double> times;
    for (const engine::Op& op : plan.ops) {
      features.push_back(engine::kernel_features(network, engine::op_layers(op)));
      times.push_back(0.01 + features.back()[macs] / 1e8);
    }
    double pass = 0;
    for (double t : times) pass += t;
    for (std::size_t k = 0; k < times.size(); ++k) {
      std::vector<std::string> row = {to_key(config), std::to_string(k),     "conv",
                                      "jit:test",     text(times[k] / pass), text(pass)};
      for (double f : features[k]) row.push_back(text(f));
      table.rows.push_back(std::move(row));
      table.lines.push_back(static_cast<int>(table.rows.size()) + 1);
    }
  }
  return table;
}

// A kernel model prices stage 2's latency: every candidate's is the kernel model's sum, with its
// whole-pass interval, which the training domain's widening leaves as it is (it was calibrated on
// architectures the kernel fit never saw); a latency budget decides by it.
TEST_F(Screening, AKernelModelPricesStageTwosLatency) {
  std::vector<Config> timed = fitted_configs();
  timed.resize(80);
  const Dataset kernels_data =
      dataset_from_kernels({known_kernel_timings(timed)}, nullptr, DriftMode::kOff);
  const Predictor kernels = fit_kernel_model(kernels_data, fit_options(), nullptr);
  ASSERT_TRUE(kernels.kernel_pass_interval().has_value());

  CandidateSet set;
  for (const char* key : {"basic18_w0.5_ds_r64_b1_fp32", "basic10_w0.25_nods_r32_b2_fp32",
                          "basic18_w0.5_ds_r224_b1_fp32", "basic34_w2_ds_r96_b4_fp32",
                          "bottleneck50_w0.5_nods_r48_b8_fp32"}) {
    set.configs.push_back(parse_key(key));
  }
  const std::vector<TargetPrediction> sums = predict_by_kernels(kernels, set.configs);
  std::vector<double> values;
  for (const TargetPrediction& p : sums) values.push_back(p.value);
  std::sort(values.begin(), values.end());
  const double limit = (values[2] + values[3]) / 2;  // two of the five within it
  char budget[64];
  std::snprintf(budget, sizeof budget, "latency<=%.9gms", limit);
  const std::size_t memory = 0, latency = 2;  // memory, energy, latency

  // The model as its own stage-1 model: stage 1 then drops nothing as over budget by the
  // model's latency, which the kernels' replaces.
  ScreenRequest plain = request(budget);
  plain.domain = DomainPolicy::kWiden;
  const ScreenResult without = screen(*model, model, set, plain);
  EXPECT_EQ(without.counts.latency_by_kernels, 0U);
  ScreenRequest r = plain;
  r.kernel_model = &kernels;
  check_request(*model, model, r);
  const ScreenResult with = screen(*model, model, set, r);
  ASSERT_EQ(with.pool.size(), 5U);
  EXPECT_EQ(with.counts.latency_by_kernels, 5U);
  std::size_t outside = 0;
  for (std::size_t i = 0; i < with.pool.size(); ++i) {
    const std::size_t c = static_cast<std::size_t>(
        std::find_if(set.configs.begin(), set.configs.end(),
                     [&](const Config& x) { return to_key(x) == with.pool[i].key; }) -
        set.configs.begin());
    ASSERT_LT(c, set.configs.size());
    const TargetPrediction& p = with.predictions[latency][i];
    EXPECT_DOUBLE_EQ(p.value, sums[c].value) << with.pool[i].key;
    EXPECT_DOUBLE_EQ(p.low, sums[c].low) << with.pool[i].key;
    EXPECT_DOUBLE_EQ(p.high, sums[c].high) << with.pool[i].key;
    // Feasible where the kernels' sum meets the budget: inside the domain by the value, outside
    // it by the upper end (widen judges those safely, their memory widened, their latency not).
    const bool inside = with.pool[i].domain.inside;
    outside += inside ? 0 : 1;
    EXPECT_EQ(with.assessed[i].feasible, (inside ? p.value : p.high) <= limit) << with.pool[i].key;
    const auto j = static_cast<std::size_t>(
        std::find_if(without.pool.begin(), without.pool.end(),
                     [&](const ScreenCandidate& x) { return x.key == with.pool[i].key; }) -
        without.pool.begin());
    ASSERT_LT(j, without.pool.size());
    EXPECT_DOUBLE_EQ(with.predictions[memory][i].high, without.predictions[memory][j].high);
  }
  EXPECT_GE(outside, 2U);
  // The count goes through the result file.
  const ScreenResult back = screen_result_from_json(
      nlohmann::json::parse(screen_result_json(with, model->feature_names()).dump()), "r.json");
  EXPECT_EQ(back.counts.latency_by_kernels, 5U);

  // A kernel model screens only beside a model of measured configurations, and a model of
  // measured configurations is not a kernel model.
  const auto error_of = [](const Predictor& main, const Predictor* kernel) -> std::string {
    ScreenRequest request;
    request.kernel_model = kernel;
    try {
      check_request(main, nullptr, request);
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::kInput);
      return error.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of(kernels, nullptr).find("give the kernel model beside it"), std::string::npos)
      << error_of(kernels, nullptr);
  EXPECT_NE(error_of(*model, model)
                .find("the kernel model is not one: its feature schema is " +
                      std::string(kArchitectureSchema)),
            std::string::npos)
      << error_of(*model, model);
}

TEST_F(Screening, AValueFileGivesValuesByConfigurationOrNetworkKey) {
  const std::string path = testing::TempDir() + "values-" + std::to_string(::getpid()) + ".csv";
  {
    std::ofstream file(path);
    file << "key,top1,note\n"
         << "basic18_w0.5_ds_r64_b1_fp32,71.5,x\n"
         << "basic18_w0.5_ds_r64,70.0,applies to every batch and precision\n"
         << "basic10_w0.25_nods_r32_b2_fp32,55.25,\n";
  }
  const ValueObjective value = read_value_file(path, "top1");
  EXPECT_EQ(value.describe(), "top1 (" + path + ")");
  const std::vector<float> unused(model->feature_names().size(), 0.0F);
  const auto of = [&](const char* key) {
    return objective_value(value, model->feature_names(), unused.data(), parse_key(key));
  };
  EXPECT_EQ(of("basic18_w0.5_ds_r64_b1_fp32"), 71.5);  // the configuration key first
  EXPECT_EQ(of("basic18_w0.5_ds_r64_b8_fp32"), 70.0);  // then its network
  EXPECT_EQ(of("basic10_w0.25_nods_r32_b2_fp32"), 55.25);
  EXPECT_EQ(of("basic10_w0.25_nods_r32_b1_fp32"), std::nullopt);
  EXPECT_EQ(network_key(parse_key("basic18_w0.5_ds_r64_b8_fp32_k10")), "basic18_w0.5_ds_r64_k10");

  // Screening candidates the file lacks is an input error naming the file, a key and the count.
  CandidateSet set;
  for (const char* key : {"basic18_w0.5_ds_r64_b4_fp32", "basic10_w0.25_nods_r32_b1_fp32",
                          "basic26_w0.5_ds_r64_b1_fp32"}) {
    set.configs.push_back(parse_key(key));
  }
  ScreenRequest r = request("latency<=100s");
  r.value = value;
  try {
    (void)screen(*model, nullptr, set, r);
    ADD_FAILURE() << "candidates without a value";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    EXPECT_NE(std::string(error.what())
                  .find(path + ": no top1 value for basic10_w0.25_nods_r32_b1_fp32 (2 of 3 "
                               "candidates have none)"),
              std::string::npos)
        << error.what();
  }
  set.configs.resize(1);
  r.domain = DomainPolicy::kAllow;
  const ScreenResult result = screen(*model, nullptr, set, r);
  ASSERT_EQ(result.pool.size(), 1U);
  EXPECT_EQ(result.pool[0].value, 70.0);
  std::filesystem::remove(path);
}

TEST(ValueFile, BadFilesAreOneLineWithTheirPlace) {
  const std::string path = testing::TempDir() + "bad-values-" + std::to_string(::getpid()) + ".csv";
  const auto error_of = [&](const std::string& text, const std::string& column) {
    std::ofstream(path) << text;
    try {
      (void)read_value_file(path, column);
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::kInput);
      return std::string(error.what());
    }
    return std::string("read");
  };
  EXPECT_EQ(error_of("key,top1\nbasic18_w0.5_ds_r64_b1_fp32,high\n", "top1"),
            path + ":2:2: 'high' is not a number");
  EXPECT_EQ(error_of("key,top1\nbasic18_w0.5_ds_r64_b1_fp32,\n", "top1"),
            path + ":2:2: '' is not a number");
  EXPECT_EQ(error_of("key,top1\nbasic18_w0.5_ds_r64_b1_fp32,nan\n", "top1"),
            path + ":2:2: 'nan' is not a number");
  EXPECT_EQ(error_of("key,top1\nbasic18_w0.5_ds_r64_b1_fp32,1\n", "top5"),
            path + ":1:1: no column 'top5' (it has: key, top1)");
  EXPECT_EQ(error_of("name,top1\nx,1\n", "top1"),
            path + ":1:1: no column 'key' (it has: name, top1)");
  EXPECT_EQ(error_of("key,top1\nresnet,1\n", "top1"),
            path + ":2:1: 'resnet' is neither a configuration key nor a network key");
  EXPECT_EQ(error_of("key,top1\nbasic18_w0.5_ds_r64,1\nbasic18_w0.5_ds_r64,2\n", "top1"),
            path + ":3:1: basic18_w0.5_ds_r64 has a value already (line 2)");
  EXPECT_EQ(error_of("key,top1\n", "top1"), path + ":1:1: no values (it has a header only)");
  std::filesystem::remove(path);
}

TEST_F(Screening, TheResultFileRoundTrips) {
  CandidateSet all;
  all.space = space;
  const ScreenResult result = screen(*model, nullptr, all, request("latency<=20ms"));
  const nlohmann::json json = screen_result_json(result, model->feature_names());
  const ScreenResult back = screen_result_from_json(nlohmann::json::parse(json.dump()), "r.json");
  ASSERT_EQ(back.pool.size(), result.pool.size());
  EXPECT_EQ(back.costs, result.costs);
  ASSERT_TRUE(back.value.has_value());
  EXPECT_EQ(back.value->name, "macs");
  EXPECT_EQ(back.rank, result.rank);
  EXPECT_EQ(back.counts.configurations, result.counts.configurations);
  EXPECT_EQ(back.feasible, result.feasible);
  ASSERT_EQ(back.ranked.size(), result.ranked.size());
  for (std::size_t r = 0; r < result.ranked.size(); ++r) {
    EXPECT_EQ(back.pool[back.ranked_pool_index(r)].key,
              result.pool[result.ranked_pool_index(r)].key);
  }
  for (std::size_t i = 0; i < result.pool.size(); ++i) {
    EXPECT_EQ(back.pool[i].value, result.pool[i].value);
    EXPECT_EQ(back.predictions[2][i].high, result.predictions[2][i].high);
  }
  // Something else is an input error naming the file.
  nlohmann::json other = json;
  other["format"] = "carb-model";
  EXPECT_THROW(screen_result_from_json(other, "r.json"), Error);
  other = json;
  other["candidates"][0].erase("key");
  try {
    (void)screen_result_from_json(other, "r.json");
    ADD_FAILURE();
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()).rfind("r.json: malformed screening result", 0), 0U);
  }

  // From a file, as carb report reads it.
  const std::string file = ::testing::TempDir() + "result-" + std::to_string(::getpid()) + ".json";
  std::ofstream(file) << json.dump(1);
  const ScreenResult read = read_screen_result(file);
  EXPECT_EQ(read.feasible, result.feasible);
  ASSERT_EQ(read.pool.size(), result.pool.size());
  EXPECT_EQ(read.pool.back().key, result.pool.back().key);
  const auto error_of = [](const std::string& path) -> std::string {
    try {
      (void)read_screen_result(path);
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::kInput);
      return error.what();
    }
    return "no error";
  };
  std::ofstream(file) << "{\"format\": ";
  EXPECT_EQ(error_of(file).rfind(file + ": not JSON: ", 0), 0U) << error_of(file);
  std::filesystem::remove(file);
  EXPECT_EQ(error_of(file), file + ": cannot open");
}

}  // namespace
}  // namespace carb
