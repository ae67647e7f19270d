// The measurement database: one SQLite file per campaign (or shard) holding campaigns, devices,
// configurations, measurements with their provenance, and raw latency samples. Writes are
// idempotent by measurement key, so a campaign can be killed at any moment and resumed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace carb {

/// Points in time as the store keeps them: UTC, stored as ISO 8601 text with milliseconds.
using Timestamp = std::chrono::system_clock::time_point;

/// The outcome of measuring one configuration (design.md, "Errors" 3). `ok` and `unsupported`
/// are final; the others are failures that a resumed campaign retries up to a limit.
enum class MeasurementStatus { kOk, kUnsupported, kOom, kTimeout, kCrashed, kError };
std::string_view to_string(MeasurementStatus status);
std::optional<MeasurementStatus> parse_measurement_status(std::string_view text);
/// Whether a status is final: a measurement with it is never retried nor overwritten.
bool is_final(MeasurementStatus status);

/// Which clock a latency was read from: the device's own (CUDA events) or the host's wall clock
/// after synchronisation.
enum class SampleClock { kDevice, kWall };
std::string_view to_string(SampleClock clock);

/// The measurement key: SHA-256 (hex) of the configuration key, the device fingerprint, the
/// software versions string and the canonical dump of the protocol JSON (keys sorted, no
/// spaces), each prefixed by its length so no two inputs share an encoding. Throws carb::Error
/// (input) when `protocol_json` is not JSON.
std::string measurement_key(std::string_view configuration_key, std::string_view device_fingerprint,
                            std::string_view software_versions, std::string_view protocol_json);

/// One measurement campaign: a spec profiled under one protocol.
struct CampaignRecord {
  std::int64_t id = 0;  ///< assigned by the store
  std::string name;
  std::string spec_text;     ///< the design-space spec as written (YAML)
  std::string spec_hash;     ///< SHA-256 of spec_text; computed by the store
  Timestamp created_at;      ///< set by the store when the campaign is first recorded
  std::string carb_version;  ///< empty: this build's version
  std::string git_commit;    ///< empty: this build's commit
  std::string protocol_json = "{}";
};

/// A device measurements were made on. The fingerprint identifies it (e.g. a GPU UUID plus
/// driver, or CPU model plus cores and governor) and is supplied by the backend.
struct DeviceRecord {
  std::int64_t id = 0;  ///< assigned by the store
  std::string fingerprint;
  std::string kind;  ///< "cpu" or "cuda"
  std::string name;  ///< human-readable, e.g. "NVIDIA H200"
  /// JSON object: CPU model, cores, ISA, governor, GPU UUID, driver, library versions, ...
  std::string details_json = "{}";
};

/// Summary statistics of one clock's latency samples, ms.
struct LatencyStats {
  double median_ms = 0;
  double mean_ms = 0;
  double p5_ms = 0;
  double p95_ms = 0;
  double cv = 0;           ///< coefficient of variation: standard deviation / mean, dimensionless
  std::int64_t count = 0;  ///< samples; must equal the number of raw samples stored with it
  double ci_half_width_ms = 0;  ///< half-width of the 95% confidence interval of the median
  bool converged = false;       ///< whether the half-width met the protocol's target in time
};

/// One measurement: a configuration on a device under a protocol. Optional fields are NULL in
/// the database; a missing energy is NULL with its reason, never 0.
struct MeasurementRecord {
  std::string measurement_key;     ///< must equal measurement_key() of the fields below
  std::string configuration_key;   ///< canonical (carb::to_key)
  std::string device_fingerprint;  ///< of a device recorded with Store::ensure_device
  std::int64_t campaign_id = 0;
  std::string software_versions;  ///< e.g. "carb 0.1.0; oneDNN 2.6.3; driver 550.54"
  MeasurementStatus status = MeasurementStatus::kError;
  std::string detail;  ///< why a measurement failed, or notes on a successful one
  int attempts = 0;    ///< measurements made of this key so far; counted by the store on write
  Timestamp started_at;
  Timestamp finished_at;

  std::optional<LatencyStats> device_latency;  ///< device-side timing (absent on CPU)
  std::vector<double> device_samples_ms;       ///< raw device-side samples, in order
  std::optional<LatencyStats> wall_latency;    ///< host wall time; required when status is ok
  std::vector<double> wall_samples_ms;         ///< raw wall-time samples, in order

