// The profiling loop: keys, resume, claims, workers, one transaction per measurement.
#include "carb/campaign.hpp"

#include <chrono>
#include <cstdlib>

#include "carb/error.hpp"
#include "carb/version.hpp"

namespace carb {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int parse_int(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw Error(ErrorCategory::kUsage, what + " '" + text + "' is not an integer");
  }
  return value;
}

const char* environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// The device a campaign names: an exact id, or the first device of a kind.
const Device& find_device(const std::vector<std::unique_ptr<Backend>>& backends,
                          const std::string& wanted) {
  std::string known;
  std::string without;  // backends without devices, and why
  for (const auto& backend : backends) {
    for (const auto& device : backend->devices()) {
      if (device->info().id == wanted || device->info().kind == wanted) return *device;
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
  std::string fingerprint = device_fingerprint(host) + "|" + info.kind + "|" + info.library +
                            "|isa=" + info.isa + "|threads=" + std::to_string(info.threads);
  if (info.kind != "cpu") {
    fingerprint += "|gpu=" + info.name + "|memory=" + std::to_string(info.memory_bytes) +
                   "|driver=" + info.driver;
  }
  return fingerprint;
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

}  // namespace

Shard Shard::parse(const std::string& text) {
  Shard shard;
  if (text == "auto") {
    const char* index = environment("SLURM_ARRAY_TASK_ID");
    const char* count = environment("SLURM_ARRAY_TASK_COUNT");
    if (index == nullptr || count == nullptr) {
      index = environment("OMPI_COMM_WORLD_RANK");
      count = environment("OMPI_COMM_WORLD_SIZE");
    }
    if (index == nullptr || count == nullptr) return shard;
    shard.index = parse_int(index, "shard index");
    shard.count = parse_int(count, "shard count");
  } else {
    const std::size_t slash = text.find('/');
    if (slash == std::string::npos) {
      throw Error(ErrorCategory::kUsage, "--shard '" + text + "': expected K/N or auto");
    }
    shard.index = parse_int(text.substr(0, slash), "--shard index");
    shard.count = parse_int(text.substr(slash + 1), "--shard count");
  }
  if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count) {
    throw Error(ErrorCategory::kUsage, "--shard " + std::to_string(shard.index) + "/" +
                                           std::to_string(shard.count) + ": needs 0 <= K < N");
  }
  return shard;
}

bool Shard::contains(const std::string& configuration_key) const {
  if (count == 1) return true;
  const std::uint64_t hash = std::stoull(sha256_hex(configuration_key).substr(0, 15), nullptr, 16);
  return static_cast<int>(hash % static_cast<std::uint64_t>(count)) == index;
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
  const auto backends = make_backends();
  return fingerprint_of(find_device(backends, device).info(), read_host_info());
}

CampaignSummary run_campaign(const std::vector<Config>& configs, const CampaignOptions& options,
                             const std::function<void(const CampaignProgress&)>& progress) {
  const auto start = Clock::now();
  const auto backends = make_backends();
  const Device& device = find_device(backends, options.device);
  const DeviceInfo& info = device.info();
  const HostInfo host = read_host_info();
  const nlohmann::json host_json = host_info_json(host);

  CampaignSummary summary;
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

  const std::string software = std::string("carb ") + kVersion + "; " + info.library;
  const std::string protocol_key = options.protocol.key_json().dump();
  std::vector<std::string> keys;
  std::map<std::string, const Config*> config_of;
  for (const Config& config : configs) {
    const std::string configuration_key = to_key(config);
    if (!options.shard.contains(configuration_key)) continue;
    const std::string key =
        measurement_key(configuration_key, summary.device_fingerprint, software, protocol_key);
    if (config_of.emplace(key, &config).second) keys.push_back(key);
  }
  summary.in_shard = static_cast<std::int64_t>(keys.size());
  const std::vector<std::string> pending = store.pending(keys, options.resume);
  summary.already_done = summary.in_shard - static_cast<std::int64_t>(pending.size());

  const std::unique_ptr<EnergyMeter> meter = open_energy_meter(info);
  if (!pending.empty()) {
    summary.idle_power_w =
        measure_idle_power_w(*meter, options.idle_window_s, &summary.idle_power_null_reason);
  }

  CampaignProgress state;
  state.total = static_cast<std::int64_t>(pending.size());
  const ClaimOwner owner = ClaimOwner::current();
  for (const std::string& key : pending) {
    if (options.time_budget_s && seconds_since(start) >= *options.time_budget_s) {
      summary.not_started = state.total - state.finished;
      break;
    }
    const Config& config = *config_of.at(key);
    state.last_key = to_key(config);
    if (!store.claim(key, owner, options.resume)) {
      ++summary.claimed_elsewhere;
    } else {
      const Timestamp started = std::chrono::system_clock::now();
      const Measurement measurement =
          measure_in_worker(options.worker, info.id, config, options.protocol);
      const Timestamp finished = std::chrono::system_clock::now();
      store.write_measurement(record_of(measurement, config, key, summary.device_fingerprint,
                                        summary.campaign_id, software, options.protocol, host_json,
                                        summary.idle_power_w, started, finished));
      const std::string status(to_string(measurement.status));
      ++summary.measured[status];
      ++state.by_status[status];
      summary.inference_s += measurement.warmup_s + measurement.timed_s + measurement.energy_s;
      summary.prepare_s += measurement.prepare_s;
      if (measurement.detail.find("contended: ") != std::string::npos) ++summary.contended;
    }
    ++state.finished;
    state.elapsed_s = seconds_since(start);
    if (progress) progress(state);
  }
  summary.wall_s = seconds_since(start);
  return summary;
}

}  // namespace carb
