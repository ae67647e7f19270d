// The small statistics every module shares: medians and quantiles, the mean, a least-squares line,
// rank correlation, the normal distribution's quantile, percentages and elapsed time. One
// definition each, header-only (module util), so every module, lower or higher, uses the same.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <numeric>
#include <string>
#include <vector>

#include "carb/error.hpp"

namespace carb {

/// The median: the middle value, or the mean of the middle two for an even count; 0 for no values.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const std::size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<long>(middle), values.end());
  const double upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  return (*std::max_element(values.begin(), values.begin() + static_cast<long>(middle)) + upper) /
         2;
}

/// The value at position n / 2 (0-based) in sorted order: the median for an odd count, the upper
/// of the middle two for an even count (never an average, so always one of the values); 0 for no
/// values.
inline double upper_median(std::vector<double> values) {
  if (values.empty()) return 0;
  const std::size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<long>(middle), values.end());
  return values[middle];
}

/// The `fraction` quantile (0..1) of at least one value sorted ascending, by linear interpolation
/// between order statistics (R's type 7, numpy's default).
inline double quantile_of_sorted(const std::vector<double>& sorted, double fraction) {
  CARB_CHECK(!sorted.empty(), "a quantile of at least one value");
  const double position = fraction * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  const double weight = position - static_cast<double>(below);
  return sorted[below] * (1 - weight) + sorted[above] * weight;
}

/// The geometric mean of positive values: exp of the mean of their logarithms; 0 for no values.
inline double geometric_mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) {
    CARB_CHECK(v > 0, "a geometric mean of positive values");
    sum += std::log(v);
  }
  return std::exp(sum / static_cast<double>(values.size()));
}

/// A standard deviation robust to outliers: 1.4826 times the median absolute deviation from the
/// median (the factor makes it the standard deviation at the normal); 0 for no values.
inline double robust_sd(const std::vector<double>& values) {
  const double center = median(values);
  std::vector<double> deviations;
  deviations.reserve(values.size());
  for (double v : values) deviations.push_back(std::abs(v - center));
  return 1.4826 * median(std::move(deviations));
}

/// The scale of residuals (prediction - measurement) for an interval centred on the prediction:
/// measured from zero, not from the residuals' own centre, as a shared offset misses the
/// measurement as surely as scatter does. The larger of two standard deviations a centred normal
/// would have: from the median absolute residual (/ 0.6745, the typical residual) and from the
/// 75th percentile of the absolute residuals (/ 1.1503, what a heavy tail adds). Both move by
/// ranks, not sizes: one wild residual among 16 moves neither by more than one rank's worth.
/// 0 for no values.
inline double residual_scale(const std::vector<double>& residuals) {
  if (residuals.empty()) return 0;
  std::vector<double> magnitudes;
  magnitudes.reserve(residuals.size());
  for (double r : residuals) magnitudes.push_back(std::abs(r));
  std::sort(magnitudes.begin(), magnitudes.end());
  // Phi^-1(0.75) and Phi^-1(0.875): the median and the 75th percentile of |N(0, 1)|.
  constexpr double kMedianOfAbsNormal = 0.6744897501960817;
  constexpr double kUpperQuartileOfAbsNormal = 1.1503493803760079;
  return std::max(quantile_of_sorted(magnitudes, 0.5) / kMedianOfAbsNormal,
                  quantile_of_sorted(magnitudes, 0.75) / kUpperQuartileOfAbsNormal);
}

/// The arithmetic mean (left-to-right sum over the count); 0 for no values.
inline double mean(const std::vector<double>& values) {
  return values.empty() ? 0
                        : std::accumulate(values.begin(), values.end(), 0.0) /
                              static_cast<double>(values.size());
}

/// y = intercept + slope * x by least squares, and its R² over the points fitted.
struct LineFit {
  bool valid = false;  ///< false with fewer than 2 points or no spread in x or y
  double slope = 0, intercept = 0, r2 = 0;
};

/// The least-squares line through (x[i], y[i]); invalid unless x and y have one length >= 2.
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

namespace statistics_detail {

// Ranks 1..n with ties given their average rank.
inline std::vector<double> ranks(const std::vector<double>& values) {
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

inline double pearson(const std::vector<double>& a, const std::vector<double>& b) {
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

}  // namespace statistics_detail

/// Spearman's rank correlation of two equal-length lists, ties averaged; 0 for fewer than 2
/// values or where either list has no spread.
inline double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  CARB_CHECK(a.size() == b.size(), "spearman of equal-length vectors");
  if (a.size() < 2) return 0;
  return statistics_detail::pearson(statistics_detail::ranks(a), statistics_detail::ranks(b));
}

/// The standard normal distribution function Phi(x).
inline double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

/// Its inverse Phi^-1(p), for p in (0, 1) (Acklam's approximation refined by Halley steps: ~1e-15).
inline double normal_quantile(double p) {
  CARB_CHECK(p > 0 && p < 1, "a probability strictly between 0 and 1");
  // Acklam's rational approximation (relative error 1.15e-9) ...
  constexpr double kA[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                           1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  constexpr double kB[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                           6.680131188771972e+01, -1.328068155288572e+01};
  constexpr double kC[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                           -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  constexpr double kD[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                           3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  double x = 0;
  if (p < kLow || p > 1 - kLow) {
    const double q = std::sqrt(-2 * std::log(p < kLow ? p : 1 - p));
    x = (((((kC[0] * q + kC[1]) * q + kC[2]) * q + kC[3]) * q + kC[4]) * q + kC[5]) /
        ((((kD[0] * q + kD[1]) * q + kD[2]) * q + kD[3]) * q + 1);
    if (p > kLow) x = -x;
  } else {
    const double q = p - 0.5;
    const double r = q * q;
    x = (((((kA[0] * r + kA[1]) * r + kA[2]) * r + kA[3]) * r + kA[4]) * r + kA[5]) * q /
        (((((kB[0] * r + kB[1]) * r + kB[2]) * r + kB[3]) * r + kB[4]) * r + 1);
  }
  // ... refined by Halley's method on Phi(x) - p, which brings it to double precision.
  for (int step = 0; step < 2; ++step) {
    const double error = normal_cdf(x) - p;
    const double u = error * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
    x -= u / (1 + x * u / 2);
  }
  return x;
}

/// The standard normal quantile for 0.5 <= p < 1 by 100 bisection steps on erf over [0, 10]: the
/// lower end of the last interval. Not the same bits as normal_quantile(); transfer's interval
/// widths were fitted with this one, so it stays as it is.
inline double normal_quantile_bisected(double p) {
  double low = 0, high = 10;
  for (int i = 0; i < 100; ++i) {
    const double mid = (low + high) / 2;
    (0.5 * (1 + std::erf(mid / std::sqrt(2.0))) < p ? low : high) = mid;
  }
  return low;
}

/// The chi-square quantile at p of `df` degrees of freedom, divided by df (so a mean square's
/// limit), by Wilson and Hilferty's cube-root approximation: within 0.5% of the exact quantile at
/// p = 0.95 from df = 4 on (tests/util/statistics_test.cpp).
inline double chi_square_mean_quantile(double p, double df) {
  const double a = 2 / (9 * df);
  return std::pow(1 - a + normal_quantile(p) * std::sqrt(a), 3);
}

/// 100 * part / whole, in percent; 0 when whole is 0.
inline double percent(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

/// Seconds from `start` to now on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace carb
