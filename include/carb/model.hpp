// The CARB predictor (method.md §3-4): per target, a blend of XGBoost learners (depthwise,
// leaf-wise, random forest) over a log-space ridge prior, cascaded memory -> energy -> latency,
// with a low-batch corrector and split-conformal intervals; its evaluation against baselines;
// and the versioned JSON model file that holds it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "carb/graph.hpp"
#include "carb/space.hpp"
#include "carb/store.hpp"

namespace carb {

// ---------------------------------------------------------------------------------------------
// Data

/// A target as the predictor knows it: name, unit and where its values come from.
struct TargetInfo {
  std::string name;    ///< "memory", "energy", "latency", or a table's own name
  std::string unit;    ///< "B", "J", "ms", or "" for a table column
  std::string source;  ///< store field (e.g. "engine_peak_bytes") or table column
};

/// Whether latencies are divided by the device's drift (docs/model.md, "Drift correction").
/// auto: when the database's drift probes cover every row; on: the same, or an error saying
/// which rows they miss; off: never.
enum class DriftMode { kAuto, kOn, kOff };
std::optional<DriftMode> parse_drift_mode(std::string_view text);

/// What a dataset's latencies were divided by: the drift factor of each row's moment (its probe
/// latency then over reference_ms, carb::DriftCurve), so that every row stands for the device
/// running as fast as when the probe took reference_ms.
struct DriftCorrection {
  bool applied = false;
  std::string probe_key;    ///< the probe configuration
  double reference_ms = 0;  ///< the probe latency of factor 1
  std::size_t probes = 0;   ///< probes in the curve
  double min_factor = 1, max_factor = 1;  ///< over the rows
  std::string reason;                     ///< why it was not applied
};

/// Rows to fit or score: features (row-major floats in the schema's order, already transformed)
/// and targets (NaN where not measured). Targets are in cascade order.
struct Dataset {
  std::string schema;                      ///< kArchitectureSchema or "table"
  std::vector<std::string> feature_names;  ///< after transformation (e.g. "log_flops")
  std::vector<float> x;                    ///< rows x feature_names.size()
  std::vector<std::string> ids;            ///< configuration key, or "line N" of a table
  std::vector<TargetInfo> targets;
  std::vector<std::vector<double>> y;  ///< per target, per row; NaN = not measured
  /// Per target: why it has no value at all (e.g. the store's energy NULL reason), else empty.
  std::vector<std::string> missing_reason;
  std::vector<int> batch;          ///< per row; 0 when the data has no batch size
  std::vector<int> stratum;        ///< per row: the split's stratum (batch tier x depth tier)
  std::string device_fingerprint;  ///< of the store's device; empty for a table
  std::string device_name;
  /// Configurations measured more than once, each a row of their median (combine_repeated).
  RepeatCount repeated;
  DriftCorrection drift;  ///< what the latencies were divided by (stores only)

