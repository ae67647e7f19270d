// Measuring one configuration in this process: the protocol of method.md §2.
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <new>
#include <thread>

#include "carb/error.hpp"
#include "carb/measure.hpp"
#include "carb/statistics.hpp"

namespace carb {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// A failure that happened after the session existed, e.g. a library error during run().
Measurement failed(MeasurementStatus status, std::string detail) {
  Measurement measurement;
  measurement.status = status;
  measurement.detail = std::move(detail);
  return measurement;
}

bool mentions_out_of_memory(const std::string& text) {
  return text.find("out of memory") != std::string::npos ||
         text.find("out_of_memory") != std::string::npos;
}

nlohmann::json latency_json(const std::optional<LatencyStats>& stats) {
  if (!stats) return nullptr;
  return {{"median_ms", stats->median_ms},
          {"mean_ms", stats->mean_ms},
          {"p5_ms", stats->p5_ms},
          {"p95_ms", stats->p95_ms},
          {"cv", stats->cv},
          {"count", stats->count},
          {"ci_half_width_ms", stats->ci_half_width_ms},
          {"converged", stats->converged}};
}

std::optional<LatencyStats> latency_from(const nlohmann::json& json) {
  if (json.is_null()) return std::nullopt;
  LatencyStats stats;
  json.at("median_ms").get_to(stats.median_ms);
  json.at("mean_ms").get_to(stats.mean_ms);
  json.at("p5_ms").get_to(stats.p5_ms);
  json.at("p95_ms").get_to(stats.p95_ms);
  json.at("cv").get_to(stats.cv);
  json.at("count").get_to(stats.count);
  json.at("ci_half_width_ms").get_to(stats.ci_half_width_ms);
  json.at("converged").get_to(stats.converged);
  return stats;
}

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

template <typename T>
std::optional<T> optional_from(const nlohmann::json& json, const char* name) {
  if (!json.contains(name) || json.at(name).is_null()) return std::nullopt;
  return json.at(name).get<T>();
}

}  // namespace

nlohmann::json Measurement::to_json() const {
  nlohmann::json memory = nullptr;
  if (engine_memory) {
    memory = {{"weight_bytes", engine_memory->weight_bytes},
              {"activation_bytes", engine_memory->activation_bytes},
              {"scratchpad_bytes", engine_memory->scratchpad_bytes},
              {"peak_bytes", engine_memory->peak_bytes}};
  }
  return {{"status", std::string(to_string(status))},
          {"detail", detail},
          {"wall_latency", latency_json(wall_latency)},
          {"wall_samples_ms", wall_samples_ms},
          {"device_latency", latency_json(device_latency)},
          {"device_samples_ms", device_samples_ms},
          {"energy_j", optional_json(energy_j)},
          {"energy_method", energy_method},
          {"energy_sensor", energy_sensor},
          {"energy_null_reason", energy_null_reason},
          {"energy_window_s", optional_json(energy_window_s)},
          {"energy_window_inferences", optional_json(energy_window_inferences)},
          {"engine_memory", memory},
          {"process_peak_rss_bytes", optional_json(process_peak_rss_bytes)},
          {"baseline_rss_bytes", optional_json(baseline_rss_bytes)},
          {"prepare_s", prepare_s},
          {"warmup_s", warmup_s},
          {"timed_s", timed_s},
          {"energy_s", energy_s},
          {"warmup_runs", warmup_runs},
          {"provenance", provenance}};
}

