// Active profiling's acquisition: which screened candidates are worth measuring next, because
// their measurement could move a budget decision or the Pareto front.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "carb/error.hpp"
#include "carb/screen.hpp"

namespace carb {

namespace {

// Whether `point` is dominated by some point of `front` (no worse everywhere, better somewhere).
bool dominated(const ObjectiveValues& point, std::span<const ObjectiveValues> front,
               std::size_t objectives) {
  for (const ObjectiveValues& f : front) {
    bool no_worse = true, better = false;
    for (std::size_t k = 0; k < objectives; ++k) {
      no_worse = no_worse && f[k] <= point[k];
      better = better || f[k] < point[k];
    }
    if (no_worse && better) return true;
  }
  return false;
}

}  // namespace

std::vector<double> acquisition_scores(std::span<const AcquisitionCandidate> candidates,
                                       std::span<const ObjectiveValues> front_values,
                                       std::size_t objectives, bool budgets) {
  CARB_CHECK(objectives >= 1 && objectives <= kMaxObjectives, "1 to 4 objectives");
  std::vector<double> width(candidates.size(), 0.0);
  double widest = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const IntervalEstimate& e = candidates[i].estimate;
    for (std::size_t k = 0; k < objectives; ++k) {
      if (!(e.value[k] > 0) || !std::isfinite(e.high[k])) continue;  // no width to speak of
      const double low = std::max(e.low[k], e.value[k] / 1000);
      width[i] += std::log(std::max(e.high[k], low) / low) / static_cast<double>(objectives);
    }
    widest = std::max(widest, width[i]);
  }
  std::vector<double> scores(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const double p = std::clamp(candidates[i].p_feasible, 0.0, 1.0);
    const double w = widest > 0 ? width[i] / widest : 0;
    const double boundary = budgets ? 4 * p * (1 - p) : 0;
    const double front = dominated(candidates[i].estimate.low, front_values, objectives) ? 0 : p;
    scores[i] = (boundary + front) * (1 + w) / 2 + w / 100;
  }
  return scores;
}

std::vector<std::size_t> top_scores(std::span<const double> scores, std::size_t n) {
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  const std::size_t count = std::min(n, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(count), order.end(),
                    [&](std::size_t a, std::size_t b) {
                      return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
                    });
  order.resize(count);
  return order;
}

}  // namespace carb
