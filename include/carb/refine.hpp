// Active profiling (method.md §7, docs/screening.md "Active profiling"): rounds that measure
// the candidates whose measurement could most change the shortlist (acquisition_scores), refit
// the model on every measurement of its device, and screen again. Above campaign, model and
// screen: it runs campaigns, fits and screens.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "carb/campaign.hpp"
#include "carb/measure.hpp"
#include "carb/model.hpp"
#include "carb/screening.hpp"

namespace carb {

/// How the next round's configurations are chosen.
enum class Acquisition {
  kInformative,  ///< acquisition_scores: near a budget's edge or possibly on the front
  kRandom,       ///< uniformly among those not measured yet (the baseline)
};
std::string_view to_string(Acquisition acquisition);
std::optional<Acquisition> parse_acquisition(std::string_view text);

/// What one round found.
struct RefineRound {
  int round = 0;
  std::size_t acquired = 0;       ///< configurations chosen to measure
  std::size_t measured = 0;       ///< of those, measured ok (now training rows)
  std::size_t training_rows = 0;  ///< after this round's measurements
  /// The model that chose them, on them (per Target): honest held-out errors.
  std::array<std::optional<Metrics>, kTargetCount> new_errors;
  std::optional<double> new_budget_accuracy;  ///< its budget decisions on them, %
  std::size_t front = 0, front_in = 0, front_out = 0, front_measured = 0, front_meets = 0;
  /// With the truth (every candidate measured): the front's recall and precision, %.
  std::optional<double> recall, precision;
  /// With the truth: the budget decisions over every candidate, % right, and the errors.
  std::optional<double> accuracy;
  std::size_t false_accepts = 0, false_rejects = 0;
  std::size_t truly_feasible = 0;  ///< with the truth: candidates that meet every budget
  double measure_s = 0, fit_s = 0, screen_s = 0;
};

struct RefineOptions {
  std::size_t per_round = 0;  ///< configurations measured per round
  int rounds = 3;
  double time_budget_s = std::numeric_limits<double>::infinity();  ///< no round starts after it
  std::string db;              ///< the model's campaign; new measurements join it
  std::string device = "cpu";  ///< the device measured on (a kind or an id)
  /// Take each chosen configuration's measurement from this finished campaign instead of
  /// measuring (evaluates the acquisition; writes nothing to `db`).
  std::string replay;
  Acquisition acquisition = Acquisition::kInformative;
  std::uint64_t seed = 1;  ///< of the refits and of random acquisition
  int threads = 0;         ///< XGBoost threads of the refits
  Protocol protocol;       ///< of the measurements
  WorkerCommand worker;    ///< how campaigns start their workers
  std::string name;        ///< campaigns are named "refine round N of NAME"
  /// Where each round's refitted model is written; empty: nowhere.
  std::string refit_output;
  std::function<void(const CampaignProgress&)> progress;  ///< during each round's campaign
  std::function<void(const RefineRound&)> round_done;     ///< after each round
};

/// What active profiling did.
struct RefineResult {
  std::vector<RefineRound> rounds;
  ScreenResult screen;  ///< the last round's screening
  /// With the truth (every candidate measured, in `replay` or `db`): the true front's size and
  /// how many candidates truly meet the budgets.
  std::optional<std::size_t> true_front;
  std::size_t truly_feasible = 0;
  bool exhausted = false;  ///< stopped because every candidate was measured
  double seconds = 0;
};

/// Runs active profiling from `model` (replaced by each round's refit). Throws carb::Error
/// (usage) for no db, rounds < 1 or per_round 0, and (input) when measuring on a device of this
/// machine other than the model's.
[[nodiscard]] RefineResult refine(Predictor& model, const Predictor* stage1, const CandidateSet& candidates,
                    const ScreenRequest& request, const RefineOptions& options);

/// A round as JSON (carb screen --json's "refine" member).
nlohmann::json refine_round_json(const RefineRound& round);

}  // namespace carb