  std::size_t rows() const { return ids.size(); }
  std::size_t cols() const { return feature_names.size(); }
  const float* row(std::size_t i) const { return x.data() + i * cols(); }
};

/// The targets carb fits from a store, in cascade order: memory (engine_peak_bytes, B),
/// energy (energy_j, J), latency (device or wall median, ms).
std::vector<TargetInfo> store_targets();

/// The name of carb's architecture feature schema. "carb-ir-2" added the per-layer-class totals
/// and the per-layer roofline sums to "carb-ir-1"; a model of another schema must be refitted.
inline constexpr std::string_view kArchitectureSchema = "carb-ir-2";
/// The architecture-only feature names of schema kArchitectureSchema.
const std::vector<std::string>& architecture_feature_names();
/// Whether an architecture feature is one of the per-layer-class totals or per-layer roofline
/// sums (what "carb-ir-2" added), which the memory target does not use.
bool is_layer_feature(std::string_view name);
/// Writes a configuration's architecture features (schema kArchitectureSchema) to `out`.
void architecture_features(const Config& config, const Features& features, float* out);

/// The successful measurements of one device in a store, as a dataset (latest measurement per
/// configuration). `device` may be empty when the store holds one device; otherwise throws
/// carb::Error (input) listing the devices. Latencies are divided by the device's drift as
/// `drift` says, relative to `reference_ms` (a model's) or to the median of the store's probes;
/// DriftMode::kOn throws carb::Error (input) when the probes do not cover every row.
Dataset dataset_from_store(const Store& store, std::string_view device = {},
                           DriftMode drift = DriftMode::kOff,
                           std::optional<double> reference_ms = std::nullopt);
/// The same from measurements of one device already read (from one store or several), ordered
/// by configuration key, then finish time: the latest of a configuration's repeats is used.
Dataset dataset_from_measurements(const std::vector<MeasuredTargets>& measured,
                                  const std::string& device_fingerprint,
                                  const std::string& device_name);

/// A parsed CSV file (RFC 4180: quoted fields, doubled quotes, embedded commas and newlines).
struct CsvTable {
  std::string path;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> lines;  ///< the line each row starts on, for error messages
  /// The index of a column; throws carb::Error (input) naming the file and the columns it has.
  std::size_t column(std::string_view name) const;
};
/// Reads a CSV file; throws carb::Error (input) with file:line:column on malformed text.
CsvTable read_csv(const std::string& path);
CsvTable parse_csv(std::string_view text, const std::string& path);

/// How to read a table: feature columns and targets ("name=column"), in cascade order.
struct TableSpec {
  std::vector<std::string> features;
  std::vector<TargetInfo> targets;
  std::vector<std::string> stratify;  ///< columns whose terciles stratify the split; may be empty
  std::string batch_column;           ///< column holding the batch size, for the corrector
};
/// Parses "name=column" (or "column", the name then being the column). Throws carb::Error.
TargetInfo parse_table_target(std::string_view text);
/// A dataset from a table. Throws carb::Error (input) with file:line:column on a missing column,
/// a value that is not a number, or a negative or NaN target.
Dataset dataset_from_table(const CsvTable& table, const TableSpec& spec);

// ---------------------------------------------------------------------------------------------
// Fitting

/// How the ridge prior takes part.
enum class PriorMode {
  kNone,    ///< trees only
  kMember,  ///< a fourth blend member
  kBase,    ///< the base the trees correct: trees fit the prior's log residuals
};
std::string_view to_string(PriorMode mode);
std::optional<PriorMode> parse_prior_mode(std::string_view text);

/// The learners of a specialist ensemble.
enum class LearnerKind { kDepthwise, kLeafwise, kForest, kRidge };
std::string_view to_string(LearnerKind kind);

struct FitOptions {
  std::uint64_t seed = 1;
  double coverage = 0.9;  ///< nominal coverage of the prediction intervals
  bool cascade = true;
  bool corrector = false;  // measured not to pay on the reference campaign (docs/benchmarks.md)
  PriorMode prior = PriorMode::kBase;
  int threads = 0;  ///< XGBoost threads; 0 = all cores
  double learning_rate = 0.1;
  int max_rounds = 2000;           ///< boosting rounds at most; early stopping usually ends sooner
  int early_stopping_rounds = 40;  ///< on the validation split
  int fixed_rounds = 0;            ///< > 0: no early stopping, this many rounds (for comparison)
  int forest_trees = 64;
  int cascade_folds = 5;  ///< folds of the out-of-fold upstream predictions
  /// Fractions of train, validation (early stopping, blend, corrector), calibration and test.
  double train_fraction = 0.70, validation_fraction = 0.075, calibration_fraction = 0.075;
  /// Test on batch <= 8 only and train on batch > 8 (leave-low-batch-out).
  bool leave_low_batch_out = false;
  bool baselines = true;  ///< also fit and score the baselines (fit reports them)
};

/// One row's prediction of one target, in the target's unit.
struct TargetPrediction {
  bool available = false;
  std::string reason;  ///< why not available
  double value = 0, low = 0, high = 0;
};

/// Scores of predictions against measurements (linear space unless said).
struct Metrics {
  std::size_t n = 0;
  double r2 = 0;                     ///< coefficient of determination, linear space
  double mae = 0;                    ///< mean absolute error, the target's unit
  double mape = 0;                   ///< mean absolute percentage error, %
  double within10 = 0;               ///< share of predictions within +-10% of the measurement, %
  double spearman = 0;               ///< rank correlation
  double slope = 0;                  ///< least-squares slope of measured on predicted (transfer)
  std::optional<double> coverage;    ///< share of measurements inside their interval, %
  std::optional<double> mean_width;  ///< mean interval width, the target's unit
};
/// Scores `predicted` against `measured` (same length; intervals optional).
Metrics score(const std::vector<double>& measured, const std::vector<double>& predicted,
              const std::vector<double>* low = nullptr, const std::vector<double>* high = nullptr);
/// Spearman's rank correlation, ties averaged.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

/// One method's scores per target, in an evaluation table.
struct MethodScores {
  std::string method;  ///< "carb", "flops-loglinear", "energy-proxy", "depthwise", ...
  std::string target;
  Metrics metrics;
};

/// What fitting did and measured.
struct FitReport {
  std::size_t train_rows = 0, validation_rows = 0, calibration_rows = 0, test_rows = 0;
  std::vector<MethodScores> scores;  ///< on the test split, carb first
  std::vector<std::string> notes;    ///< decisions (corrector skipped, target unavailable, ...)
  double fit_seconds = 0;
  /// Ids (configuration keys, or "line N" of a table) of the rows the model was fitted on: the
  /// train, validation and calibration splits. Empty for a model file written before carb
  /// recorded them.
  std::vector<std::string> fitted_ids;
};

/// A fitted CARB predictor for one device (or one table). Copyable is not needed: move-only.
class Predictor {
 public:
  /// Fits on `data` (split as the options say). Throws carb::Error (input) on too few rows, a
  /// target that is all NaN or has negative values.
  static Predictor fit(const Dataset& data, const FitOptions& options, FitReport* report);
  /// Reads a model file; throws carb::Error (input) naming the file when it is not a carb model,
  /// truncated, corrupt, or from a newer format.
  static Predictor load(const std::string& path);
  static Predictor from_json_text(std::string_view text, const std::string& origin);

