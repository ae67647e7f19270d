// Two-stage screening (carb/screening.hpp): candidates streamed through stage 1 in chunks, the
// survivors rescored by the full model, the budgets applied, and the front over the costs and a
// value extracted and ranked.
#include "carb/screening.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "carb/error.hpp"
#include "carb/graph.hpp"

namespace carb {

namespace {

using json = nlohmann::json;

constexpr std::size_t kChunk = 65536;  // candidates per stage-1 chunk: bounds memory

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

// A prediction's interval widened in log space by `factor` around its value.
void widen(TargetPrediction& p, double factor) {
  if (!p.available || factor <= 1 || !(p.value > 0)) return;
  p.low = p.low > 0 ? p.value * std::pow(p.low / p.value, factor) : 0;
  p.high = std::isfinite(p.high) ? p.value * std::pow(p.high / p.value, factor) : p.high;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Value objectives

std::string ValueObjective::describe() const {
  return name + (analytic() ? " (analytic, per image)" : " (" + file + ")");
}

std::optional<ValueObjective> analytic_value(std::string_view name) {
  if (std::find(kAnalyticValues.begin(), kAnalyticValues.end(), name) == kAnalyticValues.end()) {
    return std::nullopt;
  }
  ValueObjective value;
  value.name = std::string(name);
  return value;
}

std::string network_key(const Config& config) {
  std::string key = to_key(config);
  const std::string suffix =
      "_b" + std::to_string(config.batch) + "_" + std::string(to_string(config.precision));
  const std::size_t at = key.rfind(suffix);
  if (at != std::string::npos) key.erase(at, suffix.size());
  return key;
}

ValueObjective read_value_file(const std::string& path, const std::string& column) {
  const CsvTable table = read_csv(path);
  const auto at = [&](int line, std::size_t col, const std::string& message) {
    return Error(ErrorCategory::kInput, path + ":" + std::to_string(line) + ":" +
                                            std::to_string(col + 1) + ": " + message);
  };
  const auto find = [&](const std::string& name) {
    const auto found = std::find(table.header.begin(), table.header.end(), name);
    if (found == table.header.end()) {
      std::string have;
      for (const std::string& h : table.header) have += (have.empty() ? "" : ", ") + h;
      throw at(1, 0, "no column '" + name + "' (it has: " + have + ")");
    }
    return static_cast<std::size_t>(found - table.header.begin());
  };
  const std::size_t key_column = find("key");
  const std::size_t value_column = find(column);
  ValueObjective value;
  value.name = column;
  value.file = path;
  std::map<std::string, int> first_line;
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    const int line = table.lines[r];
    const std::string& key = table.rows[r][key_column];
    const std::string& cell = table.rows[r][value_column];
    // A configuration key, or a network key: what parse_key accepts with a batch and precision.
    bool valid = false;
    try {
      (void)parse_key(key);
      valid = true;
    } catch (const Error&) {
      try {
        (void)parse_key(key + "_b1_fp32");
        valid = true;
      } catch (const Error&) {
      }
    }
    if (!valid) {
      throw at(line, key_column, "'" + key + "' is neither a configuration key nor a network key");
    }
    std::size_t used = 0;
    double number = std::numeric_limits<double>::quiet_NaN();
    try {
      number = std::stod(cell, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (cell.empty() || used != cell.size() || !std::isfinite(number)) {
      throw at(line, value_column, "'" + cell + "' is not a number");
    }
    if (const auto [it, inserted] = first_line.emplace(key, line); !inserted) {
      throw at(line, key_column,
               key + " has a value already (line " + std::to_string(it->second) + ")");
    }
    value.values[key] = number;
  }
  if (value.values.empty()) throw at(1, 0, "no values (it has a header only)");
  return value;
}

std::optional<double> objective_value(const ValueObjective& value,
                                      const std::vector<std::string>& feature_names,
                                      const float* row, const Config& config) {
  if (!value.analytic()) {
    if (const auto found = value.values.find(to_key(config)); found != value.values.end()) {
      return found->second;
    }
    if (const auto found = value.values.find(network_key(config)); found != value.values.end()) {
      return found->second;
    }
    return std::nullopt;
  }
  const auto feature = [&](std::string_view name) -> std::optional<double> {
    const std::optional<std::size_t> f = feature_column(feature_names, name);
    if (!f || std::isnan(row[*f])) return std::nullopt;
    return static_cast<double>(row[*f]);
  };
  const auto exp_of = [](std::optional<double> log1p) -> std::optional<double> {
    if (!log1p) return std::nullopt;
    return std::expm1(*log1p);
  };
  if (value.name == "params") return exp_of(feature("log_params"));
  if (value.name == "flops") return exp_of(feature("log_flops_per_image"));
  if (value.name == "macs") {
    const auto flops = exp_of(feature("log_flops_per_image"));
    return flops ? std::optional<double>(*flops / 2) : std::nullopt;
  }
  if (value.name == "depth") return feature("depth");
  // An imported architecture has no width (its feature holds 0 for the trees): no value.
  if (value.name == "width") {
    return config.imported() ? std::nullopt : feature("width_multiplier");
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Requests

std::string_view to_string(DomainPolicy policy) {
  switch (policy) {
    case DomainPolicy::kExclude:
      return "exclude";
    case DomainPolicy::kWiden:
      return "widen";
    case DomainPolicy::kAllow:
      return "allow";
  }
  CARB_CHECK(false, "unknown domain policy");
  return {};
}

std::optional<DomainPolicy> parse_domain_policy(std::string_view text) {
  for (DomainPolicy policy : {DomainPolicy::kExclude, DomainPolicy::kWiden, DomainPolicy::kAllow}) {
    if (text == to_string(policy)) return policy;
  }
  return std::nullopt;
}

bool meets(const std::vector<Budget>& budgets, const MeasuredValues& v) {
  for (const Budget& b : budgets) {
    const auto& value = v[static_cast<std::size_t>(b.target)];
    if (!value) return false;
    if (b.strict ? !(*value < b.limit) : !(*value <= b.limit)) return false;
  }
  return true;
}

std::map<std::string, MeasuredValues> measured_by_key(const Store& store,
                                                      const std::string& device) {
  std::map<std::string, MeasuredValues> out;
  std::string fingerprint = device;
  if (fingerprint.empty()) {
    const auto devices = store.devices();
    if (devices.size() > 1) {
      std::string names;
      for (const DeviceRecord& d : devices) names += "\n  " + d.fingerprint;
      throw Error(ErrorCategory::kInput, store.path() + " holds " + std::to_string(devices.size()) +
                                             " devices; name one:" + names);
    }
    if (!devices.empty()) fingerprint = devices.front().fingerprint;
  }
  for (const MeasuredTargets& m : combine_repeated(store.ok_measurements(fingerprint))) {
    auto& values = out[m.configuration_key];
    if (m.engine_peak_bytes) {
      values[static_cast<std::size_t>(Target::kMemory)] = static_cast<double>(*m.engine_peak_bytes);
    }
    values[static_cast<std::size_t>(Target::kEnergy)] = m.energy_j;
    values[static_cast<std::size_t>(Target::kLatency)] = m.latency_ms;
  }
  return out;
}

std::size_t target_index(const Predictor& predictor, Target target) {
  for (std::size_t t = 0; t < predictor.targets().size(); ++t) {
    if (predictor.targets()[t].name == to_string(target)) return t;
  }
  return std::string::npos;
}

void check_request(const Predictor& model, const Predictor* stage1, ScreenRequest& request) {
  if (model.schema() == kKernelSchema) {
    throw Error(ErrorCategory::kInput,
                "a kernel model prices latency only: screen with a model of measured "
                "configurations and give the kernel model beside it, to price stage 2's "
                "latency");
  }
  if (request.kernel_model != nullptr) {
    if (request.kernel_model->schema() != kKernelSchema) {
      throw Error(ErrorCategory::kInput, "the kernel model is not one: its feature schema is " +
                                             request.kernel_model->schema() + ", not " +
                                             std::string(kKernelSchema) +
                                             " (a kernel model is fitted on kernel timings)");
    }
    if (target_index(model, Target::kLatency) == std::string::npos) {
      throw Error(ErrorCategory::kInput,
                  "a kernel model replaces the model's latency, and the model has none");
    }
  }
  if (model.schema() != kArchitectureSchema) {
    throw Error(ErrorCategory::kInput,
                "a model fitted on a table cannot screen: it needs a model of a device");
  }
  if (stage1 != nullptr && stage1->schema() != kArchitectureSchema) {
    throw Error(ErrorCategory::kInput, "the stage-1 model was fitted on a table");
  }
  if (request.keep == 0 && request.keep_fraction <= 0) {
    throw Error(ErrorCategory::kUsage, "stage 1 must keep at least one candidate");
  }
  // What each target's prediction is like, from one row: an unavailable one says why.
  const std::vector<float> row(model.feature_names().size(), 1.0F);
  const int batch = 1;
  const auto probe = model.predict(row.data(), 1, &batch);
  const auto available = [&](Target target) -> std::string {
    const std::size_t t = target_index(model, target);
    if (t == std::string::npos) return "the model has no such target";
    return probe[t][0].available ? "" : probe[t][0].reason;
  };
  const bool defaulted = request.costs.empty();
  if (defaulted) {
    for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
      if (available(target).empty()) request.costs.push_back(target);
    }
    if (request.costs.empty()) throw Error(ErrorCategory::kInput, "the model predicts no cost");
  }
  for (Target target : request.costs) {
    if (const std::string why = available(target); !why.empty()) {
      throw Error(ErrorCategory::kInput,
                  "objective " + std::string(to_string(target)) + " cannot be predicted: " + why);
    }
  }
  for (const Budget& budget : request.budgets) {
    if (const std::string why = available(budget.target); !why.empty()) {
      throw Error(ErrorCategory::kInput, "a budget on " + std::string(to_string(budget.target)) +
                                             ", which the model cannot predict: " + why);
    }
  }
  if (request.costs.size() + (request.value ? 1 : 0) > kMaxObjectives) {
    throw Error(ErrorCategory::kInput, "at most " + std::to_string(kMaxObjectives) +
                                           " objectives: three costs and a value");
  }
  if (request.value && request.value->analytic()) {
    const std::vector<float> x(model.feature_names().size(), 0.0F);
    if (!objective_value(*request.value, model.feature_names(), x.data(), Config{})) {
      throw Error(ErrorCategory::kInput, "the value " + request.value->name +
                                             " is not a feature of the model's schema (" +
                                             model.schema() + ")");
    }
  }
  if (stage1 != nullptr) {
    const std::vector<float> x(stage1->feature_names().size(), 1.0F);
    const auto cheap = stage1->predict_cheap(x.data(), 1);
    for (Target target : request.costs) {
      const std::size_t t = target_index(*stage1, target);
      if (t == std::string::npos || !cheap[t][0].available) {
        throw Error(ErrorCategory::kInput,
                    "the stage-1 model cannot rank " + std::string(to_string(target)));
      }
    }
  }
}

namespace {

// The value objective of a screen's options: a value file's column, values held by key, an
// analytic capacity, or none.
std::optional<ValueObjective> value_of(const ScreenOptions& options) {
  if (!options.value.empty() || options.values) {
    if (options.maximize != kDefaultValue) {
      throw Error(
          ErrorCategory::kUsage,
          "maximize '" + options.maximize + "' and a value to maximise: give one of them, not both",
          "maximize");
    }
    if (options.values) return options.values;
    const std::size_t colon = options.value.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == options.value.size()) {
      throw Error(ErrorCategory::kUsage,
                  "value takes FILE:COLUMN, e.g. accuracy.csv:top1 (got '" + options.value + "')",
                  "value");
    }
    return read_value_file(options.value.substr(0, colon), options.value.substr(colon + 1));
  }
  if (options.maximize == "none") return std::nullopt;
  auto value = analytic_value(options.maximize);
  if (!value) {
    std::string names;
    for (std::string_view name : kAnalyticValues) names += std::string(name) + ", ";
    throw Error(ErrorCategory::kUsage,
                "maximize '" + options.maximize + "': expected " + names + "or none", "maximize");
  }
  return value;
}

// Runs `parse`, its errors given `subject`.
template <typename Parse>
auto with_subject(const std::string& subject, Parse parse) {
  try {
    return parse();
  } catch (const Error& error) {
    throw Error(error.category(), error.what(), subject);
  }
}

}  // namespace

ScreenRequest screen_request(const ScreenOptions& options, const Predictor& model,
                             const Predictor* stage1, const Predictor* kernel_model) {
  ScreenRequest request;
  request.kernel_model = kernel_model;
  if (!options.rank.empty()) {
    request.rank = parse_rank_method(options.rank);
    if (!request.rank) {
      throw Error(ErrorCategory::kUsage, "rank must be ideal, knee or value", "rank");
    }
  }
  const auto policy = parse_domain_policy(options.outside_domain);
  if (!policy) {
    throw Error(ErrorCategory::kUsage, "outside_domain must be exclude, widen or allow",
                "outside_domain");
  }
  request.domain = *policy;
  if (!options.value.empty() && options.values) {
    throw Error(ErrorCategory::kUsage, "value: give a file's column or values, not both", "value");
  }
  request.value = value_of(options);
  if (request.rank == RankMethod::kValue && !request.value) {
    throw Error(ErrorCategory::kUsage, "rank value needs a value to maximise", "rank");
  }
  if (!options.budget.empty()) {
    request.budgets = with_subject("budget", [&] { return parse_budgets(options.budget); });
  }
  if (!options.objectives.empty()) {
    request.costs =
        with_subject("objectives", [&] { return parse_objectives(options.objectives); });
  }
  if (options.keep == 0 && options.keep_fraction <= 0) {
    throw Error(ErrorCategory::kUsage, "keep must be at least 1", "keep");
  }
  request.keep = options.keep;
  request.keep_fraction = options.keep_fraction;
  request.safe = options.safe;
  check_request(model, stage1, request);
  return request;
}

std::vector<std::size_t> memory_deciding_rows(const std::vector<Budget>& budgets,
                                              const std::vector<TargetPrediction>& memory) {
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < memory.size(); ++i) {
    const TargetPrediction& p = memory[i];
    for (const Budget& budget : budgets) {
      if (budget.target == Target::kMemory && p.available && p.low <= budget.limit &&
          budget.limit < p.high) {
        rows.push_back(i);
        break;
      }
    }
  }
  return rows;
}

std::size_t plan_deciding_memory(const Predictor& model, const std::vector<Budget>& budgets,
                                 const std::vector<Config>& configs,
                                 std::vector<std::vector<TargetPrediction>>& predictions,
                                 std::string* engine) {
  std::string no_plan;
  const std::unique_ptr<EngineMemoryPlanner> planner =
      EngineMemoryPlanner::for_model(model, &no_plan);
  if (!planner) return 0;
  std::vector<std::pair<std::size_t, Config>> deciding;
  for (std::size_t i :
       memory_deciding_rows(budgets, predictions[target_index(model, Target::kMemory)])) {
    if (deciding.size() < kMostPlannedConfigurations) deciding.emplace_back(i, configs.at(i));
  }
  const std::size_t planned = planner->apply(deciding, predictions);
  if (planned > 0 && engine != nullptr) *engine = planner->engine();
  return planned;
}

Feasibility decide_budgets(const std::vector<Budget>& budgets, TargetPredictions& predictions,
                           const DomainJudgement& domain, DomainPolicy policy,
                           FeasibilityOptions options,
                           const std::array<bool, kTargetCount>& unwidened) {
  if (!domain.inside && policy == DomainPolicy::kWiden) {
    for (std::size_t t = 0; t < kTargetCount; ++t) {
      if (!unwidened[t]) widen(predictions[t], domain.widening());
    }
    options.safe = true;
  }
  Feasibility feasibility = assess_budgets(budgets, predictions, options);
  if (!domain.inside && policy == DomainPolicy::kExclude) feasibility.feasible = false;
  return feasibility;
}

// ---------------------------------------------------------------------------------------------
// The pass

std::vector<std::size_t> ScreenResult::front_ranks() const {
  std::vector<std::size_t> ranks(pool.size(), 0);
  for (std::size_t r = 0; r < ranked.size(); ++r) ranks[ranked_pool_index(r)] = r + 1;
  return ranks;
}

ObjectiveValues ScreenResult::objective_values(std::size_t i) const {
  ObjectiveValues v{};
  for (std::size_t k = 0; k < costs.size(); ++k) {
    for (std::size_t t = 0; t < targets.size(); ++t) {
      if (targets[t].name == to_string(costs[k])) v[k] = predictions[t][i].value;
    }
  }
  if (value) v[costs.size()] = -pool[i].value.value_or(0);
  return v;
}

namespace {

// One pass's state while stage 1 streams.
class Pass {
 public:
  Pass(const Predictor& model, const Predictor* stage1, const ScreenRequest& request,
       const std::map<std::string, MeasuredValues>* measured, ScreenResult& out)
      : model_(model),
        ranker_(stage1 != nullptr ? *stage1 : model),
        request_(request),
        measured_(measured),
        out_(out),
        budget_prune_(stage1 == nullptr && !request.budgets.empty()),
        meeting_(request.budgets.size(), 0),
        closest_(request.budgets.size(), {"", std::numeric_limits<double>::infinity()}) {}

  // Stage 1 of one chunk of candidates, with their features.
  void add(const std::vector<Config>& configs, const FeatureRows& rows) {
    const std::size_t cols = model_.feature_names().size();
    const std::size_t costs = request_.costs.size();
    auto cheap = ranker_.predict_cheap(rows.x.data(), configs.size());
    const TrainingDomain& domain = model_.training_domain();
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const float* row = rows.x.data() + i * cols;
      ScreenCandidate c;
      c.key = to_key(configs[i]);
      // A family the model never saw: the cheap intervals it calibrated for one, before any
      // budget is judged by them.
      const std::string family = family_of(configs[i]);
      if (domain.new_family(family)) {
        for (std::size_t t = 0; t < cheap.size(); ++t) ranker_.widen_for_new_family(cheap[t][i], t);
      }
      const bool is_measured = measured_ != nullptr && measured_->count(c.key) > 0;
      bool over = false;
      for (std::size_t b = 0; b < request_.budgets.size(); ++b) {
        const auto& p = cheap[target_index(ranker_, request_.budgets[b].target)][i];
        if (budget_prune_ && p.available && p.low > request_.budgets[b].limit) over = true;
        if (p.available) {
          meeting_[b] += p.value <= request_.budgets[b].limit ? 1 : 0;
          if (p.value < closest_[b].second) closest_[b] = {c.key, p.value};
        }
      }
      if (over && !is_measured) {
        ++out_.counts.over_budget;
        // The chance it was feasible after all, by its own interval (assess_budgets' model).
        FeasibilityOptions options;
        options.coverage = ranker_.coverage();
        out_.counts.expected_feasible_lost +=
            assess_budgets(request_.budgets, gather_predictions(ranker_.targets(), cheap, i),
                           options)
                .probability;
        continue;
      }
      if (request_.value) {
        c.value = objective_value(*request_.value, model_.feature_names(), row, configs[i]);
        if (!c.value) {
          if (missing_value_++ == 0) first_missing_ = c.key;
          continue;
        }
      }
      c.domain = domain.judge(row, family);
      if (!c.domain.inside) {
        ++out_.counts.outside_domain;
        if (out_.first_outside.empty()) {
          out_.first_outside =
              c.key + ", " + domain_text(domain, c.domain, row, model_.feature_names(), family);
        }
        if (request_.domain == DomainPolicy::kExclude && !is_measured) {
          ++out_.counts.excluded_outside_domain;
          continue;
        }
      }
      const double widening =
          request_.domain == DomainPolicy::kWiden && !c.domain.inside ? c.domain.widening() : 1;
      for (std::size_t k = 0; k < costs; ++k) {
        TargetPrediction p = cheap[target_index(ranker_, request_.costs[k])][i];
        widen(p, widening);
        c.stage1.value[k] = p.value;
        c.stage1.low[k] = p.low;
        c.stage1.high[k] = p.high;
      }
      if (c.value) c.stage1.value[costs] = c.stage1.low[costs] = c.stage1.high[costs] = -*c.value;
      c.x.assign(row, row + cols);
      c.batch = rows.batch[i];
      out_.pool.push_back(std::move(c));
    }
  }

  // Keeps the best `keep` of the pool by combined rank, and whatever is not confidently worse.
  // While streaming: prune only once the pool has doubled since it was last pruned (and holds
  // more than a chunk beyond `keep`), so that a pool that pruning cannot shrink (wide intervals,
  // an exact value) costs O(n log n) overall rather than a sort per chunk.
  void prune_while_streaming(std::size_t keep) {
    if (out_.pool.size() < std::max(2 * pruned_size_, keep + kChunk)) return;
    prune(keep);
  }

  void prune(std::size_t keep) {
    if (out_.pool.size() <= keep) return;
    std::vector<IntervalEstimate> estimates;
    estimates.reserve(out_.pool.size());
    for (const ScreenCandidate& c : out_.pool) estimates.push_back(c.stage1);
    const PruneResult result = prune_stage1(estimates, out_.objectives(), keep);
    std::vector<ScreenCandidate> kept;
    kept.reserve(result.kept.size());
    for (std::size_t i : result.kept) kept.push_back(std::move(out_.pool[i]));
    out_.counts.outranked += result.pruned;
    out_.counts.overlap_kept = result.kept_by_overlap;
    out_.pool = std::move(kept);
    pruned_size_ = out_.pool.size();
  }

  std::size_t keep_for(std::uint64_t candidates) const {
    return request_.keep_fraction > 0 ? keep_count(request_.keep_fraction, candidates)
                                      : request_.keep;
  }

  void check_values(std::uint64_t candidates) const {
    if (missing_value_ == 0) return;
    if (request_.value->analytic()) {  // width: a ResNet knob an imported network lacks
      throw Error(ErrorCategory::kUsage,
                  "maximize " + request_.value->name + ": " + first_missing_ + " has no " +
                      request_.value->name + " (" + std::to_string(missing_value_) + " of " +
                      std::to_string(candidates) +
                      " candidates are imported networks, which have no ResNet width); maximize "
                      "params, macs, flops or depth, or give values per configuration",
                  "maximize");
    }
    throw Error(ErrorCategory::kInput,
                request_.value->file + ": no " + request_.value->name + " value for " +
                    first_missing_ + " (" + std::to_string(missing_value_) + " of " +
                    std::to_string(candidates) +
                    " candidates have none); give every candidate a value, by its configuration "
                    "key or its network key, or screen only the keys the file has");
  }

  // Says which budget rules everything out, and the configuration that comes closest.
  [[noreturn]] void throw_infeasible(std::uint64_t candidates) const {
    std::string why;
    for (std::size_t b = 0; b < request_.budgets.size(); ++b) {
      if (meeting_[b] > 0) continue;
      const Budget& budget = request_.budgets[b];
      const std::string unit(canonical_unit(budget.target));
      if (!why.empty()) why += "; ";
      why += to_string(budget.target);
      why += " <= " + number_text(budget.limit) + " " + unit;
      why += " rules out all " + std::to_string(candidates) + " configurations";
      why += " (closest: " + closest_[b].first;
      why += " at " + number_text(closest_[b].second) + " " + unit + ")";
    }
    throw Error(
        ErrorCategory::kInput,
        "no configuration meets the budgets" +
            (why.empty() ? std::string(" together (each alone is met by some)") : ": " + why));
  }

 private:
  const Predictor& model_;
  const Predictor& ranker_;
  const ScreenRequest& request_;
  const std::map<std::string, MeasuredValues>* measured_;
  ScreenResult& out_;
  bool budget_prune_;
  std::vector<std::uint64_t> meeting_;                   // per budget, stage-1 meeting it
  std::vector<std::pair<std::string, double>> closest_;  // per budget, the closest
  std::uint64_t missing_value_ = 0;
  std::string first_missing_;
  std::size_t pruned_size_ = 0;  // the pool's size after the last prune
};

}  // namespace

ScreenResult screen(const Predictor& model, const Predictor* stage1, const CandidateSet& candidates,
                    const ScreenRequest& request,
                    const std::map<std::string, MeasuredValues>* measured) {
  CARB_CHECK(!request.costs.empty(), "a request checked by check_request");
  ScreenResult out;
  out.targets = model.targets();
  out.budgets = request.budgets;
  out.costs = request.costs;
  if (request.value) {
    out.value = ValueObjective{request.value->name, request.value->file, {}};
  }
  out.rank = request.rank.value_or(request.value ? RankMethod::kValue : RankMethod::kIdeal);
  out.domain_policy = request.domain;
  out.safe = request.safe;
  Pass pass(model, stage1, request, measured, out);
  ScreenCounts& counts = out.counts;

  // Stage 1: stream the candidates in chunks, pruning as the pool grows (a fraction is of the
  // whole set, known only at the end: then prune at the end alone).
  if (candidates.space != nullptr) {
    const Space& space = *candidates.space;
    SpaceFeatures features(space);
    std::vector<std::uint64_t> indices;
    std::vector<Config> chunk;
    const auto flush = [&] {
      if (indices.empty()) return;
      pass.add(chunk, feature_rows(space, features, indices));
      chunk.clear();
      indices.clear();
      if (request.keep_fraction <= 0) pass.prune_while_streaming(request.keep);
    };
    for (std::uint64_t index = 0; index < space.size(); ++index) {
      ++counts.configurations;
      if (!space.constraints().empty() && !features.violated_constraint(index).empty()) {
        ++counts.outside_constraints;
        continue;
      }
      indices.push_back(index);
      chunk.push_back(space.at(index));
      if (indices.size() == kChunk) flush();
    }
    flush();
  } else {
    counts.configurations = candidates.configs.size();
    for (std::size_t begin = 0; begin < candidates.configs.size(); begin += kChunk) {
      const std::vector<Config> part(
          candidates.configs.begin() + static_cast<long>(begin),
          candidates.configs.begin() +
              static_cast<long>(std::min(candidates.configs.size(), begin + kChunk)));
      pass.add(part, feature_rows(part));
      if (request.keep_fraction <= 0) pass.prune_while_streaming(request.keep);
    }
  }
  const std::uint64_t screened = counts.configurations - counts.outside_constraints;
  if (screened == 0) {
    throw Error(ErrorCategory::kInput,
                "the space is empty: " + (counts.configurations == 0
                                              ? std::string("it has no configurations")
                                              : "all " + std::to_string(counts.configurations) +
                                                    " configurations break its constraints"));
  }
  pass.check_values(screened);
  pass.prune(pass.keep_for(screened));

  // Stage 2: the device's full model rescores the survivors.
  std::vector<float> x;
  std::vector<int> batch;
  for (const ScreenCandidate& c : out.pool) {
    x.insert(x.end(), c.x.begin(), c.x.end());
    batch.push_back(c.batch);
  }
  std::vector<std::string> families;
  families.reserve(out.pool.size());
  for (const ScreenCandidate& c : out.pool) families.push_back(family_of(parse_key(c.key)));
  // The predictions as the model gives them, memory planned where it is (below); each decision
  // starts from them, as deciding widens some in place.
  std::vector<std::vector<TargetPrediction>> given =
      model.predict(x.data(), out.pool.size(), batch.data(), &families);
  // Latency from the kernel model: each candidate's planned kernels, predicted and summed. Its
  // whole-pass intervals are calibrated on architectures its fit never saw, so the training
  // domain's widening leaves them as they are.
  std::vector<bool> by_kernels(out.pool.size(), false);
  if (request.kernel_model != nullptr && !out.pool.empty()) {
    std::vector<Config> configs;
    configs.reserve(out.pool.size());
    for (const ScreenCandidate& c : out.pool) configs.push_back(parse_key(c.key));
    const std::vector<TargetPrediction> sums = predict_by_kernels(*request.kernel_model, configs);
    std::vector<TargetPrediction>& latency = given[target_index(model, Target::kLatency)];
    for (std::size_t i = 0; i < sums.size(); ++i) {
      if (!sums[i].available) continue;
      latency[i] = sums[i];
      by_kernels[i] = true;
      ++out.counts.latency_by_kernels;
    }
  }
  FeasibilityOptions options;
  options.coverage = model.coverage();
  options.safe = request.safe;
  // Decides row i from `given`: measured values in place of its predictions, then its budgets.
  if (measured != nullptr) out.measured.assign(out.pool.size(), false);
  out.predictions.assign(given.size(), std::vector<TargetPrediction>(out.pool.size()));
  out.assessed.assign(out.pool.size(), Feasibility{});
  const auto decide_row = [&](std::size_t i) {
    for (std::size_t t = 0; t < given.size(); ++t) out.predictions[t][i] = given[t][i];
    if (measured != nullptr) {
      // What is measured is known: its values replace the predictions, as points.
      if (const auto found = measured->find(out.pool[i].key); found != measured->end()) {
        for (std::size_t t = 0; t < model.targets().size(); ++t) {
          const auto target = parse_target(model.targets()[t].name);
          if (!target || !out.predictions[t][i].available) continue;
          if (const auto& v = found->second[static_cast<std::size_t>(*target)]) {
            out.predictions[t][i] = {true, "", *v, *v, *v};
            out.measured[i] = true;
          }
        }
      }
    }
    // A measured candidate's values are known, wherever it lies.
    DomainJudgement domain = out.pool[i].domain;
    if (!out.measured.empty() && out.measured[i]) domain = DomainJudgement{};
    TargetPredictions predictions = gather_predictions(model.targets(), out.predictions, i);
    std::array<bool, kTargetCount> unwidened{};
    unwidened[static_cast<std::size_t>(Target::kLatency)] = by_kernels[i];
    out.assessed[i] =
        decide_budgets(request.budgets, predictions, domain, request.domain, options, unwidened);
    // The intervals as decided on (widened outside the domain under kWiden).
    for (std::size_t t = 0; t < model.targets().size(); ++t) {
      if (const auto target = parse_target(model.targets()[t].name)) {
        if (out.predictions[t][i].available) {
          out.predictions[t][i] = predictions[static_cast<std::size_t>(*target)];
        }
      }
    }
  };
  // Decides `rows` (all when null) again, then the feasible set and the front.
  const auto decide = [&](const std::vector<std::size_t>* rows) {
    if (rows == nullptr) {
      for (std::size_t i = 0; i < out.pool.size(); ++i) decide_row(i);
    } else {
      for (std::size_t i : *rows) decide_row(i);
    }
    out.feasible.clear();
    for (std::size_t i = 0; i < out.pool.size(); ++i) {
      if (out.assessed[i].feasible) out.feasible.push_back(i);
    }
    std::vector<ObjectiveValues> values;
    values.reserve(out.feasible.size());
    for (std::size_t i : out.feasible) values.push_back(out.objective_values(i));
    out.front = pareto_front(values, out.objectives());
  };

  // Memory from the engine's own plan where this machine runs the model's engine: exact. At
  // about a millisecond a configuration, only where it can change the answer: the candidates a
  // memory budget's limit lies within the interval of, then the front's members, again until
  // the front is all planned (planning moves members in and out of it).
  std::string no_plan;
  const std::unique_ptr<EngineMemoryPlanner> planner =
      out.pool.empty() ? nullptr : EngineMemoryPlanner::for_model(model, &no_plan);
  std::vector<bool> planned(out.pool.size(), false);
  std::size_t asked = 0;
  std::vector<std::size_t> which;  // the rows the last plan() planned
  const auto plan = [&](const std::vector<std::size_t>& rows) {
    which.clear();
    std::vector<std::pair<std::size_t, Config>> configs;
    for (std::size_t i : rows) {
      if (planned[i] || asked >= kMostPlannedConfigurations) continue;
      planned[i] = true;
      ++asked;
      which.push_back(i);
      configs.emplace_back(i, parse_key(out.pool[i].key));
    }
    if (which.empty()) return false;
    out.counts.memory_planned += planner->apply(configs, given);
    return true;
  };
  if (planner) {
    out.memory_engine = planner->engine();
    plan(memory_deciding_rows(request.budgets, given[target_index(model, Target::kMemory)]));
  }
  decide(nullptr);
  const auto front_members = [&] {
    std::vector<std::size_t> members;
    for (std::size_t f : out.front) members.push_back(out.feasible[f]);
    return members;
  };
  while (planner && plan(front_members())) decide(&which);
  if (out.feasible.empty() && !request.budgets.empty()) pass.throw_infeasible(screened);
  std::vector<ObjectiveValues> front_values;
  for (std::size_t f : out.front) front_values.push_back(out.objective_values(out.feasible[f]));
  out.ranked = rank_front(front_values, out.objectives(), out.rank);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The result file

namespace {

constexpr std::string_view kResultFormat = "carb-screening";
constexpr int kResultVersion = 1;

json prediction_json(const TargetPrediction& p) {
  const auto finite = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  return {{"value", p.value}, {"low", finite(p.low)}, {"high", finite(p.high)}};
}

}  // namespace

json screen_result_json(const ScreenResult& result, const std::vector<std::string>& feature_names) {
  json budgets = json::array();
  for (const Budget& b : result.budgets) {
    budgets.push_back({{"target", to_string(b.target)},
                       {"limit", b.limit},
                       {"unit", canonical_unit(b.target)},
                       {"strict", b.strict}});
  }
  json costs = json::array();
  for (Target t : result.costs) costs.push_back(to_string(t));
  json targets = json::array();
  for (const TargetInfo& t : result.targets) {
    targets.push_back({{"name", t.name}, {"unit", t.unit}});
  }
  const std::vector<std::size_t> ranks = result.front_ranks();
  json candidates = json::array();
  for (std::size_t i = 0; i < result.pool.size(); ++i) {
    const ScreenCandidate& c = result.pool[i];
    json predictions = json::object();
    for (std::size_t t = 0; t < result.targets.size(); ++t) {
      if (!result.predictions[t][i].available) continue;
      predictions[result.targets[t].name] = prediction_json(result.predictions[t][i]);
    }
    json entry = {{"key", c.key},
                  {"predictions", predictions},
                  {"feasible", result.assessed[i].feasible},
                  {"p_feasible", result.assessed[i].probability},
                  {"front_rank", ranks[i] > 0 ? json(ranks[i]) : json(nullptr)},
                  {"value", c.value ? json(*c.value) : json(nullptr)},
                  {"inside_domain", c.domain.inside},
                  {"domain_distance", c.domain.distance_ratio}};
    if (!result.measured.empty()) entry["measured"] = static_cast<bool>(result.measured[i]);
    if (ranks[i] > 0 && c.x.size() == feature_names.size()) {
      json features = json::object();
      for (std::size_t f = 0; f < feature_names.size(); ++f) features[feature_names[f]] = c.x[f];
      entry["features"] = std::move(features);
    }
    candidates.push_back(std::move(entry));
  }
  const ScreenCounts& n = result.counts;
  return {{"format", kResultFormat},
          {"format_version", kResultVersion},
          {"targets", targets},
          {"budgets", budgets},
          {"costs", costs},
          {"value", result.value ? json{{"name", result.value->name}, {"file", result.value->file}}
                                 : json(nullptr)},
          {"rank", to_string(result.rank)},
          {"domain_policy", to_string(result.domain_policy)},
          {"safe", result.safe},
          {"counts",
           {{"configurations", n.configurations},
            {"outside_constraints", n.outside_constraints},
            {"stage1_over_budget", n.over_budget},
            {"stage1_expected_feasible_lost", n.expected_feasible_lost},
            {"stage1_outranked", n.outranked},
            {"stage1_kept_by_overlap", n.overlap_kept},
            {"outside_training_domain", n.outside_domain},
            {"excluded_outside_training_domain", n.excluded_outside_domain},
            {"stage2_scored", result.pool.size()},
            {"stage2_memory_planned", n.memory_planned},
            {"stage2_latency_by_kernels", n.latency_by_kernels},
            {"feasible", result.feasible.size()},
            {"front", result.front.size()}}},
          {"first_outside_domain", result.first_outside},
          {"memory_engine", result.memory_engine},
          {"candidates", candidates}};
}

ScreenResult screen_result_from_json(const json& j, const std::string& origin) {
  const auto bad = [&](const std::string& what) {
    return Error(ErrorCategory::kInput, origin + ": " + what);
  };
  try {
    if (!j.is_object() || j.value("format", "") != kResultFormat) {
      throw bad("not a screening result (its \"format\" is not \"" + std::string(kResultFormat) +
                "\")");
    }
    if (j.at("format_version").get<int>() != kResultVersion) {
      throw bad("screening result format version " + j.at("format_version").dump() +
                ", this carb reads " + std::to_string(kResultVersion) + "; screen again");
    }
    ScreenResult r;
    for (const json& t : j.at("targets")) {
      r.targets.push_back({t.at("name").get<std::string>(), t.at("unit").get<std::string>(), ""});
    }
    for (const json& b : j.at("budgets")) {
      Budget budget;
      const auto target = parse_target(b.at("target").get<std::string>());
      if (!target) throw bad("unknown budget target " + b.at("target").dump());
      budget.target = *target;
      budget.limit = b.at("limit").get<double>();
      budget.strict = b.at("strict").get<bool>();
      r.budgets.push_back(budget);
    }
    for (const json& c : j.at("costs")) {
      const auto target = parse_target(c.get<std::string>());
      if (!target) throw bad("unknown cost " + c.dump());
      r.costs.push_back(*target);
    }
    if (!j.at("value").is_null()) {
      r.value = ValueObjective{j.at("value").at("name").get<std::string>(),
                               j.at("value").at("file").get<std::string>(),
                               {}};
    }
    const auto rank = parse_rank_method(j.at("rank").get<std::string>());
    const auto policy = parse_domain_policy(j.at("domain_policy").get<std::string>());
    if (!rank || !policy) throw bad("unknown rank method or domain policy");
    r.rank = *rank;
    r.domain_policy = *policy;
    r.safe = j.at("safe").get<bool>();
    const json& n = j.at("counts");
    r.counts.configurations = n.at("configurations").get<std::uint64_t>();
    r.counts.outside_constraints = n.at("outside_constraints").get<std::uint64_t>();
    r.counts.over_budget = n.at("stage1_over_budget").get<std::uint64_t>();
    r.counts.expected_feasible_lost = n.at("stage1_expected_feasible_lost").get<double>();
    r.counts.outranked = n.at("stage1_outranked").get<std::uint64_t>();
    r.counts.overlap_kept = n.at("stage1_kept_by_overlap").get<std::uint64_t>();
    r.counts.outside_domain = n.at("outside_training_domain").get<std::uint64_t>();
    r.counts.excluded_outside_domain =
        n.at("excluded_outside_training_domain").get<std::uint64_t>();
    r.first_outside = j.at("first_outside_domain").get<std::string>();
    // Results of carbs before stage 2 planned memory have neither.
    r.counts.memory_planned = n.value("stage2_memory_planned", std::uint64_t{0});
    r.counts.latency_by_kernels = n.value("stage2_latency_by_kernels", std::uint64_t{0});
    r.memory_engine = j.value("memory_engine", std::string());
    r.predictions.assign(r.targets.size(), {});
    std::vector<std::pair<std::size_t, std::size_t>> ranks;  // (rank, pool index)
    for (const json& c : j.at("candidates")) {
      const std::size_t i = r.pool.size();
      ScreenCandidate candidate;
      candidate.key = c.at("key").get<std::string>();
      (void)parse_key(candidate.key);  // a configuration key, or an input error naming it
      if (!c.at("value").is_null()) candidate.value = c.at("value").get<double>();
      candidate.domain.inside = c.at("inside_domain").get<bool>();
      candidate.domain.distance_ratio = c.at("domain_distance").get<double>();
      const json& predictions = c.at("predictions");
      for (std::size_t t = 0; t < r.targets.size(); ++t) {
        TargetPrediction p;
        if (const auto found = predictions.find(r.targets[t].name); found != predictions.end()) {
          const auto number = [](const json& v, double missing) {
            return v.is_null() ? missing : v.get<double>();
          };
          p.available = true;
          p.value = found->at("value").get<double>();
          p.low = number(found->at("low"), 0);
          p.high = number(found->at("high"), std::numeric_limits<double>::infinity());
        } else {
          p.reason = "not in " + origin;
        }
        r.predictions[t].push_back(p);
      }
      Feasibility feasibility;
      feasibility.feasible = c.at("feasible").get<bool>();
      feasibility.probability = c.at("p_feasible").get<double>();
      r.assessed.push_back(feasibility);
      if (feasibility.feasible) r.feasible.push_back(i);
      if (c.contains("measured")) {
        r.measured.resize(i + 1, false);
        r.measured[i] = c.at("measured").get<bool>();
      }
      if (!c.at("front_rank").is_null())
        ranks.emplace_back(c.at("front_rank").get<std::size_t>(), i);
      r.pool.push_back(std::move(candidate));
    }
    if (!r.measured.empty()) r.measured.resize(r.pool.size(), false);
    // The front and its ranking, from the ranks: front[f] indexes feasible, ranked[k] front.
    std::sort(ranks.begin(), ranks.end());
    for (std::size_t k = 0; k < ranks.size(); ++k) {
      if (ranks[k].first != k + 1) throw bad("its front ranks are not 1, 2, 3, ...");
      const std::size_t i = ranks[k].second;
      const auto at = std::find(r.feasible.begin(), r.feasible.end(), i);
      if (at == r.feasible.end()) throw bad("a front member (" + r.pool[i].key + ") is infeasible");
      r.front.push_back(static_cast<std::size_t>(at - r.feasible.begin()));
      r.ranked.push_back({k, 0});
    }
    return r;
  } catch (const json::exception& e) {
    throw bad(std::string("malformed screening result: ") + e.what());
  }
}

ScreenResult read_screen_result(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorCategory::kInput, path + ": cannot open");
  json parsed;
  try {
    parsed = json::parse(in);
  } catch (const json::parse_error& error) {
    throw Error(ErrorCategory::kInput, path + ": not JSON: " + error.what());
  }
  return screen_result_from_json(parsed, path);
}

}  // namespace carb
