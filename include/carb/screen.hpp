// Screening (method.md §5), its pure core: deployment budgets and objectives as people write
// them, the feasibility of a candidate's predictions against the budgets, the Pareto front of 1-4
// minimised objectives (batch and streaming), the ranking of a front, and the interval-aware
// stage-1 pruning; and active profiling's choice of what to measure next. Nothing here reads a
// store or runs a model.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "carb/model.hpp"
#include "carb/statistics.hpp"  // normal_cdf(), normal_quantile()

namespace carb {

// ---------------------------------------------------------------------------------------------
// Targets, budgets and objectives

/// A cost target a budget or an objective names. Canonical units: bytes, J, ms (as the predictor's
/// store targets).
enum class Target { kMemory, kEnergy, kLatency };
inline constexpr std::size_t kTargetCount = 3;

/// "memory", "energy" or "latency".
std::string_view to_string(Target target);
/// The inverse of to_string; nullopt for any other text.
std::optional<Target> parse_target(std::string_view name);
/// The canonical unit: "B", "J" or "ms".
std::string_view canonical_unit(Target target);

/// An upper limit on one target.
struct Budget {
  Target target = Target::kEnergy;
  double limit = 0;     ///< in the target's canonical unit (bytes, J, ms); positive and finite
  bool strict = false;  ///< `<` (must stay below) rather than `<=`
  int column = 0;       ///< where the budget starts in the text, 1-based (for later messages)
};

/// Parses budgets such as "energy<=75J, latency<20ms, memory<=2GiB". Units: J, mJ, uJ; s, ms,
/// us; B, KB, KiB, MB, MiB, GB, GiB (KB = 1000 B, KiB = 1024 B). Whitespace is free around every
/// token. Throws carb::Error (input) as "origin:1:column: message" on an empty text or budget, an
/// unknown target, a duplicate target, an operator other than <= and <, a missing or
/// non-positive number, a missing or unknown unit, or text after a budget.
[[nodiscard]] std::vector<Budget> parse_budgets(std::string_view text, std::string_view origin = "budget");

/// Parses a comma-separated, duplicate-free subset of memory, energy, latency (in the order
/// given). Throws carb::Error (input) as "origin:1:column: message".
[[nodiscard]] std::vector<Target> parse_objectives(std::string_view text,
                                     std::string_view origin = "objectives");

// ---------------------------------------------------------------------------------------------
// Feasibility

/// One candidate's predictions, indexed by Target, in canonical units.
using TargetPredictions = std::array<TargetPrediction, kTargetCount>;

/// Row `row` of Predictor::predict's result ([target][row]) as per-Target predictions, matching
/// targets by name; a target the predictor lacks is unavailable, with the reason saying so.
TargetPredictions gather_predictions(const std::vector<TargetInfo>& targets,
                                     const std::vector<std::vector<TargetPrediction>>& predictions,
                                     std::size_t row);

struct FeasibilityOptions {
  /// Nominal coverage of the predictions' intervals (Predictor::coverage()), in (0, 1).
  double coverage = 0.9;
  /// Feasible only when the interval's upper end meets every budget, not just the prediction.
  bool safe = false;
};

/// A candidate against the budgets.
struct Feasibility {
  bool feasible = false;
  /// Estimated probability that the true costs meet every budget (see assess_budgets).
  double probability = 0;
};

/// Decides feasibility and estimates the probability of meeting all budgets. Per budgeted target,
/// log(true) ~ Normal(log(value), sigma), the interval [low, high] being central with the given
/// coverage: sigma = (log(high) - log(value)) / z_{(1+c)/2}; the probability is the product over
/// budgets of Phi((log(limit) - log(value)) / sigma). A zero-width interval (sigma = 0) or a
/// value <= 0 gives a step: 1 when the value meets the limit, else 0. No budgets: feasible, 1.
/// Throws carb::Error (input) for a budget on an unavailable target, with the target's reason.
[[nodiscard]] Feasibility assess_budgets(const std::vector<Budget>& budgets, const TargetPredictions& prediction,
                           const FeasibilityOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Pareto front

/// At most this many objectives (all minimised): the three costs and a value.
inline constexpr std::size_t kMaxObjectives = 4;
/// A point's objective values; only the first `objectives` entries are read.
using ObjectiveValues = std::array<double, kMaxObjectives>;

/// The indices (ascending) of the points no other point dominates. `a` dominates `b` when it is
/// no worse on every objective and better on one, so equal points never dominate each other and
/// are all kept. O(n log n) for 1, 2 and 3 objectives, O(n x front) for 4. Values must not be NaN.
[[nodiscard]] std::vector<std::size_t> pareto_front(std::span<const ObjectiveValues> points,
                                      std::size_t objectives);

/// A point with the caller's identifier (e.g. its index in a space).
struct ParetoPoint {
  std::uint64_t id = 0;
  ObjectiveValues values{};
};

/// The Pareto front of a stream of points in bounded memory: points are buffered and the buffer is
/// merged into the front whenever it grows as large as the front (and at least `min_buffer`), so
/// at most about twice the front plus `min_buffer` points are held, and each point costs amortised
/// O(log n). front() equals pareto_front over everything added.
class ParetoArchive {
 public:
  explicit ParetoArchive(std::size_t objectives, std::size_t min_buffer = 4096);

  void add(std::uint64_t id, const ObjectiveValues& values);
  /// The non-dominated points of everything added so far, ordered by id.
  const std::vector<ParetoPoint>& front();
  /// Points added so far.
  std::uint64_t added() const { return added_; }
  /// Points held now (front and buffer): what the memory bound bounds.
  std::size_t held() const { return points_.size(); }

 private:
  void merge();

  std::size_t objectives_;
  std::size_t min_buffer_;
  std::vector<ParetoPoint> points_;  ///< the front (first front_size_, by id), then the buffer
  std::size_t front_size_ = 0;
  std::uint64_t added_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Ranking a front

/// How to order a front. Distances are of objectives scaled to [0, 1] by the front's min..max (an
/// objective with one value scales to 0).
enum class RankMethod {
  /// Distance to the ideal point (the per-objective minima), smallest first. The default: it is
  /// defined for every front and favours balanced trade-offs.
  kIdeal,
  /// Distance from the line (2 objectives) or plane (3) through the extremes (each objective's
  /// best point), on the ideal's side, largest first: the knee where trading one objective for
  /// another stops paying. When the extremes span no such plane, the plane sum(x) = 1 is used.
  kKnee,
  /// The last objective, smallest first, ties by distance to the ideal: with a value to maximise
  /// as the last objective (minimised as -value), the most capable first. The score is the last
  /// objective's value.
  kValue,
};
std::string_view to_string(RankMethod method);
std::optional<RankMethod> parse_rank_method(std::string_view text);

struct RankedPoint {
  std::size_t index = 0;  ///< into the ranked points
  double score = 0;       ///< the method's distance (see RankMethod)
};

/// Orders `front` best first (ties by index). Values must be finite.
[[nodiscard]] std::vector<RankedPoint> rank_front(std::span<const ObjectiveValues> front, std::size_t objectives,
                                    RankMethod method = RankMethod::kIdeal);

// ---------------------------------------------------------------------------------------------
// Stage-1 pruning

/// A cheap model's score of one candidate per objective (lower is better), with its interval.
struct IntervalEstimate {
  ObjectiveValues value{}, low{}, high{};
};

/// What pruning kept and dropped.
struct PruneResult {
  std::vector<std::size_t> kept;    ///< by combined rank, best first (ties by index)
  std::size_t top = 0;              ///< the first `top` of `kept` are the top by combined rank
  std::size_t kept_by_overlap = 0;  ///< kept only because their intervals overlap the top's
  std::size_t pruned = 0;
};

/// Keeps the `keep` candidates best by combined rank (the sum over objectives of each objective's
/// rank of `value`, ties averaged), and every other candidate that is not confidently worse. A
/// candidate is dropped only when all `keep` top candidates have interval upper ends below its
/// interval lower end on every objective: if the intervals hold, K others then beat it
/// everywhere, so it can be neither in the true top K of any objective nor on the true Pareto
/// front. `keep` >= the number of candidates keeps all. Throws carb::Error (usage) when keep is 0.
[[nodiscard]] PruneResult prune_stage1(std::span<const IntervalEstimate> candidates, std::size_t objectives,
                         std::size_t keep);
/// The number to keep for a fraction in (0, 1] of `candidates`: ceil(fraction x candidates), at
/// least 1. Throws carb::Error (usage) for a fraction outside (0, 1].
[[nodiscard]] std::size_t keep_count(double fraction, std::size_t candidates);

// ---------------------------------------------------------------------------------------------
// Active profiling: which candidates to measure next

/// A screened candidate as active profiling sees it: the full model's predictions of the
/// objectives with their intervals, and its probability of meeting every budget.
struct AcquisitionCandidate {
  IntervalEstimate estimate;
  double p_feasible = 1;
};

/// How much measuring each candidate could change the shortlist, in [0, 2.01]:
///   score = (boundary + front) x (1 + width) / 2 + width / 100, where
/// - boundary = 4 p (1 - p) with p = p_feasible when `budgets` (1 at p = 1/2, 0 when certain),
///   else 0;
/// - front = p when the candidate's optimistic corner (its interval's lower end on every
///   objective) is not dominated by the predicted front (`front_values`, the feasible front's
///   predicted values): it could be on the true front; else 0;
/// - width = the mean over objectives of ln(high / low), divided by the largest such mean among
///   the candidates (0 when all intervals are points).
/// The last term orders candidates that cannot change the shortlist by how little is known of
/// them. Values must be positive and finite.
[[nodiscard]] std::vector<double> acquisition_scores(std::span<const AcquisitionCandidate> candidates,
                                       std::span<const ObjectiveValues> front_values,
                                       std::size_t objectives, bool budgets);

/// The indices of the `n` highest scores, highest first (ties by index).
[[nodiscard]] std::vector<std::size_t> top_scores(std::span<const double> scores, std::size_t n);

}  // namespace carb
