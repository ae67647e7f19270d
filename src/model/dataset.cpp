// Datasets for the predictor: architecture features of stored measurements (schema
// kArchitectureSchema), and any external CSV table.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "carb/backend.hpp"
#include "carb/engine_plan.hpp"
#include "carb/error.hpp"
#include "carb/model.hpp"
#include "carb/statistics.hpp"
#include "carb/store.hpp"

namespace carb {

std::optional<std::size_t> feature_column(const std::vector<std::string>& names,
                                          std::string_view name) {
  const auto found = std::find(names.begin(), names.end(), name);
  if (found == names.end()) return std::nullopt;
  return static_cast<std::size_t>(found - names.begin());
}

std::vector<TargetInfo> store_targets() {
  return {{"memory", "B", "engine_peak_bytes"},
          {"energy", "J", "energy_j"},
          {"latency", "ms", "latency_median_ms"}};
}

namespace {
// Pooling and elementwise layers have no MACs; there is always one fc layer, and pooling's
// count follows early downsampling.
bool has_macs(LayerClass c) {
  return c != LayerClass::kPool && c != LayerClass::kElementwise && c != LayerClass::kDataMovement;
}

// The name stems of the per-layer roofline sums: "b4" for machine balance 4, ...
const std::array<std::string, kRooflineBalances.size()>& roofline_stems() {
  static const auto stems = [] {
    std::array<std::string, kRooflineBalances.size()> out;
    for (std::size_t b = 0; b < out.size(); ++b) {
      out[b] = "b" + std::to_string(static_cast<int>(kRooflineBalances[b]));
    }
    return out;
  }();
  return stems;
}

// The model's architecture features (schema kArchitectureSchema), in their order: one call of
// emit(name, stem, value) each, whose name is name + stem. This is the one list of them: the
// names and the values both come from it. Knobs, layer counts, then the analytic features,
// heavy-tailed ones in log1p and named "log_..." (method.md §3); then, with a stem, the
// per-layer-class totals (MACs, bytes moved and layer count) and the per-layer roofline sums.
template <typename Emit>
void for_each_architecture_feature(const Config& config, const Features& features, Emit&& emit) {
  const auto log1 = [](double value) { return std::log1p(value); };
  const auto flag = [](bool value) { return value ? 1.0 : 0.0; };
  const auto real = [](auto value) { return static_cast<double>(value); };
  // An imported architecture has no ResNet knobs: 0 for them, and as its depth its weighted
  // layers (convs and fc), which is what a ResNet's depth counts (docs/features.md).
  const bool resnet = !config.imported();
  emit("bottleneck", "", flag(resnet && config.block == BlockType::kBottleneck));
  emit("depth", "",
       resnet ? real(config.depth())
              : real(features.layer_counts[LayerKind::kConv] +
                     features.layer_counts[LayerKind::kFullyConnected]));
  emit("width_multiplier", "", resnet ? config.width_multiplier : 0.0);
  emit("early_downsample", "", flag(resnet && config.early_downsample));
  emit("resolution", "", real(config.resolution));
  emit("log_batch", "", log1(config.batch));
  emit("precision_bytes", "", real(element_bytes(config.precision)));
  emit("bf16", "", flag(config.precision == Precision::kBf16));
  emit("stages", "", real(config.stage_blocks.size()));
  emit("classes", "", resnet ? real(config.classes) : real(features.output_channels));
  emit("conv_layers", "", real(features.layer_counts[LayerKind::kConv]));
  emit("add_layers", "", real(features.layer_counts[LayerKind::kAdd]));
  emit("widest_channels", "", real(features.widest_channels));
  emit("kernel_launches", "", real(features.kernel_launches));
  emit("log_flops", "", log1(real(features.flops)));
  emit("log_params", "", log1(real(features.params)));
  emit("log_param_bytes", "", log1(real(features.param_bytes)));
  emit("log_activation_bytes", "", log1(real(features.activation_bytes)));
  emit("log_peak_activation_bytes", "", log1(real(features.peak_activation_bytes)));
  emit("log_analytic_peak_bytes", "",
       log1(real(features.param_bytes + features.peak_activation_bytes)));
  emit("log_engine_arena_bytes", "", log1(real(features.engine_arena_bytes)));
  emit("log_prepare_peak_bytes", "", log1(real(features.prepare_peak_bytes)));
  emit("log_arithmetic_intensity", "", log1(features.arithmetic_intensity));
  emit("log_flops_per_image", "", log1(real(features.flops) / config.batch));
  emit("log_torch_native_macs", "", log1(real(features.torch_native_macs)));
  for (int c = 0; c < kLayerClassCount; ++c) {
    const auto layer_class = static_cast<LayerClass>(c);
    const std::string_view stem = to_string(layer_class);
    const LayerClassTotals& totals = features.layer_classes[static_cast<std::size_t>(c)];
    if (has_macs(layer_class)) emit("log_macs_", stem, log1(totals.macs));
    emit("log_bytes_", stem, log1(totals.bytes));
    emit("layers_", stem, real(totals.count));
  }
  for (std::size_t b = 0; b < kRooflineBalances.size(); ++b) {
    emit("log_roofline_", roofline_stems()[b], log1(features.roofline_flops[b]));
  }
}

struct ArchitectureNames {
  std::vector<std::string> all;
  std::vector<std::string> per_layer;  // those with a stem, sorted
};

const ArchitectureNames& architecture_names() {
  static const ArchitectureNames names = [] {
    ArchitectureNames out;
    Config config;
    config.batch = 1;
    for_each_architecture_feature(config, Features{},
                                  [&](std::string_view name, std::string_view stem, double) {
                                    out.all.push_back(std::string(name) + std::string(stem));
                                    if (!stem.empty()) out.per_layer.push_back(out.all.back());
                                  });
    std::sort(out.per_layer.begin(), out.per_layer.end());
    return out;
  }();
  return names;
}
}  // namespace

const std::vector<std::string>& architecture_feature_names() { return architecture_names().all; }

bool is_layer_feature(std::string_view name) {
  const std::vector<std::string>& per_layer = architecture_names().per_layer;
  return std::binary_search(per_layer.begin(), per_layer.end(), name, std::less<>());
}

void architecture_features(const Config& config, const Features& features, float* out) {
  std::size_t i = 0;
  for_each_architecture_feature(config, features,
                                [&](std::string_view, std::string_view, double value) {
                                  out[i++] = static_cast<float>(value);
                                });
  CARB_CHECK(i == architecture_feature_names().size(), "feature count matches the schema");
}

namespace {

// Batch tier x depth tier, the split's strata (method.md §4).
int stratum_of(const Config& config) {
  const int batch_tier = config.batch <= 8 ? 0 : (config.batch <= 32 ? 1 : 2);
  const int depth = config.depth();
  const int depth_tier = depth <= 26 ? 0 : (depth <= 50 ? 1 : 2);
  return batch_tier * 3 + depth_tier;
}

}  // namespace

FeatureRows feature_rows(const std::vector<Config>& configs) {
  FeatureRows rows;
  const std::size_t cols = architecture_feature_names().size();
  rows.x.resize(configs.size() * cols);
  rows.batch.reserve(configs.size());
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const Features features = compute_features(build_network(configs[i]));
    architecture_features(configs[i], features, rows.x.data() + i * cols);
    rows.batch.push_back(configs[i].batch);
  }
  return rows;
}

