// Small statistics the characterization and the report share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace carb::report_detail {

/// The median (the mean of the middle two for an even count); 0 for no values.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const std::size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<long>(middle), values.end());
  const double upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  return (*std::max_element(values.begin(), values.begin() + static_cast<long>(middle)) + upper) /
         2;
}

/// y = intercept + slope * x by least squares, and its R² over the points fitted.
struct LineFit {
  bool valid = false;  ///< false with fewer than 2 points or no spread in x or y
  double slope = 0, intercept = 0, r2 = 0;
};

inline LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  LineFit fit;
  const std::size_t n = x.size();
  if (n < 2 || y.size() != n) return fit;
  double mean_x = 0, mean_y = 0;
  for (std::size_t i = 0; i < n; ++i) {
    mean_x += x[i];
    mean_y += y[i];
  }
  mean_x /= static_cast<double>(n);
  mean_y /= static_cast<double>(n);
  double sxx = 0, sxy = 0, syy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mean_x) * (x[i] - mean_x);
    sxy += (x[i] - mean_x) * (y[i] - mean_y);
    syy += (y[i] - mean_y) * (y[i] - mean_y);
  }
  if (sxx <= 0 || syy <= 0) return fit;
  fit.valid = true;
  fit.slope = sxy / sxx;
  fit.intercept = mean_y - fit.slope * mean_x;
  fit.r2 = sxy * sxy / (sxx * syy);
  return fit;
}

}  // namespace carb::report_detail
