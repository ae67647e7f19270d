// Scores of predictions against measurements.
#include <cmath>

#include "carb/error.hpp"
#include "carb/model.hpp"
#include "carb/statistics.hpp"

namespace carb {

Metrics score(const std::vector<double>& measured, const std::vector<double>& predicted,
              const std::vector<double>* low, const std::vector<double>* high) {
  CARB_CHECK(measured.size() == predicted.size(), "one prediction per measurement");
  Metrics metrics;
  metrics.n = measured.size();
  if (measured.empty()) return metrics;
  const double n = static_cast<double>(measured.size());
  const double mean_measured = mean(measured);
  const double mean_predicted = mean(predicted);
  double residual = 0, total = 0, absolute = 0, percentage = 0, within = 0;
  double cross = 0, spread = 0;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const double error = predicted[i] - measured[i];
    residual += error * error;
    total += (measured[i] - mean_measured) * (measured[i] - mean_measured);
    absolute += std::abs(error);
    const double relative = measured[i] != 0 ? std::abs(error) / measured[i] : 0;
    percentage += relative;
    within += relative <= 0.10 ? 1 : 0;
    cross += (predicted[i] - mean_predicted) * (measured[i] - mean_measured);
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
