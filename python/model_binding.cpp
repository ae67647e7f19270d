// Models: fit (from a database, measurements in columns, or a table), load, save, predict.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>
#include <optional>

#include "binding.hpp"
#include "carb/error.hpp"
#include "carb/store.hpp"

namespace carb::python {

namespace {

using Predictions = std::vector<std::vector<TargetPrediction>>;
using ModelPtr = std::shared_ptr<Predictor>;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

py::list architecture_names(const std::vector<Config>& configs) {
  py::list names;
  // An imported network's name (carb predict's architecture column); a ResNet's None.
  for (const Config& config : configs) names.append(py::cast(architecture_name(config)));
  return names;
}

// Each target's columns ("latency_ms", "latency_ms_low", "latency_ms_high"; NaN where the model
// cannot predict it) and why a target is unavailable.
void add_prediction_columns(const Predictor& model, const Predictions& predictions, std::size_t n,
                            py::dict& columns) {
  py::dict unavailable;
  for (std::size_t t = 0; t < model.targets().size(); ++t) {
    const TargetInfo& target = model.targets()[t];
    if (n > 0 && !predictions[t][0].available) {
      unavailable[py::str(target.name)] = predictions[t][0].reason;
    }
    add_interval_columns(columns, target, predictions[t]);
  }
  columns["unavailable"] = unavailable;
}

// Where each row stands against the model's training domain (and, given the rows' `configs`,
// their network families).
void add_domain_columns(const Predictor& model, const std::vector<float>& x, std::size_t n,
                        const std::vector<Config>& configs, py::dict& columns) {
  auto inside = new_array<bool>(n);
  auto ratio = new_array<double>(n);
  bool* in = inside.mutable_data();
  double* r = ratio.mutable_data();
  const std::size_t width = model.feature_names().size();
  without_gil([&] {
    for (std::size_t i = 0; i < n; ++i) {
      const float* row = x.data() + i * width;
      const DomainJudgement judgement =
          configs.size() == n ? model.training_domain().judge(row, family_of(configs[i]))
                              : model.training_domain().judge(row);
      in[i] = judgement.inside;
      r[i] = judgement.distance_ratio;
    }
    return 0;
  });
  columns["inside_domain"] = inside;
  columns["domain_distance"] = ratio;
}

// Predicts rows of features: the ensemble with intervals, memory from the engine's plan where
// `configs` are given and plan_memory says so (the command line's rule), and the domain.
py::dict predict_rows(const Predictor& model, const FeatureRows& rows, std::size_t n,
                      const std::vector<Config>& configs, bool planned_memory, bool domain) {
  std::string engine;
  std::size_t planned = 0;
  std::vector<std::string> families;
  families.reserve(configs.size());
  for (const Config& config : configs) families.push_back(family_of(config));
  Predictions predictions = without_gil([&] {
    Predictions p = model.predict(rows.x.data(), n, rows.batch.data(),
                                  families.size() == n ? &families : nullptr);
    if (planned_memory) planned = plan_memory(model, configs, p, &engine);
    return p;
  });
  py::dict columns;
  add_prediction_columns(model, predictions, n, columns);
  if (domain) add_domain_columns(model, rows.x, n, configs, columns);
  columns["memory_planned"] = planned;
  columns["engine"] = engine;
  return columns;
}

// A kernel model's prediction of `configs`: their planned kernels summed (predict_by_kernels).
// It has no domain of configurations (its domain is of kernels) and plans no memory.
py::dict predict_by_kernels_columns(const Predictor& model, const std::vector<Config>& configs,
                                    bool domain) {
  if (domain) {
    throw Error(ErrorCategory::kUsage,
                "a kernel model's training domain is of kernels, not of configurations: "
                "predict without domain",
                "domain");
  }
  const Predictions predictions =
      without_gil([&] { return Predictions{predict_by_kernels(model, configs)}; });
  py::dict columns;
  add_prediction_columns(model, predictions, configs.size(), columns);
  columns["memory_planned"] = 0;
  columns["engine"] = "";
  return columns;
}

void require_schema(const Predictor& model, bool table) {
  if (table && model.schema() == kKernelSchema) {
    throw Error(ErrorCategory::kUsage,
                "a kernel model predicts configurations (their kernels summed): give keys or a "
                "space");
  }
  if (model.schema() == kKernelSchema) return;
  if (table && model.schema() != "table") {
    throw Error(ErrorCategory::kUsage,
                "this model predicts from configurations: give keys or a space, not a table");
  }
  if (!table && model.schema() != kArchitectureSchema) {
    throw Error(ErrorCategory::kUsage, "this model was fitted on a table: predict from a table");
  }
}

// A table's text (header and rows of cells), as read_csv would give it: row r on line r + 2.
CsvTable table_of(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows, const std::string& path) {
  CsvTable table;
  table.path = path;
  table.header = header;
  table.rows = rows;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != header.size()) {
      throw Error(ErrorCategory::kInput, path + ":" + std::to_string(r + 2) + ": " +
                                             std::to_string(rows[r].size()) +
                                             " cells, header has " + std::to_string(header.size()));
    }
    table.lines.push_back(static_cast<int>(r) + 2);
  }
  return table;
}