FeatureRows feature_rows(const Space& space, SpaceFeatures& features,
                         const std::vector<std::uint64_t>& indices) {
  FeatureRows rows;
  const std::size_t cols = architecture_feature_names().size();
  rows.x.resize(indices.size() * cols);
  rows.batch.reserve(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const Config config = space.at(indices[i]);
    architecture_features(config, features.at(indices[i]), rows.x.data() + i * cols);
    rows.batch.push_back(config.batch);
  }
  return rows;
}

std::string family_of(const Config& config) { return architecture_name(config).value_or("resnet"); }

Dataset subset(const Dataset& data, const std::vector<std::size_t>& indices) {
  Dataset out;
  out.schema = data.schema;
  out.feature_names = data.feature_names;
  out.targets = data.targets;
  out.missing_reason = data.missing_reason;
  out.device_fingerprint = data.device_fingerprint;
  out.device_name = data.device_name;
  out.repeated = data.repeated;
  out.drift = data.drift;
  out.y.assign(data.targets.size(), {});
  for (std::size_t i : indices) {
    CARB_CHECK(i < data.rows(), "subset index out of range");
    out.x.insert(out.x.end(), data.row(i), data.row(i) + data.cols());
    out.ids.push_back(data.ids[i]);
    if (i < data.row_instance.size()) {
      out.row_instance.push_back(data.row_instance[i]);
      ++out.instances[data.row_instance[i]];
    }
    out.batch.push_back(data.batch[i]);
    out.stratum.push_back(data.stratum[i]);
    if (i < data.family.size()) out.family.push_back(data.family[i]);
    for (std::size_t t = 0; t < data.targets.size(); ++t) out.y[t].push_back(data.y[t][i]);
  }
  return out;
}

