// carb fit | carb predict | carb evaluate: the CARB predictor on the command line.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/model.hpp"
#include "carb/store.hpp"
#include "domain.hpp"
#include "output.hpp"
#include "select.hpp"
#include "verbs.hpp"

namespace carb::cli {

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    if (end > begin) items.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

struct DataOptions {
  std::string db;
  std::string device;
  std::string table;
  std::vector<std::string> kernels;
  std::string features;
  std::vector<std::string> targets;
  std::string stratify;
  std::string batch_column;
  std::string drift;  ///< empty: auto, except off for carb fit --kernels (kDefaultKernelDrift)
  std::string instance;
};

// Kernel timings are fitted as measured unless --drift says otherwise: their probe, a 0.2-0.5 ms
// pass, has moved by a fifth while the passes around it did not (docs/onnx.md, "Kernel model").
constexpr const char* kDefaultKernelDrift = "off";

DriftMode drift_mode(const std::string& text) {
  if (text.empty()) return DriftMode::kAuto;
  const auto mode = parse_drift_mode(text);
  if (!mode) throw Error(ErrorCategory::kUsage, "--drift must be auto, on or off");
  return *mode;
}

// One line on what the latencies were divided by, or why not (stderr).
void print_drift(const Dataset& data, DriftMode mode) {
  const DriftCorrection& drift = data.drift;
  if (drift.applied) {
    char text[240];
    const std::string probes =
        drift.probes > 0 ? std::to_string(drift.probes) + " probes" : "the kernel timings' probe";
    std::snprintf(text, sizeof text,
                  "latency divided by the device's drift: %s of %s, factors %.3f-%.3f of the "
                  "probe's %.4g ms\n",
                  probes.c_str(), drift.probe_key.c_str(), drift.min_factor, drift.max_factor,
                  drift.reference_ms);
    std::cerr << text;
  } else if (mode != DriftMode::kOff) {
    std::cerr << "note: latency not corrected for drift: " << drift.reason << "\n";
  }
}

void add_data_options(CLI::App* verb, DataOptions& options) {
  verb->add_option("--db", options.db, "carb database of measurements");
  verb->add_option("--device", options.device,
                   "device fingerprint, when the database holds several");
  verb->add_option("--table", options.table, "or a CSV table");
  verb->add_option("--kernels", options.kernels,
                   "or carb kernels CSV files: a kernel model (docs/onnx.md, \"Kernel model\")");
  verb->add_option("--features", options.features, "table: feature columns, comma-separated");
  verb->add_option("--target", options.targets, "table: NAME=COLUMN, repeated, in cascade order");
  verb->add_option("--stratify", options.stratify,
                   "table: columns whose terciles stratify the split");
  verb->add_option("--batch-column", options.batch_column,
                   "table: the batch-size column (for the low-batch corrector)");
  verb->add_option("--drift", options.drift,
                   "divide latencies by the drift the database's (or the kernel timings') probes "
                   "measured: auto (the default; carb fit --kernels: off), on, off");
  verb->add_option("--instance", options.instance,
                   "only the rows this host instance measured (machine:boot id, or a prefix); "
                   "see carb profile's host line");
}

// Says when a dataset pools several host instances as one device (stderr).
void print_instances(const Dataset& data) {
  if (data.instances.size() < 2) return;
  std::cerr << "warning: " << data.device_name << ": the rows come from " << data.instances.size()
            << " host instances, pooled as one device (their fingerprint matches; hosts of one "
               "CPU model differ in latency by up to a third): "
            << instances_text(data.instances) << "; --instance keeps one\n";
}

// The usage errors of a verb's data options: one source, and the options that go with it.
void check_data_options(const DataOptions& options) {
  if (static_cast<int>(!options.db.empty()) + static_cast<int>(!options.table.empty()) +
          static_cast<int>(!options.kernels.empty()) !=
      1) {
    throw Error(ErrorCategory::kUsage, "give one of --db, --table or --kernels");
  }
  if (!options.kernels.empty()) {
    if (!options.features.empty() || !options.targets.empty() || !options.instance.empty() ||
        !options.stratify.empty() || !options.batch_column.empty()) {
      throw Error(ErrorCategory::kUsage,
                  "--kernels fixes its features and target; --features, --target, --stratify, "
                  "--batch-column and --instance are for --table or --db");
    }
  }
  if (!options.table.empty() && !options.instance.empty()) {
    throw Error(ErrorCategory::kUsage, "--instance needs --db: a table has no host instances");
  }
  if (!options.table.empty() && options.drift == "on") {
    throw Error(ErrorCategory::kUsage, "--drift on needs --db: a table has no drift probes");
  }
  if (!options.db.empty()) {
    if (!options.features.empty() || !options.targets.empty()) {
      throw Error(ErrorCategory::kUsage,
                  "--features and --target are for --table; a database's are fixed");
    }
    if (!std::filesystem::exists(options.db)) {
      throw Error(ErrorCategory::kInput, options.db + ": no such database");
    }
  }
}

Dataset load_data(const DataOptions& options) {
  check_data_options(options);
  if (!options.kernels.empty()) {
    std::vector<CsvTable> tables;
    for (const std::string& path : options.kernels) tables.push_back(read_csv(path));
    std::vector<std::string> notes;
    Dataset data = dataset_from_kernels(tables, &notes, drift_mode(options.drift));
    for (const std::string& note : notes) std::cerr << "note: " << note << "\n";
    return data;
  }
  if (!options.db.empty()) {
    return dataset_from_store(Store::open(options.db), options.device, drift_mode(options.drift),
                              std::nullopt, options.instance);
  }
  TableSpec spec;
  spec.features = split_list(options.features);
  for (const std::string& target : options.targets) {
    spec.targets.push_back(parse_table_target(target));
  }
  spec.stratify = split_list(options.stratify);
  spec.batch_column = options.batch_column;
  return dataset_from_table(read_csv(options.table), spec);
}

std::string unit_of(const Predictor& predictor, const std::string& target) {
  for (const TargetInfo& info : predictor.targets()) {
    if (info.name == target) return info.unit;
  }
  return "";
}

// Scores as JSON objects, one per target and method (evaluate, and fit --from --rows).
nlohmann::json scores_json(const std::vector<MethodScores>& scores) {
  nlohmann::json out = nlohmann::json::array();
  for (const MethodScores& s : scores) {
    out.push_back({{"target", s.target},
                   {"method", s.method},
                   {"n", s.metrics.n},
                   {"r2", s.metrics.r2},
                   {"mae", s.metrics.mae},
                   {"mape", s.metrics.mape},
                   {"within10", s.metrics.within10},
                   {"spearman", s.metrics.spearman},
                   {"slope", s.metrics.slope},
                   {"coverage", s.metrics.coverage ? nlohmann::json(*s.metrics.coverage)
                                                   : nlohmann::json(nullptr)}});
  }
  return out;
}

void print_scores(const std::vector<MethodScores>& scores, const Predictor& predictor,
                  Format format) {
  auto writer = make_row_writer(format,
                                {"target", "method", "n", "r2", "mae", "unit", "mape_pct",
                                 "within10_pct", "spearman", "slope", "coverage_pct", "mean_width"},
                                std::cout);
  for (const MethodScores& s : scores) {
    const Metrics& m = s.metrics;
    writer->row({s.target, s.method, static_cast<std::int64_t>(m.n), m.r2, m.mae,
                 unit_of(predictor, s.target), m.mape, m.within10, m.spearman, m.slope,
                 or_null(m.coverage), or_null(m.mean_width)});
  }
  writer->finish();
}

// --- carb fit -------------------------------------------------------------------------------

struct FitCommand {
  DataOptions data;
  std::string output;
  std::string format = "table";
  std::string prior;  ///< empty: FitOptions' (additive)
  bool no_cascade = false;
  bool corrector = false;
  FitOptions options;
  std::vector<std::string> from;  ///< transfer: the source model, then any further ones
  std::size_t rows = 0;           ///< transfer: fit on K chosen rows, score on the rest
  std::string choose = "spread";  ///< how the K rows are chosen: spread or random
};

// carb fit --from SOURCE.json: the new device's model from the source and its rows.
void run_transfer(const FitCommand& command) {
  if (!command.data.table.empty() || !command.data.kernels.empty()) {
    throw Error(ErrorCategory::kUsage, "--from transfers to a device's measurements: give --db");
  }
  if (!command.options.hold_out.empty()) {
    throw Error(ErrorCategory::kUsage, "--hold-out fits from scratch: it does not go with --from");
  }
  const std::optional<TransferChoice> choice = parse_transfer_choice(command.choose);
  if (!choice) throw Error(ErrorCategory::kUsage, "--choose must be spread or random");
  const Format format = parse_format(command.format);
  std::vector<Predictor> sources;
  for (const std::string& path : command.from) {
    sources.push_back(Predictor::load(path));
    check_transfer_source(sources.back(), path);
  }
  const Predictor& source = sources.front();
  const std::string& source_path = command.from.front();
  const Dataset data = load_data(command.data);
  if (data.rows() == 0) {
    throw Error(ErrorCategory::kInput, command.data.db + " has no successful measurements of " +
                                           data.device_name + " to transfer to");
  }
  print_drift(data, drift_mode(command.data.drift));
  print_instances(data);
  if (command.rows > 0 && command.rows >= data.rows()) {
    std::cerr << "note: --rows " << command.rows << " but the database holds " << data.rows()
              << " measured configurations of " << data.device_name
              << ": fitting on all of them, none left to score\n";
  }
  TransferOptions options;
  options.seed = command.options.seed;
  options.coverage = command.options.coverage;
  options.threads = command.options.threads;
  for (std::size_t j = 1; j < sources.size(); ++j) options.more_sources.push_back(&sources[j]);
  const HeldOutTransfer fit = transfer_held_out(source, data, command.rows, *choice, options);
  const TransferReport& report = fit.report;
  const Predictor& model = fit.model;
  const Dataset fitted_rows = subset(data, fit.fitted);
  for (std::size_t j = 0; j < sources.size(); ++j) {
    std::cerr << "distance from " << command.from[j] << "'s device, measured / predicted: "
              << distance_text(device_distance(sources[j], fitted_rows)) << "\n";
  }
  model.save(command.output);
  if (format == Format::kJson) {
    nlohmann::json targets = nlohmann::json::array();
    for (const TransferTargetReport& target : report.targets) {
      nlohmann::json cv = nlohmann::json::object();
      for (const auto& [name, mape] : target.cv_mape) cv[name] = mape;
      targets.push_back({{"target", target.target},
                         {"available", target.available},
                         {"reason", target.reason},
                         {"method", target.method},
                         {"why", target.why},
                         {"cv_mape", cv},
                         {"rows", target.rows},
                         {"interval", target.interval}});
    }
    std::cout << nlohmann::json{{"model", command.output},
                                {"source", report.source_device},
                                {"more_sources", report.more_source_devices},
                                {"device", data.device_name + " (" + data.device_fingerprint + ")"},
                                {"rows", fit.fitted.size()},
                                {"scored_rows", fit.held.size()},
                                {"targets", targets},
                                {"notes", report.notes},
                                {"scores", scores_json(fit.scores)},
                                {"scored_rows_new_to_source", fit.held_new.size()},
                                {"scores_new_to_source", scores_json(fit.scores_new)}}
                     .dump(1)
              << "\n";
    return;
  }
  std::cerr << "transferred " << source.device_name() << " -> " << data.device_name << " on "
            << fit.fitted.size() << " rows"
            << (command.rows > 0 && !fit.held.empty()
                    ? " (chosen " +
                          std::string(*choice == TransferChoice::kRandom
                                          ? "at random"
                                          : "spread over the source's predictions") +
                          ", seed " + std::to_string(command.options.seed) + ")"
                    : "")
            << " in " << std::round(report.fit_seconds * 10) / 10 << " s\n";
  for (const std::string& note : report.notes) std::cerr << "note: " << note << "\n";
  for (const TransferTargetReport& target : report.targets) {
    if (!target.available) {
      std::cerr << target.target << ": unavailable, " << target.reason << "\n";
      continue;
    }
    std::cerr << target.target << ": " << target.why << "; intervals " << target.interval;
    if (!target.cv_mape.empty()) {
      std::cerr << "; cross-validated MAPE:";
      for (const auto& [name, mape] : target.cv_mape) {
        char text[64];
        std::snprintf(text, sizeof text, " %s %.2f%%", name.c_str(), mape);
        std::cerr << text;
      }
    }
    std::cerr << "\n";
  }
  if (!fit.held.empty()) {
    std::cerr << "scored on the other " << fit.held.size() << " rows (" << 100 * options.coverage
              << "% intervals; source = no transfer, scale = one global factor"
              << (fit.memory_planned
                      ? "; carb's memory is the engine's plan here, memory-model the model's"
                      : "")
              << "):\n";
    print_scores(fit.scores, model, format);
  }
  if (!fit.scores_new.empty() && fit.held_new.size() < fit.held.size()) {
    std::cerr << "of them, the " << fit.held_new.size() << " configurations " << source_path
              << "'s data does not have (on the others its predictions are in-sample)";
    if (format == Format::kCsv) {  // one table per stream
      std::cerr << ": in --format json (scores_new_to_source) or table\n";
    } else {
      std::cerr << ":\n";
      print_scores(fit.scores_new, model, format);
    }
  }
  std::cerr << "wrote " << command.output << "\n";
}

void run_fit(FitCommand& command) {
  if (command.output.empty()) throw Error(ErrorCategory::kUsage, "give -o MODEL.json");
  if (!command.from.empty()) {
    run_transfer(command);
    return;
  }
  if (command.rows > 0) throw Error(ErrorCategory::kUsage, "--rows goes with --from");
  if (!command.options.hold_out.empty() && command.options.leave_low_batch_out) {
    throw Error(ErrorCategory::kUsage, "--hold-out and --leave-low-batch-out: choose one");
  }
  if (const auto prior = parse_prior_mode(command.prior)) {
    command.options.prior = *prior;
  } else if (!command.prior.empty()) {
    throw Error(ErrorCategory::kUsage, "--prior must be none, member, base or additive");
  }
  command.options.cascade = !command.no_cascade;
  command.options.corrector = command.corrector;
  const Format format = parse_format(command.format);
  const bool kernel_default = !command.data.kernels.empty() && command.data.drift.empty();
  if (kernel_default) command.data.drift = kDefaultKernelDrift;
  const Dataset data = load_data(command.data);
  if (kernel_default) {
    std::cerr << "note: kernel timings fitted as measured, not divided by their drift probe "
                 "(--drift on divides them; docs/onnx.md, \"Kernel model\")\n";
  }
  if (command.data.table.empty()) print_drift(data, drift_mode(command.data.drift));
  print_instances(data);
  FitReport report;
  const Predictor predictor = command.data.kernels.empty()
                                  ? Predictor::fit(data, command.options, &report)
                                  : fit_kernel_model(data, command.options, &report);
  predictor.save(command.output);
  if (format == Format::kJson) {
    nlohmann::json out = nlohmann::json::parse(predictor.to_json_text());
    nlohmann::json summary = out.at("evaluation");
    summary["model"] = command.output;
    summary["device"] = out.at("device");
    summary["drift"] = out.at("drift");
    summary["rows"] = data.rows();
    std::cout << summary.dump(1) << "\n";
    return;
  }
  std::cerr << "fitted " << data.rows() << " rows"
            << (data.device_name.empty() ? "" : " of " + data.device_name) << " (train "
            << report.train_rows << ", validation " << report.validation_rows << ", calibration "
            << report.calibration_rows << ", test " << report.test_rows << ") in "
            << std::round(report.fit_seconds * 10) / 10 << " s\n";
  if (data.repeated.configurations > 0) {
    std::cerr << "combined repeated measurements: " << data.repeated.configurations
              << " configurations measured " << data.repeated.measurements
              << " times in all; each row is the median of its configuration's\n";
  }
  for (const std::string& note : report.notes) std::cerr << "note: " << note << "\n";
  if (const auto& pass = predictor.kernel_pass_interval()) {
    char text[200];
    std::snprintf(text, sizeof text,
                  "whole-pass intervals: x/%.3g (%g%%), from %zu configurations of %zu "
                  "architectures held out of a first fit\n",
                  std::exp(pass->half_width), 100 * command.options.coverage, pass->configurations,
                  pass->architectures);
    std::cerr << text;
  }
  if (command.options.hold_out.empty()) {
    std::cerr << "test split (" << 100 * command.options.coverage << "% intervals):\n";
  } else {
    std::cerr << "held-out families, never fitted on (";
    const char* separator = "";
    for (const std::string& family : command.options.hold_out) {
      std::cerr << separator << family;
      separator = ", ";
    }
    std::cerr << "; " << 100 * command.options.coverage << "% intervals):\n";
  }
  print_scores(report.scores, predictor, format);
  std::cerr << "wrote " << command.output << "\n";
}

// --- carb predict ---------------------------------------------------------------------------

struct PredictCommand {
  std::string model;
  Selection selection;
  std::vector<std::string> keys;
  std::string table;
  std::string format = "table";
};

void run_predict(const PredictCommand& command) {
  const Predictor predictor = Predictor::load(command.model);
  const Format format = parse_format(command.format);
  // With keys, --spec only imports the spec's model files, so that the keys of its imported
  // architectures resolve.
  const bool keyed = !command.selection.keys_file.empty() || !command.keys.empty();
  const int sources = (!command.selection.spec.empty() && !keyed ? 1 : 0) +
                      (!command.selection.keys_file.empty() ? 1 : 0) +
                      (!command.keys.empty() ? 1 : 0) + (!command.table.empty() ? 1 : 0);
  if (sources != 1 || (keyed && command.selection.sample > 0)) {
    throw Error(ErrorCategory::kUsage,
                "give exactly one of --spec [--sample], --keys, --table or KEY... (--spec with "
                "--keys or KEY... imports its model files for their keys)");
  }
  std::vector<std::string> ids;
  std::vector<float> x;
  std::vector<int> batch;
  std::vector<Config> configs;
  // A kernel model predicts configurations' kernels and sums them (predict_by_kernels), or
  // predicts a table of kernels' features row by row.
  const bool by_kernels = predictor.schema() == kKernelSchema && command.table.empty();
  if (!command.table.empty()) {
    if (predictor.schema() != "table" && predictor.schema() != kKernelSchema) {
      throw Error(ErrorCategory::kUsage, command.model +
                                             " predicts from configurations: give --spec, "
                                             "--keys or keys, not --table");
    }
    const CsvTable table = read_csv(command.table);
    FeatureRows rows = table_feature_rows(predictor, table);
    x = std::move(rows.x);
    batch = std::move(rows.batch);
    for (int line : table.lines) ids.push_back("line " + std::to_string(line));
  } else {
    if (predictor.schema() != kArchitectureSchema && !by_kernels) {
      throw Error(ErrorCategory::kUsage,
                  command.model + " was fitted on a table: predict with --table");
    }
    if (keyed && !command.selection.spec.empty()) {
      (void)Space::from_file(command.selection.spec);  // imports its model files
    }
    if (!command.keys.empty()) {
      for (const std::string& key : command.keys) configs.push_back(parse_key(key));
    } else {
      configs = select_configs(command.selection);
    }
    if (!by_kernels) {
      FeatureRows rows = feature_rows(configs);
      x = std::move(rows.x);
      batch = std::move(rows.batch);
    }
    for (const Config& config : configs) ids.push_back(to_key(config));
  }
  std::vector<std::string> families;
  families.reserve(configs.size());
  for (const Config& config : configs) families.push_back(family_of(config));
  auto predictions =
      by_kernels
          ? std::vector<std::vector<TargetPrediction>>{predict_by_kernels(predictor, configs)}
          : predictor.predict(x.data(), ids.size(), batch.data(),
                              configs.empty() ? nullptr : &families);
  std::string engine;
  const std::size_t planned =
      by_kernels ? 0 : plan_memory(predictor, configs, predictions, &engine);
  // A kernel model's domain is of kernels, not of these configurations' features.
  DomainCheck domain(predictor);
  for (std::size_t i = 0; i < ids.size() && !by_kernels; ++i) {
    domain.add(x.data() + i * predictor.feature_names().size(), ids[i],
               configs.empty() ? std::string() : family_of(configs[i]));
  }
  // Configurations' rows name an imported network beside its key (graph-<hash>_...); a ResNet
  // has no name (null). A table's rows have no architecture column.
  const bool by_config = command.table.empty();
  std::vector<std::string> columns = {"key"};
  if (by_config) columns.emplace_back("architecture");
  for (const TargetInfo& target : predictor.targets()) {
    for (const char* part : {"", "_low", "_high"}) columns.push_back(target.column() + part);
  }
  auto writer = make_row_writer(format, columns, std::cout);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::vector<Cell> row = {ids[i]};
    if (by_config) row.push_back(or_null(architecture_name(configs[i])));
    for (std::size_t t = 0; t < predictions.size(); ++t) {
      const TargetPrediction& p = predictions[t][i];
      if (p.available) {
        row.insert(row.end(), {p.value, p.low, p.high});
      } else {
        row.insert(row.end(), {kNull, kNull, kNull});
      }
    }
    writer->row(row);
  }
  writer->finish();
  for (std::size_t t = 0; t < predictions.size(); ++t) {
    if (!predictions[t].empty() && !predictions[t][0].available) {
      std::cerr << "note: " << predictor.targets()[t].name
                << " is unavailable: " << predictions[t][0].reason << "\n";
    }
  }
  if (planned > 0) {
    std::cerr << "note: memory of " << planned << " of " << configs.size()
              << " configurations is the engine's own plan on this machine (" << engine
              << "), exact, not the model's estimate\n";
  }
  if (const std::string note = this_machine_note(predictor, command.model); !note.empty()) {
    std::cerr << note << "\n";
  }
  if (predictor.drift().applied) {
    std::cerr << "note: latency is the device's at the speed where its drift probe "
              << predictor.drift().probe_key << " took " << predictor.drift().reference_ms
              << " ms (the fit's latencies were divided by the drift its probes measured)\n";
  }
  if (domain.outside() > 0) {
    std::cerr << domain.warning(ids.size(), command.table.empty() ? "configurations" : "rows",
                                command.model)
              << "\n";
  }
}

