// The Pareto front of 1-4 minimised objectives, batch and streaming, and the ranking of a front.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "carb/error.hpp"
#include "carb/screen.hpp"

namespace carb {

namespace {

// The 2-D minima of everything inserted: keys (y) ascending with values (z) strictly decreasing,
// so the entry with the largest key <= y holds the smallest z among all keys <= y.
class Staircase {
 public:
  /// Whether an inserted point has y' <= y and z' <= z.
  bool covers(double y, double z) const {
    auto next = steps_.upper_bound(y);
    return next != steps_.begin() && std::prev(next)->second <= z;
  }

  void insert(double y, double z) {
    if (covers(y, z)) return;
    // Steps at or right of y that are no lower than z are now covered by (y, z).
    auto step = steps_.lower_bound(y);
    while (step != steps_.end() && step->second >= z) step = steps_.erase(step);
    steps_.emplace(y, z);
  }

 private:
  std::map<double, double> steps_;
};

void check_points(std::span<const ObjectiveValues> points, std::size_t objectives) {
  CARB_CHECK(objectives >= 1 && objectives <= kMaxObjectives, "1 to 4 objectives");
  for (const ObjectiveValues& point : points) {
    for (std::size_t k = 0; k < objectives; ++k) {
      CARB_CHECK(!std::isnan(point[k]), "objective values that are numbers");
    }
  }
}

// Calls `visit(begin, end)` for each run of `order` whose points share coordinate `k`.
template <typename Visit>
void for_each_run(const std::vector<std::size_t>& order, std::size_t begin, std::size_t end,
                  std::span<const ObjectiveValues> points, std::size_t k, Visit visit) {
  for (std::size_t i = begin; i < end;) {
    std::size_t j = i + 1;
    while (j < end && points[order[j]][k] == points[order[i]][k]) ++j;
    visit(i, j);
    i = j;
  }
}

// In `order[begin, end)`, sorted by (y, z) with y = coordinate k and z = coordinate k + 1, the
// positions of the points no other point of the range dominates in (y, z).
std::vector<std::size_t> minima_2d(const std::vector<std::size_t>& order, std::size_t begin,
                                   std::size_t end, std::span<const ObjectiveValues> points,
                                   std::size_t k) {
  std::vector<std::size_t> minima;
  bool have_best = false;
  double best_z = 0;  // the smallest z among runs of smaller y
  for_each_run(order, begin, end, points, k, [&](std::size_t i, std::size_t j) {
    // Within a run of equal y, only the smallest z survives (its equals with it).
    const double run_z = points[order[i]][k + 1];
    if (!have_best || run_z < best_z) {
      for (std::size_t m = i; m < j && points[order[m]][k + 1] == run_z; ++m) minima.push_back(m);
      best_z = run_z;
      have_best = true;
    }
  });
  return minima;
}

}  // namespace

std::vector<std::size_t> pareto_front(std::span<const ObjectiveValues> points,
                                      std::size_t objectives) {
  check_points(points, objectives);
  std::vector<std::size_t> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    for (std::size_t k = 0; k < objectives; ++k) {
      if (points[a][k] != points[b][k]) return points[a][k] < points[b][k];
    }
    return a < b;
  });

  std::vector<std::size_t> front;
  if (objectives == 1) {
    for (std::size_t i = 0; i < order.size() && points[order[i]][0] == points[order[0]][0]; ++i) {
      front.push_back(order[i]);
    }
  } else if (objectives == 2) {
    for (std::size_t position : minima_2d(order, 0, order.size(), points, 0)) {
      front.push_back(order[position]);
    }
  } else if (objectives == 3) {
    // Sweep x upwards. A point is on the front when no point of its own x dominates it in (y, z)
    // and no point of smaller x has y' <= y and z' <= z; the staircase answers the latter.
    Staircase smaller_x;
    for_each_run(order, 0, order.size(), points, 0, [&](std::size_t i, std::size_t j) {
      const std::vector<std::size_t> minima = minima_2d(order, i, j, points, 1);
      for (std::size_t position : minima) {
        const ObjectiveValues& point = points[order[position]];
        if (!smaller_x.covers(point[1], point[2])) front.push_back(order[position]);
      }
      // The run's other points are covered by its minima, so they add nothing to the staircase.
      for (std::size_t position : minima) {
        smaller_x.insert(points[order[position]][1], points[order[position]][2]);
      }
    });
  } else {
    // Four: a point's dominators all come before it in lexicographic order, so each point is
    // checked against the front found so far (O(n x front)).
    for (std::size_t candidate : order) {
      const ObjectiveValues& point = points[candidate];
      const bool dominated = std::any_of(front.begin(), front.end(), [&](std::size_t f) {
        bool no_worse = true, better = false;
        for (std::size_t k = 0; k < objectives; ++k) {
          no_worse = no_worse && points[f][k] <= point[k];
          better = better || points[f][k] < point[k];
        }
        return no_worse && better;
      });
      if (!dominated) front.push_back(candidate);
    }
  }
  std::sort(front.begin(), front.end());
  return front;
}