  std::optional<double> energy_j;            ///< total energy of one inference (whole batch), J
  std::optional<std::string> energy_method;  ///< e.g. "nvml-total-energy", "rapl-powercap"
  std::optional<std::string> energy_sensor;  ///< e.g. "GPU-1234...", "intel-rapl:0"
  std::optional<std::string> energy_null_reason;         ///< required when an ok row has no energy
  std::optional<double> energy_window_s;                 ///< length of the energy window, s
  std::optional<std::int64_t> energy_window_inferences;  ///< inferences in that window
  std::optional<double> idle_power_w;                    ///< idle-power baseline, W
  /// energy_j minus idle power over one inference's share of the window, J; it can be slightly
  /// negative through noise and is kept as measured.
  std::optional<double> dynamic_energy_j;

  std::optional<std::int64_t> engine_peak_bytes;        ///< allocator high-water mark, all buffers
  std::optional<std::int64_t> engine_weight_bytes;      ///< weights in the kernels' layouts
  std::optional<std::int64_t> engine_activation_bytes;  ///< the engine's activation arena
  std::optional<std::int64_t> engine_scratchpad_bytes;  ///< cuDNN workspace / oneDNN scratchpad
  std::optional<std::int64_t> process_peak_rss_bytes;   ///< worker ru_maxrss or NVML per-process
  std::optional<std::int64_t> baseline_rss_bytes;  ///< the same figure before the network existed

  std::string provenance_json = "{}";  ///< host, clocks, temperatures, throttling, versions, ...
  std::string protocol_json = "{}";    ///< protocol settings; part of the measurement key
};

/// What Store::write_measurement did.
enum class WriteOutcome {
  kInserted,  ///< the key was new
  kReplaced,  ///< a failed measurement of the key was replaced (attempts incremented)
  kKept,      ///< the key already had a final measurement, which was left as it was
};

/// The process that claims a key: host name and pid.
struct ClaimOwner {
  std::string host;
  std::int64_t pid = 0;
  /// This process.
  static ClaimOwner current();
  bool operator==(const ClaimOwner& other) const = default;
};

/// How a resumed campaign treats earlier attempts and other processes' claims.
struct ResumePolicy {
  int retry_limit = 3;  ///< most attempts per key; a failed key with this many is given up
  /// A claim older than this is stale whoever holds it: set it above the longest time one
  /// measurement can take (the worker timeout plus margin).
  std::chrono::seconds claim_timeout{3600};
};

/// What the predictor reads of one successful measurement: its configuration and targets.
struct MeasuredTargets {
  std::string configuration_key;
  std::string device_fingerprint;
  std::string started_at;   ///< ISO 8601 UTC, as stored
  std::string finished_at;  ///< ISO 8601 UTC, as stored
  Timestamp measured_at;    ///< the middle of the measurement: between started_at and finished_at
  /// Median latency of one inference (whole batch), ms: the device clock's where the device has
  /// one (CUDA events), else the host wall clock's.
  double latency_ms = 0;
  std::string latency_clock;                      ///< "device" or "wall"
  std::optional<double> energy_j;                 ///< NULL on a machine with no sensor
  std::string energy_null_reason;                 ///< why energy_j is NULL
  std::optional<std::int64_t> engine_peak_bytes;  ///< the engine allocator's high-water mark
  std::optional<std::int64_t> process_peak_rss_bytes;
  /// The host instance that measured it (provenance.host.instance: machine id and boot id, see
  /// host_instance); empty for rows measured before carb recorded it.
  std::string host_instance;
};

/// How many configurations combine_repeated() found measured more than once, and how many
/// measurements they had in all.
struct RepeatCount {
  std::size_t configurations = 0;
  std::size_t measurements = 0;
};

/// One row per configuration from one device's rows ordered by configuration key, then time (as
/// Store::ok_measurements returns them). A configuration measured more than once (the rounds of
/// `carb profile --rounds`, campaigns merged or pooled) gets the median of its latencies and of
/// its measured energies, and the rest from its latest row (memory figures are deterministic).
/// `last`, when given, receives the index in `rows` of each result's latest row.
std::vector<MeasuredTargets> combine_repeated(const std::vector<MeasuredTargets>& rows,
                                              RepeatCount* repeated = nullptr,
                                              std::vector<std::size_t>* last = nullptr);

/// One measurement key that two merged databases measured differently, both with a final
/// status: one version stays in `measurements`, the other is kept in `measurement_conflicts`.
struct MergeConflict {
  std::string measurement_key;
  std::string configuration_key;
  std::string device_fingerprint;
  std::string kept_from;   ///< where the version left in `measurements` came from: a source path,
                           ///< or "" for the target's own
  std::string other_from;  ///< where the version moved to `measurement_conflicts` came from
};