Measurement Measurement::from_json(const nlohmann::json& json) {
  try {
    Measurement measurement;
    const auto status = parse_measurement_status(json.at("status").get<std::string>());
    if (!status) throw Error(ErrorCategory::kRuntime, "worker result has an unknown status");
    measurement.status = *status;
    json.at("detail").get_to(measurement.detail);
    measurement.wall_latency = latency_from(json.at("wall_latency"));
    json.at("wall_samples_ms").get_to(measurement.wall_samples_ms);
    measurement.device_latency = latency_from(json.at("device_latency"));
    json.at("device_samples_ms").get_to(measurement.device_samples_ms);
    measurement.energy_j = optional_from<double>(json, "energy_j");
    json.at("energy_method").get_to(measurement.energy_method);
    json.at("energy_sensor").get_to(measurement.energy_sensor);
    json.at("energy_null_reason").get_to(measurement.energy_null_reason);
    measurement.energy_window_s = optional_from<double>(json, "energy_window_s");
    measurement.energy_window_inferences =
        optional_from<std::int64_t>(json, "energy_window_inferences");
    if (const auto& memory = json.at("engine_memory"); !memory.is_null()) {
      MemoryUsage usage;
      memory.at("weight_bytes").get_to(usage.weight_bytes);
      memory.at("activation_bytes").get_to(usage.activation_bytes);
      memory.at("scratchpad_bytes").get_to(usage.scratchpad_bytes);
      memory.at("peak_bytes").get_to(usage.peak_bytes);
      measurement.engine_memory = usage;
    }
    measurement.process_peak_rss_bytes =
        optional_from<std::int64_t>(json, "process_peak_rss_bytes");
    measurement.baseline_rss_bytes = optional_from<std::int64_t>(json, "baseline_rss_bytes");
    json.at("prepare_s").get_to(measurement.prepare_s);
    json.at("warmup_s").get_to(measurement.warmup_s);
    json.at("timed_s").get_to(measurement.timed_s);
    json.at("energy_s").get_to(measurement.energy_s);
    json.at("warmup_runs").get_to(measurement.warmup_runs);
    measurement.provenance = json.at("provenance");
    return measurement;
  } catch (const nlohmann::json::exception& error) {
    throw Error(ErrorCategory::kRuntime, std::string("malformed worker result: ") + error.what());
  }
}

namespace {

// Energy counters are updated in steps: NVML's about every 100 ms, RAPL's about every 1 ms. A
// window that starts and stops at arbitrary moments counts up to a step too much or too little at
// each end: up to ±10% of a 1 s window at 100 ms. So a window starts at a change of the counter
// and ends at the first change after its minimum length, and its duration runs between the two:
// the energy counted is the energy of exactly that time. Near either end the counter is read at
// most every kDensePollS; inside, as rarely as wrap safety allows, so the reads barely delay the
// work. A counter that does not change within kAlignLimitS leaves that end unaligned.
constexpr double kDensePollS = 0.002;
constexpr double kAlignLimitS = 1.0;

struct AlignedWindow {
  EnergyWindow window;
  std::int64_t works = 0;  ///< how many times `work` ran inside the window
  nlohmann::json alignment = nlohmann::json::object();
};

// Runs `work` repeatedly through an energy window of at least `min_s`, aligned as above, calling
// `between` after each. `sparse_poll_s` bounds the reads inside the window.
AlignedWindow run_aligned_window(EnergyMeter& meter, double min_s, double sparse_poll_s,
                                 const std::function<void()>& work,
                                 const std::function<void()>& between) {
  const auto now = [] { return Clock::now(); };
  AlignedWindow result;
  meter.start();
  // Lead-in, not counted: work until the counter changes.
  const auto lead_in_start = now();
  auto last_read = lead_in_start;
  bool aligned_start = false;
  while (seconds_between(lead_in_start, now()) < kAlignLimitS) {
    work();
    between();
    if (seconds_between(last_read, now()) < kDensePollS) continue;
    meter.sample();
    last_read = now();
    if (meter.last_sample_changed()) {
      meter.restart_from_last_reading();
      aligned_start = true;
      break;
    }
  }
  if (!aligned_start) meter.start();
  const auto window_start = now();
  last_read = window_start;
  // The window: dense reads until the second change (the counter's refresh period), sparse ones
  // until min_s, then dense ones until the next change.
  // A change counts at the end only when the read before it came after min_s: a sparse read
  // long before could hide a change that happened before min_s.
  std::optional<double> refresh_period_s;
  bool read_after_min = false;
  bool aligned_end = false;
  while (true) {
    work();
    ++result.works;
    between();
    const auto at = now();
    const double elapsed_s = seconds_between(window_start, at);
    const bool ending = elapsed_s >= min_s;
    const bool dense = (aligned_start && !refresh_period_s) || ending;
    if (ending && !read_after_min) {
      meter.sample();
      last_read = now();
      read_after_min = true;
    } else if (seconds_between(last_read, at) >= (dense ? kDensePollS : sparse_poll_s)) {
      meter.sample();
      last_read = now();
      if (meter.last_sample_changed()) {
        if (aligned_start && !refresh_period_s) refresh_period_s = seconds_between(window_start, at);
        if (ending) {
          aligned_end = true;
          break;
        }
      }
    }
    if (elapsed_s >= min_s + kAlignLimitS) break;
  }
  const auto window_end = now();
  result.window = meter.stop();
  result.alignment = {
      {"aligned_start", aligned_start},
      {"aligned_end", aligned_end},
      {"lead_in_s", seconds_between(lead_in_start, window_start)},
      {"tail_s", std::max(0.0, seconds_between(window_start, window_end) - min_s)},
      {"counter_refresh_s",
       refresh_period_s ? nlohmann::json(*refresh_period_s) : nlohmann::json(nullptr)},
      {"dense_poll_s", kDensePollS}};
  return result;
}

}  // namespace

