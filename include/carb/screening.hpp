// Two-stage screening of a design space to a ranked Pareto shortlist (method.md §5,
// docs/screening.md): stage 1 ranks every candidate with a cheap model and keeps the best, stage
// 2 rescores the survivors with the device's full model, applies the budgets, and extracts the
// front over a value to maximise and the costs to minimise. The pure parts (budgets, fronts,
// pruning) are in carb/screen.hpp; this runs the models.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "carb/model.hpp"
#include "carb/screen.hpp"
#include "carb/space.hpp"
#include "carb/store.hpp"

namespace carb {

// ---------------------------------------------------------------------------------------------
// Value objectives

/// A value to maximise beside the costs: what a deployment buys with its budget. An analytic
/// capacity of the network (per image, so independent of batch and precision) or a value per
/// configuration the user supplies, such as measured accuracy.
struct ValueObjective {
  /// "params", "macs", "flops", "depth", "width", or the column of a value file.
  std::string name;
  std::string file;  ///< the value file; empty for an analytic capacity
  /// A value file's values by key: a configuration key, or a network key (a configuration key
  /// without its batch and precision, "_bN_fp32"), which applies to every batch and precision.
  std::unordered_map<std::string, double> values;

  bool analytic() const { return file.empty(); }
  /// "macs (analytic)" or "top1 (values.csv)".
  std::string describe() const;
};

/// The analytic capacities by name.
inline constexpr std::array<std::string_view, 5> kAnalyticValues = {"params", "macs", "flops",
                                                                    "depth", "width"};
/// The default value objective: macs (docs/screening.md, "Value objectives", says why).
inline constexpr std::string_view kDefaultValue = "macs";

/// An analytic capacity by name; nullopt for any other name.
std::optional<ValueObjective> analytic_value(std::string_view name);

/// Reads a value file: CSV with a "key" column and `column`. Throws carb::Error (input) as
/// "FILE:LINE:COLUMN: message" for a missing column (line 1), a cell that is not a finite
/// number, a key that is not a configuration or network key, or a key given twice.
[[nodiscard]] ValueObjective read_value_file(const std::string& path, const std::string& column);

/// The value of a configuration: from its feature row (names of the model's schema) when
/// analytic, else from the file by its key, then by its network key; nullopt when the file has
/// neither.
[[nodiscard]] std::optional<double> objective_value(const ValueObjective& value,
                                                    const std::vector<std::string>& feature_names,
                                                    const float* row, const Config& config);

/// The key of a configuration without its batch and precision: its network.
std::string network_key(const Config& config);

// ---------------------------------------------------------------------------------------------
// What to screen, and how

/// The candidates: every point of a space (streamed, its constraints applied), or a list.
struct CandidateSet {
  const Space* space = nullptr;  ///< when set, every point of it
  std::vector<Config> configs;   ///< else these
};

/// What becomes of candidates outside the model's training domain (TrainingDomain::judge).
enum class DomainPolicy {
  kExclude,  ///< left out of the shortlist: their predictions extrapolate
  /// kept, with intervals widened by DomainJudgement::widening() in log space, and feasible
  /// only when their upper ends meet the budgets (the default: docs/screening.md says why)
  kWiden,
  kAllow,  ///< kept as predicted (counted and warned about)
};
std::string_view to_string(DomainPolicy policy);
std::optional<DomainPolicy> parse_domain_policy(std::string_view text);

/// How far to screen, what to optimise and what to trust.
struct ScreenRequest {
  std::vector<Budget> budgets;
  /// Costs to minimise (empty: every target the model predicts).
  std::vector<Target> costs;
  /// The value to maximise; none: a front over costs alone.
  std::optional<ValueObjective> value;
  std::size_t keep = 2000;   ///< stage 1 keeps this many by combined rank
  double keep_fraction = 0;  ///< or, when > 0, this fraction of the candidates
  bool safe = false;         ///< feasible only when interval upper ends meet the budgets
  /// Order of the front; nullopt: by value where there is one (the most capable first), else
  /// by distance to the ideal point.
  std::optional<RankMethod> rank;
  DomainPolicy domain = DomainPolicy::kWiden;
  /// A kernel model (schema kKernelSchema; not owned) whose predictions replace the model's
  /// latency in stage 2: each candidate's planned kernels predicted and summed, with the kernel
  /// model's whole-pass interval (predict_by_kernels). Null: the model's own latency.
  const Predictor* kernel_model = nullptr;
};

/// Measured values of one configuration, per Target.
using MeasuredValues = std::array<std::optional<double>, kTargetCount>;

/// Whether measured values meet every budget (a missing value does not).
bool meets(const std::vector<Budget>& budgets, const MeasuredValues& values);

/// Measured values of each configuration of a store's device (the median of its ok
/// measurements, combine_repeated): [key] -> per Target. With an empty `device`, the store must
/// hold one device; throws carb::Error (input) naming them otherwise.
[[nodiscard]] std::map<std::string, MeasuredValues> measured_by_key(const Store& store,
                                                                    const std::string& device);

/// The rows of `memory` (a model's memory predictions) whose interval holds a memory budget's
/// limit: where the engine's own plan can change a budget decision, so screening (stage 2) and
/// validate's budget classification plan them (EngineMemoryPlanner).
[[nodiscard]] std::vector<std::size_t> memory_deciding_rows(
    const std::vector<Budget>& budgets, const std::vector<TargetPrediction>& memory);
/// Where this machine runs `model`'s engine, replaces the memory predictions of `configs`'
/// memory_deciding_rows (`predictions` as Predictor::predict returns them for `configs`; at most
/// kMostPlannedConfigurations rows) by the engine's own plan, as screening's stage 2 does.
/// Returns how many it planned, and the engine in `engine` when any.
std::size_t plan_deciding_memory(const Predictor& model, const std::vector<Budget>& budgets,
                                 const std::vector<Config>& configs,
                                 std::vector<std::vector<TargetPrediction>>& predictions,
                                 std::string* engine);

/// The index of a target in a predictor's targets, or npos.
std::size_t target_index(const Predictor& predictor, Target target);

/// A candidate's budget decision as screening makes it (docs/screening.md, "Domain guard"):
/// inside the training domain, assess_budgets; outside it, kExclude rejects it, kWiden widens
/// its intervals by DomainJudgement::widening() (in place) and requires their upper ends to meet
/// the budgets, and kAllow judges it as any other. The probability is assess_budgets' of the
/// (widened) predictions. The targets `unwidened` marks keep their intervals under kWiden: a
/// kernel model's latency, calibrated on architectures its fit never saw, not on the model's
/// training domain.
[[nodiscard]] Feasibility decide_budgets(const std::vector<Budget>& budgets,
                                         TargetPredictions& predictions,
                                         const DomainJudgement& domain, DomainPolicy policy,
                                         FeasibilityOptions options,
                                         const std::array<bool, kTargetCount>& unwidened = {});

/// Checks a request against the models before any work, and fills its defaults (costs: every
/// target the model predicts). Throws carb::Error (input) for an objective or budget on a
/// target the model lacks or cannot predict, a model of a table or of kernel timings, and a
/// request's kernel model that is not one or a model without latency beside it.
void check_request(const Predictor& model, const Predictor* stage1, ScreenRequest& request);

/// A screen's options as a front end takes them, as text (`carb screen`'s flags, the Python
/// module's parameters). Each field's name is the subject of screen_request's errors about it.
struct ScreenOptions {
  std::string budget;      ///< e.g. "latency<=2ms,memory<=32MiB" (parse_budgets); empty: none
  std::string objectives;  ///< costs to minimise (parse_objectives); empty: all the model has
  std::string maximize = std::string(kDefaultValue);  ///< an analytic capacity, or "none"
  std::string value;                     ///< or a value per configuration from a CSV: "FILE:COLUMN"
  std::optional<ValueObjective> values;  ///< or values the front end holds, by key
  std::string rank;                      ///< "ideal", "knee" or "value"; empty: the default
  std::string outside_domain = "widen";  ///< "exclude", "widen" or "allow"
  std::size_t keep = 2000;               ///< ScreenRequest's
  double keep_fraction = 0;              ///< ScreenRequest's
  bool safe = false;                     ///< ScreenRequest's
};

/// The request of `options`, checked against the models (check_request). Throws carb::Error
/// (usage) whose subject is the option at fault: a rank, outside_domain or maximize it does not
/// know, a value that is not FILE:COLUMN, a value with a maximize other than the default, rank
/// value without a value, keep 0 without a keep_fraction; and parse_budgets' (subject "budget"),
/// parse_objectives' ("objectives"), read_value_file's and check_request's errors.
/// `kernel_model` (not owned, may be null) becomes the request's.
[[nodiscard]] ScreenRequest screen_request(const ScreenOptions& options, const Predictor& model,
                                           const Predictor* stage1,
                                           const Predictor* kernel_model = nullptr);

// ---------------------------------------------------------------------------------------------
// The result

/// A candidate that reached stage 2.
struct ScreenCandidate {
  std::string key;
  std::vector<float> x;  ///< its features, the model's schema
  int batch = 0;
  IntervalEstimate stage1;      ///< stage 1's estimate of each objective (the value exact)
  std::optional<double> value;  ///< of the value objective
  DomainJudgement domain;
};

/// What a pass counted.
struct ScreenCounts {
  std::uint64_t configurations = 0;       ///< given (a space's points, or the list)
  std::uint64_t outside_constraints = 0;  ///< of a space, breaking its constraints
  std::uint64_t over_budget = 0;          ///< stage 1: confidently over a budget
  double expected_feasible_lost = 0;      ///< of those, feasible after all by their intervals
  std::uint64_t outranked = 0;            ///< stage 1: confidently outranked
  std::uint64_t overlap_kept = 0;         ///< kept only because their intervals overlap the top
  /// Judged outside the training domain (of those stage 1 did not drop as over budget).
  std::uint64_t outside_domain = 0;
  std::uint64_t excluded_outside_domain = 0;  ///< of those, left out (DomainPolicy::kExclude)
  /// Stage 2: candidates whose memory is the engine's own plan (ScreenResult::memory_engine).
  std::uint64_t memory_planned = 0;
  /// Stage 2: candidates whose latency is the request's kernel model's (predict_by_kernels).
  std::uint64_t latency_by_kernels = 0;
};

/// What one two-stage pass found.
struct ScreenResult {
  std::vector<TargetInfo> targets;  ///< the model's, the order of `predictions`
  std::vector<Budget> budgets;
  std::vector<Target> costs;
  std::optional<ValueObjective> value;  ///< its values are not kept (only name and file)
  RankMethod rank = RankMethod::kIdeal;
  DomainPolicy domain_policy = DomainPolicy::kWiden;
  bool safe = false;
  ScreenCounts counts;
  std::string first_outside;  ///< "KEY, whose ..." (domain_text) of the first outside, or ""
  /// The engine whose own plan gave memory (counts.memory_planned), or "" where this machine
  /// does not run the model's engine.
  std::string memory_engine;
  std::vector<ScreenCandidate> pool;                       ///< what stage 2 scored
  std::vector<std::vector<TargetPrediction>> predictions;  ///< [target][pool index]
  std::vector<Feasibility> assessed;                       ///< per pool index
  std::vector<std::size_t> feasible;                       ///< pool indices
  std::vector<std::size_t> front;                          ///< indices into `feasible`
  std::vector<RankedPoint> ranked;                         ///< indices into `front`
  /// Per pool index, whether measurements replaced its predictions (empty: none given).
  std::vector<bool> measured;

