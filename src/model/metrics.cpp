// Scores of predictions against measurements.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "carb/error.hpp"
#include "carb/model.hpp"

namespace carb {

namespace {

// Ranks 1..n with ties given their average rank.
std::vector<double> ranks(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> rank(values.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double average = (static_cast<double>(i + j) / 2) + 1;
    for (std::size_t k = i; k <= j; ++k) rank[order[k]] = average;
    i = j + 1;
  }
  return rank;
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  const double mean_a = std::accumulate(a.begin(), a.end(), 0.0) / n;
  const double mean_b = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ab += (a[i] - mean_a) * (b[i] - mean_b);
    aa += (a[i] - mean_a) * (a[i] - mean_a);
    bb += (b[i] - mean_b) * (b[i] - mean_b);
  }
  if (aa == 0 || bb == 0) return 0;
  return ab / std::sqrt(aa * bb);
}

}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  CARB_CHECK(a.size() == b.size(), "spearman of equal-length vectors");
  if (a.size() < 2) return 0;
  return pearson(ranks(a), ranks(b));
}

Metrics score(const std::vector<double>& measured, const std::vector<double>& predicted,
              const std::vector<double>* low, const std::vector<double>* high) {
  CARB_CHECK(measured.size() == predicted.size(), "one prediction per measurement");
  Metrics metrics;
  metrics.n = measured.size();
  if (measured.empty()) return metrics;
  const double n = static_cast<double>(measured.size());
  const double mean = std::accumulate(measured.begin(), measured.end(), 0.0) / n;
  const double mean_predicted = std::accumulate(predicted.begin(), predicted.end(), 0.0) / n;
  double residual = 0, total = 0, absolute = 0, percentage = 0, within = 0;
  double cross = 0, spread = 0;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const double error = predicted[i] - measured[i];
    residual += error * error;
    total += (measured[i] - mean) * (measured[i] - mean);
    absolute += std::abs(error);
    const double relative = measured[i] != 0 ? std::abs(error) / measured[i] : 0;
    percentage += relative;
    within += relative <= 0.10 ? 1 : 0;
    cross += (predicted[i] - mean_predicted) * (measured[i] - mean);
    spread += (predicted[i] - mean_predicted) * (predicted[i] - mean_predicted);
  }
  metrics.r2 = total > 0 ? 1 - residual / total : 0;
  metrics.mae = absolute / n;
  metrics.mape = 100 * percentage / n;
  metrics.within10 = 100 * within / n;
  metrics.spearman = spearman(measured, predicted);
  metrics.slope = spread > 0 ? cross / spread : 0;
  if (low != nullptr && high != nullptr) {
    double inside = 0, width = 0;
    for (std::size_t i = 0; i < measured.size(); ++i) {
      inside += ((*low)[i] <= measured[i] && measured[i] <= (*high)[i]) ? 1 : 0;
      width += (*high)[i] - (*low)[i];
    }
    metrics.coverage = 100 * inside / n;
    metrics.mean_width = width / n;
  }
  return metrics;
}

}  // namespace carb
