// The shared statistics (carb/statistics.hpp), against values worked out by hand.
#include "carb/statistics.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <vector>

namespace carb {
namespace {

TEST(Median, OddCountTakesTheMiddleValue) {
  EXPECT_DOUBLE_EQ(median({3}), 3);
  EXPECT_DOUBLE_EQ(median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(median({9, 2, 7, 4, 1}), 4);
}

TEST(Median, EvenCountAveragesTheMiddleTwo) {
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);      // (2 + 3) / 2
  EXPECT_DOUBLE_EQ(median({10, 1, 2, 1}), 1.5);     // (1 + 2) / 2
  EXPECT_DOUBLE_EQ(median({-1, 5}), 2);             // (-1 + 5) / 2
  EXPECT_DOUBLE_EQ(median({2, 2, 2, 2, 8, 8}), 2);  // (2 + 2) / 2
}

TEST(Median, NoValuesGiveZero) { EXPECT_DOUBLE_EQ(median({}), 0); }

TEST(UpperMedian, EvenCountTakesTheUpperOfTheMiddleTwo) {
  EXPECT_DOUBLE_EQ(upper_median({4, 1, 3, 2}), 3);  // sorted 1 2 3 4: position 2
  EXPECT_DOUBLE_EQ(upper_median({10, 1}), 10);
  EXPECT_DOUBLE_EQ(upper_median({5, 1, 3}), 3);  // odd: the median
  EXPECT_DOUBLE_EQ(upper_median({}), 0);
}

TEST(Quantile, InterpolatesBetweenOrderStatistics) {
  const std::vector<double> sorted = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(quantile_of_sorted(sorted, 0), 1);
  EXPECT_DOUBLE_EQ(quantile_of_sorted(sorted, 1), 4);
  EXPECT_DOUBLE_EQ(quantile_of_sorted(sorted, 0.5), 2.5);    // position 1.5
  EXPECT_DOUBLE_EQ(quantile_of_sorted(sorted, 0.05), 1.15);  // position 0.15: 1 + 0.15
  EXPECT_DOUBLE_EQ(quantile_of_sorted(sorted, 0.95), 3.85);  // position 2.85: 3 + 0.85
  EXPECT_DOUBLE_EQ(quantile_of_sorted({7}, 0.3), 7);
  EXPECT_DOUBLE_EQ(quantile_of_sorted({0, 10}, 0.25), 2.5);
}

TEST(Mean, SumOverCount) {
  EXPECT_DOUBLE_EQ(mean({1, 2, 3, 6}), 3);
  EXPECT_DOUBLE_EQ(mean({-2, 2}), 0);
  EXPECT_DOUBLE_EQ(mean({}), 0);
}

TEST(RobustSd, IsTheStandardDeviationAtTheNormalAndIgnoresOneOutlier) {
  // Median 3, absolute deviations 2 1 0 1 2: their median 1, times 1.4826.
  EXPECT_NEAR(robust_sd({1, 2, 3, 4, 5}), 1.4826, 1e-12);
  // One wild value among five moves it by one deviation's rank, not by its size.
  EXPECT_NEAR(robust_sd({1, 2, 3, 4, 500}), 1.4826, 1e-12);
  EXPECT_DOUBLE_EQ(robust_sd({7, 7, 7}), 0);
  EXPECT_DOUBLE_EQ(robust_sd({}), 0);
}

TEST(ResidualScale, CountsTheResidualsOffsetFromZeroAndTheirTail) {
  constexpr double kMedian = 0.6744897501960817, kQuartile = 1.1503493803760079;
  // Magnitudes 1 1 2 2 2: median 2, upper quartile 2; 2 / 0.6745 wins.
  EXPECT_NEAR(residual_scale({-1, 1, -2, 2, 2}), 2 / kMedian, 1e-12);
  // A shared offset is no scatter to robust_sd, but every interval around the prediction must
  // reach it.
  EXPECT_DOUBLE_EQ(robust_sd({0.3, 0.3, 0.3, 0.3}), 0);
  EXPECT_NEAR(residual_scale({0.3, 0.3, 0.3, 0.3}), 0.3 / kMedian, 1e-12);
  // A heavy tail: magnitudes 1 1 1 1 1 5 5 5 5 (9 values): median 1 gives 1.48; the upper
  // quartile, 5 (position 6 of 0..8), gives 4.35, which wins.
  EXPECT_NEAR(residual_scale({1, -1, 1, -1, 1, 5, -5, 5, 5}), 5 / kQuartile, 1e-12);
  // One wild residual among eight moves neither: magnitudes 1 (x7) and 100.
  EXPECT_NEAR(residual_scale({1, -1, 1, -1, 1, -1, 1, 100}), 1 / kMedian, 1e-12);
  EXPECT_DOUBLE_EQ(residual_scale({}), 0);
}

TEST(FitLine, ExactLine) {
  const LineFit fit = fit_line({0, 1, 2, 3}, {1, 3, 5, 7});
  ASSERT_TRUE(fit.valid);
  EXPECT_DOUBLE_EQ(fit.slope, 2);
  EXPECT_DOUBLE_EQ(fit.intercept, 1);
  EXPECT_DOUBLE_EQ(fit.r2, 1);
}

TEST(FitLine, ScatteredPoints) {
  // x mean 1, y mean 1; sxx = 2, sxy = 1, syy = 2.
  const LineFit fit = fit_line({0, 1, 2}, {0, 2, 1});
  ASSERT_TRUE(fit.valid);
  EXPECT_DOUBLE_EQ(fit.slope, 0.5);
  EXPECT_DOUBLE_EQ(fit.intercept, 0.5);
  EXPECT_DOUBLE_EQ(fit.r2, 0.25);  // 1 / (2 * 2)
}

TEST(FitLine, InvalidWithoutTwoPointsOrSpread) {
  EXPECT_FALSE(fit_line({1}, {1}).valid);
  EXPECT_FALSE(fit_line({1, 2}, {1}).valid);           // lengths differ
  EXPECT_FALSE(fit_line({2, 2, 2}, {1, 2, 3}).valid);  // no spread in x
  EXPECT_FALSE(fit_line({1, 2, 3}, {4, 4, 4}).valid);  // no spread in y
}

TEST(Spearman, MonotoneAndTiedRanks) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3}, {10, 20, 30}), 1);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3}, {9, 4, 1}), -1);
  EXPECT_DOUBLE_EQ(spearman({1, 4, 9, 16}, {1, 2, 3, 4}), 1);  // ranks only
  // Ranks 1 2.5 2.5 4 against 1 2 3 4: 4.5 / sqrt(4.5 * 5) = sqrt(0.9).
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 2, 3, 4}), std::sqrt(0.9), 1e-15);
  EXPECT_DOUBLE_EQ(spearman({1}, {2}), 0);
  EXPECT_DOUBLE_EQ(spearman({5, 5, 5}, {1, 2, 3}), 0);  // no spread
}

