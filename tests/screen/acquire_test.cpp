#include <gtest/gtest.h>

#include <cmath>

#include "carb/error.hpp"
#include "carb/screen.hpp"

namespace carb {
namespace {

AcquisitionCandidate candidate(double value0, double value1, double ratio, double p) {
  // An interval [value / ratio, value * ratio] on both objectives: width ln(ratio^2).
  return {{{value0, value1, 0},
           {value0 / ratio, value1 / ratio, 0},
           {value0 * ratio, value1 * ratio, 0}},
          p};
}

TEST(Acquire, ScoresBoundaryFrontAndWidthAsDocumented) {
  const std::vector<ObjectiveValues> front = {{1, 4, 0}, {2, 2, 0}, {4, 1, 0}};
  const std::vector<AcquisitionCandidate> candidates = {
      candidate(2, 2, 1.5, 0.5),    // on the front, at the budget boundary, widest
      candidate(10, 10, 1.1, 1.0),  // far behind the front, certainly feasible
      candidate(3, 3, 1.5, 0.9),    // behind the front, but its lower corner (2, 2) ties it
      candidate(3, 3, 1.1, 0.0),    // certainly infeasible: cannot be on the feasible front
  };
  const std::vector<double> scores = acquisition_scores(candidates, front, 2, true);
  const double w_narrow = std::log(1.1) / std::log(1.5);
  EXPECT_DOUBLE_EQ(scores[0], (1.0 + 0.5) * 2 / 2 + 0.01);
  EXPECT_DOUBLE_EQ(scores[1], 0 + w_narrow / 100);
  // 4 x 0.9 x 0.1 = 0.36 for the boundary; (2, 2) equals a front point, not dominated by it.
  EXPECT_NEAR(scores[2], (0.36 + 0.9) * 2 / 2 + 0.01, 1e-12);
  EXPECT_DOUBLE_EQ(scores[3], w_narrow / 100);
  EXPECT_EQ(top_scores(scores, 2), (std::vector<std::size_t>{0, 2}));
  EXPECT_EQ(top_scores(scores, 9), (std::vector<std::size_t>{0, 2, 1, 3}));
}

TEST(Acquire, WithoutBudgetsOnlyTheFrontCounts) {
  const std::vector<ObjectiveValues> front = {{1, 1, 0}};
  const std::vector<AcquisitionCandidate> candidates = {candidate(1, 1, 2, 0.5),
                                                        candidate(5, 5, 2, 1.0)};
  const std::vector<double> scores = acquisition_scores(candidates, front, 2, false);
  // Candidate 0: lower corner (0.5, 0.5) beats the front: front term p = 0.5, no boundary term.
  EXPECT_DOUBLE_EQ(scores[0], 0.5 * 2 / 2 + 0.01);
  // Candidate 1: lower corner (2.5, 2.5) is dominated by (1, 1).
  EXPECT_DOUBLE_EQ(scores[1], 0.01);
}

TEST(Acquire, PointIntervalsAndTies) {
  const std::vector<AcquisitionCandidate> candidates = {candidate(1, 1, 1, 0.5),
                                                        candidate(1, 1, 1, 0.5)};
  const std::vector<double> scores = acquisition_scores(candidates, {}, 2, true);
  EXPECT_DOUBLE_EQ(scores[0], (1.0 + 0.5) / 2);  // width 0 everywhere: no width terms
  EXPECT_EQ(top_scores(scores, 1), (std::vector<std::size_t>{0}));
  EXPECT_TRUE(top_scores(scores, 0).empty());
}

TEST(Acquire, FloorsLowerEndsAtAThousandthOfTheValue) {
  // A lower end at or below zero (an interval that reaches past zero) counts as value / 1000.
  std::vector<AcquisitionCandidate> candidates = {candidate(1, 1, 10, 1.0),
                                                  candidate(1, 1, 2, 1.0)};
  candidates[0].estimate.low = {-3, 0, 0};
  const std::vector<double> scores = acquisition_scores(candidates, {{{5, 5, 0}}}, 2, false);
  const double widest = std::log(10 * 1000.0);  // ln(10 / 0.001) on both objectives
  EXPECT_DOUBLE_EQ(scores[0], (0 + 1.0) * 2 / 2 + 0.01);
  EXPECT_DOUBLE_EQ(scores[1],
                   (0 + 1.0) * (1 + std::log(4.0) / widest) / 2 + std::log(4.0) / widest / 100);
}

}  // namespace
}  // namespace carb