/// What Store::merge did with one source database. Every source measurement is counted once.
struct MergeReport {
  std::string source;
  std::int64_t measurements = 0;  ///< measurements in the source
  std::int64_t added = 0;         ///< keys the target did not have
  std::int64_t identical = 0;     ///< keys the target had with the same content: collapsed
  /// The target's version replaced by the source's: a failure by a final status or a later
  /// failure, or a conflict the source's version wins.
  std::int64_t replaced = 0;
  /// The source's version not taken: a failure where the target has a final status or a later
  /// failure, or a conflict the target's version wins.
  std::int64_t kept = 0;
  std::vector<MergeConflict> conflicts;  ///< final in both, different; counted in replaced/kept
  std::int64_t probes_added = 0;         ///< drift probes the target did not have
};

/// One measurement's outcome, whatever its status: what a campaign overview counts.
struct MeasurementOutcome {
  std::string configuration_key;
  std::string device_fingerprint;
  MeasurementStatus status = MeasurementStatus::kError;
  std::string detail;  ///< why it failed, or notes on a successful one
  int attempts = 0;
  std::string finished_at;  ///< ISO 8601 UTC, as stored
};

/// One drift probe: the campaign's fixed probe configuration measured briefly between its
/// configurations, so that the device's speed over time is known (docs/measurement.md, "Drift
/// probes"). Probes have no measurement key: each is a point in time, never resumed.
struct DriftProbeRecord {
  std::int64_t campaign_id = 0;
  std::string device_fingerprint;  ///< of a device recorded with Store::ensure_device
  std::string configuration_key;   ///< the probe configuration, canonical
  std::string software_versions;
  std::string protocol_json = "{}";  ///< the probe's own (short) protocol
  Timestamp measured_at;             ///< the middle of the probe's measurement
  MeasurementStatus status = MeasurementStatus::kError;
  std::string detail;
  std::string clock;                    ///< "device" or "wall": which clock `latency` is of
  std::optional<LatencyStats> latency;  ///< required when status is ok
  bool contended = false;               ///< other work took >= kContendedShare while it ran
};

/// A device's speed over time as its drift probes measured it: the probe's latency, relative to
/// a reference latency, at any moment between probes.
struct DriftCurve {
  std::string probe_key;    ///< the probe configuration the curve follows
  double reference_ms = 0;  ///< the probe latency that factor 1 stands for
  /// (time, probe latency in ms) in time order: each ok, uncontended probe's median, replaced by
  /// the median of three (it and its neighbours; the first and last probes take the three at
  /// their end), so one outlying probe moves nothing.
  std::vector<std::pair<Timestamp, double>> points;
  /// Furthest a moment may lie from a probe on each side (or from the nearest one, before the
  /// first and after the last probe by half of it) and still get a factor.
  double max_gap_s = 300;

  bool empty() const { return points.empty(); }
  /// The probe's latency at `time` over reference_ms, interpolated linearly in time between the
  /// probes around it; nullopt where the probes lie too far (max_gap_s) or there are none.
  std::optional<double> factor_at(Timestamp time) const;
};

/// The drift curve of `probes` (one device's): their most frequent probe configuration's ok,
/// uncontended probes. reference_ms: the given one (a model's), else the median of those probes.
DriftCurve drift_curve(const std::vector<DriftProbeRecord>& probes,
                       std::optional<double> reference_ms = std::nullopt);

/// Formats of Store::export_measurements.
enum class ExportFormat { kCsv, kJsonLines };

/// How an exported column's values read: integers, reals, text, integers 0 and 1 that mean false
/// and true, or JSON text (stage_blocks, stage_widths, provenance, protocol).
enum class ExportKind { kInteger, kReal, kText, kBoolean, kJson };
/// One column of an export: its name and kind.
struct ExportColumn {
  std::string name;
  ExportKind kind = ExportKind::kText;
};
/// One value of an exported row: NULL (monostate), an integer, a real or text.
using ExportValue = std::variant<std::monostate, std::int64_t, double, std::string>;

/// An open carb database. Move-only; not safe to share between threads (open one per thread).
/// Every method throws carb::Error: runtime for SQLite failures, input for bad records.
class Store {
 public:
  /// Schema version this build reads and writes (PRAGMA user_version).
  static constexpr int kSchemaVersion = 6;
  /// PRAGMA application_id of carb databases: "CARB" in ASCII.
  static constexpr std::int32_t kApplicationId = 0x43415242;

  /// Opens an existing carb database, migrating an older schema forward. Throws carb::Error
  /// (input) when the file is missing, not a carb database, or from a newer carb.
  static Store open(const std::string& path);
  /// Like open(), but creates the file and schema when the file is missing or empty.
  static Store create_or_open(const std::string& path);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  const std::string& path() const;
  /// PRAGMA integrity_check's answer: "ok" or the problems found.
  std::string integrity_check() const;

