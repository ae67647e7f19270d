// Characterization of measurement campaigns (method.md §6) and the self-contained HTML report:
// how each target scales across batch regimes and precisions, how well FLOPs alone explains it
// next to the CARB predictor, whether it transfers between devices, and interactive charts of
// all that plus predictions and screening results.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "carb/model.hpp"
#include "carb/screen.hpp"
#include "carb/screening.hpp"
#include "carb/space.hpp"
#include "carb/store.hpp"

namespace carb {

// ---------------------------------------------------------------------------------------------
// Campaign data, pooled from one or more databases by device

/// One configuration on a device, from its ok measurements (combine_repeated): the median of their
/// latencies and of their energies, memory from the latest (memory figures are deterministic).
struct MeasuredConfiguration {
  std::string key;
  Config config;
  std::string source;  ///< the database its latest ok measurement was read from
  double gflops = 0;   ///< analytic FLOPs of one forward pass of the whole batch / 1e9
  /// By Target (memory B, energy J, latency ms); nullopt where not measured (energy without a
  /// sensor).
  std::array<std::optional<double>, kTargetCount> values;
};

/// Everything measured on one device, across the databases read.
struct DeviceCampaign {
  std::string fingerprint;
  /// As recorded; when several devices read share a name, followed by " [" and the first 8 hex
  /// digits of the SHA-256 of the fingerprint "]".
  std::string name;
  std::string kind;                         ///< "cpu" or "cuda"
  std::vector<MeasuredConfiguration> rows;  ///< one per key (its ok measurements' median), by key
  /// Ok measurements per host instance (MeasuredTargets::host_instance, "" = unrecorded).
  std::map<std::string, std::size_t> instances;
  RepeatCount repeated;  ///< configurations measured more than once: rows of their median
  /// Per Target: why no row has a value ("" when some row has one).
  std::array<std::string, kTargetCount> missing_reason;
  /// Per Target: rows without a value though others have one.
  std::array<std::size_t, kTargetCount> rows_without_value{};
  /// Every measurement row by status, indexed by MeasurementStatus.
  std::array<std::size_t, 6> status_counts{};
  /// The latest failed (not ok) measurement of each key that has no ok one, ordered by key.
  std::vector<MeasurementOutcome> failures;
  std::vector<std::string> sources;  ///< the databases it was read from
};

/// The campaigns of one or more databases; a device measured in several is one device.
struct CampaignData {
  std::vector<std::string> sources;     ///< database paths, as given
  std::vector<DeviceCampaign> devices;  ///< in the order first recorded
};

/// Reads databases (each opened read-only through Store::open). Throws carb::Error (input) for a
/// missing file or one that is not a carb database, and when no database holds a device.
CampaignData load_campaigns(const std::vector<std::string>& paths);
/// The device `name_or_fingerprint` names (its exact fingerprint or name). Throws carb::Error
/// (input) listing the devices when none matches.
/// "" when one host instance measured the device; else the warning that its rows pool several
/// hosts as one device (same fingerprint, other machines or boots), naming them.
std::string pooled_hosts_warning(const DeviceCampaign& device);

const DeviceCampaign& find_device(const CampaignData& data, const std::string& name_or_fingerprint);
/// Keeps the devices of `data` that `names` name (find_device), each once, in the order first
/// named; every device when `names` is empty. Throws as find_device.
void keep_devices(CampaignData& data, const std::vector<std::string>& names);
/// A device's rows as a predictor dataset (schema kArchitectureSchema), to fit or score on.
Dataset device_dataset(const DeviceCampaign& device);

/// "memory", "energy" or "latency" with its unit for people: "B", "J", "ms".
std::string target_label(Target target);

// ---------------------------------------------------------------------------------------------
// Models the characterization and the report score

/// The CARB model of a device, if any, and where it came from.
struct DeviceModel {
  std::shared_ptr<const Predictor> predictor;  ///< null when there is none
  std::string source;                          ///< e.g. "model.json" or "fitted now (seed 1)"
  std::string reason;                          ///< why there is none
};

/// Throws carb::Error (input) naming the model by `name` when it was fitted on a table: a
/// characterization or a report scores models of carb's measurements.
void require_device_model(const Predictor& model, const std::string& name);
/// Reads the model file a characterization or a report scores; throws as Predictor::load and
/// require_device_model.
std::shared_ptr<const Predictor> load_device_model(const std::string& path);

/// Per device of `data`: `given` when it is that device's model; otherwise, when `fit` is set,
/// CARB fitted now on the device's rows (with baselines, so its test-split scores exist); a
/// device too small to fit gets the fit's reason.
std::vector<DeviceModel> device_models(const CampaignData& data,
                                       const std::shared_ptr<const Predictor>& given,
                                       const std::string& given_path,
                                       const std::optional<FitOptions>& fit);

// ---------------------------------------------------------------------------------------------
// Characterization (method.md §6)

/// Batch regimes: the predictor's batch tiers (docs/model.md): 1-8, 9-32, 33 and up.
struct RegimeMedian {
  std::string name;                  ///< "batch 1-8", "batch 9-32", "batch 33+"
  int batch_min = 0, batch_max = 0;  ///< the batch sizes measured in the regime
  std::size_t rows = 0;
  double median = 0;  ///< of the target over the regime's rows
};

/// A target's median at one batch size, and per GFLOP of work.
struct BatchMedian {
  int batch = 0;
  std::size_t rows = 0;
  double median = 0;
  /// Median of value / GFLOPs (J/GFLOP, ms/GFLOP); energy and latency only.
  std::optional<double> median_per_gflop;
};

/// The effect of a lower precision on a target: fp32 value / lower-precision value.
struct PrecisionEffect {
  Precision precision = Precision::kFp16;
  /// "matched pairs": median over configurations measured in both precisions, otherwise
  /// "group medians": median of all fp32 rows / median of all lower-precision rows (confounded
  /// by whatever else differs between the groups; said so).
  std::string method;
  std::size_t pairs = 0, fp32_rows = 0, rows = 0;
  double ratio = 0;
};

/// ln(value) = intercept + exponent * ln(GFLOPs), least squares over every row with a value.
struct FlopsFit {
  std::size_t rows = 0;
  double exponent = 0, intercept = 0;
  double r2 = 0;  ///< in log space, over the rows fitted
};

/// CARB's accuracy on a target next to the FLOPs-only baseline, on the model's test split.
struct CarbAccuracy {
  bool available = false;
  std::string reason;
  std::string source;  ///< the model's DeviceModel::source
  std::size_t test_rows = 0;
  double r2 = 0;        ///< CARB, linear space
  double flops_r2 = 0;  ///< flops-loglinear on the same split, linear space
};

/// One target on one device.
struct TargetCharacterization {
  Target target = Target::kMemory;
  bool available = false;
  std::string reason;  ///< why not available (e.g. no energy sensor)
  std::size_t rows = 0;
  std::vector<RegimeMedian> regimes;  ///< regimes with rows, lowest batch first
  /// Median of the highest-batch regime / median of the lowest (needs two regimes).
  std::optional<double> regime_ratio;
  std::string regime_ratio_reason;
  /// The same ratio with the networks held fixed: per network (a configuration less its batch
  /// size) measured in both the highest and the lowest regime, its median there over its median
  /// here; the median over those networks. Regime medians mix whatever networks each regime
  /// holds (a space capped in FLOPs admits only small networks at large batch); this does not.
  std::optional<double> matched_regime_ratio;
  std::size_t matched_networks = 0;
  std::vector<BatchMedian> by_batch;  ///< ascending batch
  /// Median per GFLOP at the smallest batch / at the largest (energy and latency).
  std::optional<double> small_batch_penalty;
  std::vector<PrecisionEffect> precision;  ///< one per lower precision measured
  std::string precision_reason;            ///< why there is none
  std::optional<FlopsFit> flops;
  std::string flops_reason;
  CarbAccuracy carb;
};

/// One device.
struct DeviceCharacterization {
  std::string fingerprint, name;
  std::size_t configurations = 0;
  std::array<TargetCharacterization, kTargetCount> targets;
  /// Energy's regime ratio / latency's: how far latency understates energy's growth with batch.
  std::optional<double> energy_latency_divergence;
  /// The same of the matched regime ratios.
  std::optional<double> matched_energy_latency_divergence;
  std::string divergence_reason;
};

/// A target's ratio between two devices (second / first) over the shared configurations with
/// one value of one knob: how the gap between two engines or machines moves with the network.
struct RatioGroup {
  std::string knob;   ///< "batch", "width", "resolution", "depth", "block" or "precision"
  std::string value;  ///< as the configuration key spells it, e.g. "0.5", "basic"
  std::size_t rows = 0;
  double geomean_ratio = 0;
};

/// A target between two devices, on the configurations both measured.
struct TargetTransfer {
  Target target = Target::kMemory;
  bool available = false;
  std::string reason;
  std::size_t shared = 0;
  double slope = 0, intercept = 0;  ///< least squares of the second device on the first
  double median_ratio = 0;          ///< median of second / first
  double geomean_ratio = 0, min_ratio = 0, max_ratio = 0;  ///< of second / first
  /// Shared configurations where the second device's value is the lower (faster, smaller).
  std::size_t second_lower = 0;
  /// geomean_ratio per knob value, knob by knob (each knob with two or more values shared),
  /// values in ascending order.
  std::vector<RatioGroup> by_knob;
  double spearman = 0;
  /// "transfers" (ranks and values: Spearman >= 0.9 and |slope - 1| <= 0.1), "ranks transfer"
  /// (Spearman >= 0.9: one device's model ranks for the other, values need a per-device model),
  /// "does not transfer".
  std::string verdict;
};

/// Two devices.
struct DeviceTransfer {
  std::string from_fingerprint, from_name, to_fingerprint, to_name;
  /// "engines": one machine, two inference engines (the fingerprints' host parts are equal: carb's
  /// engine against PyTorch); "machines": one engine on two machines (the engine parts are
  /// equal); "devices": both differ.
  std::string relation;
  std::array<TargetTransfer, kTargetCount> targets;
};

/// A DeviceTransfer::relation for people: "one machine, two inference engines", ...
std::string_view describe_relation(std::string_view relation);

/// Thresholds of the transfer verdict.
inline constexpr double kTransferRankThreshold = 0.9;
inline constexpr double kTransferSlopeTolerance = 0.1;
/// Fewest shared configurations for a transfer statistic.
inline constexpr std::size_t kMinSharedConfigurations = 3;

struct Characterization {
  std::vector<DeviceCharacterization> devices;
  std::vector<DeviceTransfer> transfers;  ///< every pair of devices, in device order
};

/// Characterizes every device of `data` (`models`: device_models' result, one per device, or
/// empty for no CARB accuracy) and every pair of devices.
Characterization characterize(const CampaignData& data, const std::vector<DeviceModel>& models);

/// The characterization as JSON text (for `carb characterize --format json` and the report).
std::string characterization_json(const Characterization& characterization);

// ---------------------------------------------------------------------------------------------
// The HTML report

/// A screening result (`carb screen --json`), as the report draws it.
struct ScreeningInput {
  std::string path;  ///< where it was read from
  ScreenResult result;
};

struct ReportInput {
  const CampaignData* data = nullptr;
  const Characterization* characterization = nullptr;
  std::vector<DeviceModel> models;  ///< per device, as characterize got them
  /// The model given on the command line (scored on every device), or null: then each device's
  /// own model is.
  std::shared_ptr<const Predictor> model;
  std::string model_path;
  std::optional<ScreeningInput> screening;
  std::string generated_at;  ///< ISO 8601 UTC
};

/// Throws carb::Error (usage) when this carb cannot write the HTML report: built with
/// CARB_REPORT=OFF, without the Vega-Lite scripts (the GPU check's build).
void require_html_report();

/// The report: one HTML file with the Vega-Lite scripts inlined, so it opens offline. Throws as
/// require_html_report() does.
std::string render_report(const ReportInput& input);

/// What write_report wrote.
struct ReportFile {
  std::size_t charts = 0;  ///< interactive charts in it
  std::size_t bytes = 0;
};

/// Renders the report and writes it to `path` through a temporary file beside it that then
/// replaces it, so a failed write never leaves half a report. Throws as render_report does, and
/// carb::Error (runtime) when the file cannot be written.
ReportFile write_report(const ReportInput& input, const std::string& path);

}  // namespace carb
