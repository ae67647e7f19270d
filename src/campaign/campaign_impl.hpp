// What the campaign loops (one process, or MPI ranks) share.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "carb/campaign.hpp"

namespace carb::campaign_detail {

/// The backend the device name `device` belongs to, alone ("cpu:0": the CPU engine's, so that
/// measuring on it never opens libtorch), or every backend when its kind is none of this build's
/// (find_device then lists the devices there are).
std::vector<std::unique_ptr<Backend>> backends_for(const std::string& device);
/// The device a campaign names: an exact id, the first device of a kind, or the first device of
/// a backend ("torch"). Throws carb::Error (usage) listing the devices there are.
const Device& find_device(const std::vector<std::unique_ptr<Backend>>& backends,
                          const std::string& wanted);
/// What identifies a device's performance: the host's CPU fingerprint, the library, threads.
std::string fingerprint_of(const DeviceInfo& info, const HostInfo& host);
/// The devices table's details of a device.
nlohmann::json device_details(const DeviceInfo& info, const HostInfo& host);
/// What every row of a campaign records of its host (provenance.host): host_info_json plus a
/// short speed probe (measure_host_speed) taken now.
nlohmann::json measured_host_json(const HostInfo& host);
/// "carb VERSION; LIBRARY": the software part of a measurement key.
std::string software_of(const DeviceInfo& info);
/// The measurement keys of the configurations in `shard`, in order and without duplicates;
/// `config_of` maps each key to its configuration.
std::vector<std::string> campaign_keys(const std::vector<Config>& configs, const Shard& shard,
                                       const std::string& fingerprint, const std::string& software,
                                       const Protocol& protocol,
                                       std::map<std::string, const Config*>* config_of);
/// Counts one measurement's outcome and times in the summary and the progress.
void count_outcome(const Measurement& measurement, CampaignSummary* summary,
                   CampaignProgress* progress);
/// Measures the drift probe once with drift_probe_protocol() and stores it; counts it in the
/// summary (probes, probe_ms, probe_s, probe_failure).
void probe_drift(WorkerProcess& worker, const Config& probe, const Protocol& campaign_protocol,
                 const std::string& software, Store& store, CampaignSummary* summary);
/// The row to store for one measurement.
MeasurementRecord record_of(const Measurement& measurement, const Config& config,
                            const std::string& key, const std::string& fingerprint,
                            std::int64_t campaign_id, const std::string& software,
                            const Protocol& protocol, const nlohmann::json& host,
                            const std::optional<double>& idle_power_w, Timestamp started,
                            Timestamp finished);

}  // namespace carb::campaign_detail