// Scores as a list of dicts, one per target and method (fit's test split, evaluate).
py::list scores_list(const std::vector<MethodScores>& all) {
  py::list scores;
  for (const MethodScores& s : all) {
    const Metrics& m = s.metrics;
    scores.append(py::dict(py::arg("target") = s.target, py::arg("method") = s.method,
                           py::arg("n") = m.n, py::arg("r2") = m.r2, py::arg("mae") = m.mae,
                           py::arg("mape_pct") = m.mape, py::arg("within10_pct") = m.within10,
                           py::arg("spearman") = m.spearman, py::arg("slope") = m.slope,
                           py::arg("coverage_pct") = m.coverage.value_or(kNan),
                           py::arg("mean_width") = m.mean_width.value_or(kNan)));
  }
  return scores;
}

py::dict fit_report_dict(const FitReport& report) {
  const py::list scores = scores_list(report.scores);
  return py::dict(py::arg("train_rows") = report.train_rows,
                  py::arg("validation_rows") = report.validation_rows,
                  py::arg("calibration_rows") = report.calibration_rows,
                  py::arg("test_rows") = report.test_rows, py::arg("scores") = scores,
                  py::arg("notes") = report.notes, py::arg("fit_seconds") = report.fit_seconds,
                  py::arg("fitted_ids") = report.fitted_ids);
}

// What a dataset was, beside its rows: how a front end says what fit did.
py::dict dataset_dict(const Dataset& data) {
  py::dict drift(
      py::arg("applied") = data.drift.applied, py::arg("probe") = data.drift.probe_key,
      py::arg("reference_ms") = data.drift.reference_ms, py::arg("probes") = data.drift.probes,
      py::arg("min_factor") = data.drift.min_factor, py::arg("max_factor") = data.drift.max_factor,
      py::arg("reason") = data.drift.reason);
  return py::dict(py::arg("rows") = data.rows(), py::arg("device") = data.device_name,
                  py::arg("fingerprint") = data.device_fingerprint, py::arg("drift") = drift,
                  py::arg("repeated_configurations") = data.repeated.configurations,
                  py::arg("repeated_measurements") = data.repeated.measurements,
                  py::arg("instances") = data.instances);
}

py::tuple fit_dataset(const Dataset& data, const FitOptions& options) {
  FitReport report;
  auto model = std::make_shared<Predictor>(
      without_gil([&] { return Predictor::fit(data, options, &report); }));
  return py::make_tuple(model, fit_report_dict(report), dataset_dict(data));
}

