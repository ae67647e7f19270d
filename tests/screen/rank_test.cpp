#include <gtest/gtest.h>

#include <cmath>

#include "carb/screen.hpp"

namespace carb {
namespace {

std::vector<std::size_t> order_of(const std::vector<RankedPoint>& ranked) {
  std::vector<std::size_t> order;
  for (const RankedPoint& point : ranked) order.push_back(point.index);
  return order;
}

// Scaled to [0, 1] this front is (0, 1), (0.05, 0.5), (0.3, 0.3), (1, 0): the balanced point is
// nearest the ideal (Euclidean), the lopsided one lies furthest below the line x + y = 1.
const std::vector<ObjectiveValues> kTwo = {{0, 10, 0}, {0.5, 5, 0}, {3, 3, 0}, {10, 0, 0}};

TEST(Rank, IdealDistanceOnAKnownTwoObjectiveFront) {
  const std::vector<RankedPoint> ranked = rank_front(kTwo, 2);
  EXPECT_EQ(order_of(ranked), (std::vector<std::size_t>{2, 1, 0, 3}));
  EXPECT_NEAR(ranked[0].score, std::sqrt(0.18), 1e-12);
  EXPECT_NEAR(ranked[1].score, std::sqrt(0.2525), 1e-12);
  EXPECT_NEAR(ranked[2].score, 1.0, 1e-12);
  EXPECT_NEAR(ranked[3].score, 1.0, 1e-12);
}

TEST(Rank, KneeOnAKnownTwoObjectiveFront) {
  const std::vector<RankedPoint> ranked = rank_front(kTwo, 2, RankMethod::kKnee);
  EXPECT_EQ(order_of(ranked), (std::vector<std::size_t>{1, 2, 0, 3}));
  EXPECT_NEAR(ranked[0].score, 0.45 / std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(ranked[1].score, 0.4 / std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(ranked[2].score, 0.0, 1e-12);
  EXPECT_NEAR(ranked[3].score, 0.0, 1e-12);
}

TEST(Rank, ScalingAnObjectiveChangesNothing) {
  std::vector<ObjectiveValues> scaled = kTwo;
  for (ObjectiveValues& point : scaled) point[1] = point[1] * 1e9 + 5;
  for (RankMethod method : {RankMethod::kIdeal, RankMethod::kKnee}) {
    const std::vector<RankedPoint> a = rank_front(kTwo, 2, method),
                                   b = rank_front(scaled, 2, method);
    EXPECT_EQ(order_of(a), order_of(b));
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i].score, b[i].score, 1e-9);
  }
}

// Three objectives, already spanning [0, 1] each. The extremes (0, 1, 0.5), (1, 0, 1) and
// (0.5, 0.5, 0) lie on the plane x + y = 1 (normal (1, 1, 0)), not on x + y + z = 1.
const std::vector<ObjectiveValues> kThree = {
    {0, 1, 0.5}, {1, 0, 1}, {0.5, 0.5, 0}, {0.3, 0.3, 0.9}, {0.2, 0.5, 0.6}};

TEST(Rank, KneeUsesThePlaneThroughTheExtremes) {
  const std::vector<RankedPoint> ranked = rank_front(kThree, 3, RankMethod::kKnee);
  EXPECT_EQ(order_of(ranked), (std::vector<std::size_t>{3, 4, 0, 1, 2}));
  EXPECT_NEAR(ranked[0].score, 0.4 / std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(ranked[1].score, 0.3 / std::sqrt(2.0), 1e-12);
  for (std::size_t i = 2; i < 5; ++i) EXPECT_NEAR(ranked[i].score, 0.0, 1e-12);
}

TEST(Rank, IdealDistanceInThreeObjectives) {
  const std::vector<RankedPoint> ranked = rank_front(kThree, 3);
  EXPECT_EQ(order_of(ranked), (std::vector<std::size_t>{2, 4, 3, 0, 1}));
  EXPECT_NEAR(ranked[0].score, std::sqrt(0.5), 1e-12);
  EXPECT_NEAR(ranked[1].score, std::sqrt(0.65), 1e-12);
  EXPECT_NEAR(ranked[2].score, std::sqrt(0.99), 1e-12);
  EXPECT_NEAR(ranked[3].score, std::sqrt(1.25), 1e-12);
  EXPECT_NEAR(ranked[4].score, std::sqrt(2.0), 1e-12);
}

TEST(Rank, KneeFallsBackToTheUnitPlaneWhenExtremesCoincide) {
  // The first point is best on two objectives: the extremes span no plane.
  const std::vector<ObjectiveValues> front = {{0, 0, 1}, {1, 1, 0}};
  const std::vector<RankedPoint> ranked = rank_front(front, 3, RankMethod::kKnee);
  EXPECT_EQ(order_of(ranked), (std::vector<std::size_t>{0, 1}));
  EXPECT_NEAR(ranked[0].score, 0.0, 1e-12);
  EXPECT_NEAR(ranked[1].score, -1 / std::sqrt(3.0), 1e-12);
}

TEST(Rank, DegenerateFronts) {
  EXPECT_TRUE(rank_front(std::vector<ObjectiveValues>{}, 2).empty());
  const std::vector<ObjectiveValues> same = {{3, 3, 3}, {3, 3, 3}};
  for (RankMethod method : {RankMethod::kIdeal, RankMethod::kKnee}) {
    const std::vector<RankedPoint> ranked = rank_front(same, 3, method);
    EXPECT_EQ(order_of(ranked), (std::vector<std::size_t>{0, 1}));
    EXPECT_EQ(ranked[0].score, ranked[1].score);
  }
}

TEST(Rank, ValueOrdersByTheLastObjectiveThenTheIdeal) {
  // Costs, then -value: the most capable first; between equal values the nearer the ideal.
  const std::vector<ObjectiveValues> front = {
      {1, 1, -10, 0}, {3, 3, -30, 0}, {2, 4, -30, 0}, {5, 5, -50, 0}, {2, 2, -20, 0}};
  const std::vector<RankedPoint> ranked = rank_front(front, 3, RankMethod::kValue);
  EXPECT_EQ(order_of(ranked), (std::vector<std::size_t>{3, 1, 2, 4, 0}));
  EXPECT_EQ(ranked[0].score, -50);
  // Four objectives: three costs and a value.
  const std::vector<ObjectiveValues> four = {{1, 1, 1, -1}, {2, 2, 2, -4}, {1, 2, 3, -4}};
  EXPECT_EQ(order_of(rank_front(four, 4, RankMethod::kValue)), (std::vector<std::size_t>{2, 1, 0}));
  EXPECT_EQ(order_of(rank_front(four, 4, RankMethod::kIdeal)).front(), 0U);
}

TEST(Rank, MethodNamesRoundTrip) {
  EXPECT_EQ(parse_rank_method("value"), RankMethod::kValue);
  EXPECT_EQ(parse_rank_method("ideal"), RankMethod::kIdeal);
  EXPECT_EQ(parse_rank_method("knee"), RankMethod::kKnee);
  EXPECT_EQ(parse_rank_method(to_string(RankMethod::kKnee)), RankMethod::kKnee);
  EXPECT_EQ(parse_rank_method("nearest"), std::nullopt);
}

}  // namespace
}  // namespace carb
