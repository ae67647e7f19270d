// The model file: a Predictor as JSON and back (format versions 1 and 2), saved atomically.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "carb/error.hpp"
#include "carb/model.hpp"
#include "carb/version.hpp"
#include "ensemble.hpp"
#include "model_file_checks.hpp"
#include "predictor_impl.hpp"
#include "priors.hpp"
#include "transfer.hpp"

namespace carb {

using nlohmann::json;

namespace {

using model_detail::integer_of;

// Version 1: a model fitted on one device's data. Version 2: a transferred model (transfer_fit),
// which embeds its source model; plain models are still written as version 1, so older carbs
// read them.
constexpr int kModelFormat = 1;
constexpr int kTransferModelFormat = 2;

std::optional<LearnerKind> parse_learner(std::string_view text) {
  for (LearnerKind kind : {LearnerKind::kDepthwise, LearnerKind::kLeafwise, LearnerKind::kForest,
                           LearnerKind::kRidge}) {
    if (to_string(kind) == text) return kind;
  }
  return std::nullopt;
}

// A model's out-of-sample predictions (Predictor::out_of_sample), as floats: null where it has
// none.
json out_of_sample_json(const Predictor::OutOfSample& out_of_sample) {
  if (out_of_sample.ids.empty()) return nullptr;
  json values = json::array();
  for (const std::vector<double>& target : out_of_sample.values) {
    json column = json::array();
    for (double value : target) column.push_back(static_cast<float>(value));
    values.push_back(std::move(column));
  }
  return {{"ids", out_of_sample.ids}, {"values", std::move(values)}};
}

json metrics_json(const Metrics& metrics) {
  json j = {{"n", metrics.n},
            {"r2", metrics.r2},
            {"mae", metrics.mae},
            {"mape", metrics.mape},
            {"within10", metrics.within10},
            {"spearman", metrics.spearman},
            {"slope", metrics.slope}};
  j["coverage"] = metrics.coverage ? json(*metrics.coverage) : json(nullptr);
  j["mean_width"] = metrics.mean_width ? json(*metrics.mean_width) : json(nullptr);
  return j;
}

Metrics metrics_from_json(const json& j) {
  Metrics metrics;
  j.at("n").get_to(metrics.n);
  j.at("r2").get_to(metrics.r2);
  j.at("mae").get_to(metrics.mae);
  j.at("mape").get_to(metrics.mape);
  j.at("within10").get_to(metrics.within10);
  j.at("spearman").get_to(metrics.spearman);
  j.at("slope").get_to(metrics.slope);
  if (!j.at("coverage").is_null()) metrics.coverage = j.at("coverage").get<double>();
  if (!j.at("mean_width").is_null()) metrics.mean_width = j.at("mean_width").get<double>();
  return metrics;
}

void read_evaluation(const json& evaluation, FitReport& report) {
  const json& split = evaluation.at("split");
  report.train_rows = integer_of<std::size_t>(split.at("train"));
  report.validation_rows = integer_of<std::size_t>(split.at("validation"));
  report.calibration_rows = integer_of<std::size_t>(split.at("calibration"));
  report.test_rows = integer_of<std::size_t>(split.at("test"));
  for (const json& s : evaluation.at("scores")) {
    report.scores.push_back({s.at("method").get<std::string>(), s.at("target").get<std::string>(),
                             metrics_from_json(s.at("metrics"))});
  }
  evaluation.at("notes").get_to(report.notes);
  report.fit_seconds = evaluation.at("fit_seconds").get<double>();
  if (evaluation.contains("fitted_ids")) evaluation.at("fitted_ids").get_to(report.fitted_ids);
}

}  // namespace

std::string Predictor::to_json_text() const {
  return model_detail::PredictorFactory::to_json(*this).dump();  // compact: a third of the
                                                                 // indented size, loads faster
}

namespace model_detail {

json PredictorFactory::to_json(const Predictor& predictor) {
  const Predictor::Impl& self = *predictor.impl_;
  json scores = json::array();
  for (const MethodScores& s : self.report.scores) {
    scores.push_back(
        {{"method", s.method}, {"target", s.target}, {"metrics", metrics_json(s.metrics)}});
  }
  json file = {
      {"format", "carb-model"},
      {"format_version", self.transfer ? kTransferModelFormat : kModelFormat},
      {"carb_version", kVersion},
      {"git_commit", kGitCommit},
      {"device",
       {{"fingerprint", self.device_fingerprint},
        {"name", self.device_name},
        {"instances", self.instances}}},
      {"drift", self.drift.applied ? json{{"probe", self.drift.probe_key},
                                          {"reference_ms", self.drift.reference_ms},
                                          {"probes", self.drift.probes},
                                          {"min_factor", self.drift.min_factor},
                                          {"max_factor", self.drift.max_factor}}
                                   : json(nullptr)},
      {"feature_schema", {{"name", self.schema}, {"features", self.feature_names}}},
      {"training_domain", self.domain.to_json()},
      {"out_of_sample", out_of_sample_json(self.out_of_sample)},
      {"kernel_pass_interval", self.kernel_pass
                                   ? json{{"log_half_width", self.kernel_pass->half_width},
                                          {"configurations", self.kernel_pass->configurations},
                                          {"architectures", self.kernel_pass->architectures}}
                                   : json(nullptr)},
      {"evaluation",
       {{"split",
         {{"train", self.report.train_rows},
          {"validation", self.report.validation_rows},
          {"calibration", self.report.calibration_rows},
          {"test", self.report.test_rows}}},
        {"scores", scores},
        {"notes", self.report.notes},
        {"fit_seconds", self.report.fit_seconds},
        {"fitted_ids", self.report.fitted_ids}}},
  };
  if (self.transfer) {
    file["transfer"] = self.transfer->to_json();
    file["transfer"]["coverage"] = self.coverage;
    return file;
  }
  file["options"] = {{"seed", self.options.seed},
                     {"cascade", self.options.cascade},
                     {"corrector", self.options.corrector},
                     {"prior", to_string(self.options.prior)},
                     {"learning_rate", self.options.learning_rate},
                     {"early_stopping_rounds", self.options.early_stopping_rounds},
                     {"forest_trees", self.options.forest_trees},
                     {"leave_low_batch_out", self.options.leave_low_batch_out}};
  if (!self.options.hold_out.empty()) file["options"]["hold_out"] = self.options.hold_out;
  json targets = json::array();
  for (const TargetModel& model : self.models) {
    json target = {{"name", model.info.name},
                   {"unit", model.info.unit},
                   {"source", model.info.source},
                   {"available", model.available}};
    if (!model.available) {
      target["reason"] = model.reason;
      targets.push_back(std::move(target));
      continue;
    }
    json upstream = json::array();
    for (std::size_t u : model.upstream) upstream.push_back(self.models[u].info.name);
    target["cascade_inputs"] = upstream;
    target["scale"] = model.scale;
    target["prior_mode"] = to_string(model.prior_mode);
    target["prior"] = model.prior_mode == PriorMode::kBase ? model.prior.to_json() : json(nullptr);
    target["additive_prior"] =
        model.additive.empty() ? json(nullptr) : model.additive.to_json(self.feature_names);
    if (!model.columns.empty()) {
      json columns = json::array();
      for (std::size_t j : model.columns) columns.push_back(self.feature_names[j]);
      target["features"] = std::move(columns);
    }
    json members = json::array();
    for (const Member& member : model.members) {
      json entry = {{"kind", to_string(member.kind)}, {"weight", member.weight}};
      if (member.kind == LearnerKind::kRidge) {
        entry["ridge"] = member.ridge.to_json();
      } else {
        entry["rounds"] = member.booster.rounds();
        entry["xgboost"] = json::parse(member.booster.to_json());
      }
      members.push_back(std::move(entry));
    }
    target["members"] = std::move(members);
    target["corrector"] = model.corrector.empty()
                              ? json(nullptr)
                              : json{{"max_batch", kLowBatch},
                                     {"damping", kDamping},
                                     {"xgboost", json::parse(model.corrector.to_json())}};
    target["interval"] = {
        {"coverage", self.coverage},
        {"log1p_half_width",
         std::isfinite(model.half_width) ? json(model.half_width) : json(nullptr)},
        {"calibration_rows", model.calibration_rows},
        {"cheap_log1p_half_width",
         std::isfinite(model.cheap_half_width) ? json(model.cheap_half_width) : json(nullptr)}};
    if (model.new_family_half_width > 0) {
      target["interval"]["new_family_log1p_half_width"] = std::isfinite(model.new_family_half_width)
                                                              ? json(model.new_family_half_width)
                                                              : json(nullptr);
    }
    targets.push_back(std::move(target));
  }
  file["targets"] = std::move(targets);
  return file;
}

}  // namespace model_detail

void Predictor::save(const std::string& path) const {
  const std::string text = to_json_text();
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorCategory::kInput, path + ": cannot write the model file");
    out << text << '\n';
    out.close();
    if (!out) throw Error(ErrorCategory::kRuntime, path + ": writing the model file failed");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw Error(ErrorCategory::kRuntime, path + ": cannot move the model file into place");
  }
}