// --- carb evaluate --------------------------------------------------------------------------

struct EvaluateCommand {
  std::string model;
  DataOptions data;
  std::string format = "table";
};

// evaluate --table reads the columns a table model was fitted on; --features and --target, where
// given, must name them (a feature "log_NAME" is column NAME through log1p, or "log_NAME").
void check_table_columns(const Predictor& model, const std::string& path,
                         const DataOptions& options) {
  const std::vector<std::string> features = split_list(options.features);
  const std::vector<std::string>& names = model.feature_names();
  bool same = features.empty() || features.size() == names.size();
  for (std::size_t f = 0; same && f < features.size(); ++f) {
    same = features[f] == names[f] || "log_" + features[f] == names[f];
  }
  same = same && (options.targets.empty() || options.targets.size() == model.targets().size());
  for (std::size_t t = 0; same && t < options.targets.size(); ++t) {
    const TargetInfo given = parse_table_target(options.targets[t]);
    same = given.name == model.targets()[t].name && given.source == model.targets()[t].source;
  }
  if (!same) {
    std::string fitted;
    for (const std::string& name : names) fitted += (fitted.empty() ? "" : ",") + name;
    fitted += " and targets ";
    for (std::size_t t = 0; t < model.targets().size(); ++t) {
      const TargetInfo& target = model.targets()[t];
      fitted += (t == 0 ? "" : ",") + target.name + "=" + target.source;
    }
    throw Error(ErrorCategory::kInput, path + " was fitted on features " + fitted +
                                           ": --features and --target may be left out, and "
                                           "where given must name those");
  }
}