std::string instances_text(const std::map<std::string, std::size_t>& instances) {
  std::string text;
  for (const auto& [instance, rows] : instances) {
    text += (text.empty() ? "" : ", ") + (instance.empty() ? std::string("unrecorded") : instance) +
            " (" + std::to_string(rows) + (rows == 1 ? " row)" : " rows)");
  }
  return text.empty() ? "none" : text;
}

Dataset dataset_from_store(const Store& store, std::string_view device, DriftMode drift,
                           std::optional<double> reference_ms, std::string_view instance) {
  const std::vector<DeviceRecord> devices = store.devices();
  std::string fingerprint(device);
  const auto list = [&] {
    std::string text;
    for (const DeviceRecord& record : devices) {
      text += (text.empty() ? "" : ", ") + record.fingerprint + " (" + record.name + ")";
    }
    return text;
  };
  if (fingerprint.empty()) {
    if (devices.empty()) {
      throw Error(ErrorCategory::kInput, store.path() + ": no measurements to fit (no devices)");
    }
    if (devices.size() > 1) {
      throw Error(ErrorCategory::kInput,
                  store.path() + " holds " + std::to_string(devices.size()) +
                      " devices; choose one by its fingerprint: " + list(),
                  "device");
    }
    fingerprint = devices.front().fingerprint;
  }
  const auto found = std::find_if(devices.begin(), devices.end(), [&](const DeviceRecord& d) {
    return d.fingerprint == fingerprint;
  });
  if (found == devices.end()) {
    throw Error(ErrorCategory::kInput, store.path() + " has no device '" + fingerprint +
                                           "'; it has: " + (devices.empty() ? "none" : list()));
  }

  std::vector<MeasuredTargets> measured = store.ok_measurements(fingerprint);
  if (!instance.empty()) {
    std::map<std::string, std::size_t> all;
    for (const MeasuredTargets& row : measured) ++all[row.host_instance];
    std::erase_if(measured, [&](const MeasuredTargets& row) {
      return row.host_instance.empty() || row.host_instance.rfind(instance, 0) != 0;
    });
    if (measured.empty()) {
      throw Error(ErrorCategory::kInput, store.path() + " has no measurements of host instance '" +
                                             std::string(instance) + "' on " + found->name +
                                             "; it has: " + instances_text(all));
    }
  }
  if (drift == DriftMode::kOff) {
    Dataset data = dataset_from_measurements(measured, fingerprint, found->name);
    data.drift.reason = "off";
    return data;
  }
  DriftCorrection correction;
  const DriftCurve curve = drift_curve(store.drift_probes(fingerprint), reference_ms);
  std::vector<double> factors;
  std::size_t uncovered = 0;
  std::string first_uncovered;
  for (const MeasuredTargets& row : curve.empty() ? std::vector<MeasuredTargets>() : measured) {
    const std::optional<double> factor = curve.factor_at(row.measured_at);
    if (!factor && uncovered++ == 0) {
      first_uncovered = row.configuration_key + " (" + row.started_at + ")";
    }
    factors.push_back(factor.value_or(1));
  }
  if (curve.empty()) {
    correction.reason = "no drift probes of this device in " + store.path();
  } else if (uncovered > 0) {
    correction.reason = std::to_string(uncovered) + " of " + std::to_string(measured.size()) +
                        " measurements have no drift probe within " +
                        std::to_string(static_cast<int>(curve.max_gap_s)) + " s, e.g. " +
                        first_uncovered;
  } else if (measured.empty()) {
    correction.reason = store.path() + " has no measurements";
  }
  correction.applied = correction.reason.empty();
  if (!correction.applied && drift == DriftMode::kOn) {
    throw Error(ErrorCategory::kInput, "drift on: " + correction.reason, "drift");
  }
  if (correction.applied) {
    correction.probe_key = curve.probe_key;
    correction.reference_ms = curve.reference_ms;
    correction.probes = curve.points.size();
    correction.min_factor = *std::min_element(factors.begin(), factors.end());
    correction.max_factor = *std::max_element(factors.begin(), factors.end());
    for (std::size_t i = 0; i < measured.size(); ++i) measured[i].latency_ms /= factors[i];
  }
  Dataset data = dataset_from_measurements(measured, fingerprint, found->name);
  data.drift = correction;
  return data;
}