Predictor Predictor::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCategory::kInput, path + ": cannot open the model file");
  std::ostringstream text;
  text << in.rdbuf();
  return from_json_text(text.str(), path);
}

Predictor Predictor::from_json_text(std::string_view text, const std::string& origin) {
  json file;
  try {
    file = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(ErrorCategory::kInput, origin + ": not a carb model file (truncated or not JSON: " +
                                           "byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception& e) {
    // Valid JSON syntax that nlohmann cannot hold, e.g. a number beyond a double's range.
    throw Error(ErrorCategory::kInput, origin + ": not a carb model file (" + e.what() + ")");
  }
  return model_detail::PredictorFactory::from_json(file, origin);
}

namespace model_detail {

Predictor PredictorFactory::transferred(std::shared_ptr<const TransferLayer> layer,
                                        const Dataset& data, double coverage, FitReport report) {
  auto impl = std::make_unique<Predictor::Impl>();
  const Predictor& source = *layer->source;
  impl->schema = source.schema();
  impl->feature_names = source.feature_names();
  impl->targets = source.targets();
  // The transfer's rows join the source's domain: a family calibrated from a few of its own
  // measurements is no longer new to the model.
  impl->domain = source.training_domain().extended(data);
  impl->device_fingerprint = data.device_fingerprint;
  impl->device_name = data.device_name;
  impl->instances = data.instances;
  if (data.drift.applied) impl->drift = data.drift;
  impl->coverage = coverage;
  impl->report = std::move(report);
  impl->transfer = std::move(layer);
  return Predictor(std::move(impl));
}

void PredictorFactory::set_kernel_pass_interval(Predictor& model,
                                                const KernelPassInterval& interval) {
  model.impl_->kernel_pass = interval;
}

void PredictorFactory::add_note(Predictor& model, std::string note) {
  model.impl_->report.notes.push_back(std::move(note));
}

Predictor PredictorFactory::from_json(const json& file, const std::string& origin) {
  if (!file.is_object() || file.value("format", "") != "carb-model") {
    throw Error(ErrorCategory::kInput,
                origin + ": not a carb model file (no \"format\": \"carb-model\")");
  }
  try {
    const int version = integer_of<int>(file.at("format_version"));
    if (version > kTransferModelFormat) {
      throw Error(ErrorCategory::kInput, origin + ": model format " + std::to_string(version) +
                                             " is newer than this carb (" + std::string(kVersion) +
                                             ") reads (" + std::to_string(kTransferModelFormat) +
                                             "); use a newer carb or refit");
    }
    auto impl = std::make_unique<Predictor::Impl>();
    impl->schema = file.at("feature_schema").at("name").get<std::string>();
    file.at("feature_schema").at("features").get_to(impl->feature_names);
    if (impl->schema != kArchitectureSchema && impl->schema.rfind("carb-ir-", 0) == 0) {
      throw Error(ErrorCategory::kInput,
                  origin + ": fitted on feature schema " + impl->schema + ", this carb's is " +
                      std::string(kArchitectureSchema) + "; refit the model");
    }
    if (impl->schema == kArchitectureSchema &&
        impl->feature_names != architecture_feature_names()) {
      throw Error(ErrorCategory::kInput, origin + ": its " + std::string(kArchitectureSchema) +
                                             " feature list differs from this carb's; refit the "
                                             "model");
    }
    if (const auto domain = file.find("training_domain"); domain != file.end()) {
      impl->domain = TrainingDomain::from_json(*domain, impl->feature_names, origin);
    }
    // Absent from model files before carb kept them; null where the model has none.
    if (const auto oos = file.find("out_of_sample"); oos != file.end() && !oos->is_null()) {
      oos->at("ids").get_to(impl->out_of_sample.ids);
      for (const json& values : oos->at("values")) {
        std::vector<double>& target = impl->out_of_sample.values.emplace_back();
        for (const json& value : values) target.push_back(value.get<double>());
        if (!target.empty() && target.size() != impl->out_of_sample.ids.size()) {
          throw Error(ErrorCategory::kInput, origin + ": its out-of-sample predictions are " +
                                                 std::to_string(target.size()) + " for " +
                                                 std::to_string(impl->out_of_sample.ids.size()) +
                                                 " configurations");
        }
      }
    }
    if (impl->schema != kArchitectureSchema && impl->schema != "table" &&
        impl->schema != kKernelSchema) {
      throw Error(ErrorCategory::kInput,
                  origin + ": unknown feature schema '" + impl->schema + "'");
    }
    file.at("device").at("fingerprint").get_to(impl->device_fingerprint);
    file.at("device").at("name").get_to(impl->device_name);
    // Absent from model files before carb recorded host instances.
    if (const auto instances = file.at("device").find("instances");
        instances != file.at("device").end()) {
      instances->get_to(impl->instances);
    }
    // Absent from model files before carb recorded drift corrections, null when none applied.
    if (const auto drift = file.find("drift"); drift != file.end() && !drift->is_null()) {
      impl->drift.applied = true;
      drift->at("probe").get_to(impl->drift.probe_key);
      drift->at("reference_ms").get_to(impl->drift.reference_ms);
      drift->at("probes").get_to(impl->drift.probes);
      drift->at("min_factor").get_to(impl->drift.min_factor);
      drift->at("max_factor").get_to(impl->drift.max_factor);
      if (!(impl->drift.reference_ms > 0) || !std::isfinite(impl->drift.reference_ms)) {
        throw Error(ErrorCategory::kInput,
                    origin + ": its drift correction's reference latency is not positive");
      }
    }
    if (const auto transfer = file.find("transfer"); transfer != file.end()) {
      if (version < kTransferModelFormat) {
        throw std::invalid_argument("a transfer in a model of format " + std::to_string(version));
      }
      impl->transfer = TransferLayer::from_json(*transfer, origin);
      impl->coverage = transfer->at("coverage").get<double>();
      impl->targets = impl->transfer->source->targets();
      if (impl->transfer->source->feature_names() != impl->feature_names) {
        throw std::invalid_argument("transfer: the source's features differ from the model's");
      }
      read_evaluation(file.at("evaluation"), impl->report);
      return Predictor(std::move(impl));
    }
    const json& options = file.at("options");
    impl->options.seed = integer_of<std::uint64_t>(options.at("seed"));
    impl->options.cascade = options.at("cascade").get<bool>();
    impl->options.corrector = options.at("corrector").get<bool>();
    impl->options.prior =
        parse_prior_mode(options.at("prior").get<std::string>()).value_or(PriorMode::kNone);
    impl->options.learning_rate = options.at("learning_rate").get<double>();
    impl->options.early_stopping_rounds = integer_of<int>(options.at("early_stopping_rounds"));
    impl->options.forest_trees = integer_of<int>(options.at("forest_trees"));
    impl->options.leave_low_batch_out = options.at("leave_low_batch_out").get<bool>();
    if (options.contains("hold_out")) {
      impl->options.hold_out = options.at("hold_out").get<std::vector<std::string>>();
    }
    const std::size_t width = impl->feature_names.size();
    for (const json& target : file.at("targets")) {
      TargetModel model;
      model.info = {target.at("name").get<std::string>(), target.at("unit").get<std::string>(),
                    target.at("source").get<std::string>()};
      model.available = target.at("available").get<bool>();
      impl->targets.push_back(model.info);
      if (!model.available) {
        model.reason = target.at("reason").get<std::string>();
        impl->models.push_back(std::move(model));
        continue;
      }
      for (const json& name : target.at("cascade_inputs")) {
        const auto found = std::find_if(impl->models.begin(), impl->models.end(),
                                        [&](const TargetModel& m) { return m.info.name == name; });
        if (found == impl->models.end() || !found->available) {
          throw std::invalid_argument("cascade input " + name.dump() + " is not an earlier target");
        }
        model.upstream.push_back(static_cast<std::size_t>(found - impl->models.begin()));
      }
      if (const auto additive = target.find("additive_prior");
          additive != target.end() && !additive->is_null()) {
        model.additive = Additive::from_json(*additive, impl->feature_names);
      }
      if (const auto columns = target.find("features"); columns != target.end()) {
        for (const json& name : *columns) {
          const auto column = feature_column(impl->feature_names, name.get<std::string>());
          if (!column) {
            throw std::invalid_argument("target feature " + name.dump() + " is not a feature");
          }
          model.columns.push_back(*column);
        }
      }
      const std::size_t cols = (model.columns.empty() ? width : model.columns.size()) +
                               model.upstream.size() + (model.additive.empty() ? 0 : 1);
      model.scale = target.at("scale").get<double>();
      if (!(model.scale > 0)) throw std::invalid_argument("scale must be positive");
      model.prior_mode =
          parse_prior_mode(target.at("prior_mode").get<std::string>()).value_or(PriorMode::kNone);
      if (model.prior_mode == PriorMode::kBase) {
        model.prior = Ridge::from_json(target.at("prior"));
        if (model.prior.coef.size() != cols)
          throw std::invalid_argument("prior has the wrong width");
      }
      for (const json& entry : target.at("members")) {
        const auto kind = parse_learner(entry.at("kind").get<std::string>());
        if (!kind) throw std::invalid_argument("unknown member kind " + entry.at("kind").dump());
        Member member{*kind, entry.at("weight").get<double>(), {}, {}};
        if (*kind == LearnerKind::kRidge) {
          member.ridge = Ridge::from_json(entry.at("ridge"));
          if (member.ridge.coef.size() != cols)
            throw std::invalid_argument("ridge has the wrong width");
        } else {
          member.booster = load_booster(entry.at("xgboost"), cols);
        }
        model.members.push_back(std::move(member));
      }
      if (!target.at("corrector").is_null()) {
        model.corrector = load_booster(target.at("corrector").at("xgboost"), cols);
      }
      const json& interval = target.at("interval");
      impl->coverage = interval.at("coverage").get<double>();
      model.half_width = interval.at("log1p_half_width").is_null()
                             ? std::numeric_limits<double>::infinity()
                             : interval.at("log1p_half_width").get<double>();
      model.calibration_rows = integer_of<std::size_t>(interval.at("calibration_rows"));
      model.cheap_half_width = interval.at("cheap_log1p_half_width").is_null()
                                   ? std::numeric_limits<double>::infinity()
                                   : interval.at("cheap_log1p_half_width").get<double>();
      if (const auto family = interval.find("new_family_log1p_half_width");
          family != interval.end()) {
        model.new_family_half_width =
            family->is_null() ? std::numeric_limits<double>::infinity() : family->get<double>();
        if (!(model.new_family_half_width > 0)) {
          throw Error(ErrorCategory::kInput,
                      origin + ": a new family's interval half-width that is not positive");
        }
      }
      impl->models.push_back(std::move(model));
    }
    // Absent from model files before kernel models; null for other models.
    if (const auto pass = file.find("kernel_pass_interval");
        pass != file.end() && !pass->is_null()) {
      KernelPassInterval interval{pass->at("log_half_width").get<double>(),
                                  pass->at("configurations").get<std::size_t>(),
                                  pass->at("architectures").get<std::size_t>()};
      if (!(interval.half_width >= 0) || !std::isfinite(interval.half_width)) {
        throw Error(ErrorCategory::kInput,
                    origin +
                        ": a kernel model's whole-pass half-width that is not finite and "
                        "non-negative");
      }
      impl->kernel_pass = interval;
    }
    read_evaluation(file.at("evaluation"), impl->report);
    return Predictor(std::move(impl));
  } catch (const json::exception& e) {
    throw Error(ErrorCategory::kInput, origin + ": corrupt carb model file: " + e.what());
  } catch (const std::invalid_argument& e) {
    throw Error(ErrorCategory::kInput, origin + ": corrupt carb model file: " + e.what());
  } catch (const Error& e) {
    if (e.category() == ErrorCategory::kRuntime) {
      throw Error(ErrorCategory::kInput, origin + ": corrupt carb model file: " + e.what());
    }
    throw;
  }
}

}  // namespace model_detail

}  // namespace carb
