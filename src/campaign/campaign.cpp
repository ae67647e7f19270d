// The profiling loop: keys, resume, claims, workers, one transaction per measurement.
#include "carb/campaign.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "campaign_impl.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/statistics.hpp"
#include "carb/version.hpp"

namespace carb {

namespace {

using Clock = std::chrono::steady_clock;

// A whole decimal integer: no spaces, no sign but '-', nothing after it; else a usage Error about
// the shard (the one integer input here) that names `what`.
int parse_int(const std::string& text, const std::string& what) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) {
    throw Error(ErrorCategory::kUsage, what + " '" + text + "' is not an integer", "shard");
  }
  return value;
}

// Whether the measurement's detail says other work distorted its timing (measure.cpp writes it).
bool is_contended(const Measurement& measurement) {
  return measurement.detail.find("contended: ") != std::string::npos;
}

const char* environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

}  // namespace

namespace campaign_detail {

namespace {

bool names_device(const Backend& backend, const Device& device, const std::string& wanted) {
  return device.info().id == wanted || device.info().kind == wanted || backend.name() == wanted;
}

}  // namespace

std::vector<std::unique_ptr<Backend>> backends_for(const std::string& device) {
  const std::string kind = device.substr(0, device.find(':'));
  const std::vector<std::string> names = backend_names();
  if (std::find(names.begin(), names.end(), kind) == names.end()) return make_backends();
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(make_backend_for(device));
  for (const auto& candidate : backends.front()->devices()) {
    if (names_device(*backends.front(), *candidate, device)) return backends;
  }
  // Not there: every backend, so that find_device's error lists the devices there are.
  return make_backends();
}

// The device a campaign names: an exact id, the first device of a kind, or the first device of
// a backend ("torch").
const Device& find_device(const std::vector<std::unique_ptr<Backend>>& backends,
                          const std::string& wanted) {
  std::string known;
  std::string without;  // backends without devices, and why
  for (const auto& backend : backends) {
    for (const auto& device : backend->devices()) {
      if (names_device(*backend, *device, wanted)) return *device;
      known += (known.empty() ? "" : ", ") + device->info().id;
    }
    if (backend->devices().empty()) {
      without += "; " + std::string(backend->name()) + ": " + backend->unavailable_reason();
    }
  }
  throw Error(ErrorCategory::kUsage, "no device '" + wanted + "' on this machine (devices: " +
                                         (known.empty() ? "none" : known) + ")" + without);
}

// What identifies a device's performance: the host's CPU fingerprint, the library and threads;
// for a GPU also its name, memory and driver (its UUID is left out, so identical cards share a
// fingerprint as identical hosts do).
std::string fingerprint_of(const DeviceInfo& info, const HostInfo& host) {
  return device_fingerprint(host) + "|" + engine_fingerprint(info);
}

nlohmann::json device_details(const DeviceInfo& info, const HostInfo& host) {
  nlohmann::json precisions = nlohmann::json::object();
  for (const PrecisionSupport& support : info.precisions) {
    precisions[std::string(to_string(support.precision))] =
        support.supported ? "supported" : "unsupported: " + support.reason;
  }
  nlohmann::json details = {{"id", info.id},
                            {"kind", info.kind},
                            {"name", info.name},
                            {"library", info.library},
                            {"isa", info.isa},
                            {"threads", info.threads},
                            {"precisions", precisions},
                            {"host", host_info_json(host)}};
  if (const auto monitor = open_device_monitor(info)) {
    // The GPU as NVML sees it when the campaign starts: identity, power limits, clocks.
    details["gpu"] = monitor->available()
                         ? nlohmann::json{{"identity", gpu_identity_json(monitor->identity())},
                                          {"state", gpu_sample_json(monitor->sample())}}
                         : nlohmann::json{{"unavailable", monitor->unavailable_reason()}};
    details["memory_bytes"] = info.memory_bytes;
    details["uuid"] = info.uuid;
  }
  return details;
}

nlohmann::json measured_host_json(const HostInfo& host) {
  nlohmann::json json = host_info_json(host);
  json["speed"] = host_speed_json(measure_host_speed());
  return json;
}

MeasurementRecord record_of(const Measurement& measurement, const Config& config,
                            const std::string& key, const std::string& fingerprint,
                            std::int64_t campaign_id, const std::string& software,
                            const Protocol& protocol, const nlohmann::json& host,
                            const std::optional<double>& idle_power_w, Timestamp started,
                            Timestamp finished) {
  MeasurementRecord record;
  record.measurement_key = key;
  record.configuration_key = to_key(config);
  record.device_fingerprint = fingerprint;
  record.campaign_id = campaign_id;
  record.software_versions = software;
  record.status = measurement.status;
  record.detail = measurement.detail;
  record.started_at = started;
  record.finished_at = finished;
  record.device_latency = measurement.device_latency;
  record.device_samples_ms = measurement.device_samples_ms;
  record.wall_latency = measurement.wall_latency;
  record.wall_samples_ms = measurement.wall_samples_ms;
  if (measurement.status == MeasurementStatus::kOk) {
    record.energy_j = measurement.energy_j;
    record.energy_method = measurement.energy_method;
    record.energy_sensor = measurement.energy_sensor;
    if (!measurement.energy_j) record.energy_null_reason = measurement.energy_null_reason;
    record.energy_window_s = measurement.energy_window_s;
    record.energy_window_inferences = measurement.energy_window_inferences;
    record.idle_power_w = idle_power_w;
    if (measurement.energy_j && idle_power_w && measurement.energy_window_s &&
        measurement.energy_window_inferences && *measurement.energy_window_inferences > 0) {
      record.dynamic_energy_j =
          *measurement.energy_j - *idle_power_w * *measurement.energy_window_s /
                                      static_cast<double>(*measurement.energy_window_inferences);
    }
  }
  if (measurement.engine_memory) {
    record.engine_peak_bytes = measurement.engine_memory->peak_bytes;
    record.engine_weight_bytes = measurement.engine_memory->weight_bytes;
    record.engine_activation_bytes = measurement.engine_memory->activation_bytes;
    record.engine_scratchpad_bytes = measurement.engine_memory->scratchpad_bytes;
  }
  record.process_peak_rss_bytes = measurement.process_peak_rss_bytes;
  record.baseline_rss_bytes = measurement.baseline_rss_bytes;
  nlohmann::json provenance = measurement.provenance;
  provenance["host"] = host;
  provenance["carb_version"] = kVersion;
  provenance["git_commit"] = kGitCommit;
  provenance["timings_s"] = {{"prepare", measurement.prepare_s},
                             {"warmup", measurement.warmup_s},
                             {"timed", measurement.timed_s},
                             {"energy", measurement.energy_s}};
  provenance["warmup_runs"] = measurement.warmup_runs;
  record.provenance_json = provenance.dump();
  record.protocol_json = protocol.key_json().dump();
  return record;
}

std::vector<std::string> campaign_keys(const std::vector<Config>& configs, const Shard& shard,
                                       const std::string& fingerprint, const std::string& software,
                                       const Protocol& protocol,
                                       std::map<std::string, const Config*>* config_of) {
  const std::string protocol_key = protocol.key_json().dump();
  std::vector<std::string> keys;
  for (const Config& config : configs) {
    const std::string configuration_key = to_key(config);
    if (!shard.contains(configuration_key)) continue;
    const std::string key = measurement_key(configuration_key, fingerprint, software, protocol_key);
    if (config_of->emplace(key, &config).second) keys.push_back(key);
  }
  return keys;
}

void count_outcome(const Measurement& measurement, CampaignSummary* summary,
                   CampaignProgress* progress) {
  const std::string status(to_string(measurement.status));
  ++summary->measured[status];
  ++progress->by_status[status];
  summary->inference_s += measurement.warmup_s + measurement.timed_s + measurement.energy_s;
  summary->prepare_s += measurement.prepare_s;
  if (is_contended(measurement)) ++summary->contended;
}

void probe_drift(WorkerProcess& worker, const Config& probe, const Protocol& campaign_protocol,
                 const std::string& software, Store& store, CampaignSummary* summary) {
  const Protocol protocol = drift_probe_protocol(campaign_protocol);
  const auto start = Clock::now();
  const Timestamp started = std::chrono::system_clock::now();
  const Measurement measurement = worker.measure(probe, protocol);
  const Timestamp finished = std::chrono::system_clock::now();
  DriftProbeRecord record;
  record.campaign_id = summary->campaign_id;
  record.device_fingerprint = summary->device_fingerprint;
  record.configuration_key = to_key(probe);
  record.software_versions = software;
  record.protocol_json = protocol.key_json().dump();
  record.measured_at = started + (finished - started) / 2;
  record.status = measurement.status;
  record.detail = measurement.detail;
  record.contended = is_contended(measurement);
  const bool device = measurement.device_latency.has_value();
  record.latency = device ? measurement.device_latency : measurement.wall_latency;
  if (record.latency) record.clock = device ? "device" : "wall";
  if (record.status != MeasurementStatus::kOk) record.latency.reset();
  store.write_probe(record);
  ++summary->probes;
  if (record.status == MeasurementStatus::kOk && !record.contended) {
    summary->probe_ms.push_back(record.latency->median_ms);
  } else if (record.status != MeasurementStatus::kOk && summary->probe_failure.empty()) {
    summary->probe_failure = std::string(to_string(record.status)) + ": " + record.detail;
  }
  summary->probe_s += seconds_since(start);
}

std::string software_of(const DeviceInfo& info) {
  return std::string("carb ") + kVersion + "; " + info.library;
}

}  // namespace campaign_detail

