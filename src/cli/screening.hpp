// carb screen's flags, turned into the screening library's request (carb/screening.hpp), and the
// printing of its result; shared by screen_verb.cpp and the active-profiling printer.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "carb/measure.hpp"
#include "carb/model.hpp"
#include "carb/screening.hpp"
#include "select.hpp"

namespace carb::cli {

struct ScreenCommand {
  std::string model;
  std::string stage1_model;
  std::string kernel_model;  ///< a kernel model for stage 2's latency
  Selection selection;
  ScreenOptions options;  ///< the request's flags, as screen_request takes them
  std::size_t top = 20;
  std::string output;
  std::string json_output;
  std::string candidates_output;  ///< every stage-2 candidate as CSV
  std::string format = "table";
  // Active profiling.
  std::size_t refine = 0;  ///< configurations to measure per round; 0: no active profiling
  int rounds = 3;
  std::string refine_time;  ///< a duration; no round starts after it
  std::string db;
  std::string device = "cpu";
  std::string replay;
  std::string acquire = "informative";
  std::string refit_output;  ///< where the refitted model goes
  std::uint64_t seed = 1;    ///< of the refits and of random acquisition (--refine-seed)
  int threads = 0;           ///< XGBoost threads of the refits
  Protocol protocol;         ///< of the measurements
};

/// The models and the request a command makes, checked.
struct ScreenSetup {
  Predictor model;
  std::unique_ptr<Predictor> stage1;  ///< the stage-1 model, when another than `model`
  std::unique_ptr<Predictor> kernel_model;  ///< stage 2's latency, when given (the request's)
  ScreenRequest request;
  std::unique_ptr<Space> space;  ///< the spec, when the whole of it is screened
  CandidateSet candidates;
};

/// Loads the models and the candidates, parses the flags into a request and checks it.
ScreenSetup prepare_screen(const ScreenCommand& command);

/// Prints the shortlist and the counts, and writes the -o, --candidates and --json files;
/// `extra` members are added to the JSON file.
void report_screen(const ScreenCommand& command, const ScreenSetup& setup,
                   const ScreenResult& result, const nlohmann::json& extra = {});

}  // namespace carb::cli
