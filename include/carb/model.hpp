// The CARB predictor (method.md §3-4): per target, a blend of XGBoost learners (depthwise,
// leaf-wise, random forest) over a log-space ridge prior, cascaded memory -> energy -> latency,
// with a low-batch corrector and split-conformal intervals; its evaluation against baselines;
// and the versioned JSON model file that holds it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "carb/graph.hpp"
#include "carb/space.hpp"
#include "carb/statistics.hpp"  // spearman() and the rest of the shared statistics
#include "carb/store.hpp"

namespace carb {

namespace model_detail {
class TransferLayer;
struct PredictorFactory;
}  // namespace model_detail

// ---------------------------------------------------------------------------------------------
// Data

/// A target as the predictor knows it: name, unit and where its values come from.
struct TargetInfo {
  std::string name;    ///< "memory", "energy", "latency", or a table's own name
  std::string unit;    ///< "B", "J", "ms", or "" for a table column
  std::string source;  ///< store field (e.g. "engine_peak_bytes") or table column
  /// The column of its predictions in a table of them: "latency_ms", or the name alone for a
  /// target without a unit; its interval's are column() + "_low" and "_high".
  std::string column() const { return unit.empty() ? name : name + "_" + unit; }
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
  std::size_t probes = 0;   ///< probes in the curve (0 for kernel timings: they carry no probes)
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
  std::vector<int> batch;    ///< per row; 0 when the data has no batch size
  std::vector<int> stratum;  ///< per row: the split's stratum (batch tier x depth tier)
  /// Per row: the network family, what leave-family-out holds out (FitOptions::hold_out): an
  /// imported architecture's name (e.g. "mobilenet_v2-bn"), "resnet" for carb's ResNet knobs;
  /// empty for a table.
  std::vector<std::string> family;
  std::string device_fingerprint;  ///< of the store's device; empty for a table
  std::string device_name;
  /// Configurations measured more than once, each a row of their median (combine_repeated).
  RepeatCount repeated;
  DriftCorrection drift;  ///< what the latencies were divided by (stores only)
  /// Per row: the host instance that measured it (its latest measurement's
  /// MeasuredTargets::host_instance; "" for rows that predate it); empty for a table.
  std::vector<std::string> row_instance;
  /// Rows per host instance (of row_instance). More than one: hosts pooled as one device.
  std::map<std::string, std::size_t> instances;