Shard Shard::parse(const std::string& text) {
  Shard shard;
  if (text == "auto") return from_environment();
  const std::size_t slash = text.find('/');
  if (slash == std::string::npos) {
    throw Error(ErrorCategory::kUsage,
                "shard '" + text + "': expected K/N (0 <= K < N, shards count from 0) or auto",
                "shard");
  }
  shard.index = parse_int(text.substr(0, slash), "shard '" + text + "': K");
  shard.count = parse_int(text.substr(slash + 1), "shard '" + text + "': N");
  if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count) {
    throw Error(ErrorCategory::kUsage,
                "shard " + text + ": needs 0 <= K < N (shards count from 0: 0/" +
                    std::to_string(std::max(shard.count, 1)) + " is the first of " +
                    std::to_string(std::max(shard.count, 1)) + ")",
                "shard");
  }
  return shard;
}

Shard Shard::from_environment() {
  const auto variable = [](const char* name) -> std::optional<int> {
    const char* value = environment(name);
    if (value == nullptr) return std::nullopt;
    return parse_int(value, std::string("shard auto: ") + name);
  };
  Shard shard;
  std::string source;
  if (const auto task = variable("SLURM_ARRAY_TASK_ID")) {
    const auto count = variable("SLURM_ARRAY_TASK_COUNT");
    if (!count) {
      throw Error(ErrorCategory::kUsage,
                  "shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not",
                  "shard");
    }
    // Arrays may start anywhere and step (--array=1-16:2): the shard is the task's position.
    const int first = variable("SLURM_ARRAY_TASK_MIN").value_or(0);
    const int step = variable("SLURM_ARRAY_TASK_STEP").value_or(1);
    if (step < 1 || *task < first || (*task - first) % step != 0) {
      throw Error(ErrorCategory::kUsage,
                  "shard auto: SLURM_ARRAY_TASK_ID " + std::to_string(*task) +
                      " is not on the array's grid (min " + std::to_string(first) + ", step " +
                      std::to_string(step) + "); give the shard as K/N",
                  "shard");
    }
    // An array such as --array=0,5,9 is no grid: min, max and step disagree with the count.
    if (const auto last = variable("SLURM_ARRAY_TASK_MAX");
        last && (*last - first) / step + 1 != *count) {
      throw Error(ErrorCategory::kUsage,
                  "shard auto: the Slurm array (min " + std::to_string(first) + ", max " +
                      std::to_string(*last) + ", step " + std::to_string(step) +
                      ") does not have " + std::to_string(*count) +
                      " evenly spaced tasks; give the shard as K/N",
                  "shard");
    }
    shard.index = (*task - first) / step;
    shard.count = *count;
    source = "Slurm array task " + std::to_string(*task);
  } else if (const auto rank = variable("OMPI_COMM_WORLD_RANK")) {
    const auto size = variable("OMPI_COMM_WORLD_SIZE");
    if (!size) {
      throw Error(ErrorCategory::kUsage,
                  "shard auto: OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not",
                  "shard");
    }
    shard.index = *rank;
    shard.count = *size;
    source = "OpenMPI rank " + std::to_string(*rank);
  } else {
    throw Error(ErrorCategory::kUsage,
                "shard auto: neither SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT (a Slurm job "
                "array task) nor OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (an mpirun rank) is "
                "set; give the shard as K/N",
                "shard");
  }
  if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count) {
    throw Error(ErrorCategory::kUsage,
                "shard auto: " + source + " gives shard " + std::to_string(shard.index) + " of " +
                    std::to_string(shard.count) +
                    " (a non-contiguous array?); give the shard as K/N",
                "shard");
  }
  return shard;
}

