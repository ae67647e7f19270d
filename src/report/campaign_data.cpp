// Campaign data for characterization and the report: the measurements of one or more
// databases, pooled by device, and the CARB model of each device.
#include <algorithm>
#include <filesystem>
#include <map>

#include "carb/backend.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/report.hpp"

namespace carb {

namespace {

// One device's measurements from every database read.
struct Pooled {
  std::vector<std::pair<MeasuredTargets, std::string>> ok;  ///< with the database read from
  std::vector<MeasurementOutcome> outcomes;
};

std::string device_list(const CampaignData& data) {
  std::string text;
  for (const DeviceCampaign& device : data.devices) {
    text += (text.empty() ? "" : ", ") + device.fingerprint + " (" + device.name + ")";
  }
  return text;
}

// The inference library of a device's engine, without its details: "PyTorch 1.13.0" of
// "...|cpu|PyTorch 1.13.0 (ATen eager, ...)|isa=...".
// "" when the fingerprint has no such part.
std::string library_of(const DeviceCampaign& device) {
  if (device.fingerprint.find('|') == std::string::npos) return "";
  const std::string engine = engine_part(device.fingerprint);
  const std::size_t start = engine.find('|');
  if (start == std::string::npos) return "";
  const std::string library = engine.substr(start + 1, engine.find('|', start + 1) - start - 1);
  return library.substr(0, library.find(" ("));
}

// Fills a device's rows, reasons and failures from its pooled measurements.
void summarise(DeviceCampaign& device, Pooled& pooled) {
  const auto by_key_then_time = [](const auto& a, const auto& b) {
    return std::tie(a.configuration_key, a.finished_at) <
           std::tie(b.configuration_key, b.finished_at);
  };
  std::stable_sort(pooled.ok.begin(), pooled.ok.end(), [&](const auto& a, const auto& b) {
    return by_key_then_time(a.first, b.first);
  });
  std::stable_sort(pooled.outcomes.begin(), pooled.outcomes.end(), by_key_then_time);

  std::map<std::string, std::size_t> energy_reasons;
  std::vector<MeasuredTargets> measured;
  for (const auto& entry : pooled.ok) measured.push_back(entry.first);
  std::vector<std::size_t> last;
  for (const MeasuredTargets& m : combine_repeated(measured, &device.repeated, &last)) {
    MeasuredConfiguration& row = device.rows.emplace_back();
    row.key = m.configuration_key;
    row.source = pooled.ok[last[device.rows.size() - 1]].second;
    row.config = parse_key(m.configuration_key);
    row.gflops = static_cast<double>(compute_features(build_network(row.config)).flops) / 1e9;
    if (m.engine_peak_bytes) {
      row.values[static_cast<std::size_t>(Target::kMemory)] =
          static_cast<double>(*m.engine_peak_bytes);
    }
    row.values[static_cast<std::size_t>(Target::kEnergy)] = m.energy_j;
    row.values[static_cast<std::size_t>(Target::kLatency)] = m.latency_ms;
    if (!m.energy_j) ++energy_reasons[m.energy_null_reason];
  }
  for (std::size_t t = 0; t < kTargetCount; ++t) {
    const auto without = static_cast<std::size_t>(std::count_if(
        device.rows.begin(), device.rows.end(),
        [t](const MeasuredConfiguration& row) { return !row.values[t].has_value(); }));
    if (without < device.rows.size() || device.rows.empty()) {
      device.rows_without_value[t] = without;
      continue;
    }
    if (static_cast<Target>(t) == Target::kEnergy && !energy_reasons.empty()) {
      // The most common reason, in the words the predictor uses for the same fact.
      const auto most =
          std::max_element(energy_reasons.begin(), energy_reasons.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      device.missing_reason[t] = "no energy measured on " + device.name + ": " + most->first;
    } else {
      device.missing_reason[t] =
          "no " + std::string(to_string(static_cast<Target>(t))) + " measured on " + device.name;
    }
  }
  if (device.rows.empty()) {
    for (std::size_t t = 0; t < kTargetCount; ++t) {
      device.missing_reason[t] = "no successful measurement on " + device.name;
    }
  }

  // Failures: the latest outcome of each key that never succeeded.
  for (std::size_t i = 0; i < pooled.outcomes.size(); ++i) {
    const MeasurementOutcome& outcome = pooled.outcomes[i];
    ++device.status_counts[static_cast<std::size_t>(outcome.status)];
    const bool latest = i + 1 == pooled.outcomes.size() ||
                        pooled.outcomes[i + 1].configuration_key != outcome.configuration_key;
    if (!latest || outcome.status == MeasurementStatus::kOk) continue;
    const auto found = std::lower_bound(
        device.rows.begin(), device.rows.end(), outcome.configuration_key,
        [](const MeasuredConfiguration& row, const std::string& key) { return row.key < key; });
    const bool succeeded = found != device.rows.end() && found->key == outcome.configuration_key;
    if (!succeeded) device.failures.push_back(outcome);
  }
}

}  // namespace

std::string target_label(Target target) {
  return std::string(to_string(target)) + " (" + std::string(canonical_unit(target)) + ")";
}

CampaignData load_campaigns(const std::vector<std::string>& paths) {
  if (paths.empty()) throw Error(ErrorCategory::kUsage, "give at least one database", "databases");
  CampaignData data;
  std::map<std::string, Pooled> pooled;
  for (const std::string& path : paths) {
    if (!std::filesystem::exists(path)) {
      throw Error(ErrorCategory::kInput, path + ": no such database");
    }
    const Store store = Store::open(path);
    data.sources.push_back(path);
    for (const DeviceRecord& record : store.devices()) {
      auto found = std::find_if(
          data.devices.begin(), data.devices.end(),
          [&](const DeviceCampaign& d) { return d.fingerprint == record.fingerprint; });
      if (found == data.devices.end()) {
        DeviceCampaign device;
        device.fingerprint = record.fingerprint;
        device.name = record.name;
        device.kind = record.kind;
        data.devices.push_back(std::move(device));
        found = data.devices.end() - 1;
      }
      found->sources.push_back(path);
      Pooled& into = pooled[record.fingerprint];
      for (MeasuredTargets& m : store.ok_measurements(record.fingerprint)) {
        ++found->instances[m.host_instance];
        into.ok.emplace_back(std::move(m), path);
      }
      for (MeasurementOutcome& outcome : store.outcomes(record.fingerprint)) {
        into.outcomes.push_back(std::move(outcome));
      }
    }
  }
  if (data.devices.empty()) {
    std::string list;
    for (const std::string& path : paths) list += (list.empty() ? "" : ", ") + path;
    throw Error(ErrorCategory::kInput, list + ": no measurements (no device recorded)");
  }
  // Devices are shown by name. Two of one name get their engine's library when that tells them
  // apart (one machine, carb's engine and PyTorch), else a short hash of their fingerprints (two
  // machines of one model).
  std::vector<std::string> names;
  for (const DeviceCampaign& device : data.devices) {
    const auto same = [&](const auto& suffix) {
      return std::count_if(data.devices.begin(), data.devices.end(), [&](const DeviceCampaign& d) {
        return d.name == device.name && suffix(d) == suffix(device);
      });
    };
    const auto nothing = [](const DeviceCampaign&) { return std::string(); };
    if (same(nothing) == 1) {
      names.push_back(device.name);
    } else if (!library_of(device).empty() && same(library_of) == 1) {
      names.push_back(device.name + " [" + library_of(device) + "]");
    } else {
      names.push_back(device.name + " [" + sha256_hex(device.fingerprint).substr(0, 8) + "]");
    }
  }
  for (std::size_t d = 0; d < names.size(); ++d) data.devices[d].name = names[d];
  for (DeviceCampaign& device : data.devices) summarise(device, pooled[device.fingerprint]);
  return data;
}

std::string pooled_hosts_warning(const DeviceCampaign& device) {
  if (device.instances.size() < 2) return "";
  return "warning: " + device.name + ": its measurements come from " +
         std::to_string(device.instances.size()) +
         " host instances pooled as one device (the fingerprint matches; the machines or boots "
         "differ, and hosts of one CPU model differ in latency by up to a third): " +
         instances_text(device.instances);
}

const DeviceCampaign& find_device(const CampaignData& data,
                                  const std::string& name_or_fingerprint) {
  // Names are unique: load_campaigns tells devices of one name apart.
  for (const DeviceCampaign& device : data.devices) {
    if (device.fingerprint == name_or_fingerprint || device.name == name_or_fingerprint) {
      return device;
    }
  }
  throw Error(ErrorCategory::kInput,
              "device '" + name_or_fingerprint +
                  "' names no device; give a fingerprint or a name: " + device_list(data),
              "device");
}

void keep_devices(CampaignData& data, const std::vector<std::string>& names) {
  if (names.empty()) return;
  std::vector<DeviceCampaign> kept;
  for (const std::string& name : names) {
    const DeviceCampaign& device = find_device(data, name);
    const bool already = std::any_of(kept.begin(), kept.end(), [&](const DeviceCampaign& d) {
      return d.fingerprint == device.fingerprint;
    });
    if (!already) kept.push_back(device);
  }
  data.devices = std::move(kept);
}

void require_device_model(const Predictor& model, const std::string& name) {
  if (model.schema() != kArchitectureSchema) {
    throw Error(ErrorCategory::kInput, name + " was fitted on a table, not on carb measurements");
  }
}

std::shared_ptr<const Predictor> load_device_model(const std::string& path) {
  auto model = std::make_shared<const Predictor>(Predictor::load(path));
  require_device_model(*model, path);
  return model;
}

Dataset device_dataset(const DeviceCampaign& device) {
  std::vector<MeasuredTargets> measured;
  for (const MeasuredConfiguration& row : device.rows) {
    MeasuredTargets& m = measured.emplace_back();
    m.configuration_key = row.key;
    m.device_fingerprint = device.fingerprint;
    const auto& memory = row.values[static_cast<std::size_t>(Target::kMemory)];
    if (memory) m.engine_peak_bytes = static_cast<std::int64_t>(*memory);
    m.energy_j = row.values[static_cast<std::size_t>(Target::kEnergy)];
    m.latency_ms = *row.values[static_cast<std::size_t>(Target::kLatency)];
  }
  Dataset data = dataset_from_measurements(measured, device.fingerprint, device.name);
  // The device's own words for a target nobody measured (the rows above carry no reasons).
  for (std::size_t t = 0; t < kTargetCount && t < data.missing_reason.size(); ++t) {
    if (!data.missing_reason[t].empty()) data.missing_reason[t] = device.missing_reason[t];
  }
  return data;
}

std::vector<DeviceModel> device_models(const CampaignData& data,
                                       const std::shared_ptr<const Predictor>& given,
                                       const std::string& given_path,
                                       const std::optional<FitOptions>& fit) {
  std::vector<DeviceModel> models;
  for (const DeviceCampaign& device : data.devices) {
    DeviceModel& model = models.emplace_back();
    if (given && given->device_fingerprint() == device.fingerprint) {
      model.predictor = given;
      model.source = given_path;
      continue;
    }
    if (!fit) {
      model.reason = given ? given_path + " is a model of " + given->device_name() +
                                 ", and fitting one now is off"
                           : "no model given, and fitting one now is off";
      continue;
    }
    try {
      FitOptions options = *fit;
      options.baselines = true;
      model.predictor = std::make_shared<const Predictor>(
          Predictor::fit(device_dataset(device), options, nullptr));
      model.source = "fitted now (seed " + std::to_string(options.seed) + ")";
    } catch (const Error& error) {
      if (error.category() == ErrorCategory::kRuntime) throw;
      model.reason =
          std::string("CARB could not be fitted on ") + device.name + ": " + error.what();
    }
  }
  return models;
}

}  // namespace carb