std::optional<DriftMode> parse_drift_mode(std::string_view text) {
  if (text == "auto") return DriftMode::kAuto;
  if (text == "on") return DriftMode::kOn;
  if (text == "off") return DriftMode::kOff;
  return std::nullopt;
}

Dataset dataset_from_measurements(const std::vector<MeasuredTargets>& measured,
                                  const std::string& device_fingerprint,
                                  const std::string& device_name) {
  // One row per configuration: a configuration measured more than once gets the median of its
  // latencies, each already divided by its own moment's drift (combine_repeated).
  Dataset data;
  data.schema = std::string(kArchitectureSchema);
  data.feature_names = architecture_feature_names();
  data.targets = store_targets();
  data.device_fingerprint = device_fingerprint;
  data.device_name = device_name;
  data.y.assign(data.targets.size(), {});
  data.missing_reason.assign(data.targets.size(), "");
  std::map<std::string, int> energy_reasons;
  std::vector<Config> configs;
  RepeatCount repeated;
  for (const MeasuredTargets& row : combine_repeated(measured, &repeated)) {
    data.row_instance.push_back(row.host_instance);
    ++data.instances[row.host_instance];
    const Config config = parse_key(row.configuration_key);
    configs.push_back(config);
    data.ids.push_back(row.configuration_key);
    data.batch.push_back(config.batch);
    data.stratum.push_back(stratum_of(config));
    data.family.push_back(family_of(config));
    const double nan = std::nan("");
    data.y[0].push_back(row.engine_peak_bytes ? static_cast<double>(*row.engine_peak_bytes) : nan);
    data.y[1].push_back(row.energy_j.value_or(nan));
    data.y[2].push_back(row.latency_ms);
    if (!row.energy_j) ++energy_reasons[row.energy_null_reason];
  }
  data.repeated = repeated;
  FeatureRows rows = feature_rows(configs);
  data.x = std::move(rows.x);
  for (std::size_t t = 0; t < data.targets.size(); ++t) {
    const bool any = std::any_of(data.y[t].begin(), data.y[t].end(),
                                 [](double value) { return !std::isnan(value); });
    if (any || data.rows() == 0) continue;
    if (t == 1 && !energy_reasons.empty()) {
      const auto most =
          std::max_element(energy_reasons.begin(), energy_reasons.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      data.missing_reason[t] = "no energy measured on " + data.device_name + ": " + most->first;
    } else {
      data.missing_reason[t] = "no " + data.targets[t].source + " measured on " + data.device_name;
    }
  }
  return data;
}

// ---------------------------------------------------------------------------------------------
// CSV tables

std::size_t CsvTable::column(std::string_view name) const {
  const auto found = std::find(header.begin(), header.end(), name);
  if (found != header.end()) return static_cast<std::size_t>(found - header.begin());
  std::string columns;
  for (const std::string& column : header) columns += (columns.empty() ? "" : ", ") + column;
  throw Error(ErrorCategory::kInput,
              path + ":1:1: no column '" + std::string(name) + "'; the table has: " + columns);
}

CsvTable parse_csv(std::string_view text, const std::string& path) {
  CsvTable table;
  table.path = path;
  std::vector<std::vector<std::string>> records;
  std::vector<int> lines;
  std::vector<std::string> record;
  std::string field;
  int line = 1, column = 1;
  int record_line = 1;
  bool quoted = false, field_started = false, after_quote = false;
  const auto end_field = [&] {
    record.push_back(std::move(field));
    field.clear();
    field_started = false;
    after_quote = false;
  };
  const auto end_record = [&] {
    end_field();
    if (!(record.size() == 1 && record[0].empty())) {  // skip blank lines
      records.push_back(std::move(record));
      lines.push_back(record_line);
    }
    record.clear();
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
          ++column;
        } else {
          quoted = false;
          after_quote = true;
        }
      } else {
        field += c;
      }
      if (c == '\n') {
        ++line;
        column = 0;
      }
    } else if (c == '"' && !field_started) {
      quoted = true;
      field_started = true;
    } else if (c == ',') {
      end_field();
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      end_record();
      ++line;
      column = 0;
      record_line = line;
    } else if (after_quote) {
      throw Error(ErrorCategory::kInput, path + ":" + std::to_string(line) + ":" +
                                             std::to_string(column) +
                                             ": text after a closing quote");
    } else {
      field += c;
      field_started = true;
    }
    ++column;
  }
  if (quoted) {
    throw Error(ErrorCategory::kInput,
                path + ":" + std::to_string(record_line) + ":1: a quoted field is never closed");
  }
  if (field_started || !record.empty()) end_record();
  if (records.empty()) throw Error(ErrorCategory::kInput, path + ":1:1: empty table, no header");
  table.header = std::move(records.front());
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != table.header.size()) {
      throw Error(ErrorCategory::kInput, path + ":" + std::to_string(lines[r]) +
                                             ":1: " + std::to_string(records[r].size()) +
                                             " fields, the header has " +
                                             std::to_string(table.header.size()));
    }
    table.rows.push_back(std::move(records[r]));
    table.lines.push_back(lines[r]);
  }
  return table;
}