  /// The objectives of the front in order: the costs, then the value when there is one.
  std::size_t objectives() const { return costs.size() + (value ? 1 : 0); }
  /// The pool index of the r-th ranked front member.
  std::size_t ranked_pool_index(std::size_t r) const { return feasible[front[ranked[r].index]]; }
  /// Pool index -> its rank on the front (1-based), 0 when not on it.
  std::vector<std::size_t> front_ranks() const;
  /// A pool member's objective values as the front saw them (costs, then -value).
  ObjectiveValues objective_values(std::size_t pool_index) const;
};

/// Screens `candidates` with `model` (stage 2) and `stage1` (stage 1; null: the model's own
/// cheapest members, which may also drop candidates confidently over a budget). A candidate
/// with `measured` values is kept through stage 1 and has them in place of its predictions
/// (zero-width intervals). Where this machine runs the model's engine, stage 2 takes memory
/// from the engine's own plan (EngineMemoryPlanner, exact, zero-width) for the candidates whose
/// memory interval holds a memory budget's limit and for every member of the front, replanning
/// the front until its members are all planned (at most kMostPlannedConfigurations). With a
/// kernel model in `request`, stage 2 takes every candidate's latency from it (stage 1 ranks by
/// the models as without; a measured latency still replaces it). `request` must
/// have passed check_request. Throws carb::Error (input) for an empty space, budgets nothing meets
/// (naming the budget and the closest configuration), and a value file without a candidate's value
/// (naming the file, the key and how many lack one).
[[nodiscard]] ScreenResult screen(const Predictor& model, const Predictor* stage1,
                                  const CandidateSet& candidates, const ScreenRequest& request,
                                  const std::map<std::string, MeasuredValues>* measured = nullptr);

/// The result as JSON (docs/screening.md, "The result file"): the request, the counts and every
/// stage-2 candidate with its predictions, feasibility, front rank, value and domain; features
/// for the front's members.
nlohmann::json screen_result_json(const ScreenResult& result,
                                  const std::vector<std::string>& feature_names);
/// Reads it back (without features); throws carb::Error (input) naming `origin` when it is not
/// a screening result of this carb.
[[nodiscard]] ScreenResult screen_result_from_json(const nlohmann::json& json,
                                                   const std::string& origin);
/// Reads a result file (screen_result_json's, as `carb screen --json` writes it); throws
/// carb::Error (input) naming the file when it cannot be opened, is not JSON, or is not a
/// screening result of this carb.
[[nodiscard]] ScreenResult read_screen_result(const std::string& path);

}  // namespace carb