void run_evaluate(EvaluateCommand& command) {
  const Predictor predictor = Predictor::load(command.model);
  const Format format = parse_format(command.format);
  if (!command.data.db.empty() && predictor.schema() != kArchitectureSchema) {
    throw Error(ErrorCategory::kInput,
                command.model + " was fitted on a table, not on carb measurements");
  }
  if (!command.data.table.empty()) {
    if (predictor.schema() != "table") {
      throw Error(ErrorCategory::kInput,
                  command.model + " was fitted on carb measurements, not on a table");
    }
    check_table_columns(predictor, command.model, command.data);
  }
  // auto: as the model was fitted; the rows evaluation_dataset chooses from a database.
  DriftMode drift = drift_mode(command.data.drift);
  if (drift == DriftMode::kAuto && !predictor.drift().applied) drift = DriftMode::kOff;
  Dataset data;
  if (!command.data.db.empty()) {
    check_data_options(command.data);
    data = evaluation_dataset(predictor, Store::open(command.data.db), command.data.device, drift,
                              command.data.instance);
  } else if (!command.data.table.empty()) {
    check_data_options(command.data);
    data = table_dataset_for(predictor, read_csv(command.data.table), command.data.batch_column);
  } else {
    DataOptions options = command.data;
    options.drift = drift == DriftMode::kOff ? "off" : command.data.drift;
    data = load_data(options);
  }
  if (!command.data.db.empty()) print_drift(data, drift);
  if (data.feature_names != predictor.feature_names()) {
    throw Error(ErrorCategory::kInput, command.model +
                                           ": the model's feature schema differs "
                                           "from the data's");
  }
  const bool other_device = data.device_fingerprint != predictor.device_fingerprint();
  const std::string hosts =
      other_device || command.data.db.empty()
          ? std::string()
          : host_difference(predictor, command.model, data.instances, "the data");
  const bool transfer = other_device || !hosts.empty();
  print_instances(data);
  std::string kernel_files;
  for (const std::string& path : command.data.kernels)
    kernel_files += (kernel_files.empty() ? "" : ", ") + path;
  std::cerr << (!command.data.table.empty() ? "table model scored on " + command.data.table
                : !kernel_files.empty()
                    ? "kernel model scored on the kernel timings of " + kernel_files
                : other_device ? "transfer: model of " + predictor.device_name() + " scored on " +
                                     data.device_name
                : transfer ? "model of " + predictor.device_name() +
                                 " scored on measurements of the same device fingerprint from "
                                 "another (or an unknown) host"
                           : std::string("model scored on its own device"))
            << " (" << data.rows() << (kernel_files.empty() ? " rows)\n" : " kernels)\n");
  if (!hosts.empty()) std::cerr << hosts << "\n";
  if (transfer && !command.data.db.empty()) {
    std::cerr << "distance, measured / predicted: "
              << distance_text(device_distance(predictor, data)) << "\n";
  }
  if (!transfer && !command.data.db.empty()) {
    std::cerr << "note: on its own device, rows the model may have been trained on are scored "
                 "too; the fit's test-split "
                 "scores are the honest ones\n";
  }
  std::string no_plan;
  const std::unique_ptr<EngineMemoryPlanner> planner =
      command.data.db.empty() ? nullptr : EngineMemoryPlanner::for_model(predictor, &no_plan);
  if (planner) {
    std::cerr << "memory: carb's is the engine's own plan on this machine (" << planner->engine()
              << "); the model's is memory-model\n";
  }
  const std::vector<MethodScores> scores = evaluate(predictor, data, planner.get());
  if (format == Format::kJson) {
    const nlohmann::json out = scores_json(scores);
    nlohmann::json distance = nlohmann::json::array();
    if (transfer && !command.data.db.empty()) {
      for (const DeviceDistance& d : device_distance(predictor, data)) {
        distance.push_back({{"target", d.target},
                            {"rows", d.rows},
                            {"ratio", d.ratio},
                            {"low", d.low},
                            {"high", d.high}});
      }
    }
    std::cout << nlohmann::json{{"transfer", transfer},
                                {"same_fingerprint", !other_device},
                                {"hosts", hosts},
                                {"distance", distance},
                                {"memory_planned", planner != nullptr},
                                {"scores", out}}
                     .dump(1)
              << "\n";
    return;
  }
  print_scores(scores, predictor, format);
}

}  // namespace

