// The CARB predictor: fitting (targets in log space, the split, each target's ensemble in cascade
// order with out-of-fold upstream predictions, cheap-path intervals, baselines), prediction and
// evaluation. The ensemble of one target is in ensemble.cpp, its priors in priors.cpp, the model
// file in model_io.cpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "carb/error.hpp"
#include "carb/model.hpp"
#include "carb/store.hpp"
#include "ensemble.hpp"
#include "predictor_impl.hpp"
#include "transfer.hpp"

namespace carb {

std::string_view to_string(PriorMode mode) {
  switch (mode) {
    case PriorMode::kNone:
      return "none";
    case PriorMode::kMember:
      return "member";
    case PriorMode::kBase:
      return "base";
    case PriorMode::kAdditive:
      return "additive";
  }
  return "?";
}

std::optional<PriorMode> parse_prior_mode(std::string_view text) {
  for (PriorMode mode :
       {PriorMode::kNone, PriorMode::kMember, PriorMode::kBase, PriorMode::kAdditive}) {
    if (to_string(mode) == text) return mode;
  }
  return std::nullopt;
}

std::string_view to_string(LearnerKind kind) {
  switch (kind) {
    case LearnerKind::kDepthwise:
      return "depthwise";
    case LearnerKind::kLeafwise:
      return "leafwise";
    case LearnerKind::kForest:
      return "forest";
    case LearnerKind::kRidge:
      return "ridge";
  }
  return "?";
}

namespace {

using model_detail::Additive;
using model_detail::blend;
using model_detail::conformal_half_width;
using model_detail::fit_target;
using model_detail::Matrix;
using model_detail::member_predictions;
using model_detail::out_of_fold;
using model_detail::predict_log;
using model_detail::Role;
using model_detail::rows_with;
using model_detail::split_rows;
using model_detail::target_matrix;
using model_detail::TargetFit;
using model_detail::TargetModel;

constexpr std::size_t kMinRows = 40;
// Folds of the out-of-sample predictions a model keeps for transfers (Predictor::out_of_sample)
// of a target no other depends on: two, as each fold refits the target's members. On the AMD
// reference campaign five took the fit from 12.6 s to 55.7 s.
constexpr int kOutOfSampleFolds = 2;

// The additive layer-cost prior's terms of target `t` of `data`: latency and energy of an
// architecture dataset (sums over layers; memory is a peak, not a sum), and a kernel's latency
// (a sum over its MACs and bytes); none otherwise.
Additive time_like_terms(const Dataset& data, std::size_t t) {
  if (data.schema == kKernelSchema) return Additive::kernel_columns_of(data.feature_names);
  if (data.schema == kArchitectureSchema &&
      (data.targets[t].name == "latency" || data.targets[t].name == "energy")) {
    return Additive::columns_of(data.feature_names);
  }
  return {};
}

bool time_like(const Dataset& data, std::size_t t) { return !time_like_terms(data, t).empty(); }

// The part (AdditivePart) an additive prior term of the latency or energy prior belongs to.
AdditivePart additive_part_of(std::string_view name) {
  if (name == "log_torch_native_macs") return AdditivePart::kTorchNativeMacs;
  if (name == "log_bytes_pool" || name == "layers_pool") return AdditivePart::kPool;
  if (name.find("macs_") != std::string_view::npos) return AdditivePart::kMacs;
  if (name.find("bytes_") != std::string_view::npos) return AdditivePart::kBytes;
  return AdditivePart::kLayers;
}

}  // namespace

Predictor::Predictor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Predictor::Predictor(Predictor&&) noexcept = default;
Predictor& Predictor::operator=(Predictor&&) noexcept = default;
Predictor::~Predictor() = default;

const std::string& Predictor::schema() const { return impl_->schema; }
const std::vector<std::string>& Predictor::feature_names() const { return impl_->feature_names; }

const TrainingDomain& Predictor::training_domain() const { return impl_->domain; }
const Predictor::OutOfSample& Predictor::out_of_sample() const { return impl_->out_of_sample; }
const std::vector<TargetInfo>& Predictor::targets() const { return impl_->targets; }
const std::string& Predictor::device_fingerprint() const { return impl_->device_fingerprint; }
const std::string& Predictor::device_name() const { return impl_->device_name; }
const std::map<std::string, std::size_t>& Predictor::device_instances() const {
  return impl_->instances;
}
const DriftCorrection& Predictor::drift() const { return impl_->drift; }
double Predictor::coverage() const { return impl_->coverage; }
const std::optional<KernelPassInterval>& Predictor::kernel_pass_interval() const {
  return impl_->kernel_pass;
}
const FitReport& Predictor::fit_report() const { return impl_->report; }

void Predictor::widen_for_new_family(TargetPrediction& p, std::size_t t) const {
  if (impl_->transfer) {
    impl_->transfer->source->widen_for_new_family(p, t);
    return;
  }
  if (t >= impl_->models.size() || !p.available || !(p.value > 0)) return;
  const TargetModel& model = impl_->models[t];
  const double width = model.new_family_half_width;
  if (!(width > 0)) return;
  const double y = std::log1p(model.scale * p.value);
  p.low = std::min(p.low, std::max(0.0, std::expm1(y - width) / model.scale));
  p.high = std::max(p.high, std::expm1(y + width) / model.scale);
}

std::vector<std::vector<TargetPrediction>> Predictor::predict(
    const float* x, std::size_t rows, const int* batch,
    const std::vector<std::string>* families) const {
  std::vector<bool> new_family;
  if (families != nullptr && families->size() == rows && !impl_->domain.families().empty()) {
    new_family.resize(rows);
    for (std::size_t i = 0; i < rows; ++i) {
      new_family[i] = impl_->domain.new_family((*families)[i]);
    }
  }
  if (impl_->transfer) {
    auto out = impl_->transfer->predict(x, rows, batch, false);
    if (new_family.empty()) return out;
    for (std::size_t t = 0; t < out.size(); ++t) {
      for (std::size_t i = 0; i < rows; ++i) {
        if (new_family[i]) widen_for_new_family(out[t][i], t);
      }
    }
    return out;
  }
  return impl_->with_intervals(impl_->predict_logs(x, rows, batch), rows, false,
                               new_family.empty() ? nullptr : &new_family);
}

std::vector<double> Predictor::new_family_half_widths() const {
  if (impl_->transfer) return impl_->transfer->source->new_family_half_widths();
  std::vector<double> widths;
  for (const model_detail::TargetModel& model : impl_->models) {
    widths.push_back(model.new_family_half_width);
  }
  return widths;
}

std::vector<std::vector<TargetPrediction>> Predictor::predict_cheap(const float* x,
                                                                    std::size_t rows) const {
  if (impl_->transfer) return impl_->transfer->predict(x, rows, nullptr, true);
  return impl_->with_intervals(impl_->predict_cheap_logs(x, rows), rows, true);
}

bool Predictor::transferred() const { return impl_->transfer != nullptr; }

const Predictor* Predictor::transfer_source() const {
  return impl_->transfer ? impl_->transfer->source.get() : nullptr;
}

std::vector<AdditiveParts> Predictor::additive_parts(const float* x, std::size_t rows,
                                                     std::size_t t) const {
  if (impl_->transfer) return impl_->transfer->source->additive_parts(x, rows, t);
  std::vector<AdditiveParts> parts;
  if (t >= impl_->models.size() || !impl_->models[t].available) return parts;
  const TargetModel& model = impl_->models[t];
  // Memory's additive prior (PriorMode::kAdditive) has no layer terms to split.
  if (model.additive.empty() || model.info.name == "memory") return parts;
  const std::vector<std::string>& names = impl_->feature_names;
  // Absent columns read as past the end.
  const auto column = [&](std::string_view name) {
    return feature_column(names, name).value_or(names.size());
  };
  const std::size_t flops = column("log_flops");
  const std::size_t fc_macs = column("log_macs_fc");
  const std::size_t native = column("log_torch_native_macs");
  const std::size_t activation = column("log_activation_bytes");
  const std::size_t cols = names.size();
  parts.resize(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    const float* row = x + i * cols;
    AdditiveParts part{};
    part[static_cast<std::size_t>(AdditivePart::kIntercept)] =
        model.additive.intercept / model.scale;
    for (std::size_t k = 0; k < model.additive.columns.size(); ++k) {
      const std::string& name = names[model.additive.columns[k]];
      const double term = model.additive.coef[k] * model.additive.input(k, row);
      part[static_cast<std::size_t>(additive_part_of(name))] += term / model.scale;
    }
    // The MAC terms' share of the MACs PyTorch runs off oneDNN moves to their part.
    if (native < cols && flops < cols) {
      const double total_macs = std::expm1(static_cast<double>(row[flops])) / 2;
      const double share =
          total_macs > 0
              ? std::clamp(std::expm1(static_cast<double>(row[native])) / total_macs, 0.0, 1.0)
              : 0.0;
      const double moved = part[static_cast<std::size_t>(AdditivePart::kMacs)] * share;
      part[static_cast<std::size_t>(AdditivePart::kMacs)] -= moved;
      part[static_cast<std::size_t>(AdditivePart::kTorchNativeMacs)] += moved;
    }
    if (activation < cols) {
      part[static_cast<std::size_t>(AdditivePart::kActivationBytes)] =
          std::expm1(static_cast<double>(row[activation])) * kActivationBytesMs;
    }
    if (fc_macs < cols) {
      part[static_cast<std::size_t>(AdditivePart::kFcMacs)] =
          std::expm1(static_cast<double>(row[fc_macs])) * kFcMacMs;
    }
    parts[i] = part;
  }
  return parts;
}

std::vector<std::vector<std::pair<std::string, std::vector<double>>>> Predictor::predict_members(
    const float* x, std::size_t rows, const int* batch) const {
  if (impl_->transfer) return impl_->transfer->members(x, rows, batch);
  const auto logs = impl_->predict_logs(x, rows, batch);
  std::vector<std::vector<std::pair<std::string, std::vector<double>>>> out(impl_->models.size());
  for (std::size_t t = 0; t < impl_->models.size(); ++t) {
    const TargetModel& model = impl_->models[t];
    if (!model.available) continue;
    const Matrix m = target_matrix(model, x, rows, impl_->feature_names.size(), logs);
    const auto members = member_predictions(model, m);
    for (std::size_t k = 0; k < members.size(); ++k) {
      out[t].emplace_back(std::string(to_string(model.members[k].kind)), members[k]);
    }
    if (model.prior_mode == PriorMode::kBase) {
      std::vector<double> prior(rows);
      for (std::size_t i = 0; i < rows; ++i) prior[i] = model.prior.predict(m.row(i));
      out[t].emplace_back("ridge-prior", std::move(prior));
    }
    if (!model.additive.empty()) {
      std::vector<double> additive(rows);
      for (std::size_t i = 0; i < rows; ++i) {
        additive[i] = model.additive.log_prediction(x + i * impl_->feature_names.size());
      }
      out[t].emplace_back("additive-prior", std::move(additive));
    }
    if (!model.corrector.empty()) out[t].emplace_back("carb-no-corrector", blend(model, members));
    for (auto& [name, values] : out[t]) {
      for (double& value : values) value = std::max(0.0, std::expm1(value) / model.scale);
    }
  }
  return out;
}

Predictor Predictor::fit(const Dataset& data, const FitOptions& options, FitReport* report_out) {
  const auto started = std::chrono::steady_clock::now();
  if (options.coverage <= 0 || options.coverage >= 1) {
    throw Error(ErrorCategory::kUsage, "coverage must be between 0 and 1 (exclusive)", "coverage");
  }
  auto impl = std::make_unique<Impl>();
  impl->schema = data.schema;
  impl->feature_names = data.feature_names;
  impl->targets = data.targets;
  model_detail::check_hold_out(data, options);
  if (options.hold_out.empty()) {
    impl->domain = TrainingDomain::of(data);
  } else {  // the held-out families lie outside what the model saw
    std::vector<std::size_t> kept;
    for (std::size_t i = 0; i < data.rows(); ++i) {
      if (!model_detail::held_out(data, options, i)) kept.push_back(i);
    }
    impl->domain = TrainingDomain::of(subset(data, kept));
  }
  impl->device_fingerprint = data.device_fingerprint;
  impl->device_name = data.device_name;
  impl->instances = data.instances;
  if (data.drift.applied) impl->drift = data.drift;
  impl->coverage = options.coverage;
  impl->options = options;
  FitReport& report = impl->report;

  // Targets in log1p(scale x value) space; bad values are input errors.
  std::vector<std::vector<double>> y(data.targets.size());
  std::vector<double> scales(data.targets.size(), 1.0);
  for (std::size_t t = 0; t < data.targets.size(); ++t) {
    for (std::size_t i = 0; i < data.rows(); ++i) {
      const double value = data.y[t][i];
      if (!std::isnan(value) && (value < 0 || !std::isfinite(value))) {
        throw Error(ErrorCategory::kInput, data.ids[i] + ": target " + data.targets[t].name +
                                               " is " + std::to_string(value) +
                                               "; measurements must be finite and >= 0");
      }
    }
    double smallest = std::numeric_limits<double>::infinity();
    for (double value : data.y[t]) {
      if (!std::isnan(value) && value > 0) smallest = std::min(smallest, value);
    }
    scales[t] = std::isfinite(smallest) && smallest < 10
                    ? std::pow(10.0, std::ceil(std::log10(10 / smallest)))
                    : 1.0;
    for (double value : data.y[t]) {
      y[t].push_back(std::isnan(value) ? value : std::log1p(scales[t] * value));
    }
  }
  const std::vector<Role> roles = split_rows(data, options);
  for (std::size_t i = 0; i < roles.size(); ++i) {
    if (roles[i] != Role::kTest) report.fitted_ids.push_back(data.ids[i]);
  }
  for (Role role : roles) {
    (role == Role::kTrain         ? report.train_rows
     : role == Role::kValidation  ? report.validation_rows
     : role == Role::kCalibration ? report.calibration_rows
                                  : report.test_rows)++;
  }

  std::vector<std::vector<double>> upstream_logs(data.targets.size());  // for downstream features
  if (data.schema == kArchitectureSchema) {
    impl->out_of_sample.ids = data.ids;
    impl->out_of_sample.values.resize(data.targets.size());
  }
  bool any_available = false;
  for (std::size_t t = 0; t < data.targets.size(); ++t) {
    TargetModel unavailable;
    unavailable.info = data.targets[t];
    const std::size_t measured = static_cast<std::size_t>(
        std::count_if(y[t].begin(), y[t].end(), [](double v) { return !std::isnan(v); }));
    if (measured == 0) {
      unavailable.reason = data.missing_reason[t].empty()
                               ? "no " + data.targets[t].name + " values in the data"
                               : data.missing_reason[t];
      report.notes.push_back(data.targets[t].name + ": unavailable, " + unavailable.reason);
      impl->models.push_back(std::move(unavailable));
      continue;
    }
    const auto counts = [&](Role role) { return rows_with(roles, role, y[t]).size(); };
    if (measured < kMinRows || counts(Role::kTrain) < 10 || counts(Role::kValidation) < 2 ||
        counts(Role::kCalibration) < 2 || counts(Role::kTest) < 2) {
      throw Error(ErrorCategory::kInput,
                  "too few rows to split: " + std::to_string(measured) + " measured rows of " +
                      data.targets[t].name + ", need at least " + std::to_string(kMinRows) +
                      " (70% train, 7.5% validation, 7.5% calibration, 15% test)");
    }
    any_available = true;
    // Upstream targets that were fitted feed this one (the cascade).
    std::vector<std::size_t> upstream;
    if (options.cascade) {
      for (std::size_t u = 0; u < t; ++u) {
        if (impl->models[u].available) upstream.push_back(u);
      }
    }
    TargetModel shape;
    shape.upstream = upstream;
    if (data.schema == kArchitectureSchema && !time_like(data, t)) {
      // Memory is a peak, not a sum over layers: it keeps the whole-network features.
      for (std::size_t j = 0; j < data.cols(); ++j) {
        if (!is_layer_feature(data.feature_names[j])) shape.columns.push_back(j);
      }
    }
    shape.additive = time_like_terms(data, t);
    if (shape.additive.empty() && options.prior == PriorMode::kAdditive &&
        data.schema == kArchitectureSchema) {
      shape.additive = Additive::memory_columns_of(data.feature_names);
    }
    if (!shape.additive.empty()) {
      std::vector<double> linear;
      for (double value : data.y[t]) linear.push_back(scales[t] * value);
      shape.additive.fit(data.x.data(), data.cols(), rows_with(roles, Role::kTrain, y[t]), linear);
    }
    const Matrix m = target_matrix(shape, data.x.data(), data.rows(), data.cols(), upstream_logs);
    TargetFit fit = fit_target(data.targets[t], m, y[t], roles, data, options, options.corrector,
                               !shape.additive.empty());
    fit.model.upstream = upstream;
    fit.model.additive = std::move(shape.additive);
    fit.model.columns = std::move(shape.columns);
    fit.model.scale = scales[t];
    report.notes.insert(report.notes.end(), fit.notes.begin(), fit.notes.end());

    // What downstream targets see: out-of-fold predictions on training rows, the model's own
    // predictions elsewhere.
    // The same are the out-of-sample predictions a transfer from this model calibrates with.
    const bool downstream = options.cascade && t + 1 < data.targets.size();
    const bool keep = data.schema == kArchitectureSchema;
    if (downstream || keep) {
      std::vector<double> logs = predict_log(fit.model, m, data.batch.data());
      FitOptions folds = options;
      if (!downstream) folds.cascade_folds = kOutOfSampleFolds;
      const std::vector<double> oof = out_of_fold(fit.model, m, y[t], roles, data, folds);
      for (std::size_t i = 0; i < logs.size(); ++i) {
        if (roles[i] == Role::kTrain && !std::isnan(oof[i])) logs[i] = oof[i];
      }
      if (keep) {
        std::vector<double>& values = impl->out_of_sample.values[t];
        for (double log : logs) {  // as the model file keeps them
          values.push_back(static_cast<float>(std::max(0.0, std::expm1(log) / scales[t])));
        }
      }
      if (downstream) upstream_logs[t] = std::move(logs);
    }
    impl->models.push_back(std::move(fit.model));
  }
  if (!any_available) {
    throw Error(ErrorCategory::kInput, "no target has any measured value: nothing to fit");
  }

  // Stage 1's cheap predictions get their own intervals, calibrated the same way.
  const auto cheap = impl->predict_cheap_logs(data.x.data(), data.rows());
  for (std::size_t t = 0; t < impl->models.size(); ++t) {
    if (!impl->models[t].available) continue;
    std::vector<double> measured, predicted;
    for (std::size_t row : rows_with(roles, Role::kCalibration, y[t])) {
      measured.push_back(y[t][row]);
      predicted.push_back(cheap[t][row]);
    }
    impl->models[t].cheap_half_width = conformal_half_width(measured, predicted, options.coverage);
  }
  // A family the model never saw: intervals from leave-one-family-out fits of the additive base
  // on the fitted rows (docs/model.md, "Training domain").
  if (data.family.size() == data.rows()) {
    for (std::size_t t = 0; t < impl->models.size(); ++t) {
      TargetModel& model = impl->models[t];
      if (!model.available || model.additive.empty()) continue;
      std::vector<std::size_t> fitted;
      for (std::size_t i = 0; i < data.rows(); ++i) {
        if (roles[i] != Role::kTest && !std::isnan(y[t][i])) fitted.push_back(i);
      }
      std::vector<double> linear;
      for (double value : data.y[t]) linear.push_back(scales[t] * value);
      const double width =
          model_detail::family_half_width(model.additive, data.x.data(), data.cols(), fitted,
                                          data.family, y[t], linear, options.coverage);
      if (width > 0) model.new_family_half_width = std::max(width, model.half_width);
    }
  }

  Predictor predictor(std::move(impl));
  if (options.baselines) {
    // Scores on the test split, with the baselines fitted on the training split.
    Impl& self = *predictor.impl_;
    std::vector<std::size_t> test;
    for (std::size_t i = 0; i < roles.size(); ++i) {
      if (roles[i] == Role::kTest) test.push_back(i);
    }
    const Dataset test_data = subset(data, test);
    report.scores = evaluate(predictor, test_data);

    const std::optional<std::size_t> flops = feature_column(data.feature_names, "log_flops");
    for (std::size_t t = 0; t < data.targets.size(); ++t) {
      if (!self.models[t].available) continue;
      const auto train = rows_with(roles, Role::kTrain, y[t]);
      std::vector<std::size_t> scored;
      for (std::size_t i : test) {
        if (!std::isnan(y[t][i])) scored.push_back(i);
      }
      std::vector<double> measured;
      measured.reserve(scored.size());
      for (std::size_t i : scored) measured.push_back(data.y[t][i]);
      // FLOPs alone, log-log least squares.
      if (flops) {
        const std::size_t column = *flops;
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        for (std::size_t i : train) {
          const double fx = data.row(i)[column];
          sx += fx;
          sy += y[t][i];
          sxx += fx * fx;
          sxy += fx * y[t][i];
        }
        const double n = static_cast<double>(train.size());
        const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
        const double intercept = (sy - slope * sx) / n;
        std::vector<double> predicted;
        predicted.reserve(scored.size());
        for (std::size_t i : scored) {
          predicted.push_back(std::expm1(intercept + slope * data.row(i)[column]) / scales[t]);
        }
        report.scores.push_back(
            {"flops-loglinear", data.targets[t].name, score(measured, predicted)});
      }
      // Energy from measured latency times the mean power of the training rows.
      if (data.targets[t].name == "energy" && t + 1 < data.targets.size()) {
        const std::size_t latency = data.targets.size() - 1;
        double power = 0;
        std::size_t count = 0;
        for (std::size_t i : train) {
          if (std::isnan(data.y[latency][i])) continue;
          power += data.y[t][i] / (data.y[latency][i] / 1e3);
          ++count;
        }
        power /= static_cast<double>(std::max<std::size_t>(count, 1));
        std::vector<double> proxy_measured, proxy;
        for (std::size_t i : scored) {
          if (std::isnan(data.y[latency][i])) continue;
          proxy_measured.push_back(data.y[t][i]);
          proxy.push_back(power * data.y[latency][i] / 1e3);
        }
        report.scores.push_back(
            {"energy-proxy", data.targets[t].name, score(proxy_measured, proxy)});
      }
    }
    // The specialist alone: no cascade, no corrector.
    if (options.cascade || options.corrector) {
      FitOptions plain = options;
      plain.cascade = false;
      plain.corrector = false;
      plain.baselines = false;
      const Predictor specialist = Predictor::fit(data, plain, nullptr);
      for (const MethodScores& scores : evaluate(specialist, test_data)) {
        if (scores.method == "carb") {
          report.scores.push_back({"specialist", scores.target, scores.metrics});
        }
      }
    }
  }
  report.fit_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (report_out != nullptr) *report_out = report;
  return predictor;
}

std::vector<MethodScores> evaluate(const Predictor& predictor, const Dataset& data,
                                   const EngineMemoryPlanner* planner) {
  if (data.schema != predictor.schema() || data.feature_names != predictor.feature_names()) {
    throw Error(ErrorCategory::kInput, "the data's feature schema (" + data.schema +
                                           ") differs from the model's (" + predictor.schema() +
                                           ")");
  }
  auto predictions = predictor.predict(data.x.data(), data.rows(), data.batch.data(),
                                       data.family.empty() ? nullptr : &data.family);
  auto members = predictor.predict_members(data.x.data(), data.rows(), data.batch.data());
  if (planner != nullptr) {
    // carb's memory is the engine's plan; the model's own prediction stays beside it.
    std::vector<Config> configs;
    for (const std::string& id : data.ids) configs.push_back(parse_key(id));
    for (std::size_t t = 0; t < predictor.targets().size(); ++t) {
      if (predictor.targets()[t].name != "memory" || predictions[t].empty() ||
          !predictions[t][0].available) {
        continue;
      }
      std::vector<double> model;
      for (const TargetPrediction& p : predictions[t]) model.push_back(p.value);
      members[t].insert(members[t].begin(), {"memory-model", std::move(model)});
    }
    planner->apply(configs, predictions);
  }
  std::vector<MethodScores> out;
  for (std::size_t t = 0; t < predictor.targets().size(); ++t) {
    const auto& target = predictor.targets()[t];
    const auto column =
        std::find_if(data.targets.begin(), data.targets.end(),
                     [&](const TargetInfo& info) { return info.name == target.name; });
    if (column == data.targets.end() || predictions[t].empty() || !predictions[t][0].available) {
      continue;
    }
    const auto& y = data.y[static_cast<std::size_t>(column - data.targets.begin())];
    std::vector<std::size_t> rows;
    for (std::size_t i = 0; i < data.rows(); ++i) {
      if (!std::isnan(y[i])) rows.push_back(i);
    }
    if (rows.empty()) continue;
    std::vector<double> measured, value, low, high;
    for (std::size_t i : rows) {
      measured.push_back(y[i]);
      value.push_back(predictions[t][i].value);
      low.push_back(predictions[t][i].low);
      high.push_back(predictions[t][i].high);
    }
    out.push_back({"carb", target.name, score(measured, value, &low, &high)});
    for (const auto& [name, logs] : members[t]) {
      std::vector<double> values;
      values.reserve(rows.size());
      for (std::size_t i : rows) values.push_back(logs[i]);
      out.push_back({name, target.name, score(measured, values)});
    }
  }
  return out;
}

Dataset evaluation_dataset(const Predictor& model, const Store& store, std::string_view device,
                           DriftMode drift, std::string_view instance) {
  if (drift == DriftMode::kAuto && !model.drift().applied) drift = DriftMode::kOff;
  if (device.empty() && store.find_device(model.device_fingerprint()).has_value())
    device = model.device_fingerprint();
  // The reference is the probe's latency on the model's device: with it, another device whose
  // probe ran 40x slower would have every latency divided by 40.
  const std::optional<double> reference =
      model.drift().applied && device == model.device_fingerprint()
          ? std::optional<double>(model.drift().reference_ms)
          : std::nullopt;
  return dataset_from_store(store, device, drift, reference, instance);
}

}  // namespace carb