std::optional<double> measure_idle_power_w(EnergyMeter& meter, double seconds, std::string* why) {
  if (!meter.available()) {
    if (why != nullptr) *why = meter.unavailable_reason();
    return std::nullopt;
  }
  const AlignedWindow idle = run_aligned_window(
      meter, seconds, kDensePollS,
      [] { std::this_thread::sleep_for(std::chrono::duration<double>(kDensePollS)); }, [] {});
  const EnergyWindow& window = idle.window;
  if (!window.energy_j || window.duration_s <= 0) {
    if (why != nullptr) *why = window.unavailable_reason;
    return std::nullopt;
  }
  return *window.energy_j / window.duration_s;
}

namespace {

void run_once(Session& session) {
  session.run();
  session.sync();
}

// The fault CARB_WORKER_FAULT asks of this configuration: a comma-separated list of faults,
// each "KIND" (every configuration) or "KIND:KEY" (that configuration only).
std::string fault_for(const std::string& key) {
  const char* faults = std::getenv("CARB_WORKER_FAULT");
  if (faults == nullptr) return "";
  std::string_view rest = faults;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view fault = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
    const std::size_t colon = fault.find(':');
    if (colon == std::string_view::npos || fault.substr(colon + 1) == key) {
      return std::string(fault.substr(0, colon));
    }
  }
  return "";
}

void inject_fault_if_asked(const Config& config) {
  const std::string kind = fault_for(to_key(config));
  if (kind == "segv") {
    // The default action, whatever handler is installed (AddressSanitizer installs one).
    std::signal(SIGSEGV, SIG_DFL);
    std::raise(SIGSEGV);
  } else if (kind == "abort") {
    std::abort();
  } else if (kind == "hang") {
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  } else if (kind == "alloc") {
    throw std::bad_alloc();
  }
}

// Samples a GPU's state through a window: at its start, at most every kGpuSampleInterval
// between passes, and at its end, ORing the clocks-event reasons. A no-op without a monitor.
class GpuWatch {
 public:
  static constexpr std::chrono::milliseconds kGpuSampleInterval{100};

  explicit GpuWatch(GpuMonitor* monitor) : monitor_(monitor) {}
  void begin() {
    window_ = GpuWindow{};
    take();
  }
  void poll() {
    if (monitor_ != nullptr && Clock::now() - last_ >= kGpuSampleInterval) take();
  }
  void end() { take(); }
  const GpuWindow& window() const { return window_; }

 private:
  void take() {
    if (monitor_ == nullptr || !monitor_->available()) return;
    window_.add(monitor_->sample());
    last_ = Clock::now();
  }

  GpuMonitor* monitor_;
  GpuWindow window_;
  Clock::time_point last_{};
};

std::string not_converged(const LatencyStats& stats, double timed_s, const char* clock) {
  return std::string("not converged: 95% CI half-width ") +
         std::to_string(100 * stats.ci_half_width_ms / stats.median_ms) + "% of the " + clock +
         " median after " + std::to_string(stats.count) + " samples in " + std::to_string(timed_s) +
         " s";
}

