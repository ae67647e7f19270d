// Pareto extraction alone: 10^6 random points in 2 and 3 objectives (best of 3 runs), the
// streaming archive on the same points, and a check against a plain O(n^2) reference on 10^4
// points (the outputs must be identical).
// Usage: bench_pareto
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "carb/screen.hpp"
#include "carb/statistics.hpp"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<carb::ObjectiveValues> random_points(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::lognormal_distribution<double> value(0, 1);
  std::vector<carb::ObjectiveValues> points(n);
  for (auto& p : points) p = {value(random), value(random), value(random)};
  return points;
}

std::vector<std::size_t> brute_force(const std::vector<carb::ObjectiveValues>& points,
                                     std::size_t d) {
  std::vector<std::size_t> front;
  for (std::size_t i = 0; i < points.size(); ++i) {
    bool dominated = false;
    for (std::size_t j = 0; j < points.size() && !dominated; ++j) {
      bool no_worse = true, better = false;
      for (std::size_t k = 0; k < d; ++k) {
        no_worse = no_worse && points[j][k] <= points[i][k];
        better = better || points[j][k] < points[i][k];
      }
      dominated = no_worse && better;
    }
    if (!dominated) front.push_back(i);
  }
  return front;
}

}  // namespace

int main() {
  std::printf("%-34s %10s %10s %14s\n", "case", "points", "front", "seconds (best)");
  for (std::size_t d : {2, 3}) {
    const auto points = random_points(1'000'000, d);
    double best = 1e30;
    std::size_t front_size = 0;
    for (int run = 0; run < 3; ++run) {
      const auto start = Clock::now();
      front_size = carb::pareto_front(points, d).size();
      best = std::min(best, carb::seconds_since(start));
    }
    std::printf("%-34s %10zu %10zu %14.3f\n",
                d == 2 ? "pareto_front, 2 objectives" : "pareto_front, 3 objectives", points.size(),
                front_size, best);
    const auto start = Clock::now();
    carb::ParetoArchive archive(d);
    for (std::size_t i = 0; i < points.size(); ++i) archive.add(i, points[i]);
    const std::size_t archived = archive.front().size();
    std::printf("%-34s %10zu %10zu %14.3f\n",
                d == 2 ? "streaming archive, 2 objectives" : "streaming archive, 3 objectives",
                points.size(), archived,
                carb::seconds_since(start));
  }
  for (std::size_t d : {2, 3}) {
    auto points = random_points(10'000, 10 + d);
    for (std::size_t i = 0; i < points.size(); i += 7) points[i] = points[i / 2];  // ties
    const bool same = carb::pareto_front(points, d) == brute_force(points, d);
    std::printf("O(n^2) reference, %zu objectives, 10^4 points: %s\n", d,
                same ? "identical" : "DIFFERENT");
    if (!same) return 1;
  }
  return 0;
}
