// Kernel models (docs/onnx.md, "Kernel model"): a network's latency as the sum of its planned
// kernels' predicted times, with whole-pass intervals calibrated on architectures held out.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "carb/backend.hpp"
#include "carb/engine_plan.hpp"
#include "carb/error.hpp"
#include "carb/model.hpp"
#include "transfer.hpp"

namespace carb {

namespace {

// A kernel row's configuration key ("KEY kernel I", dataset_from_kernels' ids).
std::string key_of(const std::string& id) { return id.substr(0, id.rfind(" kernel ")); }

// A configuration key's architecture: all before its resolution ("_r<digits>_b").
std::string architecture_of(const std::string& key) {
  for (std::size_t at = key.rfind("_r"); at != std::string::npos && at > 0;
       at = key.rfind("_r", at - 1)) {
    if (at + 2 < key.size() && std::isdigit(static_cast<unsigned char>(key[at + 2])) != 0) {
      return key.substr(0, at);
    }
  }
  return key;
}

}  // namespace

Predictor fit_kernel_model(const Dataset& data, const FitOptions& options, FitReport* report) {
  if (data.schema != kKernelSchema) {
    throw Error(ErrorCategory::kUsage,
                "fit_kernel_model: not a kernel dataset (schema " + data.schema + ")");
  }
  // Hold about a fifth of the architectures out of a first fit, and see how far their whole
  // passes fall from their kernels' predicted sums.
  std::set<std::string> architectures;
  for (const std::string& id : data.ids) architectures.insert(architecture_of(key_of(id)));
  std::vector<std::string> order(architectures.begin(), architectures.end());
  std::mt19937_64 random(options.seed);
  std::shuffle(order.begin(), order.end(), random);
  const std::size_t held_count = (order.size() + 4) / 5;
  const std::set<std::string> held(order.begin(),
                                   order.begin() + static_cast<std::ptrdiff_t>(held_count));
  std::vector<std::size_t> fit_rows, held_rows;
  for (std::size_t i = 0; i < data.rows(); ++i) {
    (held.count(architecture_of(key_of(data.ids[i]))) > 0 ? held_rows : fit_rows).push_back(i);
  }
  std::optional<KernelPassInterval> interval;
  std::map<std::string, std::pair<double, double>> passes;  // key -> measured, predicted
  if (order.size() >= 5 && fit_rows.size() >= 50) {
    const Dataset first_data = subset(data, fit_rows);
    const Predictor first = Predictor::fit(first_data, options, nullptr);
    const Dataset calibration = subset(data, held_rows);
    const auto predicted =
        first.predict(calibration.x.data(), calibration.rows(), calibration.batch.data());
    for (std::size_t i = 0; i < calibration.rows(); ++i) {
      auto& [measured, sum] = passes[key_of(calibration.ids[i])];
      measured += calibration.y[0][i];
      sum += predicted[0][i].value;
    }
  }
  if (passes.size() >= 10) {
    std::vector<double> errors;
    for (const auto& [key, pass] : passes) {
      if (pass.first > 0 && pass.second > 0)
        errors.push_back(std::abs(std::log(pass.first / pass.second)));
    }
    std::sort(errors.begin(), errors.end());
    // Split conformal: the ceil((n + 1) coverage)-th smallest error.
    const auto rank = static_cast<std::size_t>(
        std::ceil((static_cast<double>(errors.size()) + 1) * options.coverage));
    if (!errors.empty()) {
      interval =
          KernelPassInterval{errors[std::min(rank, errors.size()) - 1], errors.size(), held_count};
    }
  }
  Predictor model = Predictor::fit(data, options, report);
  if (interval) {
    model_detail::PredictorFactory::set_kernel_pass_interval(model, *interval);
  } else {
    const std::string note =
        "whole-pass intervals not calibrated (it needs 5 architectures and 10 configurations "
        "held out): a configuration's interval is its kernels' bounds summed, wider";
    if (report != nullptr) report->notes.push_back(note);
    model_detail::PredictorFactory::add_note(model, note);
  }
  return model;
}

std::vector<TargetPrediction> predict_by_kernels(const Predictor& model,
                                                 const std::vector<Config>& configs) {
  if (model.schema() != kKernelSchema) {
    throw Error(ErrorCategory::kUsage, "not a kernel model (its feature schema is " +
                                           model.schema() + ", not " + std::string(kKernelSchema) +
                                           ")");
  }
  // The kernels of the engine that timed the model's rows: carb's CPU engine runs its execution
  // plan's ops, PyTorch one ATen operator per IR layer (its session's kernels()). Timings of
  // carbs before the device columns have no fingerprint: carb's engine was the only one timed.
  const std::string backend = engine_backend(model.device_fingerprint());
  if (!backend.empty() && backend != "cpu" && backend != "torch") {
    throw Error(ErrorCategory::kUsage,
                "a kernel model of a " + backend + " device (" + model.device_name() +
                    "): carb knows the kernels of its CPU engine and of PyTorch's, not of the " +
                    backend + " engine's");
  }
  const engine::KernelEngine kernel_engine = kernel_engine_of(model.device_fingerprint());
  const bool per_layer = kernel_engine == engine::KernelEngine::kTorch;
  // Every configuration's planned kernels as rows of a table of their features, by name.
  CsvTable table;
  table.path = "planned kernels";
  table.header = engine::kernel_feature_names();
  std::vector<std::size_t> owner;  // the configuration of each row
  std::vector<int> batch;
  char text[32];
  for (std::size_t c = 0; c < configs.size(); ++c) {
    const Network network = build_network(configs[c]);
    std::vector<std::vector<int>> kernel_layers;  // each kernel's IR layers, its anchor first
    if (per_layer) {
      for (std::size_t i = 0; i < network.layers.size(); ++i) {
        kernel_layers.push_back({static_cast<int>(i)});
      }
    } else {
      const engine::ExecutionPlan plan = engine::plan_execution(
          network, engine::ResidualMode::kAccumulateInPlace, engine::OpNames::kUnnamed);
      for (const engine::Op& op : plan.ops) kernel_layers.push_back(engine::op_layers(op));
    }
    for (const std::vector<int>& layers : kernel_layers) {
      std::vector<std::string> row;
      for (const double value : engine::kernel_features(network, layers, kernel_engine)) {
        std::snprintf(text, sizeof text, "%.17g", value);
        row.emplace_back(text);
      }
      table.rows.push_back(std::move(row));
      table.lines.push_back(static_cast<int>(table.rows.size()));
      owner.push_back(c);
      batch.push_back(configs[c].batch);
    }
  }
  const std::optional<KernelPassInterval>& interval = model.kernel_pass_interval();
  std::vector<TargetPrediction> sums(configs.size());
  for (TargetPrediction& sum : sums) sum.available = true;
  if (table.rows.empty()) return sums;
  const FeatureRows rows = table_feature_rows(model, table);
  const std::vector<std::vector<TargetPrediction>> kernels =
      model.predict(rows.x.data(), table.rows.size(), batch.data());
  for (std::size_t r = 0; r < owner.size(); ++r) {
    const TargetPrediction& kernel = kernels.front()[r];
    TargetPrediction& sum = sums[owner[r]];
    if (!kernel.available) {
      sum.available = false;
      sum.reason = kernel.reason;
    }
    sum.value += kernel.value;
    sum.low += kernel.low;
    sum.high += kernel.high;
  }
  if (interval) {
    for (TargetPrediction& sum : sums) {
      sum.low = sum.value * std::exp(-interval->half_width);
      sum.high = sum.value * std::exp(interval->half_width);
    }
  }
  return sums;
}

}  // namespace carb