  std::size_t rows() const { return ids.size(); }
  std::size_t cols() const { return feature_names.size(); }
  const float* row(std::size_t i) const { return x.data() + i * cols(); }
};

/// The column of feature `name` in a schema's feature names; nullopt where it has none.
std::optional<std::size_t> feature_column(const std::vector<std::string>& names,
                                          std::string_view name);

/// The targets carb fits from a store, in cascade order: memory (engine_peak_bytes, B),
/// energy (energy_j, J), latency (device or wall median, ms).
std::vector<TargetInfo> store_targets();

/// A prediction's additive layer-cost prior split by kind of term (Predictor::additive_parts):
/// the MAC terms (compute) less the share of the MACs PyTorch runs off oneDNN, the byte terms
/// (memory traffic), the per-layer terms (overhead), the intercept, the cost of the MACs PyTorch
/// runs off oneDNN (torch_native_macs: their share of the MAC terms plus their own term), and
/// the pooling layers' terms (bytes and count: PyTorch pools plain NCHW tensors far slower than
/// oneDNN's blocked ones).
/// The last two are no terms of the prior: the network's activation bytes at 1 ns a byte
/// (kActivationBytesMs), a cost the source may not pay at all (carb's engine folds batch-norm into
/// its convs and runs ReLU as their post-op; PyTorch eager passes over every conv output again),
/// and the fully connected layer's MACs at 1 ns a MAC (kFcMacMs), a cost the source hardly pays
/// (Debian's libtorch runs at::linear on a generic BLAS: 17 times carb's engine's fc on ResNets,
/// docs/torch.md).
enum class AdditivePart {
  kMacs,
  kBytes,
  kLayers,
  kIntercept,
  kTorchNativeMacs,
  kPool,
  kActivationBytes,
  kFcMacs
};
inline constexpr std::size_t kAdditivePartCount =
    static_cast<std::size_t>(AdditivePart::kFcMacs) + 1;
/// The parts that are terms of the prior, and sum to it: all but kActivationBytes and kFcMacs.
inline constexpr std::size_t kPriorPartCount = kAdditivePartCount - 2;
/// kActivationBytes' reference cost, ms per byte: 1 ns.
inline constexpr double kActivationBytesMs = 1e-6;
/// kFcMacs' reference cost, ms per MAC: 1 ns.
inline constexpr double kFcMacMs = 1e-6;
using AdditiveParts = std::array<double, kAdditivePartCount>;

/// The name of carb's architecture feature schema. "carb-ir-2" added the per-layer-class totals
/// and the per-layer roofline sums to "carb-ir-1"; "carb-ir-3" the classes of other networks
/// than ResNets (depthwise, grouped and other convolutions, data movement) and every class's
/// layer count; "carb-ir-4" the engine plan's arena and prepare's peak (engine_arena_bytes,
/// prepare_peak_bytes); "carb-ir-5" the MACs PyTorch runs off oneDNN (torch_native_macs). A
/// model of another schema must be refitted.
inline constexpr std::string_view kArchitectureSchema = "carb-ir-5";
/// The feature schema of a kernel model (dataset_from_kernels): one row per kernel of the engine
/// that timed it (carb's CPU engine, or PyTorch's), the features engine::kernel_features, the
/// target the kernel's part of a whole pass.
inline constexpr std::string_view kKernelSchema = "kernels";
/// The architecture-only feature names of schema kArchitectureSchema.
const std::vector<std::string>& architecture_feature_names();
/// Whether an architecture feature is one of the per-layer-class totals or per-layer roofline
/// sums (what "carb-ir-2" added and "carb-ir-3" extended), which the memory target does not use.
bool is_layer_feature(std::string_view name);
/// Writes a configuration's architecture features (schema kArchitectureSchema) to `out`.
void architecture_features(const Config& config, const Features& features, float* out);

/// The successful measurements of one device in a store, as a dataset (latest measurement per
/// configuration). `device` may be empty when the store holds one device; otherwise throws
/// carb::Error (input) listing the devices. Latencies are divided by the device's drift as
/// `drift` says, relative to `reference_ms` (a model's) or to the median of the store's probes;
/// DriftMode::kOn throws carb::Error (input) when the probes do not cover every row.
/// A non-empty `instance` keeps only the rows that host instance measured (a prefix of it is
/// enough); throws carb::Error (input), listing the instances, when it measured none.
[[nodiscard]] Dataset dataset_from_store(const Store& store, std::string_view device = {},
                                         DriftMode drift = DriftMode::kOff,
                                         std::optional<double> reference_ms = std::nullopt,
                                         std::string_view instance = {});

/// The rows of `data` at `indices`, in that order.
[[nodiscard]] Dataset subset(const Dataset& data, const std::vector<std::size_t>& indices);

/// The instances of a dataset in words, e.g. "3d1219c7:e8c3e171 (600 rows), unrecorded (24 rows)".
std::string instances_text(const std::map<std::string, std::size_t>& instances);
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
/// A kernel model's dataset (schema kKernelSchema) from `carb kernels --format csv` outputs: one
/// row per kernel the device ran (an op of carb's CPU engine's execution plan, or one of
/// PyTorch's ATen operators, one per IR layer), its features the columns named by
/// engine::kernel_feature_names(), its target ("latency", ms) the kernel's part of its whole
/// pass (share x pass_ms), so that a network's kernels predicted and summed estimate its pass.
/// An eltwise step run after its kernel (a name ending "(step)") counts in that kernel's row, as
/// the plan has no op of its own for it. A configuration any of whose kernels ran one of
/// oneDNN's reference implementations ("ref:...", tens to thousands of times slower than the
/// optimised ones, and chosen by what no feature says) is left out, and `notes` (when given)
/// says how many. Each target is divided by its configuration's drift factor (data.drift) as
/// `drift` says: the drift probe's latency at the configuration's moment (`carb kernels`'
/// probe_ms, per table: one configuration timed in two tables was timed at two moments) over
/// the median of every configuration's, when every row has one of one probe
/// configuration (auto), the same or an error saying which row has not (on), or never (off).
/// The device is the timings' (their device, device_name and instance columns: data's
/// device_fingerprint, device_name, row_instance and instances; timings of carbs before them
/// have none, and their rows' instance is unrecorded, ""). Throws carb::Error (input) with
/// file:line:column on a missing column, a kernel that names no IR layers (no features), a cell
/// that is not a number, or a row timed on another device than an earlier row.
Dataset dataset_from_kernels(const std::vector<CsvTable>& tables,
                             std::vector<std::string>* notes = nullptr,
                             DriftMode drift = DriftMode::kAuto);

// ---------------------------------------------------------------------------------------------
// Fitting

/// How the ridge prior takes part.
enum class PriorMode {
  kNone,    ///< trees only
  kMember,  ///< a fourth blend member
  kBase,    ///< the base the trees correct: trees fit the prior's log residuals
  /// The additive layer-cost prior is the base the trees correct, for latency and energy (sums
  /// over layers, so it carries to network families the trees never saw); other targets keep
  /// the ridge as their base.
  kAdditive,
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
  PriorMode prior = PriorMode::kAdditive;  ///< docs/model.md, "Priors"
  int threads = 0;                         ///< XGBoost threads; 0 = all cores
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
  /// Leave-family-out: the rows of these families (Dataset::family) are the test rows, the model
  /// is fitted on the others (and its training domain is theirs). Empty: a stratified split.
  std::vector<std::string> hold_out;
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

// ---------------------------------------------------------------------------------------------
// Training domain (docs/model.md, "Training domain")

/// A feature's range over the rows a model was fitted on.
struct FeatureRange {
  float min = 0, max = 0;
};

/// No feature: a DomainJudgement's outside_feature when every feature is in its range.
inline constexpr std::size_t kNoFeature = static_cast<std::size_t>(-1);

/// How one configuration's features stand against the rows a model was fitted on.
struct DomainJudgement {
  /// Inside every feature's range and no farther from its nearest training row than the
  /// threshold: its predictions interpolate.
  bool inside = true;
  /// Its distance to the nearest training row, in the standardized space of the domain's summary
  /// features, over the threshold (<= 1: as close as 99% of the training rows are to their own
  /// nearest other row); 0 where the domain keeps no rows (model files before carb 0.3).
  double distance_ratio = 0;
  std::size_t outside_feature = kNoFeature;  ///< the first feature outside its range
  /// How far outside its range the farthest feature lies, in ranges (0 inside the box).
  double box_excess = 0;
  std::size_t nearest = kNoFeature;  ///< the nearest training row (TrainingDomain::id)
  /// Of a network family (Dataset::family) none of the training rows is: nothing about it was
  /// learned, whatever its features (leave-family-out on the zoo: docs/benchmarks.md).
  bool new_family = false;
  /// By how much screening's "widen" policy multiplies the interval's log-width:
  /// max(1, distance_ratio, 1 + box_excess).
  double widening() const;
};

/// Where a model was fitted: each feature's range over its training rows (a box), and those
/// rows in a standardized space of summary features (the knobs and the network's size; every
/// feature of a table), so that a configuration is judged jointly by its distance to the nearest
/// training row and not only feature by feature. Copies share one immutable state.
class TrainingDomain {
 public:
  /// No domain (a model file written before carb recorded one): everything lies inside.
  TrainingDomain();
  /// The domain of `data`'s rows.
  static TrainingDomain of(const Dataset& data);
  /// This domain and `more`'s rows (a transfer's): ranges widened, rows and families added, the
  /// joint space's centre, scale and threshold kept. An unknown domain stays unknown.
  [[nodiscard]] TrainingDomain extended(const Dataset& more) const;