// Times forward passes until the median's CI is tight enough (after the minimum samples and
// time), or the time limit. The primary clock is the device's where the session has one (CUDA
// events), else the host's; both are kept. Convergence is checked when the sample count has
// grown by 10%, so the sort it needs costs O(n log n) in total, not per sample. GPU samples are
// taken between passes, outside the timed interval.
void time_adaptively(Session& session, const Protocol& protocol, Measurement& measurement,
                     GpuWatch& watch) {
  const auto start = Clock::now();
  std::size_t next_check = static_cast<std::size_t>(protocol.min_samples);
  watch.begin();
  while (true) {
    const auto before = Clock::now();
    run_once(session);
    const auto after = Clock::now();
    measurement.wall_samples_ms.push_back(seconds_between(before, after) * 1e3);
    if (const auto device_ms = session.last_run_device_ms()) {
      measurement.device_samples_ms.push_back(*device_ms);
    }
    watch.poll();
    const double elapsed_s = seconds_between(start, after);
    if (elapsed_s >= protocol.max_time_s) break;
    const std::size_t count = measurement.wall_samples_ms.size();
    if (count >= next_check && elapsed_s >= protocol.min_time_s) {
      const bool device = measurement.device_samples_ms.size() == count;
      const LatencyStats stats =
          summarize_latency(device ? measurement.device_samples_ms : measurement.wall_samples_ms,
                            protocol.target_relative_ci);
      if (stats.converged) break;
      next_check = count + std::max<std::size_t>(1, count / 10);
    }
  }
  watch.end();
  measurement.timed_s = seconds_between(start, Clock::now());
  measurement.wall_latency =
      summarize_latency(measurement.wall_samples_ms, protocol.target_relative_ci);
  if (!measurement.device_samples_ms.empty()) {
    measurement.device_latency =
        summarize_latency(measurement.device_samples_ms, protocol.target_relative_ci);
  }
  // Stopped by the time limit before the minimum sample count: not converged, whatever the CI.
  for (auto* stats : {&measurement.wall_latency, &measurement.device_latency}) {
    if (*stats && (*stats)->count < protocol.min_samples) (*stats)->converged = false;
  }
  const bool device = measurement.device_latency.has_value();
  const LatencyStats& primary = device ? *measurement.device_latency : *measurement.wall_latency;
  if (!primary.converged) {
    measurement.detail = not_converged(primary, measurement.timed_s, device ? "device" : "wall");
  }
}

void measure_energy(Session& session, const Protocol& protocol, EnergyMeter& meter,
                    Measurement& measurement, GpuWatch& watch) {
  measurement.energy_method = meter.name();
  measurement.energy_sensor = meter.sensor();
  if (!meter.available()) {
    measurement.energy_null_reason = meter.unavailable_reason();
    return;
  }
  watch.begin();
  const auto start = Clock::now();
  AlignedWindow run = run_aligned_window(
      meter, protocol.energy_window_min_s, std::min(0.5, meter.max_poll_interval_s() / 2),
      [&] { run_once(session); }, [&] { watch.poll(); });
  watch.end();
  measurement.energy_s = seconds_between(start, Clock::now());
  measurement.energy_window_s = run.window.duration_s;
  measurement.energy_window_inferences = run.works;
  measurement.provenance["energy_window"] = std::move(run.alignment);
  if (run.window.energy_j && run.works > 0) {
    measurement.energy_j = *run.window.energy_j / static_cast<double>(run.works);
  } else {
    measurement.energy_null_reason = run.window.unavailable_reason;
  }
}

// Records how much of the machine other work took while the passes were timed, and says so in
// the detail when it was enough to distort them (docs/measurement.md, "Contention").
void record_contention(const std::optional<CpuUsage>& before, const std::string& why,
                       double window_s, Measurement& measurement) {
  std::string after_why;
  const auto after = before ? read_cpu_usage(&after_why) : std::nullopt;
  if (!before || !after) {
    measurement.provenance["contention"] = {{"unavailable", before ? after_why : why}};
    return;
  }
  const Contention contention = contention_between(*before, *after, window_s);
  measurement.provenance["contention"] = {{"other_cpu_share", contention.other_share},
                                          {"steal_share", contention.steal_share},
                                          {"window_s", window_s}};
  if (contention.other_share >= kContendedShare || contention.steal_share >= kContendedShare) {
    const auto percent = [](double share) { return std::to_string(std::lround(100 * share)); };
    measurement.detail += std::string(measurement.detail.empty() ? "" : "; ") +
                          "contended: other processes used " + percent(contention.other_share) +
                          "% of the CPUs while timing (steal " + percent(contention.steal_share) +
                          "%)";
  }
}

nlohmann::json device_provenance(const Device& device) {
  const DeviceInfo& info = device.info();
  nlohmann::json json = {{"id", info.id},           {"kind", info.kind}, {"name", info.name},
                         {"library", info.library}, {"isa", info.isa},   {"threads", info.threads}};
  if (!info.uuid.empty()) {
    json["uuid"] = info.uuid;
    json["driver"] = info.driver;
    json["memory_bytes"] = info.memory_bytes;
  }
  return json;
}