  Predictor(Predictor&&) noexcept;
  Predictor& operator=(Predictor&&) noexcept;
  ~Predictor();

  /// Writes the model file (versioned JSON, XGBoost models in XGBoost's JSON format).
  void save(const std::string& path) const;
  std::string to_json_text() const;

  const std::string& schema() const;
  const std::vector<std::string>& feature_names() const;
  const std::vector<TargetInfo>& targets() const;
  const std::string& device_fingerprint() const;
  const std::string& device_name() const;
  /// The drift correction of the latencies it was fitted on (applied == false: none): its
  /// latencies are the device's at the speed where the probe took drift().reference_ms.
  const DriftCorrection& drift() const;
  double coverage() const;
  /// The test-split scores recorded at fit time.
  const FitReport& fit_report() const;

  /// Each feature's range over the rows the model was fitted on: its training domain. Empty
  /// for a model file written before carb recorded it.
  struct FeatureRange {
    float min = 0, max = 0;
  };
  const std::vector<FeatureRange>& training_domain() const;
  /// The index of the first feature of `row` (the schema's order) outside the training domain,
  /// or npos when it lies inside (or the domain is unknown): predictions there extrapolate.
  std::size_t outside_domain(const float* row) const;

  /// Predicts every target for `rows` rows of features (row-major, the schema's order).
  /// Result: [target][row].
  std::vector<std::vector<TargetPrediction>> predict(const float* x, std::size_t rows,
                                                     const int* batch) const;
  /// Predictions of each target's cheapest member (the ridge prior, where there is one) with
  /// their own split-conformal intervals: stage 1 of screening ranks whole spaces with these.
  std::vector<std::vector<TargetPrediction>> predict_cheap(const float* x, std::size_t rows) const;
  /// Predictions of each member alone and of the blend before the corrector, in the targets'
  /// units, for evaluation: [target] -> method name -> values. Unavailable targets are empty.
  std::vector<std::vector<std::pair<std::string, std::vector<double>>>> predict_members(
      const float* x, std::size_t rows, const int* batch) const;

 private:
  struct Impl;
  explicit Predictor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Scores a predictor on a dataset: carb per target, plus each member alone. When the dataset's
/// device differs from the model's, this is a transfer evaluation (R², Spearman, slope matter).
std::vector<MethodScores> evaluate(const Predictor& predictor, const Dataset& data);

/// The feature rows of configurations under schema kArchitectureSchema, with their batch sizes.
struct FeatureRows {
  std::vector<float> x;
  std::vector<int> batch;
};
FeatureRows feature_rows(const std::vector<Config>& configs);
/// The same for points of a space by index, through the space's feature cache (fast).
FeatureRows feature_rows(const Space& space, SpaceFeatures& features,
                         const std::vector<std::uint64_t>& indices);

}  // namespace carb
