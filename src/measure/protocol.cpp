// Protocol settings and latency statistics.
#include <algorithm>
#include <cmath>

#include "carb/error.hpp"
#include "carb/measure.hpp"
#include "carb/statistics.hpp"

namespace carb {

nlohmann::json Protocol::key_json() const {
  nlohmann::json json = {{"warmup_min_s", warmup_min_s},
                         {"warmup_min_runs", warmup_min_runs},
                         {"min_samples", min_samples},
                         {"min_time_s", min_time_s},
                         {"target_relative_ci", target_relative_ci},
                         {"max_time_s", max_time_s},
                         {"energy_window_min_s", energy_window_min_s},
                         {"cooldown_s", cooldown_s},
                         {"seed", seed}};
  if (cuda_graph) json["cuda_graph"] = true;
  if (cudnn_find) json["cudnn_find"] = true;
  if (round > 0) json["round"] = round;
  return json;
}

nlohmann::json Protocol::to_json() const {
  nlohmann::json json = key_json();
  json["cuda_graph"] = cuda_graph;
  json["cudnn_find"] = cudnn_find;
  json["cudnn_cache"] = cudnn_cache;
  json["timeout_s"] = timeout_s;
  json["worker_memory_limit_bytes"] = worker_memory_limit_bytes;
  json["worker_reuse"] = worker_reuse;
  json["throttle_cooldown_s"] = throttle_cooldown_s;
  json["throttle_retries"] = throttle_retries;
  return json;
}

Protocol Protocol::from_json(const nlohmann::json& json) {
  Protocol protocol;
  auto read = [&](const char* name, auto& field, auto minimum) {
    if (!json.contains(name)) return;
    try {
      json.at(name).get_to(field);
    } catch (const nlohmann::json::exception&) {
      throw Error(ErrorCategory::kInput,
                  std::string("protocol field '") + name + "' has the wrong type");
    }
    if (!(field >= minimum)) {
      throw Error(ErrorCategory::kInput,
                  std::string("protocol field '") + name + "' is out of range");
    }
  };
  if (!json.is_object()) throw Error(ErrorCategory::kInput, "a protocol is a JSON object");
  read("warmup_min_s", protocol.warmup_min_s, 0.0);
  read("warmup_min_runs", protocol.warmup_min_runs, 0);
  read("min_samples", protocol.min_samples, 1);
  read("min_time_s", protocol.min_time_s, 0.0);
  read("target_relative_ci", protocol.target_relative_ci, 0.0);
  read("max_time_s", protocol.max_time_s, 0.0);
  read("energy_window_min_s", protocol.energy_window_min_s, 0.0);
  read("cooldown_s", protocol.cooldown_s, 0.0);
  read("seed", protocol.seed, std::uint64_t{0});
  read("round", protocol.round, 0);
  read("timeout_s", protocol.timeout_s, 0.001);
  read("worker_memory_limit_bytes", protocol.worker_memory_limit_bytes, std::int64_t{0});
  read("worker_reuse", protocol.worker_reuse, 1);
  read("throttle_cooldown_s", protocol.throttle_cooldown_s, 0.0);
  read("throttle_retries", protocol.throttle_retries, 0);
  read("cuda_graph", protocol.cuda_graph, false);
  read("cudnn_find", protocol.cudnn_find, false);
  if (json.contains("cudnn_cache")) {
    if (!json.at("cudnn_cache").is_string()) {
      throw Error(ErrorCategory::kInput, "protocol field 'cudnn_cache' has the wrong type");
    }
    protocol.cudnn_cache = json.at("cudnn_cache").get<std::string>();
  }
  return protocol;
}

LatencyStats summarize_latency(std::span<const double> samples_ms, double target_relative_ci) {
  CARB_CHECK(!samples_ms.empty(), "no samples to summarize");
  std::vector<double> sorted(samples_ms.begin(), samples_ms.end());
  std::sort(sorted.begin(), sorted.end());
  const auto n = static_cast<double>(sorted.size());
  LatencyStats stats;
  stats.count = static_cast<std::int64_t>(sorted.size());
  stats.median_ms = quantile_of_sorted(sorted, 0.5);
  stats.p5_ms = quantile_of_sorted(sorted, 0.05);
  stats.p95_ms = quantile_of_sorted(sorted, 0.95);
  stats.mean_ms = mean(sorted);
  double squares = 0;
  for (double value : sorted) squares += (value - stats.mean_ms) * (value - stats.mean_ms);
  const double deviation = sorted.size() > 1 ? std::sqrt(squares / (n - 1)) : 0.0;
  stats.cv = stats.mean_ms > 0 ? deviation / stats.mean_ms : 0.0;
  // The median's CI runs between the order statistics at n/2 -+ 1.96 sqrt(n)/2 (1-based).
  constexpr double kZ95 = 1.959963984540054;
  const double spread = kZ95 * std::sqrt(n) / 2;
  const auto low = static_cast<std::size_t>(std::clamp(std::floor(n / 2 - spread), 1.0, n));
  const auto high = static_cast<std::size_t>(std::clamp(std::ceil(n / 2 + 1 + spread), 1.0, n));
  stats.ci_half_width_ms = (sorted[high - 1] - sorted[low - 1]) / 2;
  stats.converged =
      stats.median_ms > 0 && stats.ci_half_width_ms / stats.median_ms <= target_relative_ci;
  return stats;
}

}  // namespace carb