void add_model_verbs(CLI::App& app) {
  auto fit = std::make_shared<FitCommand>();
  CLI::App* fit_verb = app.add_subcommand(
      "fit", "fit the CARB predictor on measurements (or a table) and write a model file");
  add_data_options(fit_verb, fit->data);
  fit_verb->add_option("-o,--output", fit->output, "model file to write (JSON)");
  fit_verb->add_option("--format", fit->format, "table, csv or json");
  fit_verb->add_option("--seed", fit->options.seed, "seed of the split and the learners");
  fit_verb->add_option("--coverage", fit->options.coverage, "interval coverage (default 0.9)");
  fit_verb->add_option("--prior", fit->prior,
                       "base the trees correct: base (the ridge), additive (the layer-cost prior, "
                       "for latency and energy and a kernel's latency; the default), member (a "
                       "blend member), or none");
  fit_verb->add_flag("--no-cascade", fit->no_cascade, "fit each target on its own");
  fit_verb->add_flag("--corrector", fit->corrector,
                     "add the low-batch corrector (off: it did not pay, docs/model.md)");
  fit_verb->add_option("--learning-rate", fit->options.learning_rate, "boosting step (0.1)");
  fit_verb->add_option("--forest-trees", fit->options.forest_trees, "random-forest trees (64)");
  fit_verb->add_option("--fixed-rounds", fit->options.fixed_rounds,
                       "boosting rounds without early stopping (0: early stopping)");
  fit_verb->add_option("--threads", fit->options.threads, "XGBoost threads (0: all cores)");
  fit_verb->add_flag("--leave-low-batch-out", fit->options.leave_low_batch_out,
                     "train on batch > 8, test on batch <= 8");
  fit_verb
      ->add_option("--hold-out", fit->options.hold_out,
                   "leave-family-out: test on these network families (comma-separated: an "
                   "imported architecture's name, or resnet), train on the rest")
      ->delimiter(',');
  fit_verb->add_option("--from", fit->from,
                       "transfer: fit the database's device from this model of another device "
                       "(repeat it for further sources, whose predictions join the first's in the "
                       "sources candidate)");
  fit_verb->add_option("--rows", fit->rows,
                       "transfer: fit on K rows chosen from the database, score on the rest");
  fit_verb
      ->add_option("--choose", fit->choose,
                   "transfer: how --rows chooses: spread (over the source's predictions, "
                   "block types and batch regimes) or random")
      ->capture_default_str();
  fit_verb->callback([fit] { run_fit(*fit); });

  auto predict = std::make_shared<PredictCommand>();
  CLI::App* predict_verb = app.add_subcommand(
      "predict", "predict energy, latency and memory, with intervals, for configurations");
  predict_verb->add_option("--model", predict->model, "model file")->required();
  predict_verb->add_option("--spec", predict->selection.spec,
                           "design-space spec (YAML); with --keys or KEY..., only its model "
                           "files are imported, so that their keys resolve");
  predict_verb->add_option("--sample", predict->selection.sample, "N configurations of the spec");
  predict_verb->add_option("--seed", predict->selection.seed, "seed of the sample");
  predict_verb->add_option("--keys", predict->selection.keys_file, "file of configuration keys");
  predict_verb->add_option("--table", predict->table, "CSV table (for a model fitted on one)");
  predict_verb->add_option("--format", predict->format, "table, csv or json");
  predict_verb->add_option("key", predict->keys, "configuration keys");
  predict_verb->callback([predict] { run_predict(*predict); });

  auto evaluate_command = std::make_shared<EvaluateCommand>();
  CLI::App* evaluate_verb = app.add_subcommand(
      "evaluate", "score a model on measurements: accuracy, intervals, cross-device transfer");
  evaluate_verb->add_option("--model", evaluate_command->model, "model file")->required();
  add_data_options(evaluate_verb, evaluate_command->data);
  evaluate_verb->add_option("--format", evaluate_command->format, "table, csv or json");
  evaluate_verb->callback([evaluate_command] { run_evaluate(*evaluate_command); });
}

}  // namespace carb::cli