  bool empty() const;  ///< no ranges: unknown
  bool joint() const;  ///< keeps its training rows, so judge() measures distance too
  const std::vector<FeatureRange>& ranges() const;   ///< per feature of the schema
  const std::vector<std::string>& features() const;  ///< the joint space's features
  double threshold() const;                          ///< distance of ratio 1 in the joint space
  std::size_t rows() const;                          ///< training rows kept
  const std::string& id(std::size_t row) const;      ///< a kept row's configuration key (or line)

  /// Judges one row of features (the schema's order). Thread-safe.
  [[nodiscard]] DomainJudgement judge(const float* row) const;
  /// And its network family (family_of): one the training rows do not have lies outside too.
  [[nodiscard]] DomainJudgement judge(const float* row, const std::string& family) const;
  /// The network families of the training rows (Dataset::family), sorted; empty where unknown
  /// (a table, or a model file written before carb recorded them), and then any family is known.
  const std::vector<std::string>& families() const;
  /// Whether `family` is one the training rows are not of (false where families() is empty).
  bool new_family(const std::string& family) const;

  nlohmann::json to_json() const;
  /// Throws carb::Error (input) naming `origin` when the JSON does not fit `feature_names`.
  static TrainingDomain from_json(const nlohmann::json& json,
                                  const std::vector<std::string>& feature_names,
                                  const std::string& origin);

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

/// Why a judged row lies outside, in words: "whose widest_channels is 96, fitted on 128 to
/// 2560", or "2.3x farther from the nearest fitted configuration (KEY) than 99% of those are from
/// theirs"; "" when it lies inside.
/// With `family` (the row's), a new family reads "whose family F the model never saw (it saw
/// A, B)".
std::string domain_text(const TrainingDomain& domain, const DomainJudgement& judgement,
                        const float* row, const std::vector<std::string>& feature_names,
                        const std::string& family = {});

/// A configuration's network family (Dataset::family): an imported architecture's name, or
/// "resnet" for carb's own ResNet knobs.
std::string family_of(const Config& config);

/// A kernel model's whole-pass intervals: how far the passes of architectures held out of a first
/// fit fell from their kernels' predicted sums.
struct KernelPassInterval {
  double half_width = 0;           ///< |log(pass / sum)| at the coverage (split conformal)
  std::size_t configurations = 0;  ///< held-out configurations it was calibrated on
  std::size_t architectures = 0;   ///< of this many architectures held out
};

/// A fitted CARB predictor for one device (or one table). Copyable is not needed: move-only.
class Predictor {
 public:
  /// Fits on `data` (split as the options say). Throws carb::Error (input) on too few rows, a
  /// target that is all NaN or has negative values.
  [[nodiscard]] static Predictor fit(const Dataset& data, const FitOptions& options,
                                     FitReport* report);
  /// Reads a model file; throws carb::Error (input) naming the file when it is not a carb model,
  /// truncated, corrupt, or from a newer format.
  [[nodiscard]] static Predictor load(const std::string& path);
  [[nodiscard]] static Predictor from_json_text(std::string_view text, const std::string& origin);

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
  /// The host instances its rows were measured on, with their counts (Dataset::instances);
  /// empty for a table model or a model file from before carb recorded them.
  const std::map<std::string, std::size_t>& device_instances() const;
  /// The drift correction of the latencies it was fitted on (applied == false: none): its
  /// latencies are the device's at the speed where the probe took drift().reference_ms.
  const DriftCorrection& drift() const;
  double coverage() const;
  /// The test-split scores recorded at fit time.
  const FitReport& fit_report() const;