// The timed passes and the energy window, measured again after a cooldown while a GPU held its
// clocks down to protect itself during either (Protocol::throttle_*). Each attempt's GPU
// windows are kept in the provenance.
void time_and_measure_energy(Session& session, const Protocol& protocol, EnergyMeter& meter,
                             GpuMonitor* monitor, Measurement& measurement) {
  GpuWatch timing(monitor);
  GpuWatch energy(monitor);
  nlohmann::json attempts = nlohmann::json::array();
  for (int attempt = 0;; ++attempt) {
    measurement.detail.clear();
    measurement.wall_samples_ms.clear();
    measurement.device_samples_ms.clear();
    measurement.device_latency.reset();
    measurement.energy_j.reset();
    measurement.energy_null_reason.clear();
    std::string why;
    const auto usage_before = read_cpu_usage(&why);
    const auto timing_start = Clock::now();
    time_adaptively(session, protocol, measurement, timing);
    record_contention(usage_before, why, seconds_between(timing_start, Clock::now()), measurement);
    measure_energy(session, protocol, meter, measurement, energy);
    if (monitor == nullptr) return;
    attempts.push_back(
        {{"timing", timing.window().to_json()}, {"energy", energy.window().to_json()}});
    const bool throttled = timing.window().throttled() || energy.window().throttled();
    if (!throttled || attempt >= protocol.throttle_retries) {
      nlohmann::json gpu = {{"attempts", attempts}};
      if (!monitor->available()) gpu["unavailable"] = monitor->unavailable_reason();
      if (measurement.energy_j && measurement.energy_window_s && energy.window().samples() > 0) {
        // The counter's mean power beside NVML's instant power: a cross-check, never the figure.
        gpu["counter_mean_power_w"] = *measurement.energy_j *
                                      static_cast<double>(*measurement.energy_window_inferences) /
                                      *measurement.energy_window_s;
      }
      measurement.provenance["gpu"] = gpu;
      if (throttled) {
        const std::uint64_t reasons =
            timing.window().reasons().value_or(0) | energy.window().reasons().value_or(0);
        const int times = attempt + 1;
        measurement.detail += std::string(measurement.detail.empty() ? "" : "; ") +
                              "throttled: " + clocks_event_reason_names(reasons) + ", measured " +
                              std::to_string(times) + (times == 1 ? " time" : " times");
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(protocol.throttle_cooldown_s));
  }
}

}  // namespace

Measurement measure_configuration(const Device& device, const Config& config,
                                  const Protocol& protocol, EnergyMeter& meter,
                                  GpuMonitor* monitor) {
  const Support support = device.supports(config);
  if (!support.supported) return failed(MeasurementStatus::kUnsupported, support.reason);
  if (protocol.cooldown_s > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(protocol.cooldown_s));
  }
  Measurement measurement;
  measurement.provenance["device"] = device_provenance(device);
  try {
    measurement.baseline_rss_bytes = static_cast<std::int64_t>(current_rss_bytes());
    const auto prepare_start = Clock::now();
    SessionOptions options;
    options.cuda_graph = protocol.cuda_graph;
    options.cudnn_find = protocol.cudnn_find;
    options.algorithm_cache = protocol.cudnn_cache;
    const std::unique_ptr<Session> session = device.prepare(config, protocol.seed, options);
    measurement.prepare_s = seconds_between(prepare_start, Clock::now());
    inject_fault_if_asked(config);

    const auto warmup_start = Clock::now();
    while (measurement.warmup_runs < protocol.warmup_min_runs ||
           seconds_between(warmup_start, Clock::now()) < protocol.warmup_min_s) {
      run_once(*session);
      ++measurement.warmup_runs;
    }
    measurement.warmup_s = seconds_between(warmup_start, Clock::now());

    time_and_measure_energy(*session, protocol, meter, monitor, measurement);

    measurement.engine_memory = session->memory();
    if (nlohmann::json details = session->details(); !details.empty()) {
      measurement.provenance["engine"] = std::move(details);
    }
    if (monitor != nullptr) {
      // The driver's view of this process while the session still holds everything.
      std::string why;
      const auto bytes = monitor->process_memory_bytes(&why);
      measurement.provenance["gpu_memory"] = {
          {"process_bytes", bytes ? nlohmann::json(*bytes) : nlohmann::json(nullptr)},
          {"process_bytes_null_reason", bytes ? "" : why}};
    }
    measurement.process_peak_rss_bytes = static_cast<std::int64_t>(peak_rss_bytes());
    nlohmann::json kernels = nlohmann::json::array();
    for (const KernelInfo& kernel : session->kernels()) {
      kernels.push_back({{"name", kernel.name}, {"implementation", kernel.implementation}});
    }
    measurement.provenance["kernels"] = std::move(kernels);
    measurement.status = MeasurementStatus::kOk;
  } catch (const std::bad_alloc&) {
    return failed(MeasurementStatus::kOom, "out of memory (std::bad_alloc)");
  } catch (const Error& error) {
    const std::string message = error.what();
    return failed(
        mentions_out_of_memory(message) ? MeasurementStatus::kOom : MeasurementStatus::kError,
        message);
  }
  return measurement;
}

