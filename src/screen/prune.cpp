// Stage-1 pruning: keep the top of a cheap model's combined ranking, and whatever it cannot rule
// out with confidence.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "carb/error.hpp"
#include "carb/screen.hpp"

namespace carb {

std::size_t keep_count(double fraction, std::size_t candidates) {
  if (!(fraction > 0 && fraction <= 1)) {
    throw Error(ErrorCategory::kUsage,
                "the fraction to keep must be in (0, 1], got " + std::to_string(fraction));
  }
  const double count = std::ceil(fraction * static_cast<double>(candidates));
  return std::max<std::size_t>(1, static_cast<std::size_t>(count));
}

PruneResult prune_stage1(std::span<const IntervalEstimate> candidates, std::size_t objectives,
                         std::size_t keep) {
  CARB_CHECK(objectives >= 1 && objectives <= kMaxObjectives, "1 to 4 objectives");
  if (keep == 0) throw Error(ErrorCategory::kUsage, "keep at least one candidate");
  const std::size_t n = candidates.size();
  for (const IntervalEstimate& candidate : candidates) {
    for (std::size_t k = 0; k < objectives; ++k) {
      CARB_CHECK(!std::isnan(candidate.value[k]), "scores that are numbers");
    }
  }

  // Combined rank: the sum over objectives of the per-objective rank (1..n, ties averaged), so no
  // objective's scale outweighs another's.
  std::vector<double> combined(n, 0.0);
  std::vector<std::size_t> order(n);
  for (std::size_t k = 0; k < objectives; ++k) {
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return candidates[a].value[k] < candidates[b].value[k];
    });
    for (std::size_t i = 0; i < n;) {
      std::size_t j = i + 1;
      while (j < n && candidates[order[j]].value[k] == candidates[order[i]].value[k]) ++j;
      const double average = static_cast<double>(i + j + 1) / 2;  // ranks i+1..j
      for (std::size_t m = i; m < j; ++m) combined[order[m]] += average;
      i = j;
    }
  }
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return combined[a] != combined[b] ? combined[a] < combined[b] : a < b;
  });

  PruneResult result;
  result.top = std::min(keep, n);
  result.kept.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(result.top));
  if (result.top == n) return result;

  // All of the top beat a candidate with confidence exactly when, per objective, the largest
  // upper end among the top lies below the candidate's lower end.
  ObjectiveValues top_high{};
  for (std::size_t k = 0; k < objectives; ++k) {
    top_high[k] = -HUGE_VAL;
    for (std::size_t i = 0; i < result.top; ++i) {
      top_high[k] = std::max(top_high[k], candidates[order[i]].high[k]);
    }
  }
  for (std::size_t i = result.top; i < n; ++i) {
    const IntervalEstimate& candidate = candidates[order[i]];
    bool confidently_worse = true;
    for (std::size_t k = 0; k < objectives; ++k) {
      // A NaN bound compares false, so it keeps the candidate: no confidence without a number.
      if (!(top_high[k] < candidate.low[k])) confidently_worse = false;
    }
    if (confidently_worse) {
      ++result.pruned;
    } else {
      result.kept.push_back(order[i]);
      ++result.kept_by_overlap;
    }
  }
  return result;
}

}  // namespace carb