  /// The rows the model was fitted on, as a domain to judge configurations against (a
  /// transferred model's is its source's with the transfer's rows and their families added).
  /// Empty for a model file written before carb recorded it.
  const TrainingDomain& training_domain() const;

  /// Out-of-sample predictions of the configurations it was fitted on, per target in the
  /// target's unit: on a training row, from the fold of an out-of-fold fit that did not see it;
  /// on its validation, calibration and test rows, its own. A transfer from this model calibrates
  /// its intervals for configurations new to it with these (docs/model.md, "Transfer"). `ids`
  /// empty: none (a table or kernel model, a transfer, a model file before carb kept them);
  /// a target's `values` empty where it is unavailable.
  struct OutOfSample {
    std::vector<std::string> ids;
    std::vector<std::vector<double>> values;  ///< [target][row of ids]
  };
  const OutOfSample& out_of_sample() const;

  /// Predicts every target for `rows` rows of features (row-major, the schema's order).
  /// Result: [target][row]. With `families` (each row's, family_of), a row of a family the
  /// training domain does not know gets the target's new-family interval where the fit could
  /// calibrate one (new_family_half_width), at least as wide as its own. A transferred model
  /// stretches its own intervals to its source's new-family interval (widen_for_new_family).
  [[nodiscard]] std::vector<std::vector<TargetPrediction>> predict(
      const float* x, std::size_t rows, const int* batch,
      const std::vector<std::string>* families = nullptr) const;
  /// Per target, the log1p half-width of the intervals of a family the model never saw, from
  /// leave-one-family-out fits of its additive base; 0 where it has none (fewer than 3
  /// families fitted on, no additive base or an older model file). A transferred model's are its
  /// source's: what a family neither saw costs is as uncertain on the new device.
  [[nodiscard]] std::vector<double> new_family_half_widths() const;
  /// Widens `p`, a prediction of target `t`, to at least the new-family interval about its
  /// value: its half-width in the target's log1p(scale x value) space, as the model's own
  /// intervals are (a transferred model: its source's width and scale). Nothing where the model
  /// has no new-family width or `p` is unavailable.
  void widen_for_new_family(TargetPrediction& p, std::size_t t) const;
  /// Predictions of each target's cheapest member (the ridge prior, where there is one) with
  /// their own split-conformal intervals: stage 1 of screening ranks whole spaces with these.
  [[nodiscard]] std::vector<std::vector<TargetPrediction>> predict_cheap(const float* x,
                                                                         std::size_t rows) const;
  /// Predictions of each member alone and of the blend before the corrector, in the targets'
  /// units, for evaluation: [target] -> method name -> values. Unavailable targets are empty.
  /// For a transferred model: the source model's uncorrected predictions ("source") and each
  /// simple correction fitted on all the target rows ("scale", "loglinear", "structural").
  std::vector<std::vector<std::pair<std::string, std::vector<double>>>> predict_members(
      const float* x, std::size_t rows, const int* batch) const;

