// Characterization statistics (method.md §6): scaling across batch regimes, energy per GFLOP,
// precision, FLOPs-only fits next to CARB, and transfer between devices.
#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "carb/backend.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/report.hpp"
#include "carb/statistics.hpp"

namespace carb {

namespace {

using json = nlohmann::ordered_json;

// The predictor's batch tiers (docs/model.md), so "low batch" means one thing across carb.
struct Regime {
  const char* name;
  int batch_min, batch_max;
};
constexpr Regime kRegimes[] = {
    {"batch 1-8", 1, 8}, {"batch 9-32", 9, 32}, {"batch 33+", 33, INT_MAX}};

std::size_t at(Target target) { return static_cast<std::size_t>(target); }

bool per_gflop(Target target) { return target != Target::kMemory; }

void regimes_of(TargetCharacterization& out, const DeviceCampaign& device) {
  const std::size_t t = at(out.target);
  for (const Regime& regime : kRegimes) {
    std::vector<double> values;
    RegimeMedian median_of{regime.name, INT_MAX, 0, 0, 0};
    for (const MeasuredConfiguration& row : device.rows) {
      const int batch = row.config.batch;
      if (!row.values[t] || batch < regime.batch_min || batch > regime.batch_max) continue;
      values.push_back(*row.values[t]);
      median_of.batch_min = std::min(median_of.batch_min, batch);
      median_of.batch_max = std::max(median_of.batch_max, batch);
    }
    if (values.empty()) continue;
    median_of.rows = values.size();
    median_of.median = median(values);
    out.regimes.push_back(median_of);
  }
  if (out.regimes.size() < 2) {
    out.regime_ratio_reason = "only one batch regime measured (" +
                              (out.regimes.empty() ? std::string("none") : out.regimes[0].name) +
                              ")";
  } else if (out.regimes.front().median <= 0) {
    out.regime_ratio_reason = "the lowest regime's median is 0";
  } else {
    out.regime_ratio = out.regimes.back().median / out.regimes.front().median;
  }
  if (out.regimes.size() < 2) return;
  // Networks (a configuration less its batch) measured in both extreme regimes.
  const RegimeMedian& lowest = out.regimes.front();
  const RegimeMedian& highest = out.regimes.back();
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> networks;
  for (const MeasuredConfiguration& row : device.rows) {
    const int batch = row.config.batch;
    if (!row.values[t]) continue;
    Config network = row.config;
    network.batch = 1;
    if (batch >= lowest.batch_min && batch <= lowest.batch_max) {
      networks[to_key(network)].first.push_back(*row.values[t]);
    } else if (batch >= highest.batch_min && batch <= highest.batch_max) {
      networks[to_key(network)].second.push_back(*row.values[t]);
    }
  }
  std::vector<double> ratios;
  for (const auto& [network, values] : networks) {
    if (values.first.empty() || values.second.empty()) continue;
    const double low = median(values.first);
    if (low > 0) ratios.push_back(median(values.second) / low);
  }
  out.matched_networks = ratios.size();
  if (!ratios.empty()) out.matched_regime_ratio = median(ratios);
}

void batches_of(TargetCharacterization& out, const DeviceCampaign& device) {
  const std::size_t t = at(out.target);
  std::map<int, std::pair<std::vector<double>, std::vector<double>>> by_batch;
  for (const MeasuredConfiguration& row : device.rows) {
    if (!row.values[t]) continue;
    auto& [values, per_gflop_values] = by_batch[row.config.batch];
    values.push_back(*row.values[t]);
    if (row.gflops > 0) per_gflop_values.push_back(*row.values[t] / row.gflops);
  }
  for (auto& [batch, lists] : by_batch) {
    BatchMedian entry{batch, lists.first.size(), median(lists.first), std::nullopt};
    if (per_gflop(out.target) && !lists.second.empty()) {
      entry.median_per_gflop = median(lists.second);
    }
    out.by_batch.push_back(entry);
  }
  if (out.by_batch.size() >= 2 && out.by_batch.front().median_per_gflop &&
      out.by_batch.back().median_per_gflop && *out.by_batch.back().median_per_gflop > 0) {
    out.small_batch_penalty =
        *out.by_batch.front().median_per_gflop / *out.by_batch.back().median_per_gflop;
  }
}

void precision_of(TargetCharacterization& out, const DeviceCampaign& device) {
  const std::size_t t = at(out.target);
  std::map<std::string, double> fp32;
  std::map<Precision, std::vector<const MeasuredConfiguration*>> lower;
  for (const MeasuredConfiguration& row : device.rows) {
    if (!row.values[t]) continue;
    if (row.config.precision == Precision::kFp32) {
      fp32[row.key] = *row.values[t];
    } else {
      lower[row.config.precision].push_back(&row);
    }
  }
  if (lower.empty()) {
    out.precision_reason = "only fp32 measured";
    return;
  }
  if (fp32.empty()) {
    out.precision_reason = "no fp32 measurement to compare with";
    return;
  }
  std::vector<double> fp32_values;
  fp32_values.reserve(fp32.size());
  for (const auto& [key, value] : fp32) fp32_values.push_back(value);
  for (const auto& [precision, rows] : lower) {
    PrecisionEffect effect;
    effect.precision = precision;
    effect.fp32_rows = fp32.size();
    effect.rows = rows.size();
    std::vector<double> ratios, values;
    for (const MeasuredConfiguration* row : rows) {
      values.push_back(*row->values[t]);
      Config twin = row->config;
      twin.precision = Precision::kFp32;
      const auto found = fp32.find(to_key(twin));
      if (found != fp32.end() && *row->values[t] > 0) {
        ratios.push_back(found->second / *row->values[t]);
      }
    }
    effect.pairs = ratios.size();
    if (!ratios.empty()) {
      effect.method = "matched pairs";
      effect.ratio = median(ratios);
    } else {
      effect.method = "group medians";
      const double low = median(values);
      if (low <= 0) continue;
      effect.ratio = median(fp32_values) / low;
    }
    out.precision.push_back(effect);
  }
}

void flops_fit_of(TargetCharacterization& out, const DeviceCampaign& device) {
  const std::size_t t = at(out.target);
  std::vector<double> x, y;
  for (const MeasuredConfiguration& row : device.rows) {
    if (!row.values[t] || *row.values[t] <= 0 || row.gflops <= 0) continue;
    x.push_back(std::log(row.gflops));
    y.push_back(std::log(*row.values[t]));
  }
  const LineFit line = fit_line(x, y);
  if (x.size() < 3) {
    out.flops_reason = "fewer than 3 rows with a positive value";
  } else if (!line.valid) {
    out.flops_reason = "every row has the same FLOPs or the same value";
  } else {
    out.flops = FlopsFit{x.size(), line.slope, line.intercept, line.r2};
  }
}

void carb_accuracy_of(TargetCharacterization& out, const DeviceModel& model) {
  CarbAccuracy& carb = out.carb;
  if (!model.predictor) {
    carb.reason = model.reason;
    return;
  }
  carb.source = model.source;
  const std::string name(to_string(out.target));
  bool found_carb = false, found_flops = false;
  for (const MethodScores& scores : model.predictor->fit_report().scores) {
    if (scores.target != name) continue;
    if (scores.method == "carb") {
      carb.r2 = scores.metrics.r2;
      carb.test_rows = scores.metrics.n;
      found_carb = true;
    } else if (scores.method == "flops-loglinear") {
      carb.flops_r2 = scores.metrics.r2;
      found_flops = true;
    }
  }
  carb.available = found_carb && found_flops;
  if (!carb.available) {
    carb.reason = "the model (" + model.source + ") has no test-split score of " + name;
  }
}

TargetCharacterization characterize_target(Target target, const DeviceCampaign& device,
                                           const DeviceModel* model) {
  TargetCharacterization out;
  out.target = target;
  const std::size_t t = at(target);
  if (!device.missing_reason[t].empty()) {
    out.reason = device.missing_reason[t];
    return out;
  }
  out.available = true;
  out.rows = device.rows.size() - device.rows_without_value[t];
  regimes_of(out, device);
  batches_of(out, device);
  precision_of(out, device);
  flops_fit_of(out, device);
  if (model != nullptr) {
    carb_accuracy_of(out, *model);
  } else {
    out.carb.reason = "no model";
  }
  return out;
}

// The knobs a ratio between two devices is grouped by, each as a number to order its values by
// and the text a configuration key spells it with; nullopt where a configuration has no such
// knob (an imported architecture has no block, width or stem of carb's ResNets).
struct Knob {
  const char* name;
  std::optional<double> (*order)(const Config&);
  std::string (*text)(const Config&);
};

std::string shortest(double value) {
  std::array<char, 32> buffer{};
  const auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  CARB_CHECK(ec == std::errc(), "to_chars failed");
  return {buffer.data(), end};
}

std::optional<double> resnet_only(const Config& c, double value) {
  return c.imported() ? std::nullopt : std::optional<double>(value);
}

constexpr Knob kRatioKnobs[] = {
    {"architecture", [](const Config&) -> std::optional<double> { return 0.0; },
     [](const Config& c) { return architecture_name(c).value_or("resnet"); }},
    {"batch", [](const Config& c) -> std::optional<double> { return c.batch; },
     [](const Config& c) { return std::to_string(c.batch); }},
    {"width", [](const Config& c) { return resnet_only(c, c.width_multiplier); },
     [](const Config& c) { return shortest(c.width_multiplier); }},
    {"resolution", [](const Config& c) -> std::optional<double> { return c.resolution; },
     [](const Config& c) { return std::to_string(c.resolution); }},
    {"depth", [](const Config& c) { return resnet_only(c, c.depth()); },
     [](const Config& c) { return std::to_string(c.depth()); }},
    {"block", [](const Config& c) { return resnet_only(c, static_cast<int>(c.block)); },
     [](const Config& c) { return std::string(to_string(c.block)); }},
    {"precision",
     [](const Config& c) -> std::optional<double> { return static_cast<int>(c.precision); },
     [](const Config& c) { return std::string(to_string(c.precision)); }},
};

std::vector<RatioGroup> ratios_by_knob(const std::vector<const Config*>& configs,
                                       const std::vector<double>& ratios) {
  std::vector<RatioGroup> out;
  for (const Knob& knob : kRatioKnobs) {
    // Ordered by the knob's number, then its text (the architectures, which share one number).
    std::map<std::pair<double, std::string>, std::vector<double>> groups;
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const std::optional<double> order = knob.order(*configs[i]);
      if (order) groups[{*order, knob.text(*configs[i])}].push_back(ratios[i]);
    }
    if (groups.size() < 2) continue;
    for (const auto& [order, group] : groups) {
      out.push_back({knob.name, order.second, group.size(), geometric_mean(group)});
    }
  }
  return out;
}

std::string host_part(const std::string& fingerprint) {
  return fingerprint.substr(0, fingerprint.find('|'));
}

TargetTransfer transfer_of(Target target, const DeviceCampaign& from, const DeviceCampaign& to) {
  TargetTransfer out;
  out.target = target;
  const std::size_t t = at(target);
  for (const DeviceCampaign* device : {&from, &to}) {
    if (!device->missing_reason[t].empty()) {
      out.reason = device->missing_reason[t];
      return out;
    }
  }
  std::map<std::string, double> first;
  for (const MeasuredConfiguration& row : from.rows) {
    if (row.values[t]) first[row.key] = *row.values[t];
  }
  std::vector<double> x, y, ratios;
  std::vector<const Config*> ratio_configs;
  for (const MeasuredConfiguration& row : to.rows) {
    const auto found = first.find(row.key);
    if (!row.values[t] || found == first.end()) continue;
    x.push_back(found->second);
    y.push_back(*row.values[t]);
    if (found->second > 0 && *row.values[t] > 0) {
      ratios.push_back(*row.values[t] / found->second);
      ratio_configs.push_back(&row.config);
    }
  }
  out.shared = x.size();
  if (x.size() < kMinSharedConfigurations) {
    out.reason = std::to_string(x.size()) + " configuration" + (x.size() == 1 ? "" : "s") +
                 " measured on both devices; need " + std::to_string(kMinSharedConfigurations);
    return out;
  }
  const LineFit line = fit_line(x, y);
  if (!line.valid) {
    out.reason = "the shared configurations all have one value on " + from.name;
    return out;
  }
  out.available = true;
  out.slope = line.slope;
  out.intercept = line.intercept;
  out.median_ratio = ratios.empty() ? 0 : median(ratios);
  if (!ratios.empty()) {
    out.geomean_ratio = geometric_mean(ratios);
    out.min_ratio = *std::min_element(ratios.begin(), ratios.end());
    out.max_ratio = *std::max_element(ratios.begin(), ratios.end());
    out.second_lower = static_cast<std::size_t>(
        std::count_if(ratios.begin(), ratios.end(), [](double r) { return r < 1; }));
    out.by_knob = ratios_by_knob(ratio_configs, ratios);
  }
  out.spearman = spearman(x, y);
  if (out.spearman >= kTransferRankThreshold &&
      std::abs(out.slope - 1) <= kTransferSlopeTolerance) {
    out.verdict = "transfers";
  } else if (out.spearman >= kTransferRankThreshold) {
    out.verdict = "ranks transfer";
  } else {
    out.verdict = "does not transfer";
  }
  return out;
}

json optional_number(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

}  // namespace

std::string_view describe_relation(std::string_view relation) {
  if (relation == "engines") return "one machine, two inference engines";
  if (relation == "machines") return "one engine on two machines";
  return "other machines and engines";
}

Characterization characterize(const CampaignData& data, const std::vector<DeviceModel>& models) {
  CARB_CHECK(models.empty() || models.size() == data.devices.size(), "one model slot per device");
  Characterization out;
  for (std::size_t d = 0; d < data.devices.size(); ++d) {
    const DeviceCampaign& device = data.devices[d];
    DeviceCharacterization& result = out.devices.emplace_back();
    result.fingerprint = device.fingerprint;
    result.name = device.name;
    result.configurations = device.rows.size();
    for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
      result.targets[at(target)] =
          characterize_target(target, device, models.empty() ? nullptr : &models[d]);
    }
    const TargetCharacterization& energy = result.targets[at(Target::kEnergy)];
    const TargetCharacterization& latency = result.targets[at(Target::kLatency)];
    if (!energy.available) {
      result.divergence_reason = "energy: " + energy.reason;
    } else if (!latency.available) {
      result.divergence_reason = "latency: " + latency.reason;
    } else if (!energy.regime_ratio || !latency.regime_ratio) {
      result.divergence_reason =
          energy.regime_ratio ? latency.regime_ratio_reason : energy.regime_ratio_reason;
    } else {
      result.energy_latency_divergence = *energy.regime_ratio / *latency.regime_ratio;
      if (energy.matched_regime_ratio && latency.matched_regime_ratio) {
        result.matched_energy_latency_divergence =
            *energy.matched_regime_ratio / *latency.matched_regime_ratio;
      }
    }
  }
  for (std::size_t a = 0; a < data.devices.size(); ++a) {
    for (std::size_t b = a + 1; b < data.devices.size(); ++b) {
      DeviceTransfer& transfer = out.transfers.emplace_back();
      const DeviceCampaign& from = data.devices[a];
      const DeviceCampaign& to = data.devices[b];
      transfer.from_fingerprint = from.fingerprint;
      transfer.from_name = from.name;
      transfer.to_fingerprint = to.fingerprint;
      transfer.to_name = to.name;
      transfer.relation = host_part(from.fingerprint) == host_part(to.fingerprint) ? "engines"
                          : engine_part(from.fingerprint) == engine_part(to.fingerprint)
                              ? "machines"
                              : "devices";
      for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
        transfer.targets[at(target)] = transfer_of(target, from, to);
      }
    }
  }
  return out;
}

