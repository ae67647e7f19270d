// Drift probes: writing and reading them, and the device's speed curve they give.
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "carb/error.hpp"
#include "carb/space.hpp"
#include "carb/statistics.hpp"
#include "store_impl.hpp"

namespace carb {

namespace {

using store::Statement;
using store::Transaction;

[[noreturn]] void throw_input(const std::string& message) {
  throw Error(ErrorCategory::kInput, message);
}

double seconds_between(Timestamp from, Timestamp to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

void Store::write_probe(const DriftProbeRecord& probe) {
  const auto fail = [&](const std::string& message) {
    throw_input("drift probe " + probe.configuration_key + ": " + message);
  };
  std::string canonical;
  try {
    canonical = to_key(parse_key(probe.configuration_key));
  } catch (const Error& error) {
    fail(error.what());
  }
  if (canonical != probe.configuration_key) fail("the configuration key is not canonical");
  if (probe.status == MeasurementStatus::kOk && !probe.latency) fail("ok without a latency");
  if (probe.latency) {
    const LatencyStats& stats = *probe.latency;
    for (double value : {stats.median_ms, stats.ci_half_width_ms, stats.cv}) {
      if (!std::isfinite(value)) fail("a latency statistic is not a finite number");
    }
    if (!(stats.median_ms > 0) || stats.count < 1) fail("a latency needs a positive median");
    if (probe.clock != "device" && probe.clock != "wall") fail("clock must be device or wall");
  }
  const auto protocol = nlohmann::json::parse(probe.protocol_json, nullptr, false);
  if (protocol.is_discarded()) fail("the protocol is not valid JSON");

  sqlite3* db = impl_->db.get();
  Transaction transaction(db, Transaction::Mode::kWrite);
  Statement device(db, "SELECT id FROM devices WHERE fingerprint = :fingerprint");
  device.bind(":fingerprint", probe.device_fingerprint);
  if (!device.step()) fail("device '" + probe.device_fingerprint + "' is not recorded");
  Statement campaign(db, "SELECT id FROM campaigns WHERE id = :id");
  campaign.bind(":id", probe.campaign_id);
  if (!campaign.step()) fail("campaign " + std::to_string(probe.campaign_id) + " is not recorded");

  const bool has = probe.latency.has_value();
  const LatencyStats stats = probe.latency.value_or(LatencyStats{});
  const auto real = [has](double value) { return has ? std::optional<double>(value) : std::nullopt; };
  const auto integer = [has](std::int64_t value) {
    return has ? std::optional<std::int64_t>(value) : std::nullopt;
  };
  Statement insert(db,
                   "INSERT INTO drift_probes (campaign_id, device_id, configuration_key, "
                   "software_versions, protocol, measured_at, status, detail, clock, median_ms, "
                   "ci_half_width_ms, sample_count, cv, converged, contended) VALUES (:campaign, "
                   ":device, :key, :software, :protocol, :at, :status, :detail, :clock, :median, "
                   ":ci, :count, :cv, :converged, :contended) ON CONFLICT DO NOTHING");
  insert.bind(":campaign", probe.campaign_id)
      .bind(":device", device.integer("id"))
      .bind(":key", probe.configuration_key)
      .bind(":software", probe.software_versions)
      .bind(":protocol", protocol.dump())
      .bind(":at", store::format_timestamp(probe.measured_at))
      .bind(":status", to_string(probe.status))
      .bind(":detail", probe.detail)
      .bind(":clock", has ? std::optional<std::string>(probe.clock) : std::nullopt)
      .bind(":median", real(stats.median_ms))
      .bind(":ci", real(stats.ci_half_width_ms))
      .bind(":count", integer(stats.count))
      .bind(":cv", real(stats.cv))
      .bind(":converged", integer(stats.converged ? 1 : 0))
      .bind(":contended", std::int64_t{probe.contended})
      .run();
  transaction.commit();
}

std::vector<DriftProbeRecord> Store::drift_probes(std::string_view fingerprint) const {
  Statement rows(impl_->db.get(),
                 "SELECT p.*, d.fingerprint FROM drift_probes p JOIN devices d ON "
                 "d.id = p.device_id WHERE :fingerprint = '' OR d.fingerprint = :fingerprint "
                 "ORDER BY p.measured_at, p.id");
  rows.bind(":fingerprint", fingerprint);
  std::vector<DriftProbeRecord> probes;
  while (rows.step()) {
    DriftProbeRecord& probe = probes.emplace_back();
    probe.campaign_id = rows.integer("campaign_id");
    probe.device_fingerprint = rows.text("fingerprint");
    probe.configuration_key = rows.text("configuration_key");
    probe.software_versions = rows.text("software_versions");
    probe.protocol_json = rows.text("protocol");
    probe.measured_at = store::parse_timestamp(rows.text("measured_at"));
    probe.status = store::read_status(rows);
    probe.detail = rows.text("detail");
    probe.contended = rows.integer("contended") != 0;
    if (const auto median = rows.optional_real("median_ms")) {
      probe.clock = rows.text("clock");
      LatencyStats stats;
      stats.median_ms = *median;
      stats.ci_half_width_ms = rows.real("ci_half_width_ms");
      stats.count = rows.integer("sample_count");
      stats.cv = rows.real("cv");
      stats.converged = rows.integer("converged") != 0;
      probe.latency = stats;
    }
  }
  return probes;
}

DriftCurve drift_curve(const std::vector<DriftProbeRecord>& probes,
                       std::optional<double> reference_ms) {
  const auto usable = [](const DriftProbeRecord& probe) {
    return probe.status == MeasurementStatus::kOk && probe.latency && !probe.contended;
  };
  std::map<std::string, int> counts;
  for (const DriftProbeRecord& probe : probes) {
    if (usable(probe)) ++counts[probe.configuration_key];
  }
  DriftCurve curve;
  if (counts.empty()) return curve;
  curve.probe_key = std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
                      return a.second < b.second;
                    })->first;
  std::vector<std::pair<Timestamp, double>> raw;
  for (const DriftProbeRecord& probe : probes) {
    if (usable(probe) && probe.configuration_key == curve.probe_key) {
      raw.emplace_back(probe.measured_at, probe.latency->median_ms);
    }
  }
  std::stable_sort(raw.begin(), raw.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Each probe's value is the median of three: itself and its neighbours (the first and the
  // last take the three at their end), so no single probe moves the curve.
  curve.points = raw;
  const std::size_t n = raw.size();
  for (std::size_t i = 0; n >= 3 && i < n; ++i) {
    const std::size_t middle = std::clamp<std::size_t>(i, 1, n - 2);
    const double a = raw[middle - 1].second;
    const double b = raw[middle].second;
    const double c = raw[middle + 1].second;
    curve.points[i].second = std::max(std::min(a, b), std::min(std::max(a, b), c));
  }
  if (reference_ms) {
    curve.reference_ms = *reference_ms;
  } else {
    std::vector<double> values;
    for (const auto& point : curve.points) values.push_back(point.second);
    curve.reference_ms = median(std::move(values));
  }
  return curve;
}

std::optional<double> DriftCurve::factor_at(Timestamp time) const {
  if (points.empty() || !(reference_ms > 0)) return std::nullopt;
  const auto after = std::lower_bound(points.begin(), points.end(), time,
                                      [](const auto& point, Timestamp t) { return point.first < t; });
  if (after == points.begin() || after == points.end()) {
    const auto& nearest = after == points.begin() ? points.front() : points.back();
    if (std::abs(seconds_between(nearest.first, time)) > max_gap_s / 2) return std::nullopt;
    return nearest.second / reference_ms;
  }
  const auto& [t1, v1] = *after;
  const auto& [t0, v0] = *(after - 1);
  const double span = seconds_between(t0, t1);
  if (span > max_gap_s) return std::nullopt;
  const double weight = span > 0 ? seconds_between(t0, time) / span : 0;
  return (v0 + weight * (v1 - v0)) / reference_ms;
}

}  // namespace carb