  /// Records a campaign, or finds the one with the same name, spec and protocol; returns its id.
  std::int64_t ensure_campaign(const CampaignRecord& campaign);
  std::optional<CampaignRecord> find_campaign(std::int64_t id) const;
  /// Records a device, or finds the one with the same fingerprint (its other fields are kept as
  /// first recorded); returns its id.
  std::int64_t ensure_device(const DeviceRecord& device);
  std::optional<DeviceRecord> find_device(std::string_view fingerprint) const;
  /// Every device recorded, in the order they were first recorded.
  std::vector<DeviceRecord> devices() const;
  /// Every successful measurement (status ok), of one device or of all when `fingerprint` is
  /// empty, ordered by configuration key, then finish time.
  std::vector<MeasuredTargets> ok_measurements(std::string_view fingerprint = {}) const;
  /// Every measurement of any status, of one device or of all when `fingerprint` is empty,
  /// ordered by configuration key, then finish time.
  std::vector<MeasurementOutcome> outcomes(std::string_view fingerprint = {}) const;

  /// Writes one drift probe in its own transaction. Throws carb::Error (input) for a probe of an
  /// unrecorded device or campaign, an ok probe without a latency, or a non-finite value.
  void write_probe(const DriftProbeRecord& probe);
  /// Every drift probe of one device, or of all when `fingerprint` is empty, in time order.
  std::vector<DriftProbeRecord> drift_probes(std::string_view fingerprint = {}) const;

  /// Writes one measurement, its configuration and its raw samples in one transaction, and
  /// drops any claim on its key. Idempotent by key: a final row is never replaced; a failed
  /// row is replaced and its attempt count carried forward.
  WriteOutcome write_measurement(const MeasurementRecord& record);
  /// The stored measurement of a key, raw samples included.
  std::optional<MeasurementRecord> find_measurement(std::string_view measurement_key) const;

  /// The keys, in the given order, that still need measuring: no row, or a failed row with
  /// fewer than policy.retry_limit attempts. Claims are not consulted: claim() decides.
  std::vector<std::string> pending(const std::vector<std::string>& keys,
                                   const ResumePolicy& policy) const;
  /// Claims a key for `owner` so no other process measures it. False when the key needs no
  /// measuring (see pending()) or another live owner holds a fresh claim. A claim is stale,
  /// and taken over, when its owner ran on this host and its pid is gone, or when it is older
  /// than policy.claim_timeout. Claiming again as the same owner refreshes the claim.
  bool claim(std::string_view measurement_key, const ClaimOwner& owner, const ResumePolicy& policy);
  /// Drops `owner`'s claim on a key without writing a measurement (e.g. on interruption).
  void release(std::string_view measurement_key, const ClaimOwner& owner);

  /// Merges the carb database at `source_path` into this one by measurement key, in one
  /// transaction (a failure leaves this database as it was). Campaigns, devices and
  /// configurations are matched by identity (name + spec + protocol, fingerprint, key). A key
  /// this database lacks is added with its samples; an identical one (every column but the row
  /// ids, the campaign, the device and the raw samples) collapses; otherwise a final status
  /// beats a failure, the failure with more attempts (then the later one) beats another, and
  /// of two final ones the earlier finished (then the smaller content hash) stays while the
  /// other is kept in `measurement_conflicts`. So merging is idempotent and its result does
  /// not depend on the order of the sources. Throws carb::Error (input) when the source is not
  /// a carb database, fails PRAGMA quick_check, or is this database's own file.
  MergeReport merge(const std::string& source_path);

  /// Streams one row per measurement (ordered by configuration key, then measurement key), joined
  /// with its campaign, device, configuration knobs and analytic features (carb::compute_features),
  /// as CSV with a header or as JSON Lines. NULLs stay empty (CSV) or null (JSON), never 0. Returns
  /// the rows written.
  std::int64_t export_measurements(std::ostream& out, ExportFormat format,
                                   bool ok_only = false) const;
  /// The same rows as typed values, what export_measurements writes: `columns` is called once,
  /// before the first row, then `row` for each row (its values in the columns' order; a value
  /// is NULL or of its column's kind: an integer for kInteger and kBoolean, a real for kReal,
  /// text for kText and kJson). Returns the rows.
  std::int64_t export_rows(bool ok_only,
                           const std::function<void(const std::vector<ExportColumn>&)>& columns,
                           const std::function<void(const std::vector<ExportValue>&)>& row) const;

 private:
  struct Impl;
  Store(const std::string& path, bool create);
  std::unique_ptr<Impl> impl_;
};

}  // namespace carb