double kernels_sum_ms(const KernelBreakdown& breakdown) {
  double sum = 0;
  for (const KernelTime& time : breakdown.kernels) sum += time.median_ms;
  return sum;
}

KernelBreakdown combine_rounds(const std::vector<KernelBreakdown>& rounds) {
  if (rounds.empty()) throw Error(ErrorCategory::kUsage, "no rounds of kernel timings to combine");
  KernelBreakdown combined;
  combined.kernels = rounds.front().kernels;
  std::vector<double> passes, probes;
  passes.reserve(rounds.size());
  for (const KernelBreakdown& round : rounds) {
    if (round.kernels.size() != combined.kernels.size()) {
      throw Error(ErrorCategory::kUsage,
                  "rounds of kernel timings of " + std::to_string(combined.kernels.size()) +
                      " and " + std::to_string(round.kernels.size()) + " kernels do not combine");
    }
    passes.push_back(round.pass_median_ms);
    if (round.probe_ms) probes.push_back(*round.probe_ms);
    combined.passes += round.passes;
  }
  for (std::size_t k = 0; k < combined.kernels.size(); ++k) {
    std::vector<double> times;
    times.reserve(rounds.size());
    for (const KernelBreakdown& round : rounds) times.push_back(round.kernels[k].median_ms);
    combined.kernels[k].median_ms = median(times);
  }
  combined.pass_median_ms = median(passes);
  if (!probes.empty()) combined.probe_ms = median(probes);
  return combined;
}

bool pass_agrees_with_kernels(const KernelBreakdown& breakdown) {
  const double ratio = breakdown.pass_median_ms / kernels_sum_ms(breakdown);
  return ratio <= kPassKernelsTolerance && ratio >= 1 / kPassKernelsTolerance;
}

std::optional<KernelBreakdown> time_kernels(Session& session, int warmup_passes, int passes) {
  if (passes < 1 || warmup_passes < 0) {
    throw Error(ErrorCategory::kUsage,
                "kernel timing needs at least one pass and no negative "
                "warm-up (got " +
                    std::to_string(passes) + " and " + std::to_string(warmup_passes) + ")");
  }
  const std::vector<KernelInfo> infos = session.kernels();
  if (infos.empty() || !session.run_kernel(0)) return std::nullopt;
  for (std::size_t k = 1; k < infos.size(); ++k) session.run_kernel(k);
  for (int i = 0; i < warmup_passes; ++i) {
    session.run();
    session.sync();
  }
  std::vector<std::vector<double>> samples(infos.size());
  std::vector<double> pass_samples;
  KernelBreakdown breakdown;
  for (int round = 0;; ++round) {
    for (int i = 0; i < passes; ++i) {
      const Clock::time_point start = Clock::now();
      session.run();
      session.sync();
      pass_samples.push_back(seconds_between(start, Clock::now()) * 1e3);
      for (std::size_t k = 0; k < infos.size(); ++k) {
        const Clock::time_point before = Clock::now();
        session.run_kernel(k);
        samples[k].push_back(seconds_between(before, Clock::now()) * 1e3);
      }
    }
    breakdown.kernels.clear();
    for (std::size_t k = 0; k < infos.size(); ++k) {
      breakdown.kernels.push_back({infos[k], median(samples[k])});
    }
    breakdown.pass_median_ms = median(pass_samples);
    if (pass_agrees_with_kernels(breakdown) || round == kPassKernelsRetimings) break;
  }
  breakdown.passes = static_cast<int>(pass_samples.size());
  return breakdown;
}

}  // namespace carb
