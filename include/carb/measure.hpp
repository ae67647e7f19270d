// The measurement protocol (method.md §2): warm-up, adaptive repetition until the median's 95%
// confidence interval is tight, an energy window of repeated inferences, memory figures, and
// per-configuration isolation in a worker process with a timeout. Timing lives here, never in a
// backend. Statuses and latency statistics are the store's types (carb/store.hpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "carb/backend.hpp"
#include "carb/engine_plan.hpp"
#include "carb/store.hpp"
#include "carb/telemetry.hpp"

namespace carb {

/// How carb measures. Fields marked (key) change what is measured and are part of the
/// measurement key; the others only bound how long it may take.
struct Protocol {
  double warmup_min_s = 0.1;  ///< (key) warm up for at least this long...
  int warmup_min_runs = 3;    ///< (key) ...and at least this many forward passes
  int min_samples = 10;       ///< (key) timed forward passes, at least
  double min_time_s = 0.5;    ///< (key) timed seconds, at least
  double target_relative_ci =
      0.01;                 ///< (key) stop when the median's 95% CI half-width / median <= this
  double max_time_s = 5.0;  ///< (key) stop timing after this long, converged or not
  double energy_window_min_s = 1.0;  ///< (key) energy window of repeated inferences, at least
  double cooldown_s = 0.0;           ///< (key) idle time before each configuration
  std::uint64_t seed = 1;            ///< (key) weights and input
  /// (key when > 0) Which round of a campaign that measures every configuration once per round
  /// (`carb profile --rounds N`: round 0, then 1, ... N-1): the rounds differ only in their
  /// measurement keys, so each round's measurement is stored and resumed on its own.
  int round = 0;
  /// (key when true) Replay the forward pass as one CUDA Graph (SessionOptions::cuda_graph).
  bool cuda_graph = false;
  /// (key when true) cuDNN algorithms by timed search, cached (SessionOptions::cudnn_find).
  bool cudnn_find = false;
  std::string cudnn_cache;   ///< the find cache file; empty: the default (SessionOptions)
  double timeout_s = 300.0;  ///< a worker without a result after this long is killed
  /// A GPU whose clocks a protective reason (kRemeasureClocksEventReasons) held down during the
  /// timed passes or the energy window is left idle this long, then measured again...
  double throttle_cooldown_s = 5.0;
  int throttle_retries = 2;  ///< ...at most this many times; then the row says it was throttled
  /// Address space each worker may map (RLIMIT_AS), bytes; 0: no limit. A configuration that
  /// needs more fails to allocate and is recorded as `oom` instead of waking the kernel's OOM
  /// killer on a shared machine.
  std::int64_t worker_memory_limit_bytes = 0;
  /// Configurations one worker process measures before a fresh one replaces it; 1: a fresh
  /// process for every configuration. Reuse saves the process start and most of prepare's
  /// first touches (docs/measurement.md, "Workers"); every row records its worker's pid and how
  /// many configurations that worker measured before it.
  int worker_reuse = kDefaultWorkerReuse;
  static constexpr int kDefaultWorkerReuse = 100;

  /// The (key) fields as a JSON object: what a measurement key hashes. cuda_graph, cudnn_find
  /// and round appear only when set, so keys measured before they existed stay the same.
  nlohmann::json key_json() const;
  /// Every field as a JSON object.
  nlohmann::json to_json() const;
  /// Parses to_json()'s output; throws carb::Error (input) naming a bad field.
  static Protocol from_json(const nlohmann::json& json);
};

/// A measurement is flagged "contended" (in its detail) when other processes, or a VM host's
/// steal, took at least this share of the machine's CPUs while its passes were timed.
inline constexpr double kContendedShare = 0.10;

/// Statistics of samples (any order, at least one): percentiles by linear interpolation, the
/// median's 95% confidence interval from order statistics (binomial, normal approximation).
LatencyStats summarize_latency(std::span<const double> samples_ms, double target_relative_ci);

/// What measuring one configuration produced. Energy and memory fields are absent (NULL) when
/// they could not be read, with the reason.
struct Measurement {
  MeasurementStatus status = MeasurementStatus::kError;
  std::string detail;  ///< why it failed, or notes (e.g. "not converged")