DriftMode drift_of(const std::string& text) {
  const auto mode = parse_drift_mode(text);
  if (!mode) throw Error(ErrorCategory::kUsage, "drift must be auto, on or off", "drift");
  return *mode;
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<FitOptions>(m, "FitOptions")
      .def(py::init<>())
      .def_readwrite("seed", &FitOptions::seed)
      .def_readwrite("coverage", &FitOptions::coverage)
      .def_readwrite("cascade", &FitOptions::cascade)
      .def_readwrite("corrector", &FitOptions::corrector)
      .def_property(
          "prior", [](const FitOptions& o) { return std::string(to_string(o.prior)); },
          [](FitOptions& o, const std::string& text) {
            const auto mode = parse_prior_mode(text);
            if (!mode) {
              throw Error(ErrorCategory::kUsage, "prior must be none, member, base or additive",
                          "prior");
            }
            o.prior = *mode;
          })
      .def_readwrite("threads", &FitOptions::threads)
      .def_readwrite("learning_rate", &FitOptions::learning_rate)
      .def_readwrite("max_rounds", &FitOptions::max_rounds)
      .def_readwrite("early_stopping_rounds", &FitOptions::early_stopping_rounds)
      .def_readwrite("fixed_rounds", &FitOptions::fixed_rounds)
      .def_readwrite("forest_trees", &FitOptions::forest_trees)
      .def_readwrite("leave_low_batch_out", &FitOptions::leave_low_batch_out)
      .def_readwrite("baselines", &FitOptions::baselines);

  py::class_<Predictor, ModelPtr>(m, "Model")
      .def_static(
          "load",
          [](const std::string& path) {
            return std::make_shared<Predictor>(without_gil([&] { return Predictor::load(path); }));
          },
          py::arg("path"))
      .def_static(
          "from_json",
          [](const std::string& text, const std::string& origin) {
            return std::make_shared<Predictor>(
                without_gil([&] { return Predictor::from_json_text(text, origin); }));
          },
          py::arg("text"), py::arg("origin"))
      .def(
          "save", [](const Predictor& model, const std::string& path) { model.save(path); },
          py::arg("path"))
      .def("to_json", &Predictor::to_json_text)
      .def_property_readonly("schema", &Predictor::schema)
      .def_property_readonly("feature_names", &Predictor::feature_names)
      .def_property_readonly(
          "targets",
          [](const Predictor& model) {
            py::list targets;
            for (const TargetInfo& t : model.targets()) {
              targets.append(py::dict(py::arg("name") = t.name, py::arg("unit") = t.unit,
                                      py::arg("source") = t.source));
            }
            return targets;
          })
      .def_property_readonly("device_fingerprint", &Predictor::device_fingerprint)
      .def_property_readonly("device_name", &Predictor::device_name)
      .def_property_readonly("instances", &Predictor::device_instances)
      .def_property_readonly("coverage", &Predictor::coverage)
      .def_property_readonly("transferred", &Predictor::transferred)
      .def_property_readonly("kernel_pass_interval",
                             [](const Predictor& model) -> py::object {
                               const auto& pass = model.kernel_pass_interval();
                               if (!pass) return py::none();
                               return py::dict(py::arg("half_width") = pass->half_width,
                                               py::arg("factor") = std::exp(pass->half_width),
                                               py::arg("configurations") = pass->configurations,
                                               py::arg("architectures") = pass->architectures);
                             })
      .def_property_readonly("drift",
                             [](const Predictor& model) {
                               const DriftCorrection& d = model.drift();
                               return py::dict(py::arg("applied") = d.applied,
                                               py::arg("probe") = d.probe_key,
                                               py::arg("reference_ms") = d.reference_ms);
                             })
      .def("fit_report", [](const Predictor& model) { return fit_report_dict(model.fit_report()); })
      .def(
          "predict_keys",
          [](const Predictor& model, const std::vector<std::string>& keys, bool planned_memory,
             bool domain) {
            require_schema(model, false);
            std::vector<Config> configs;
            const bool by_kernels = model.schema() == kKernelSchema;
            FeatureRows rows = without_gil([&] {
              configs = configs_of_keys(keys);
              return by_kernels ? FeatureRows{} : feature_rows(configs);
            });
            py::dict columns = by_kernels ? predict_by_kernels_columns(model, configs, domain)
                                          : predict_rows(model, rows, configs.size(), configs,
                                                         planned_memory, domain);
            std::vector<std::string> canonical;
            canonical.reserve(configs.size());
            for (const Config& config : configs) canonical.push_back(to_key(config));
            columns["key"] = canonical;
            columns["architecture"] = architecture_names(configs);
            return columns;
          },
          py::arg("keys"), py::arg("plan_memory") = true, py::arg("domain") = false)
      .def(
          "predict_space",
          [](const Predictor& model, SpaceHandle& space,
             const py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>& array,
             bool planned_memory, bool domain) {
            require_schema(model, false);
            const std::vector<std::uint64_t> indices(array.data(), array.data() + array.size());
            std::vector<Config> configs;
            std::vector<std::string> keys;
            std::vector<std::optional<std::string>> names;
            const bool by_kernels = model.schema() == kKernelSchema;
            FeatureRows rows = without_gil([&] {
              return space.with_features([&](const Space& s, SpaceFeatures& features) {
                keys.reserve(indices.size());
                for (std::uint64_t index : indices) {
                  if (index >= s.size()) {
                    throw Error(
                        ErrorCategory::kUsage,
                        "indices: " + std::to_string(index) + " is not a point of " + s.name(),
                        "indices");
                  }
                  const Config& config = features.config_at(index);
                  keys.push_back(to_key(config));
                  names.push_back(architecture_name(config));
                  // The engine plans few configurations (plan_memory's limit): only those are
                  // kept; a kernel model plans every one.
                  if (by_kernels ||
                      (planned_memory && indices.size() <= kMostPlannedConfigurations)) {
                    configs.push_back(config);
                  }
                }
                return by_kernels ? FeatureRows{} : feature_rows(s, features, indices);
              });
            });
            py::dict columns = by_kernels ? predict_by_kernels_columns(model, configs, domain)
                                          : predict_rows(model, rows, indices.size(), configs,
                                                         planned_memory, domain);
            columns["key"] = py::cast(keys);
            columns["architecture"] = py::cast(names);
            columns["index"] = array;
            return columns;
          },
          py::arg("space"), py::arg("indices"), py::arg("plan_memory") = true,
          py::arg("domain") = false)
      .def(
          "predict_table",
          [](const Predictor& model, const std::vector<std::string>& header,
             const std::vector<std::vector<std::string>>& cells, const std::string& path,
             bool domain) {
            require_schema(model, true);
            const CsvTable table = table_of(header, cells, path);
            const FeatureRows rows = without_gil([&] { return table_feature_rows(model, table); });
            return predict_rows(model, rows, cells.size(), {}, false, domain);
          },
          py::arg("header"), py::arg("rows"), py::arg("path"), py::arg("domain") = false);

  m.def(
      "fit_store",
      [](const std::string& db, const std::string& device, const std::string& drift,
         const std::string& instance, const FitOptions& options) {
        const DriftMode mode = drift_of(drift);
        const Dataset data = without_gil([&] {
          return dataset_from_store(Store::open(db), device, mode, std::nullopt, instance);
        });
        return fit_dataset(data, options);
      },
      py::arg("db"), py::arg("device"), py::arg("drift"), py::arg("instance"), py::arg("options"));

  m.def(
      "transfer_store",
      [](const ModelPtr& source, const std::string& db, const std::string& device,
         const std::string& drift, const std::string& instance, std::uint64_t seed, double coverage,
         int threads, std::size_t rows, const std::string& choose,
         const std::vector<ModelPtr>& more_sources) {
        const std::optional<TransferChoice> choice = parse_transfer_choice(choose);
        if (!choice)
          throw Error(ErrorCategory::kInput, "choose must be spread or random", "choose");
        std::vector<ModelPtr> all = {source};
        all.insert(all.end(), more_sources.begin(), more_sources.end());
        for (std::size_t i = 0; i < all.size(); ++i) {
          const std::string name = i == 0 ? "the source model" : "a further source model";
          if (!all[i]) throw Error(ErrorCategory::kInput, name + " is None");
          check_transfer_source(*all[i], name);
        }
        const DriftMode mode = drift_of(drift);
        const Dataset data = without_gil([&] {
          return dataset_from_store(Store::open(db), device, mode, std::nullopt, instance);
        });
        if (data.rows() == 0) {
          throw Error(ErrorCategory::kInput, db + " has no successful measurements of " +
                                                 data.device_name + " to transfer to");
        }
        TransferOptions options;
        options.seed = seed;
        options.coverage = coverage;
        options.threads = threads;
        for (const ModelPtr& model : more_sources) options.more_sources.push_back(model.get());
        HeldOutTransfer fit =
            without_gil([&] { return transfer_held_out(*source, data, rows, *choice, options); });
        const TransferReport& report = fit.report;
        auto model = std::make_shared<Predictor>(std::move(fit.model));
        py::list targets;
        for (const TransferTargetReport& t : report.targets) {
          py::dict cv;
          for (const auto& [name, mape] : t.cv_mape) cv[py::str(name)] = mape;
          targets.append(py::dict(py::arg("target") = t.target, py::arg("available") = t.available,
                                  py::arg("reason") = t.reason, py::arg("method") = t.method,
                                  py::arg("why") = t.why, py::arg("cv_mape_pct") = cv,
                                  py::arg("rows") = t.rows, py::arg("folds") = t.folds,
                                  py::arg("interval") = t.interval));
        }
        py::dict transfer(
            py::arg("source") = report.source_device,
            py::arg("more_sources") = report.more_source_devices, py::arg("targets") = targets,
            py::arg("notes") = report.notes, py::arg("fit_seconds") = report.fit_seconds,
            py::arg("rows") = fit.fitted.size(), py::arg("scored_rows") = fit.held.size(),
            py::arg("scores") = scores_list(fit.scores),
            py::arg("scored_rows_new_to_source") = fit.held_new.size(),
            py::arg("scores_new_to_source") = scores_list(fit.scores_new),
            py::arg("memory_planned") = fit.memory_planned);
        return py::make_tuple(model, transfer, dataset_dict(data));
      },
      py::arg("source"), py::arg("db"), py::arg("device"), py::arg("drift"), py::arg("instance"),
      py::arg("seed"), py::arg("coverage"), py::arg("threads"), py::arg("rows"), py::arg("choose"),
      py::arg("more_sources"));

  m.def(
      "evaluate_store",
      [](const ModelPtr& model, const std::string& db, const std::string& device,
         const std::string& drift, const std::string& instance) {
        if (model->schema() != kArchitectureSchema) {
          throw Error(ErrorCategory::kInput,
                      "the model was fitted on a table, not on carb measurements", "model");
        }
        const DriftMode mode = drift_of(drift);
        if (!std::filesystem::exists(db)) {
          throw Error(ErrorCategory::kInput, db + ": no such database", "db");
        }
        std::vector<MethodScores> scores;
        std::vector<DeviceDistance> distance;
        bool planned = false;
        const Dataset data = without_gil([&] {
          Dataset rows = evaluation_dataset(*model, Store::open(db), device, mode, instance);
          std::string no_plan;
          const auto planner = EngineMemoryPlanner::for_model(*model, &no_plan);
          planned = planner != nullptr;
          scores = evaluate(*model, rows, planner.get());
          distance = device_distance(*model, rows);
          return rows;
        });
        py::list distances;
        for (const DeviceDistance& d : distance) {
          distances.append(py::dict(py::arg("target") = d.target, py::arg("rows") = d.rows,
                                    py::arg("ratio") = d.ratio, py::arg("low") = d.low,
                                    py::arg("high") = d.high));
        }
        return py::make_tuple(
            py::dict(py::arg("scores") = scores_list(scores),
                     py::arg("same_fingerprint") =
                         data.device_fingerprint == model->device_fingerprint(),
                     py::arg("memory_planned") = planned, py::arg("distance") = distances),
            dataset_dict(data));
      },
      py::arg("model"), py::arg("db"), py::arg("device"), py::arg("drift"), py::arg("instance"));

  m.def(
      "evaluate_table",
      [](const ModelPtr& model, const std::vector<std::string>& header,
         const std::vector<std::vector<std::string>>& cells, const std::string& path,
         const std::string& batch_column) {
        const Dataset data = table_dataset_for(*model, table_of(header, cells, path), batch_column);
        const std::vector<MethodScores> scores =
            without_gil([&] { return evaluate(*model, data, nullptr); });
        return py::make_tuple(scores_list(scores), dataset_dict(data));
      },
      py::arg("model"), py::arg("header"), py::arg("rows"), py::arg("path"),
      py::arg("batch_column"));

  m.def(
      "fit_measured",
      [](const std::vector<std::string>& keys, const std::vector<double>& latency_ms,
         const std::vector<double>& memory_bytes, const std::vector<double>& energy_j,
         const std::vector<std::string>& energy_null_reason,
         const std::vector<std::string>& finished_at, const std::vector<std::string>& instance,
         const std::string& fingerprint, const std::string& name, const FitOptions& options) {
        const std::size_t n = keys.size();
        for (const auto* size : {&latency_ms, &memory_bytes, &energy_j}) {
          if (size->size() != n) throw Error(ErrorCategory::kUsage, "columns of unequal length");
        }
        if (energy_null_reason.size() != n || finished_at.size() != n || instance.size() != n) {
          throw Error(ErrorCategory::kUsage, "columns of unequal length");
        }
        std::vector<MeasuredTargets> rows(n);
        for (std::size_t i = 0; i < n; ++i) {
          MeasuredTargets& row = rows[i];
          row.configuration_key = to_key(parse_key(keys[i]));
          row.device_fingerprint = fingerprint;
          row.finished_at = finished_at[i];
          row.latency_ms = latency_ms[i];
          if (!std::isnan(memory_bytes[i])) {
            row.engine_peak_bytes = static_cast<std::int64_t>(std::llround(memory_bytes[i]));
          }
          if (!std::isnan(energy_j[i])) row.energy_j = energy_j[i];
          row.energy_null_reason = energy_null_reason[i];
          row.host_instance = instance[i];
        }
        // As a store gives them: by configuration key, then finish time (the latest last).
        std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
          return std::tie(a.configuration_key, a.finished_at) <
                 std::tie(b.configuration_key, b.finished_at);
        });
        const Dataset data =
            without_gil([&] { return dataset_from_measurements(rows, fingerprint, name); });
        return fit_dataset(data, options);
      },
      py::arg("keys"), py::arg("latency_ms"), py::arg("memory_bytes"), py::arg("energy_j"),
      py::arg("energy_null_reason"), py::arg("finished_at"), py::arg("instance"),
      py::arg("fingerprint"), py::arg("name"), py::arg("options"));

  m.def(
      "fit_table",
      [](const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& cells,
         const std::string& path, const std::vector<std::string>& features,
         const std::vector<std::string>& targets, const std::vector<std::string>& stratify,
         const std::string& batch_column, const FitOptions& options) {
        TableSpec spec;
        spec.features = features;
        for (const std::string& target : targets)
          spec.targets.push_back(parse_table_target(target));
        spec.stratify = stratify;
        spec.batch_column = batch_column;
        const Dataset data = dataset_from_table(table_of(header, cells, path), spec);
        return fit_dataset(data, options);
      },
      py::arg("header"), py::arg("rows"), py::arg("path"), py::arg("features"), py::arg("targets"),
      py::arg("stratify"), py::arg("batch_column"), py::arg("options"));

  m.def(
      "fit_kernels",
      [](const std::vector<std::string>& paths,
         const std::vector<
             std::pair<std::vector<std::string>, std::vector<std::vector<std::string>>>>& frames,
         const FitOptions& options, const std::string& drift) {
        const DriftMode mode = drift_of(drift);
        std::vector<CsvTable> tables;
        tables.reserve(paths.size() + frames.size());
        for (const std::string& path : paths) tables.push_back(read_csv(path));
        for (std::size_t f = 0; f < frames.size(); ++f) {
          tables.push_back(table_of(frames[f].first, frames[f].second,
                                    "<DataFrame " + std::to_string(f + 1) + ">"));
        }
        FitReport report;
        const auto [model, data] = without_gil([&] {
          std::vector<std::string> notes;
          Dataset kernels = dataset_from_kernels(tables, &notes, mode);
          auto fitted = std::make_shared<Predictor>(fit_kernel_model(kernels, options, &report));
          report.notes.insert(report.notes.begin(), notes.begin(), notes.end());
          return std::make_pair(std::move(fitted), std::move(kernels));
        });
        return py::make_tuple(model, fit_report_dict(report), dataset_dict(data));
      },
      py::arg("paths"), py::arg("frames"), py::arg("options"), py::arg("drift"));
}

}  // namespace carb::python