std::string Shard::name() const { return std::to_string(index) + "/" + std::to_string(count); }

std::string Shard::expand(const std::string& pattern) const {
  std::string result = pattern;
  for (const auto& [placeholder, value] :
       {std::pair<std::string, std::string>{"{shard}", std::to_string(index)},
        std::pair<std::string, std::string>{"{shards}", std::to_string(count)}}) {
    for (auto at = result.find(placeholder); at != std::string::npos;
         at = result.find(placeholder, at + value.size())) {
      result.replace(at, placeholder.size(), value);
    }
  }
  return result;
}

bool Shard::contains(const std::string& configuration_key) const {
  if (count == 1) return true;
  const std::uint64_t hash = std::stoull(sha256_hex(configuration_key).substr(0, 15), nullptr, 16);
  return static_cast<int>(hash % static_cast<std::uint64_t>(count)) == index;
}

Protocol drift_probe_protocol(const Protocol& campaign) {
  Protocol probe = campaign;
  probe.warmup_min_s = 0.05;
  probe.warmup_min_runs = 3;
  probe.min_samples = 10;
  probe.min_time_s = 0.15;
  probe.max_time_s = 0.5;
  probe.energy_window_min_s = 0;
  probe.cooldown_s = 0;
  return probe;
}

double parse_duration_s(const std::string& text) {
  double total = 0;
  std::size_t position = 0;
  bool any = false;
  while (position < text.size()) {
    std::size_t used = 0;
    double value = 0;
    try {
      value = std::stod(text.substr(position), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || value < 0) {
      throw Error(ErrorCategory::kUsage,
                  "duration '" + text + "': expected e.g. 90, 90s, 30m, 2h or 1h30m");
    }
    position += used;
    double unit = 1;
    if (position < text.size()) {
      const char suffix = text[position];
      if (suffix == 'h' || suffix == 'm' || suffix == 's') {
        unit = suffix == 'h' ? 3600 : (suffix == 'm' ? 60 : 1);
        ++position;
      } else {
        throw Error(ErrorCategory::kUsage,
                    "duration '" + text + "': unknown unit '" + std::string(1, suffix) + "'");
      }
    }
    total += value * unit;
    any = true;
  }
  if (!any) throw Error(ErrorCategory::kUsage, "empty duration");
  return total;
}

std::string device_fingerprint_of(const std::string& device) {
  const auto backends = campaign_detail::backends_for(device);
  return campaign_detail::fingerprint_of(campaign_detail::find_device(backends, device).info(),
                                         read_host_info());
}

std::optional<double> probe_ms_at(double at_s,
                                  const std::optional<std::pair<double, double>>& before,
                                  const std::optional<std::pair<double, double>>& after) {
  if (before && after && after->first > before->first) {
    const double along = (at_s - before->first) / (after->first - before->first);
    return before->second + along * (after->second - before->second);
  }
  if (after) return after->second;
  if (before) return before->second;
  return std::nullopt;
}

namespace {

// One round of profile_kernels: every configuration once, `each` called in their order.
void profile_kernels_once(const std::vector<Config>& configs, const std::string& device_name,
                          std::uint64_t seed, int warmup_passes, int passes,
                          const std::optional<KernelDriftProbe>& probe,
                          const std::function<void(const Network&, const KernelBreakdown&)>& each) {
  const auto backends = campaign_detail::backends_for(device_name);
  const Device& device = campaign_detail::find_device(backends, device_name);
  const auto start = Clock::now();
  const auto now_s = [&] { return seconds_since(start); };
  // Configurations timed since the last probe, waiting for the next one: (network, breakdown,
  // moment in seconds).
  struct Timed {
    Network network;
    KernelBreakdown breakdown;
    double at_s;
  };
  std::vector<Timed> waiting;
  std::optional<std::pair<double, double>> last_probe;  // the last ok probe: (moment, ms)
  double last_probe_s = 0;
  std::unique_ptr<EnergyMeter> meter;
  if (probe) meter = open_energy_meter(device.info());
  // Measures the probe; hands the waiting configurations their probe latency, interpolated
  // between the last ok probe and this one (when ok; else they wait for the next).
  const auto run_probe = [&](bool last) {
    const double before_s = now_s();
    const Measurement measurement =
        measure_configuration(device, probe->config, drift_probe_protocol(Protocol{}), *meter);
    last_probe_s = now_s();
    const std::optional<LatencyStats>& latency =
        measurement.device_latency ? measurement.device_latency : measurement.wall_latency;
    std::optional<std::pair<double, double>> point;
    if (measurement.status == MeasurementStatus::kOk && latency) {
      point = std::pair{(before_s + last_probe_s) / 2, latency->median_ms};
    }
    if (!point && !last) return;
    for (Timed& timed : waiting) {
      timed.breakdown.probe_ms = probe_ms_at(timed.at_s, last_probe, point);
      each(timed.network, timed.breakdown);
    }
    waiting.clear();
    if (point) last_probe = point;
  };
  if (probe) run_probe(false);
  for (const Config& config : configs) {
    if (probe && now_s() - last_probe_s >= probe->every_s) run_probe(false);
    const std::unique_ptr<Session> session = device.prepare(config, seed);
    const double before_s = now_s();
    std::optional<KernelBreakdown> breakdown = time_kernels(*session, warmup_passes, passes);
    if (!breakdown) {
      throw Error(ErrorCategory::kUsage,
                  device.info().id + " cannot run a forward pass a kernel at a time");
    }
    if (!probe) {
      each(session->network(), *breakdown);
      continue;
    }
    waiting.push_back({session->network(), std::move(*breakdown), (before_s + now_s()) / 2});
  }
  if (probe) run_probe(true);
}

}  // namespace

DeviceIdentity identify_device(const std::string& device_name) {
  const auto backends = campaign_detail::backends_for(device_name);
  const Device& device = campaign_detail::find_device(backends, device_name);
  const HostInfo host = read_host_info();
  DeviceIdentity identity;
  identity.fingerprint = campaign_detail::fingerprint_of(device.info(), host);
  identity.name = device.info().name;
  identity.instance = host_instance(host);
  return identity;
}

void profile_kernels(const std::vector<Config>& configs, const std::string& device_name,
                     std::uint64_t seed, int warmup_passes, int passes, int rounds,
                     const std::optional<KernelDriftProbe>& probe,
                     const std::function<void(const Network&, const KernelBreakdown&)>& each) {
  if (rounds < 1) {
    throw Error(ErrorCategory::kUsage,
                "kernel timing needs at least one round (got " + std::to_string(rounds) + ")");
  }
  if (rounds == 1) {
    profile_kernels_once(configs, device_name, seed, warmup_passes, passes, probe, each);
    return;
  }
  // Every configuration once per round, the rounds one after the other, so that a
  // configuration's rounds lie a round apart and a slow spell of the host spoils one of them.
  std::vector<Network> networks(configs.size());
  std::vector<std::vector<KernelBreakdown>> timed(configs.size());
  for (int round = 0; round < rounds; ++round) {
    std::size_t next = 0;  // `each` comes in the configurations' order
    profile_kernels_once(configs, device_name, seed, warmup_passes, passes, probe,
                         [&](const Network& network, const KernelBreakdown& breakdown) {
                           if (round == 0) networks[next] = network;
                           timed[next++].push_back(breakdown);
                         });
  }
  for (std::size_t c = 0; c < configs.size(); ++c) each(networks[c], combine_rounds(timed[c]));
}

CampaignSummary run_campaign(const std::vector<Config>& configs, const CampaignOptions& options,
                             const std::function<void(const CampaignProgress&)>& progress) {
  using namespace campaign_detail;
  const auto start = Clock::now();
  const auto backends = backends_for(options.device);
  const Device& device = find_device(backends, options.device);
  const DeviceInfo& info = device.info();
  const HostInfo host = read_host_info();
  const nlohmann::json host_json = measured_host_json(host);

  CampaignSummary summary;
  summary.host = host_json;
  summary.device_id = info.id;
  summary.device_fingerprint = fingerprint_of(info, host);
  summary.selected = static_cast<std::int64_t>(configs.size());

  Store store = Store::create_or_open(options.db_path);
  CampaignRecord campaign;
  campaign.name = options.name;
  campaign.spec_text = options.spec_text;
  campaign.protocol_json = options.protocol.key_json().dump();
  summary.campaign_id = store.ensure_campaign(campaign);
  store.ensure_device(
      {0, summary.device_fingerprint, info.kind, info.name, device_details(info, host).dump()});

  const std::string software = software_of(info);
  // Round r's keys follow round r-1's, and each key remembers its round.
  std::map<std::string, const Config*> config_of;
  std::map<std::string, int> round_of;
  std::vector<std::string> keys;
  for (int round = 0; round < std::max(1, options.rounds); ++round) {
    Protocol protocol = options.protocol;
    protocol.round = round;
    for (const std::string& key : campaign_keys(configs, options.shard, summary.device_fingerprint,
                                                software, protocol, &config_of)) {
      round_of.emplace(key, round);
      keys.push_back(key);
    }
  }
  summary.in_shard = static_cast<std::int64_t>(keys.size());
  const std::vector<std::string> pending = store.pending(keys, options.resume);
  summary.already_done = summary.in_shard - static_cast<std::int64_t>(pending.size());

  const std::unique_ptr<EnergyMeter> meter = open_energy_meter(info);
  if (!pending.empty()) {
    summary.idle_power_w =
        measure_idle_power_w(*meter, options.idle_window_s, &summary.idle_power_null_reason);
  } else {
    summary.idle_power_null_reason = "not measured: nothing left to measure";
  }

  CampaignProgress state;
  state.total = static_cast<std::int64_t>(pending.size());
  const ClaimOwner owner = ClaimOwner::current();
  WorkerProcess worker(options.worker, info.id);
  std::optional<Clock::time_point> last_probe;
  bool measured_since_probe = false;
  const auto probe = [&] {
    probe_drift(worker, *options.drift_probe, options.protocol, software, store, &summary);
    last_probe = Clock::now();
    measured_since_probe = false;
  };
  for (const std::string& key : pending) {
    if (options.time_budget_s && seconds_since(start) >= *options.time_budget_s) {
      summary.not_started = state.total - state.finished;
      break;
    }
    if (options.stop && options.stop()) {
      summary.stopped = true;
      break;
    }
    const Config& config = *config_of.at(key);
    state.last_key = to_key(config);
    if (!store.claim(key, owner, options.resume)) {
      ++summary.claimed_elsewhere;
    } else {
      Measurement measurement;
      Protocol protocol = options.protocol;
      protocol.round = round_of.at(key);
      Timestamp started;
      try {
        if (options.drift_probe &&
            (!last_probe || seconds_since(*last_probe) >= options.drift_every_s)) {
          probe();
        }
        started = std::chrono::system_clock::now();
        measurement = worker.measure(config, protocol, options.stop);
      } catch (const MeasurementStopped&) {
        store.release(key, owner);
        summary.stopped = true;
        break;
      }
      const Timestamp finished = std::chrono::system_clock::now();
      store.write_measurement(record_of(measurement, config, key, summary.device_fingerprint,
                                        summary.campaign_id, software, protocol, host_json,
                                        summary.idle_power_w, started, finished));
      count_outcome(measurement, &summary, &state);
      measured_since_probe = true;
    }
    ++state.finished;
    state.elapsed_s = seconds_since(start);
    if (progress) progress(state);
  }
  // The closing probe, unless asked to stop.
  if (options.drift_probe && measured_since_probe && !summary.stopped) probe();
  summary.wall_s = seconds_since(start);
  return summary;
}

std::chrono::seconds claim_timeout_for(const Protocol& protocol) {
  return std::chrono::seconds(static_cast<long long>(protocol.timeout_s * 2 + 60));
}

std::string duration_text(double seconds) {
  const auto total = std::llround(seconds);
  std::ostringstream text;
  if (total >= 3600) text << total / 3600 << "h";
  if (total >= 60) text << (total % 3600) / 60 << "m";
  text << total % 60 << "s";
  return text.str();
}

std::string progress_text(const CampaignProgress& progress) {
  const double rate_per_min =
      progress.elapsed_s > 0 ? static_cast<double>(progress.finished) * 60.0 / progress.elapsed_s
                             : 0;
  const double eta_s = progress.finished > 0
                           ? progress.elapsed_s / static_cast<double>(progress.finished) *
                                 static_cast<double>(progress.total - progress.finished)
                           : 0;
  std::ostringstream line;
  line << "[" << progress.finished << "/" << progress.total << "] " << std::lround(rate_per_min)
       << "/min, ETA " << duration_text(eta_s);
  for (const auto& [status, count] : progress.by_status) line << ", " << status << " " << count;
  line << "  " << progress.last_key;
  return line.str();
}

}  // namespace carb