CsvTable read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCategory::kInput, path + ": cannot open the table");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_csv(text.str(), path);
}

TargetInfo parse_table_target(std::string_view text) {
  const auto equals = text.find('=');
  TargetInfo target;
  target.name = std::string(text.substr(0, equals));
  target.source =
      equals == std::string_view::npos ? target.name : std::string(text.substr(equals + 1));
  if (target.name.empty() || target.source.empty()) {
    throw Error(ErrorCategory::kUsage,
                "target '" + std::string(text) + "': expected NAME=COLUMN or COLUMN", "target");
  }
  return target;
}

namespace {

// A cell as a finite number, or an error at its position.
double number_at(const CsvTable& table, std::size_t row, std::size_t column) {
  const std::string& cell = table.rows[row][column];
  const auto where = [&] {
    return table.path + ":" + std::to_string(table.lines[row]) + ":" + std::to_string(column + 1);
  };
  if (cell.empty()) return std::nan("");
  char* end = nullptr;
  const double value = std::strtod(cell.c_str(), &end);
  if (end != cell.c_str() + cell.size() || !std::isfinite(value)) {
    throw Error(ErrorCategory::kInput, where() + ": column '" + table.header[column] + "': '" +
                                           cell + "' is not a finite number");
  }
  return value;
}

// Tercile (0, 1, 2) of each value among all of them.
std::vector<int> terciles(const std::vector<double>& values) {
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  const double first = sorted[sorted.size() / 3];
  const double second = sorted[2 * sorted.size() / 3];
  std::vector<int> tiers;
  tiers.reserve(values.size());
  for (double value : values) tiers.push_back(value < first ? 0 : (value < second ? 1 : 2));
  return tiers;
}

}  // namespace