ParetoArchive::ParetoArchive(std::size_t objectives, std::size_t min_buffer)
    : objectives_(objectives), min_buffer_(std::max<std::size_t>(min_buffer, 1)) {
  CARB_CHECK(objectives >= 1 && objectives <= kMaxObjectives, "1 to 4 objectives");
}

void ParetoArchive::add(std::uint64_t id, const ObjectiveValues& values) {
  for (std::size_t k = 0; k < objectives_; ++k) {
    CARB_CHECK(!std::isnan(values[k]), "objective values that are numbers");
  }
  points_.push_back({id, values});
  ++added_;
  // Merging when the buffer is as large as the front keeps memory within about twice the front
  // and makes each merge's O(m log m) cost amortise to O(log m) per point.
  if (points_.size() - front_size_ >= std::max(min_buffer_, front_size_)) merge();
}

const std::vector<ParetoPoint>& ParetoArchive::front() {
  if (points_.size() > front_size_) merge();
  return points_;
}

void ParetoArchive::merge() {
  // The front of (front of A) + B is the front of A + B: whatever the discarded points of A
  // dominate, a point of A's front dominates too (dominance is transitive).
  std::vector<ObjectiveValues> values(points_.size());
  for (std::size_t i = 0; i < points_.size(); ++i) values[i] = points_[i].values;
  std::vector<ParetoPoint> kept;
  for (std::size_t index : pareto_front(values, objectives_)) kept.push_back(points_[index]);
  // By id, and among equal ids by insertion order, so the result does not depend on chunking.
  std::stable_sort(kept.begin(), kept.end(),
                   [](const ParetoPoint& a, const ParetoPoint& b) { return a.id < b.id; });
  points_ = std::move(kept);
  front_size_ = points_.size();
}

std::string_view to_string(RankMethod method) {
  switch (method) {
    case RankMethod::kIdeal:
      return "ideal";
    case RankMethod::kKnee:
      return "knee";
    case RankMethod::kValue:
      return "value";
  }
  CARB_CHECK(false, "unknown rank method");
  return {};
}

std::optional<RankMethod> parse_rank_method(std::string_view text) {
  for (RankMethod method : {RankMethod::kIdeal, RankMethod::kKnee, RankMethod::kValue}) {
    if (text == to_string(method)) return method;
  }
  return std::nullopt;
}