TEST(Normal, DistributionAndQuantile) {
  EXPECT_DOUBLE_EQ(normal_cdf(0), 0.5);
  EXPECT_NEAR(normal_cdf(1.959963984540054), 0.975, 1e-15);
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-14);
  EXPECT_NEAR(normal_quantile(0.5), 0, 1e-15);
  EXPECT_NEAR(normal_quantile(0.01), -2.3263478740408408, 1e-13);  // the low tail's branch
  EXPECT_NEAR(normal_quantile(0.99), 2.3263478740408408, 1e-13);
}

// Wilson-Hilferty against the exact chi-square quantiles at 0.95 (R's qchisq(0.95, df) / df).
TEST(ChiSquare, MeanQuantileIsWithinHalfAPercentFromFourDegreesOn) {
  const std::vector<std::pair<double, double>> exact = {
      {4, 9.487729 / 4}, {8, 15.507313 / 8}, {16, 26.296228 / 16}, {39, 54.572228 / 39}};
  for (const auto& [df, quantile] : exact) {
    EXPECT_NEAR(chi_square_mean_quantile(0.95, df) / quantile, 1.0, 0.005) << df;
  }
  // One degree is 2.5% low: the approximation is for the rows a transfer has (8 and more).
  EXPECT_LT(chi_square_mean_quantile(0.95, 1), 3.841459);
  EXPECT_GT(chi_square_mean_quantile(0.95, 1), 3.841459 * 0.97);
  EXPECT_LT(chi_square_mean_quantile(0.95, 16), chi_square_mean_quantile(0.95, 8));
}

TEST(Normal, BisectedQuantileAgreesToNearDoublePrecision) {
  EXPECT_NEAR(normal_quantile_bisected(0.975), 1.959963984540054, 1e-12);
  EXPECT_NEAR(normal_quantile_bisected(0.95), 1.6448536269514722, 1e-12);
  EXPECT_DOUBLE_EQ(normal_quantile_bisected(0.5), 0);  // every step moves the upper end
}

TEST(Percent, PartOfWhole) {
  EXPECT_DOUBLE_EQ(percent(1, 4), 25);
  EXPECT_DOUBLE_EQ(percent(3, 3), 100);
  EXPECT_DOUBLE_EQ(percent(3, 0), 0);
}

TEST(SecondsSince, CountsSteadyClockSeconds) {
  const auto start = std::chrono::steady_clock::now() - std::chrono::seconds(2);
  const double elapsed_s = seconds_since(start);
  EXPECT_GE(elapsed_s, 2.0);
  EXPECT_LT(elapsed_s, 62.0);  // far beyond any scheduling delay
}

}  // namespace
}  // namespace carb