Dataset dataset_from_table(const CsvTable& table, const TableSpec& spec) {
  if (spec.features.empty()) {
    throw Error(ErrorCategory::kUsage, "features: name at least one feature column", "features");
  }
  if (spec.targets.empty())
    throw Error(ErrorCategory::kUsage, "targets: name at least one target", "targets");
  Dataset data;
  data.schema = "table";
  data.targets = spec.targets;
  const std::size_t rows = table.rows.size();
  std::vector<std::size_t> feature_columns;
  for (const std::string& name : spec.features) feature_columns.push_back(table.column(name));
  std::vector<std::size_t> target_columns;
  for (const TargetInfo& target : spec.targets)
    target_columns.push_back(table.column(target.source));

  // Features: non-negative columns spanning 1.5 decades or more go to log1p space (method.md §3,
  // heavy tails), decided here
  // and recorded in the feature names ("log_" prefix) so predictions transform the same way.
  std::vector<std::vector<double>> columns(feature_columns.size());
  for (std::size_t f = 0; f < feature_columns.size(); ++f) {
    for (std::size_t r = 0; r < rows; ++r) {
      const double value = number_at(table, r, feature_columns[f]);
      if (std::isnan(value)) {
        throw Error(ErrorCategory::kInput, table.path + ":" + std::to_string(table.lines[r]) + ":" +
                                               std::to_string(feature_columns[f] + 1) +
                                               ": feature '" + spec.features[f] + "' is empty");
      }
      columns[f].push_back(value);
    }
  }
  std::vector<bool> logged(columns.size(), false);
  for (std::size_t f = 0; f < columns.size() && rows > 0; ++f) {
    std::vector<double> sorted = columns[f];
    std::sort(sorted.begin(), sorted.end());
    logged[f] = sorted.front() >= 0 && (sorted.back() + 1) / (sorted.front() + 1) >= 30;
    data.feature_names.push_back((logged[f] ? "log_" : "") + spec.features[f]);
  }
  data.x.resize(rows * columns.size());
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t f = 0; f < columns.size(); ++f) {
      const double value = logged[f] ? std::log1p(columns[f][r]) : columns[f][r];
      data.x[r * columns.size() + f] = static_cast<float>(value);
    }
    data.ids.push_back("line " + std::to_string(table.lines[r]));
  }

  data.y.assign(spec.targets.size(), {});
  data.missing_reason.assign(spec.targets.size(), "");
  for (std::size_t t = 0; t < spec.targets.size(); ++t) {
    for (std::size_t r = 0; r < rows; ++r) {
      const double value = number_at(table, r, target_columns[t]);
      if (value < 0) {
        throw Error(ErrorCategory::kInput, table.path + ":" + std::to_string(table.lines[r]) + ":" +
                                               std::to_string(target_columns[t] + 1) +
                                               ": target '" + spec.targets[t].name +
                                               "' is negative (" +
                                               table.rows[r][target_columns[t]] + ")");
      }
      data.y[t].push_back(value);
    }
    if (std::all_of(data.y[t].begin(), data.y[t].end(), [](double v) { return std::isnan(v); })) {
      throw Error(ErrorCategory::kInput, table.path + ": target '" + spec.targets[t].name +
                                             "' (column '" + spec.targets[t].source +
                                             "') has no values");
    }
  }

  data.batch.assign(rows, 0);
  if (!spec.batch_column.empty()) {
    const std::size_t column = table.column(spec.batch_column);
    for (std::size_t r = 0; r < rows; ++r) {
      data.batch[r] = static_cast<int>(std::lround(number_at(table, r, column)));
    }
  }
  data.stratum.assign(rows, 0);
  for (const std::string& name : spec.stratify) {
    const std::size_t column = table.column(name);
    std::vector<double> values;
    for (std::size_t r = 0; r < rows; ++r) values.push_back(number_at(table, r, column));
    const std::vector<int> tiers = terciles(values);
    for (std::size_t r = 0; r < rows; ++r) data.stratum[r] = data.stratum[r] * 3 + tiers[r];
  }
  return data;
}