  /// Target `t`'s additive layer-cost prior split by kind of term, per row, in the target's
  /// unit (AdditivePart's order). Empty when the target has none (memory, tables).
  std::vector<AdditiveParts> additive_parts(const float* x, std::size_t rows, std::size_t t) const;

  /// A kernel model's whole-pass interval (fit_kernel_model); nullopt for other models and a
  /// kernel model fitted without one.
  const std::optional<KernelPassInterval>& kernel_pass_interval() const;

  /// Whether this model was fitted by transfer_fit (from a source model of another device).
  bool transferred() const;
  /// The source model of a transferred model; null otherwise.
  const Predictor* transfer_source() const;

 private:
  friend struct model_detail::PredictorFactory;
  struct Impl;
  explicit Predictor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class EngineMemoryPlanner;

/// Scores a predictor on a dataset: carb per target, plus each member alone. When the dataset's
/// device differs from the model's, this is a transfer evaluation (R², Spearman, slope matter).
/// With a planner, carb's memory is the engine's plan (the model's own is "memory-model").
[[nodiscard]] std::vector<MethodScores> evaluate(const Predictor& predictor, const Dataset& data,
                                                 const EngineMemoryPlanner* planner = nullptr);

/// The rows of `store` that carb evaluate scores `model` on: `device`'s (a fingerprint or what
/// dataset_from_store takes), or, where it is empty, the model's own device when the store has
/// it, else the store's only device (a transfer). kAuto divides latencies by the drift only where
/// the model's fit did (else none); the model's probe reference applies to rows of its own
/// device, and another device's latencies are corrected relative to that device's own probes.
[[nodiscard]] Dataset evaluation_dataset(const Predictor& model, const Store& store,
                                         std::string_view device, DriftMode drift,
                                         std::string_view instance = {});

// ---------------------------------------------------------------------------------------------
// Transfer to another device (docs/model.md, "Transfer")

/// How transfer_fit fits.
struct TransferOptions {
  std::uint64_t seed = 1;  ///< the cross-validation folds and the residual trees
  double coverage = 0.9;   ///< nominal coverage of the prediction intervals
  int threads = 0;         ///< XGBoost threads; 0 = all cores
  /// Models of further devices (not owned; each a model of carb's measurements with the source's
  /// feature schema and targets, not itself a transfer): their predictions join the source's in
  /// the "sources" candidate, a line in the natural logs of every model's prediction. A second
  /// device's difference from the new one carries part of what a few rows cannot pin down.
  std::vector<const Predictor*> more_sources;
};

/// Throws carb::Error (input) unless `model` can be a transfer's source: a model of carb's
/// measurements (not of a table or of kernel timings) that is not itself a transfer. `name`
/// names it in the message (its path, or "the source model").
void check_transfer_source(const Predictor& model, const std::string& name);

/// What transfer_fit chose for one target, and why.
struct TransferTargetReport {
  std::string target;
  bool available = false;
  std::string reason;  ///< why the target is unavailable
  /// "source", "scale", "loglinear", "structural", "feature-ridge", "residual-trees", "sources"
  /// (with TransferOptions::more_sources) or "refit".
  std::string method;
  std::string why;  ///< the choice in words
  /// Each candidate's cross-validated mean absolute percentage error on the target rows, %.
  std::vector<std::pair<std::string, double>> cv_mape;
  std::size_t rows = 0;   ///< target rows fitted on
  std::size_t folds = 0;  ///< cross-validation folds
  std::string interval;   ///< "cross-conformal", or "student-t" (robust; pooled with the source's
                          ///< spread where it holds: too few rows)
  double half_width = 0;  ///< natural-log half-width of the intervals
  /// The same for configurations the source's data does not have: from the same out-of-fold
  /// fits applied to the source's out-of-sample predictions of the rows it has
  /// (Predictor::out_of_sample); half_width where the source kept none or no row is of its data.
  double new_half_width = 0;
};

/// What transfer_fit did.
struct TransferReport {
  std::string source_device;  ///< the source model's device name and fingerprint
  std::vector<std::string> more_source_devices;  ///< the same of TransferOptions::more_sources
  std::vector<TransferTargetReport> targets;
  std::vector<std::string> notes;
  double fit_seconds = 0;
};

/// The least number of target rows a refit from scratch is offered on, as a candidate.
inline constexpr std::size_t kTransferRefitRows = 200;
/// The least number of rows of a network family the source never saw from which a transfer
/// corrects more than one factor: the structural correction and the source as it is need them.
inline constexpr std::size_t kTransferFamilyRows = 4;

/// Fits a model of `target`'s device from `source` (another device's model) and `target`'s rows:
/// per target, candidate corrections of the source's predictions (one factor; log-linear; the
/// source's additive layer-cost prior with its compute, memory and per-layer terms reweighted;
/// trees on the residual; a fit from scratch; for rows of a network family the source never
/// saw, the source as it is; with options.more_sources, a line in every source's prediction)
/// are cross-validated on the target rows, and the default (log-linear;
/// for a new family's rows the structural one) is kept unless another beats it by more than one
/// standard error. Intervals
/// come from out-of-fold residuals: the chosen method's, cross-conformal, from 40 rows; below,
/// those of the choice cross-validated whole (each fold choosing anew), in a Student-t
/// interval. Throws carb::Error (input) when a source and the
/// data differ in feature schema or targets, a source is itself a transfer, or the data has no
/// rows.
[[nodiscard]] Predictor transfer_fit(const Predictor& source, const Dataset& target,
                                     const TransferOptions& options, TransferReport* report);

/// The `k` rows of `x` (`rows` rows of the source's features, with their batch sizes) that a
/// transfer from `source` learns most from: spread over block types and batch regimes in
/// proportion, and within each over the source's predicted latency (evenly spaced quantiles from
/// a seeded offset). Deterministic by seed; all rows when k >= rows. Sorted indices.
[[nodiscard]] std::vector<std::size_t> choose_transfer_rows(const Predictor& source, const float* x,
                                                            std::size_t rows, const int* batch,
                                                            std::size_t k, std::uint64_t seed);
/// The same by uniform random choice, for comparison.
std::vector<std::size_t> choose_random_rows(std::size_t rows, std::size_t k, std::uint64_t seed);

/// Which of the configurations `ids` (keys, or a table's row names) the data `source` was fitted
/// on has (its training domain's rows, test split included): on those the source's predictions
/// are in-sample, and a correction fitted or scored there looks better than it will be on a
/// configuration new to the source. All false where the domain keeps no rows.
[[nodiscard]] std::vector<bool> known_to(const Predictor& source,
                                         const std::vector<std::string>& ids);

/// How a transfer scored on held-out rows chooses the rows it is fitted on.
enum class TransferChoice {
  kSpread,  ///< choose_transfer_rows: what carb profile's transfer choice measures
  kRandom,  ///< choose_random_rows, for comparison
};
/// "spread" or "random"; nullopt otherwise.
[[nodiscard]] std::optional<TransferChoice> parse_transfer_choice(std::string_view text);

/// A transfer fitted on some rows of a device's data and scored on the rest.
struct HeldOutTransfer {
  Predictor model;
  TransferReport report;
  std::vector<std::size_t> fitted;    ///< rows of the data it was fitted on, sorted
  std::vector<std::size_t> held;      ///< the rest, scored
  std::vector<std::size_t> held_new;  ///< of those, the configurations new to the source
  std::vector<MethodScores> scores;   ///< on `held`, as evaluate() scores
  /// On `held_new` (empty where none is): on the other held-out rows the source's predictions
  /// are in-sample, and the transfer looks better there than on a configuration new to it.
  std::vector<MethodScores> scores_new;
  bool memory_planned = false;  ///< carb's memory is the engine's plan on this machine
};
/// transfer_fit on `k` rows of `data` chosen by `choice` (seeded by options.seed), scored on
/// the rest. k = 0, or k at least data's rows: fitted on all of them, none scored.
[[nodiscard]] HeldOutTransfer transfer_held_out(const Predictor& source, const Dataset& data,
                                                std::size_t k, TransferChoice choice,
                                                const TransferOptions& options);

/// How far a device is from a model's: per target, measured / predicted over some rows of it
/// (calibration configurations of different sizes, or any measured rows).
struct DeviceDistance {
  std::string target;
  std::size_t rows = 0;      ///< rows with a measured value and an available prediction
  double ratio = 1;          ///< geometric mean of measured / predicted
  double low = 1, high = 1;  ///< the smallest and largest ratio
  double spread = 0;         ///< standard deviation of log(measured / predicted)
};
/// One DeviceDistance per target of `model` (rows = 0 where none could be compared).
[[nodiscard]] std::vector<DeviceDistance> device_distance(const Predictor& model,
                                                          const Dataset& data);
/// "latency 1.27x (1.08x-1.49x over 16 rows), energy ..., memory 1.00x ..."
std::string distance_text(const std::vector<DeviceDistance>& distances);

// ---------------------------------------------------------------------------------------------
// Engine memory from the engine's own plan

/// Where a model's memory predictions can come from the engine itself: carb's engine plans
/// every byte before it runs (Device::plan_memory), so on this machine's device of the model's
/// engine (the same kind, library, instruction set and threads: engine_part of the model's
/// fingerprint) its peak memory is known exactly, unseen knob values included.
class EngineMemoryPlanner {
 public:
  /// The planner for `model`, or null with the reason in `why` (no such device here, a table
  /// model, or a model without a memory target).
  static std::unique_ptr<EngineMemoryPlanner> for_model(const Predictor& model, std::string* why);
  ~EngineMemoryPlanner();
  EngineMemoryPlanner(const EngineMemoryPlanner&) = delete;
  EngineMemoryPlanner& operator=(const EngineMemoryPlanner&) = delete;

