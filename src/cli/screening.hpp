// The screening pipeline behind carb screen, shared by its active-profiling loop (refine.cpp):
// set-up checks, one two-stage pass over the candidates, and the shortlist's output.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "carb/measure.hpp"
#include "carb/model.hpp"
#include "carb/screen.hpp"
#include "carb/store.hpp"
#include "output.hpp"
#include "select.hpp"

namespace carb::cli {

struct ScreenCommand {
  std::string model;
  std::string stage1_model;
  Selection selection;
  std::string budget;
  std::string objectives;
  std::size_t keep = 2000;
  double keep_fraction = 0;
  bool safe = false;
  std::string rank = "ideal";
  std::size_t top = 20;
  std::string output;
  std::string json_output;
  std::string candidates_output;  ///< every stage-2 candidate as CSV (for carb report)
  std::string format = "table";
  // Active profiling (refine.cpp).
  std::size_t refine = 0;  ///< configurations to measure per round; 0: no active profiling
  int rounds = 3;
  std::string refine_time;  ///< a duration; no round starts after it
  std::string db;
  std::string device = "cpu";
  std::string replay;                   ///< take measurements from this finished campaign instead
  std::string acquire = "informative";  ///< or "random"
  std::string refit_output;             ///< where the refitted model goes
  std::uint64_t seed = 1;               ///< of the refits and of random acquisition (--refine-seed)
  int threads = 0;                      ///< XGBoost threads of the refits
  Protocol protocol;                    ///< of the measurements
};

/// The models, budgets and objectives of a screening, checked against each other.
struct ScreenSetup {
  Predictor model;
  std::unique_ptr<Predictor> source;  ///< the stage-1 model, when another than `model`
  std::vector<Budget> budgets;
  std::vector<Target> objectives;
};

/// Loads the models and checks budgets and objectives; throws carb::Error (input) as the
/// documented bad inputs say.
ScreenSetup prepare_screen(const ScreenCommand& command);

/// Measured values of one configuration, per Target.
using MeasuredValues = std::array<std::optional<double>, kTargetCount>;

/// A candidate by configuration key with its features row.
struct Candidate {
  std::string key;
  std::vector<float> x;
  int batch = 0;
  IntervalEstimate stage1;
};

/// What one two-stage pass found.
struct ScreenOutcome {
  std::uint64_t total = 0, excluded = 0, over_budget = 0, rank_pruned = 0, overlap_kept = 0;
  double expected_lost = 0;
  std::uint64_t outside_domain = 0;  ///< candidates outside the model's training data
  std::string domain_warning;        ///< the warning about them, or ""
  std::vector<Candidate> pool;       ///< stage-1 survivors, which stage 2 scored
  std::vector<std::vector<TargetPrediction>> predictions;  ///< [target][pool index]
  std::vector<Feasibility> assessed;                       ///< per pool index
  std::vector<std::size_t> feasible;                       ///< pool indices
  std::vector<std::size_t> front;                          ///< indices into `feasible`
  std::vector<RankedPoint> ranked;                         ///< indices into `front`
  /// Per pool index, whether measurements replaced its predictions (empty: none given).
  std::vector<bool> measured;

  /// The pool index of the r-th ranked front member.
  std::size_t ranked_pool_index(std::size_t r) const { return feasible[front[ranked[r].index]]; }
};

/// Screens the command's candidates with the setup's models. A candidate with `measured` values
/// is not dropped as over budget in stage 1, and has them in place of its predictions
/// (zero-width intervals) in stage 2. Throws
/// carb::Error (input) for an empty space or budgets nothing meets (naming the budget and the
/// closest configuration).
ScreenOutcome screen_once(const ScreenCommand& command, const ScreenSetup& setup,
                          const std::map<std::string, MeasuredValues>* measured = nullptr);

/// Prints the shortlist and the counts, and writes the -o and --json files; `extra` members are
/// added to the JSON file.
void report_screen(const ScreenCommand& command, const ScreenSetup& setup,
                   const ScreenOutcome& outcome, const nlohmann::json& extra = {});

/// The index of a target in a predictor's targets, or npos.
std::size_t target_index(const Predictor& predictor, Target target);

/// Measured values of the latest ok measurement per configuration: [key] -> per Target. With an
/// empty `device`, the store must hold one device.
std::map<std::string, MeasuredValues> measured_by_key(const Store& store,
                                                      const std::string& device);

/// Whether measured values meet every budget (a missing value does not).
bool meets(const std::vector<Budget>& budgets, const MeasuredValues& values);

/// carb screen --refine: active profiling (refine.cpp).
void run_refine(const ScreenCommand& command, ScreenSetup& setup);

}  // namespace carb::cli