namespace {

// Each table's configurations' drift factors in kernel timings, in table order: a
// configuration's probe_ms over the median of every timed configuration's, where every table has
// a probe of one configuration for every configuration (`correction` says whether, and why not).
// Per table, as one configuration timed in two tables was timed at two moments.
std::vector<std::map<std::string, double>> kernel_drift_factors(const std::vector<CsvTable>& tables,
                                                                DriftCorrection& correction) {
  std::vector<std::map<std::string, double>> probe_of;  // per table: configuration -> probe_ms
  for (const CsvTable& table : tables) {
    std::map<std::string, double>& probes = probe_of.emplace_back();
    const auto has = [&](std::string_view name) {
      return std::find(table.header.begin(), table.header.end(), name) != table.header.end();
    };
    if (!has("drift_probe") || !has("probe_ms")) {
      correction.reason = table.path + " has no drift probe columns (timed without a drift probe)";
      return {};
    }
    const std::size_t key = table.column("key");
    const std::size_t probe = table.column("drift_probe");
    const std::size_t probe_ms = table.column("probe_ms");
    for (std::size_t r = 0; r < table.rows.size(); ++r) {
      const std::vector<std::string>& row = table.rows[r];
      const double value = number_at(table, r, probe_ms);
      const std::string where = table.path + ":" + std::to_string(table.lines[r]);
      if (row[probe].empty() || std::isnan(value) || value <= 0) {
        correction.reason = where + ": " + row[key] + " has no probe latency (no probe was ok)";
        return {};
      }
      if (correction.probe_key.empty()) correction.probe_key = row[probe];
      if (row[probe] != correction.probe_key) {
        correction.reason = where + ": probe " + row[probe] + ", where earlier rows' is " +
                            correction.probe_key + ": one probe's latencies compare";
        return {};
      }
      probes.emplace(row[key], value);
    }
  }
  std::vector<double> values;
  for (const auto& probes : probe_of) {
    for (const auto& [key, value] : probes) values.push_back(value);
  }
  if (values.empty()) {
    correction.reason = "the kernel timings hold no kernels";
    return {};
  }
  correction.reference_ms = median(values);
  correction.min_factor = *std::min_element(values.begin(), values.end()) / correction.reference_ms;
  correction.max_factor = *std::max_element(values.begin(), values.end()) / correction.reference_ms;
  correction.applied = true;
  for (auto& probes : probe_of) {
    for (auto& [key, value] : probes) value /= correction.reference_ms;
  }
  return probe_of;
}

}  // namespace