std::vector<RankedPoint> rank_front(std::span<const ObjectiveValues> front, std::size_t objectives,
                                    RankMethod method) {
  check_points(front, objectives);
  const std::size_t n = front.size();
  std::vector<RankedPoint> ranked(n);
  if (n == 0) return ranked;

  // Scale each objective to [0, 1] over the front so that joules and bytes weigh alike.
  std::vector<ObjectiveValues> scaled(n, ObjectiveValues{});
  for (std::size_t k = 0; k < objectives; ++k) {
    double low = front[0][k], high = front[0][k];
    for (const ObjectiveValues& point : front) {
      CARB_CHECK(std::isfinite(point[k]), "finite objective values");
      low = std::min(low, point[k]);
      high = std::max(high, point[k]);
    }
    for (std::size_t i = 0; i < n; ++i) {
      scaled[i][k] = high > low ? (front[i][k] - low) / (high - low) : 0.0;
    }
  }

  if (method == RankMethod::kIdeal || method == RankMethod::kValue) {
    std::vector<double> ideal(n);
    for (std::size_t i = 0; i < n; ++i) {
      double squares = 0;
      for (std::size_t k = 0; k < objectives; ++k) squares += scaled[i][k] * scaled[i][k];
      ideal[i] = std::sqrt(squares);
      ranked[i] = {i, method == RankMethod::kIdeal ? ideal[i] : front[i][objectives - 1]};
    }
    // Smallest score first; ties by the distance to the ideal, then index.
    std::sort(ranked.begin(), ranked.end(), [&](const RankedPoint& a, const RankedPoint& b) {
      if (a.score != b.score) return a.score < b.score;
      if (ideal[a.index] != ideal[b.index]) return ideal[a.index] < ideal[b.index];
      return a.index < b.index;
    });
    return ranked;
  }

  // The extremes: each objective's best point (ties: the smaller sum of the others, then index).
  const auto sum = [&](std::size_t i) {
    double total = 0;
    for (std::size_t k = 0; k < objectives; ++k) total += scaled[i][k];
    return total;
  };
  double system[kMaxObjectives][kMaxObjectives + 1] = {};
  for (std::size_t k = 0; k < objectives; ++k) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < n; ++i) {
      if (scaled[i][k] < scaled[best][k] ||
          (scaled[i][k] == scaled[best][k] && sum(i) < sum(best))) {
        best = i;
      }
    }
    for (std::size_t m = 0; m < objectives; ++m) system[k][m] = scaled[best][m];
    system[k][objectives] = 1;
  }
  // The plane normal . x = 1 through the extremes (Gaussian elimination, partial pivoting). It
  // cannot pass through the ideal (the origin), so the ideal's side is where normal . x < 1.
  ObjectiveValues normal{};
  bool degenerate = false;
  for (std::size_t col = 0; col < objectives && !degenerate; ++col) {
    std::size_t pivot = col;
    for (std::size_t row = col + 1; row < objectives; ++row) {
      if (std::abs(system[row][col]) > std::abs(system[pivot][col])) pivot = row;
    }
    // Extremes that coincide or line up span no plane; the scaled extremes are O(1), so a fixed
    // threshold suffices.
    if (std::abs(system[pivot][col]) < 1e-9) {
      degenerate = true;
      break;
    }
    std::swap(system[pivot], system[col]);
    for (std::size_t row = 0; row < objectives; ++row) {
      if (row == col) continue;
      const double factor = system[row][col] / system[col][col];
      for (std::size_t m = col; m <= objectives; ++m) system[row][m] -= factor * system[col][m];
    }
  }
  for (std::size_t k = 0; k < objectives; ++k) {
    normal[k] = degenerate ? 1.0 : system[k][objectives] / system[k][k];
  }
  double norm = 0;
  for (std::size_t k = 0; k < objectives; ++k) norm += normal[k] * normal[k];
  norm = std::sqrt(norm);
  for (std::size_t i = 0; i < n; ++i) {
    double dot = 0;
    for (std::size_t k = 0; k < objectives; ++k) dot += normal[k] * scaled[i][k];
    ranked[i] = {i, (1 - dot) / norm};
  }
  std::sort(ranked.begin(), ranked.end(), [](const RankedPoint& a, const RankedPoint& b) {
    return a.score != b.score ? a.score > b.score : a.index < b.index;
  });
  return ranked;
}

}  // namespace carb