std::string characterization_json(const Characterization& characterization) {
  json devices = json::array();
  for (const DeviceCharacterization& device : characterization.devices) {
    json targets = json::array();
    for (const TargetCharacterization& target : device.targets) {
      json entry = {{"target", to_string(target.target)},
                    {"unit", canonical_unit(target.target)},
                    {"available", target.available}};
      if (!target.available) {
        entry["reason"] = target.reason;
        targets.push_back(std::move(entry));
        continue;
      }
      entry["rows"] = target.rows;
      json regimes = json::array();
      for (const RegimeMedian& r : target.regimes) {
        regimes.push_back({{"regime", r.name},
                           {"batch_min", r.batch_min},
                           {"batch_max", r.batch_max},
                           {"rows", r.rows},
                           {"median", r.median}});
      }
      entry["regimes"] = std::move(regimes);
      entry["regime_ratio"] = optional_number(target.regime_ratio);
      if (!target.regime_ratio) entry["regime_ratio_reason"] = target.regime_ratio_reason;
      entry["matched_regime_ratio"] = optional_number(target.matched_regime_ratio);
      entry["matched_networks"] = target.matched_networks;
      json by_batch = json::array();
      for (const BatchMedian& b : target.by_batch) {
        json row = {{"batch", b.batch}, {"rows", b.rows}, {"median", b.median}};
        if (per_gflop(target.target)) row["median_per_gflop"] = optional_number(b.median_per_gflop);
        by_batch.push_back(std::move(row));
      }
      entry["by_batch"] = std::move(by_batch);
      if (per_gflop(target.target)) {
        entry["small_batch_penalty"] = optional_number(target.small_batch_penalty);
      }
      json precision = json::array();
      for (const PrecisionEffect& p : target.precision) {
        precision.push_back({{"precision", to_string(p.precision)},
                             {"method", p.method},
                             {"pairs", p.pairs},
                             {"fp32_rows", p.fp32_rows},
                             {"rows", p.rows},
                             {"fp32_over_precision", p.ratio}});
      }
      entry["precision"] = std::move(precision);
      if (target.precision.empty()) entry["precision_reason"] = target.precision_reason;
      if (target.flops) {
        entry["flops_loglog"] = {{"rows", target.flops->rows},
                                 {"exponent", target.flops->exponent},
                                 {"intercept", target.flops->intercept},
                                 {"r2", target.flops->r2}};
      } else {
        entry["flops_loglog"] = {{"reason", target.flops_reason}};
      }
      const CarbAccuracy& carb = target.carb;
      entry["carb"] = carb.available ? json{{"source", carb.source},
                                            {"test_rows", carb.test_rows},
                                            {"r2", carb.r2},
                                            {"flops_loglinear_r2", carb.flops_r2}}
                                     : json{{"reason", carb.reason}};
      targets.push_back(std::move(entry));
    }
    json entry = {{"fingerprint", device.fingerprint},
                  {"name", device.name},
                  {"configurations", device.configurations},
                  {"targets", std::move(targets)},
                  {"energy_latency_divergence", optional_number(device.energy_latency_divergence)},
                  {"matched_energy_latency_divergence",
                   optional_number(device.matched_energy_latency_divergence)}};
    if (!device.energy_latency_divergence) entry["divergence_reason"] = device.divergence_reason;
    devices.push_back(std::move(entry));
  }
  json transfers = json::array();
  for (const DeviceTransfer& transfer : characterization.transfers) {
    json targets = json::array();
    for (const TargetTransfer& t : transfer.targets) {
      json entry = {
          {"target", to_string(t.target)}, {"available", t.available}, {"shared", t.shared}};
      if (t.available) {
        json by_knob = json::array();
        for (const RatioGroup& group : t.by_knob) {
          by_knob.push_back({{"knob", group.knob},
                             {"value", group.value},
                             {"rows", group.rows},
                             {"geomean_ratio", group.geomean_ratio}});
        }
        entry.update({{"slope", t.slope},
                      {"intercept", t.intercept},
                      {"median_ratio", t.median_ratio},
                      {"geomean_ratio", t.geomean_ratio},
                      {"min_ratio", t.min_ratio},
                      {"max_ratio", t.max_ratio},
                      {"second_lower", t.second_lower},
                      {"spearman", t.spearman},
                      {"verdict", t.verdict},
                      {"by_knob", std::move(by_knob)}});
      } else {
        entry["reason"] = t.reason;
      }
      targets.push_back(std::move(entry));
    }
    transfers.push_back(
        {{"from", {{"fingerprint", transfer.from_fingerprint}, {"name", transfer.from_name}}},
         {"to", {{"fingerprint", transfer.to_fingerprint}, {"name", transfer.to_name}}},
         {"relation", transfer.relation},
         {"targets", std::move(targets)}});
  }
  return json{{"devices", std::move(devices)}, {"transfers", std::move(transfers)}}.dump(1);
}

}  // namespace carb