Dataset dataset_from_kernels(const std::vector<CsvTable>& tables, std::vector<std::string>* notes,
                             DriftMode drift) {
  const std::vector<std::string>& features = engine::kernel_feature_names();
  DriftCorrection correction;
  std::vector<std::map<std::string, double>> factor_of;  // per table
  if (drift == DriftMode::kOff) {
    correction.reason = "off";
  } else {
    factor_of = kernel_drift_factors(tables, correction);
    if (!correction.applied && drift == DriftMode::kOn) {
      throw Error(ErrorCategory::kInput, "drift on: " + correction.reason, "drift");
    }
  }
  CsvTable merged;
  merged.path = "kernel timings";
  merged.header = features;
  merged.header.emplace_back("latency_ms");
  std::vector<std::string> ids;
  char text[32];
  const auto cell = [&](double value) {
    std::snprintf(text, sizeof text, "%.17g", value);
    return std::string(text);
  };
  std::size_t configurations = 0;
  std::set<std::string> unoptimised;  // configurations that ran a reference kernel
  // The device the timings ran on (carb kernels' device columns; timings of carbs before them
  // have none), where the first row of it was, and each kept row's host instance.
  std::string device, device_name, device_at;
  std::vector<std::string> row_instance;
  for (std::size_t t = 0; t < tables.size(); ++t) {
    const CsvTable& table = tables[t];
    const auto optional_column = [&](std::string_view name) -> std::optional<std::size_t> {
      const auto at = std::find(table.header.begin(), table.header.end(), name);
      if (at == table.header.end()) return std::nullopt;
      return static_cast<std::size_t>(at - table.header.begin());
    };
    const std::optional<std::size_t> device_column = optional_column("device");
    const std::optional<std::size_t> name_column = optional_column("device_name");
    const std::optional<std::size_t> instance_column = optional_column("instance");
    const std::size_t key = table.column("key");
    const std::size_t index = table.column("index");
    const std::size_t kernel = table.column("kernel");
    const std::size_t implementation = table.column("implementation");
    std::set<std::string> keys;
    for (const std::vector<std::string>& row : table.rows) {
      keys.insert(row[key]);
      if (row[implementation].rfind("ref:", 0) == 0) unoptimised.insert(row[key]);
    }
    configurations += keys.size();
    const std::size_t share = table.column("share");
    const std::size_t pass = table.column("pass_ms");
    // is_torch_native came after the others: timings of carb's engine from carbs before it lack
    // it, and there it is 0 (carb's engine runs every conv on oneDNN); PyTorch's must have it.
    constexpr std::string_view kNative = "is_torch_native";
    const std::optional<std::size_t> native_column = optional_column(kNative);
    std::vector<std::size_t> feature_columns;
    feature_columns.reserve(features.size());
    for (const std::string& name : features) {
      feature_columns.push_back(name == kNative && !native_column ? table.header.size()
                                                                  : table.column(name));
    }
    double previous = 0;  // the last kernel row's target
    std::string previous_key;
    for (std::size_t r = 0; r < table.rows.size(); ++r) {
      const std::vector<std::string>& row = table.rows[r];
      if (unoptimised.count(row[key]) > 0) continue;
      const auto where = [&](std::size_t column) {
        return table.path + ":" + std::to_string(table.lines[r]) + ":" + std::to_string(column + 1);
      };
      if (device_column && !row[*device_column].empty()) {
        if (device.empty()) {
          device = row[*device_column];
          device_at = where(*device_column);
          if (name_column) device_name = row[*name_column];
        } else if (row[*device_column] != device) {
          std::string message = where(*device_column);
          message.append(": timed on ")
              .append(row[*device_column])
              .append(", where ")
              .append(device_at)
              .append(" was timed on ")
              .append(device)
              .append(": a kernel model is of one device; fit each device's timings apart");
          throw Error(ErrorCategory::kInput, message);
        }
      }
      const double part = number_at(table, r, share) * number_at(table, r, pass) /
                          (correction.applied ? factor_of[t].at(row[key]) : 1.0);
      if (std::isnan(part) || part < 0) {
        throw Error(ErrorCategory::kInput,
                    where(share) + ": kernel " + row[kernel] + " has no time (share and pass_ms)");
      }
      const bool step = !row[kernel].empty() && row[kernel].back() == ')';
      if (step && !previous_key.empty() && previous_key == row[key]) {
        previous += part;  // the plan runs it within its kernel's op
        merged.rows.back().back() = cell(previous);
        continue;
      }
      if (!native_column && device_column && engine_backend(row[*device_column]) == "torch") {
        std::string message = table.path + ":" + std::to_string(table.lines[r]) + ": timed on ";
        message.append(row[*device_column])
            .append(" without the column ")
            .append(kNative)
            .append(": PyTorch's kernels need it; time them again with this carb");
        throw Error(ErrorCategory::kInput, message);
      }
      std::vector<std::string> values;
      for (const std::size_t column : feature_columns) {
        if (column == table.header.size()) {  // is_torch_native of carb's engine
          values.push_back(cell(0));
          continue;
        }
        const double value = number_at(table, r, column);
        if (std::isnan(value)) {
          throw Error(ErrorCategory::kInput,
                      where(column) + ": kernel " + row[kernel] +
                          " has no features (it names no IR layers; carb kernels of this "
                          "carb writes them)");
        }
        values.push_back(cell(value));
      }
      values.push_back(cell(part));
      merged.rows.push_back(std::move(values));
      merged.lines.push_back(static_cast<int>(merged.rows.size()));
      ids.push_back(row[key] + " kernel " + row[index]);
      row_instance.push_back(instance_column ? row[*instance_column] : std::string());
      previous_key = row[key];
      previous = part;
    }
  }
  if (!unoptimised.empty() && notes != nullptr) {
    notes->push_back("left out " + std::to_string(unoptimised.size()) + " of " +
                     std::to_string(configurations) +
                     " configurations that ran one of oneDNN's reference kernels (first: " +
                     *unoptimised.begin() + "): their time is not their kernels' shapes'");
  }
  if (merged.rows.empty()) {
    throw Error(ErrorCategory::kInput, "the kernel timings hold no kernels");
  }
  TableSpec spec;
  spec.features = features;
  spec.targets = {parse_table_target("latency=latency_ms")};
  spec.batch_column = "batch";
  Dataset data = dataset_from_table(merged, spec);
  data.schema = std::string(kKernelSchema);
  data.targets.front().unit = "ms";
  data.ids = std::move(ids);
  data.drift = correction;
  data.device_fingerprint = device;
  data.device_name = device_name.empty() ? "an unrecorded device" : device_name;
  for (const std::string& instance : row_instance) ++data.instances[instance];
  data.row_instance = std::move(row_instance);
  return data;
}

}  // namespace carb