  std::optional<LatencyStats> wall_latency;  ///< host wall time of run()+sync()
  std::vector<double> wall_samples_ms;
  std::optional<LatencyStats> device_latency;  ///< device-side timing, where a device has it
  std::vector<double> device_samples_ms;

  std::optional<double> energy_j;  ///< one inference (whole batch), J
  std::string energy_method;       ///< meter name: "rapl", "perf", "nvml", "none"
  std::string energy_sensor;
  std::string energy_null_reason;  ///< set when energy_j is absent
  std::optional<double> energy_window_s;
  std::optional<std::int64_t> energy_window_inferences;

  std::optional<MemoryUsage> engine_memory;            ///< what the engine holds (exact)
  std::optional<std::int64_t> process_peak_rss_bytes;  ///< worker ru_maxrss at the end
  std::optional<std::int64_t> baseline_rss_bytes;      ///< worker RSS before the network existed

  double prepare_s = 0;  ///< building the session (weights, kernels, buffers)
  double warmup_s = 0;   ///< warm-up forward passes
  double timed_s = 0;    ///< the timed forward passes
  double energy_s = 0;   ///< the energy window
  int warmup_runs = 0;

  nlohmann::json provenance = nlohmann::json::object();  ///< kernels, threads, meter, ...

  nlohmann::json to_json() const;
  /// Parses to_json()'s output; throws carb::Error (runtime) on a malformed document.
  static Measurement from_json(const nlohmann::json& json);
};

/// Measures one configuration in this process: supports() check, cooldown, prepare, warm-up,
/// adaptive timing (on the device clock where the session has one, else the host's), the
/// energy window (skipped, with the meter's reason, when the meter has no sensor), memory
/// figures. With a GPU monitor, the GPU's state is sampled through the timed passes and the
/// energy window (provenance "gpu"), and a window the GPU throttled itself in is measured again
/// after a cooldown (Protocol::throttle_*). Per-configuration failures come back as a status,
/// not an exception.
Measurement measure_configuration(const Device& device, const Config& config,
                                  const Protocol& protocol, EnergyMeter& meter,
                                  GpuMonitor* monitor = nullptr);

/// One kernel's time in a forward pass run a kernel at a time (carb kernels).
struct KernelTime {
  KernelInfo kernel;
  double median_ms = 0;  ///< median over the passes of its wall time, run alone and waited for
};

/// Where a prepared session's forward pass spends its time, kernel by kernel.
struct KernelBreakdown {
  std::vector<KernelTime> kernels;  ///< in kernels() order
  double pass_median_ms = 0;        ///< median whole pass (run() + sync()), timed between them
  int passes = 0;  ///< kernel-by-kernel passes (and whole passes) timed, re-timings included
  /// The drift probe's latency, ms, at the moment it was timed (profile_kernels); nullopt
  /// without a probe, or where none was ok.
  std::optional<double> probe_ms;
};

/// The one definition of a kernel's row in `carb kernels` and the Python module's `kernels()`:
/// kernel (its name), implementation; of the IR layer that decides its kind (the first of
/// KernelInfo::layers; nullopt where the kernel names none): kind, class, input_shape,
/// output_shape, window, stride, groups; macs and params of every layer it computes; median_ms,
/// and share: its part of `kernels_ms`, the sum of its pass's kernels; then the kernel model's
/// features (engine::kernel_feature_names) as `engine` runs the kernel (a device's:
/// kernel_engine_of). Calls `column(name, value)`: `value()` gives
/// std::string, double or std::optional of std::string, std::int64_t or double.
template <typename Column>
void for_each_kernel_column(const Network& network, const KernelTime& time, double kernels_ms,
                            engine::KernelEngine engine, Column&& column) {
  const std::vector<int>& layers = time.kernel.layers;
  const Layer* anchor =
      layers.empty() ? nullptr : &network.layers[static_cast<std::size_t>(layers.front())];
  const auto text = [&](auto&& of) -> std::optional<std::string> {
    return anchor ? std::optional<std::string>(of(*anchor)) : std::nullopt;
  };
  const auto number = [&](auto&& of) -> std::optional<std::int64_t> {
    return anchor ? std::optional<std::int64_t>(of(*anchor)) : std::nullopt;
  };
  const auto total = [&](std::int64_t Layer::*field) -> std::optional<std::int64_t> {
    if (!anchor) return std::nullopt;
    std::int64_t sum = 0;
    for (int index : layers) sum += network.layers[static_cast<std::size_t>(index)].*field;
    return sum;
  };
  column(std::string_view("kernel"), [&] { return time.kernel.name; });
  column(std::string_view("implementation"), [&] { return time.kernel.implementation; });
  column(std::string_view("kind"),
         [&] { return text([](const Layer& l) { return std::string(to_string(l.kind)); }); });
  column(std::string_view("class"), [&] {
    return text([&](const Layer& l) { return std::string(to_string(layer_class_of(network, l))); });
  });
  column(std::string_view("input_shape"),
         [&] { return text([&](const Layer& l) { return input_shapes(network, l); }); });
  column(std::string_view("output_shape"), [&] {
    return text([&](const Layer& l) {
      return to_string(network.tensors[static_cast<std::size_t>(l.output)]);
    });
  });
  column(std::string_view("window"),
         [&] { return number([](const Layer& l) { return l.kernel; }); });
  column(std::string_view("stride"),
         [&] { return number([](const Layer& l) { return l.stride; }); });
  column(std::string_view("groups"),
         [&] { return number([](const Layer& l) { return l.groups; }); });
  column(std::string_view("macs"), [&] { return total(&Layer::macs); });
  column(std::string_view("params"), [&] { return total(&Layer::params); });
  column(std::string_view("median_ms"), [&] { return time.median_ms; });
  column(std::string_view("share"),
         [&] { return kernels_ms > 0 ? time.median_ms / kernels_ms : 0.0; });
  // The features not already a column above (macs, window, stride, groups are, of equal value).
  const std::vector<double> features = engine::kernel_features(network, layers, engine);
  const std::vector<std::string>& feature_names = engine::kernel_feature_names();
  for (std::size_t f = 0; f < feature_names.size(); ++f) {
    const std::string& name = feature_names[f];
    if (name == "macs" || name == "window" || name == "stride" || name == "groups") continue;
    if (name == "macs_per_byte") {
      column(std::string_view(name), [&] {
        return features.empty() ? std::optional<double>() : std::optional<double>(features[f]);
      });
      continue;
    }
    column(std::string_view(name), [&] {  // the others are whole numbers, written exactly
      return features.empty() ? std::optional<std::int64_t>()
                              : std::optional<std::int64_t>(std::llround(features[f]));
    });
  }
}

/// The sum of a breakdown's kernels' medians, ms (for_each_kernel_column's `kernels_ms`).
double kernels_sum_ms(const KernelBreakdown& breakdown);

/// Times `session` kernel by kernel (Session::run_kernel): `warmup_passes` whole passes, then
/// `passes` rounds of one whole pass and one pass a kernel at a time. The kernels' medians need
/// not sum to the whole pass's: each waits for its kernel, and runs it after its predecessor
/// rather than beside it, but they come within a few percent of it (1,415 configurations of
/// the zoo and the kernel campaign: 0.88-1.2). A host that disturbs the whole passes and not
/// the kernels' (1.2-2.2x, 3 of those) is told by that: where the passes' median and the
/// kernels' sum differ by more than kPassKernelsTolerance either way, it times `passes` more
/// rounds, pooled with the others, up to kPassKernelsRetimings times; KernelBreakdown::passes
/// counts them all, and a breakdown still out of that band is kept as measured. nullopt where
/// the session cannot split its pass. Throws what the session throws; carb::Error (usage) for
/// fewer than one pass.
std::optional<KernelBreakdown> time_kernels(Session& session, int warmup_passes, int passes);
inline constexpr double kPassKernelsTolerance = 1.2;
inline constexpr int kPassKernelsRetimings = 2;

/// Whether a breakdown's whole-pass median lies within kPassKernelsTolerance of its kernels'
/// sum, either way (time_kernels times again where it does not).
bool pass_agrees_with_kernels(const KernelBreakdown& breakdown);

/// One breakdown of a configuration timed in several rounds (carb kernels --rounds): each
/// kernel's median_ms and the whole pass's median are the medians of the rounds' (the mean of
/// the middle two for an even count), passes their sum, probe_ms the median of the rounds'
/// that have one. Throws carb::Error (usage) for no rounds or rounds of different kernels.
KernelBreakdown combine_rounds(const std::vector<KernelBreakdown>& rounds);

/// Average power of an idle window of `seconds` (nothing running), W; nullopt with the meter's
/// reason in `why` when the meter cannot measure it.
std::optional<double> measure_idle_power_w(EnergyMeter& meter, double seconds, std::string* why);

/// The environment variable that moves the CPU energy meter's sysfs root from "/" to a folder:
/// for tests that replay recorded counters through a campaign's workers. A row measured so names
/// that folder in its energy_sensor.
inline constexpr const char* kTelemetryRootVariable = "CARB_TELEMETRY_ROOT";

/// The energy meter for a device: the host's CPU meter (RAPL, perf or none, under
/// kTelemetryRootVariable's folder when set) for CPU devices, the GPU's NVML energy counter (or
/// none, with the reason) for CUDA devices.
std::unique_ptr<EnergyMeter> open_energy_meter(const DeviceInfo& device);

/// The NVML monitor of a CUDA device (possibly unavailable, with its reason); nullptr for a CPU.
std::unique_ptr<GpuMonitor> open_device_monitor(const DeviceInfo& device);

/// What WorkerProcess::measure throws when its `stop` asked it to stop: not a failure of the
/// configuration, which was not measured.
class MeasurementStopped : public std::exception {
 public:
  const char* what() const noexcept override { return "measurement stopped"; }
};

/// How to start a worker: an executable and the arguments that put it in worker mode (carb
/// uses itself: /proc/self/exe with the hidden verb "__worker"; WorkerProcess adds --device).
struct WorkerCommand {
  std::string executable;
  std::vector<std::string> arguments;
};

/// A worker process measuring configurations of one device, one after another, each killed
/// after protocol.timeout_s. A crash, a kill or a timeout becomes a status (crashed, oom,
/// timeout) with the signal and the end of the worker's stderr, and the next configuration gets
/// a fresh process; so does every protocol.worker_reuse-th one. The worker starts on the first
/// measure(); the process ends with the object.
class WorkerProcess {
 public:
  WorkerProcess(WorkerCommand command, std::string device_id);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  /// Measures one configuration. `stop_requested`, when given, is asked while the worker
  /// measures (at least once a second, and whenever a signal interrupts the wait): when it
  /// returns true, the worker is killed and MeasurementStopped thrown, nothing measured.
  Measurement measure(const Config& config, const Protocol& protocol,
                      const std::function<bool()>& stop_requested = {});

 private:
  struct Running;
  static std::unique_ptr<Running> start(const WorkerCommand& command, const std::string& device_id,
                                        std::int64_t memory_limit_bytes);
  void stop();
  WorkerCommand command_;
  std::string device_id_;
  std::unique_ptr<Running> running_;
};

/// Measures one configuration in a fresh worker process (WorkerProcess, used once).
Measurement measure_in_worker(const WorkerCommand& command, const std::string& device_id,
                              const Config& config, const Protocol& protocol);

/// The worker's side: finds the device, then reads requests from stdin, one JSON line each
/// ({"key", "protocol"}), measures each and answers one JSON line on stdout ({"measurement",
/// "reusable"}; reusable is false after a failed configuration, and where the process cannot
/// reset its peak-RSS mark, so the next configuration needs a fresh process). Ends at the end of
/// its input. For tests, the environment variable CARB_WORKER_FAULT injects a fault after prepare:
/// a comma-separated list of "KIND" (every configuration) or "KIND:KEY" (that one), KIND being
/// segv, abort, hang or alloc. Returns the exit code.
int worker_main(const std::string& device_id);

}  // namespace carb