  /// Replaces the memory prediction of each of `configs` (predictions as Predictor::predict
  /// returns them, [target][row]) by its plan: value, low and high all the planned peak. A
  /// configuration the engine does not support keeps the model's. Returns how many it planned.
  std::size_t apply(const std::vector<Config>& configs,
                    std::vector<std::vector<TargetPrediction>>& predictions) const;
  /// The same for some rows only: each (row of `predictions`, its configuration).
  std::size_t apply(const std::vector<std::pair<std::size_t, Config>>& rows,
                    std::vector<std::vector<TargetPrediction>>& predictions) const;
  /// The engine it plans for (engine_part of the model's fingerprint).
  const std::string& engine() const;

 private:
  struct State;
  explicit EngineMemoryPlanner(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// The feature rows of configurations under schema kArchitectureSchema, with their batch sizes.
struct FeatureRows {
  std::vector<float> x;
  std::vector<int> batch;
};
FeatureRows feature_rows(const std::vector<Config>& configs);
/// The same for points of a space by index, through the space's feature cache (fast).
FeatureRows feature_rows(const Space& space, SpaceFeatures& features,
                         const std::vector<std::uint64_t>& indices);

// ---------------------------------------------------------------------------------------------
// Predicting what a user names (carb predict, the Python module)

/// The most configurations whose memory plan_memory asks the engine for: planning takes about a
/// millisecond a configuration, worth it for what a user reads, not for a whole space.
inline constexpr std::size_t kMostPlannedConfigurations = 10000;

/// Replaces the memory predictions of `configs` (Predictor::predict's result for them,
/// [target][row]) by the engine's own plan (EngineMemoryPlanner) where this machine runs the
/// model's engine and there are at most kMostPlannedConfigurations of them. Returns how many it
/// planned (0: none; the model's predictions stand), with the engine in `engine` when it did.
std::size_t plan_memory(const Predictor& model, const std::vector<Config>& configs,
                        std::vector<std::vector<TargetPrediction>>& predictions,
                        std::string* engine);

/// The feature rows of a table model (Predictor::schema() "table") from a table holding its
/// feature columns by name: a feature "log_NAME" is column NAME through log1p, unless the table
/// has a column "log_NAME" itself. Batch sizes are 0. Throws carb::Error (input) with
/// file:line:column on a cell that is not a finite number, or naming the columns the table has
/// when it lacks one.
FeatureRows table_feature_rows(const Predictor& model, const CsvTable& table);
/// A table's rows to score a table model on (carb evaluate --table): its features read as
/// table_feature_rows reads them, in the model's layout whatever span these rows have (a fit
/// decides from its rows' span which columns go through log1p), its targets from the columns
/// the model was fitted on, batch sizes from `batch_column` (or 0). Throws carb::Error (input)
/// as dataset_from_table does, and when `model` was not fitted on a table.
[[nodiscard]] Dataset table_dataset_for(const Predictor& model, const CsvTable& table,
                                        const std::string& batch_column = "");

/// Fits a kernel model on dataset_from_kernels' data: the ensemble on every kernel, and whole-pass
/// intervals from a first fit without a fifth of the architectures (chosen by the seed), whose
/// configurations' passes against their predicted sums calibrate them (split conformal at
/// `options.coverage`). Needs 5 architectures and 10 held-out configurations for the intervals;
/// with fewer, a note in `report` and in the model's own fit report says a prediction's interval
/// is its kernels' bounds summed.
[[nodiscard]] Predictor fit_kernel_model(const Dataset& data, const FitOptions& options,
                                         FitReport* report);

/// Latency of each configuration predicted by a kernel model (schema kKernelSchema): every kernel
/// the model's engine runs for it predicted from its features, and summed. The engine is the
/// model's device's (engine_backend of its fingerprint): carb's CPU engine runs the ops of its
/// execution plan (engine::plan_execution), as do timings without a device; PyTorch runs one
/// ATen operator per IR layer. Its interval is the model's whole-pass interval about the sum
/// (fit_kernel_model), or where it has none its kernels' bounds summed. One prediction per
/// configuration. Throws carb::Error (usage) when `model` is not a kernel model, or is of an
/// engine whose kernels carb does not know (CUDA's).
std::vector<TargetPrediction> predict_by_kernels(const Predictor& model,
                                                 const std::vector<Config>& configs);

}  // namespace carb
