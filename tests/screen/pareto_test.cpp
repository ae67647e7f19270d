#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "carb/screen.hpp"

namespace carb {
namespace {

// The O(n^2) definition, as the reference.
std::vector<std::size_t> brute_force_front(const std::vector<ObjectiveValues>& points,
                                           std::size_t objectives) {
  std::vector<std::size_t> front;
  for (std::size_t i = 0; i < points.size(); ++i) {
    bool dominated = false;
    for (std::size_t j = 0; j < points.size() && !dominated; ++j) {
      bool no_worse = true, better = false;
      for (std::size_t k = 0; k < objectives; ++k) {
        no_worse = no_worse && points[j][k] <= points[i][k];
        better = better || points[j][k] < points[i][k];
      }
      dominated = no_worse && better;
    }
    if (!dominated) front.push_back(i);
  }
  return front;
}

// Integer coordinates below `range`: a small range makes ties and duplicates common.
std::vector<ObjectiveValues> random_points(std::mt19937_64& rng, std::size_t n, int range) {
  std::uniform_int_distribution<int> coordinate(0, range - 1);
  std::vector<ObjectiveValues> points(n);
  for (ObjectiveValues& point : points) {
    for (double& value : point) value = coordinate(rng);
  }
  return points;
}

TEST(Pareto, SmallKnownFronts) {
  const std::vector<ObjectiveValues> two = {{1, 5, 0}, {2, 3, 0}, {2, 3, 0},  {3, 3, 0},
                                            {4, 1, 0}, {1, 5, 0}, {5, 0.5, 0}};
  EXPECT_EQ(pareto_front(two, 2), (std::vector<std::size_t>{0, 1, 2, 4, 5, 6}));
  const std::vector<ObjectiveValues> three = {{1, 1, 1}, {1, 1, 1}, {0, 2, 2}, {2, 0, 2},
                                              {2, 2, 0}, {1, 1, 2}, {2, 2, 2}, {0, 2, 3}};
  EXPECT_EQ(pareto_front(three, 3), (std::vector<std::size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(pareto_front(three, 1), (std::vector<std::size_t>{2, 7}));
  EXPECT_TRUE(pareto_front(std::vector<ObjectiveValues>{}, 3).empty());
  EXPECT_EQ(pareto_front(std::vector<ObjectiveValues>{{4, 4, 4}}, 3),
            (std::vector<std::size_t>{0}));
}

TEST(Pareto, InfinitiesCompareAsNumbers) {
  const double inf = HUGE_VAL;
  const std::vector<ObjectiveValues> points = {{inf, 0, 0},   {0, inf, 0}, {1, 1, 0},
                                               {inf, inf, 0}, {0, inf, 0}, {1, inf, 0}};
  EXPECT_EQ(pareto_front(points, 2), (std::vector<std::size_t>{0, 1, 2, 4}));
  EXPECT_EQ(pareto_front(points, 2), brute_force_front(points, 2));
}

TEST(Pareto, MatchesTheBruteForceOnRandomSetsWithTies) {
  std::mt19937_64 rng(7);
  for (std::size_t objectives : {1u, 2u, 3u, 4u}) {
    for (int range : {3, 8, 1000}) {
      for (std::size_t n : {2u, 5u, 40u, 300u}) {
        for (int repeat = 0; repeat < 5; ++repeat) {
          const std::vector<ObjectiveValues> points = random_points(rng, n, range);
          ASSERT_EQ(pareto_front(points, objectives), brute_force_front(points, objectives))
              << objectives << " objectives, range " << range << ", n " << n;
        }
      }
    }
  }
}

TEST(Pareto, AnticorrelatedSetsHaveLargeFrontsAndStillMatch) {
  // Points near the plane x + y + z = 1000 are mostly mutually non-dominated: the staircase works.
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> coordinate(0, 1000), jitter(0, 20);
  std::vector<ObjectiveValues> points(800);
  for (ObjectiveValues& point : points) {
    const int x = coordinate(rng);
    const int y = std::uniform_int_distribution<int>(0, 1000 - x)(rng);
    point = {double(x), double(y), double(1000 - x - y + jitter(rng))};
  }
  const std::vector<std::size_t> front = pareto_front(points, 3);
  EXPECT_GT(front.size(), 100u);
  EXPECT_EQ(front, brute_force_front(points, 3));
}

TEST(Pareto, FrontDoesNotDependOnInputOrder) {
  std::mt19937_64 rng(3);
  const std::vector<ObjectiveValues> points = random_points(rng, 500, 12);
  std::vector<std::size_t> permutation(points.size());
  for (std::size_t i = 0; i < permutation.size(); ++i) permutation[i] = i;
  std::shuffle(permutation.begin(), permutation.end(), rng);
  std::vector<ObjectiveValues> shuffled(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) shuffled[i] = points[permutation[i]];
  for (std::size_t objectives : {2u, 3u, 4u}) {
    std::vector<std::size_t> mapped;
    for (std::size_t index : pareto_front(shuffled, objectives))
      mapped.push_back(permutation[index]);
    std::sort(mapped.begin(), mapped.end());
    EXPECT_EQ(mapped, pareto_front(points, objectives));
  }
}

TEST(ParetoArchive, EqualsTheBatchFrontWhateverTheChunking) {
  std::mt19937_64 rng(5);
  for (std::size_t objectives : {2u, 3u, 4u}) {
    for (int range : {6, 1000}) {
      const std::vector<ObjectiveValues> points = random_points(rng, 3000, range);
      const std::vector<std::size_t> expected = pareto_front(points, objectives);
      for (std::size_t min_buffer : {1u, 16u, 4096u}) {
        ParetoArchive archive(objectives, min_buffer);
        for (std::size_t i = 0; i < points.size(); ++i) archive.add(i, points[i]);
        EXPECT_EQ(archive.added(), points.size());
        std::vector<std::size_t> ids;
        for (const ParetoPoint& point : archive.front()) {
          ids.push_back(point.id);
          EXPECT_EQ(point.values, points[point.id]);
        }
        EXPECT_EQ(ids, expected) << objectives << " objectives, range " << range << ", buffer "
                                 << min_buffer;
        // Asking again (nothing new buffered) gives the same.
        EXPECT_EQ(archive.front().size(), expected.size());
      }
    }
  }
}

TEST(ParetoArchive, HoldsBoundedMemoryOnALongStream) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> uniform(0, 1);
  ParetoArchive archive(2, 64);
  std::vector<ObjectiveValues> points;
  std::size_t most_held = 0;
  for (std::uint64_t i = 0; i < 50000; ++i) {
    const ObjectiveValues point = {uniform(rng), uniform(rng), 0};
    points.push_back(point);
    archive.add(i, point);
    most_held = std::max(most_held, archive.held());
  }
  // A uniform cloud's 2-D front has O(log n) points, so the archive stays near its buffer.
  EXPECT_LE(most_held, 64u + 2 * 40u);
  std::vector<std::size_t> ids;
  for (const ParetoPoint& point : archive.front()) ids.push_back(point.id);
  EXPECT_EQ(ids, pareto_front(points, 2));
}

}  // namespace
}  // namespace carb
