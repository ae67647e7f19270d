// carb screen --refine: active profiling. Each round measures the configurations whose
// measurement could most change the shortlist (acquisition_scores), refits the model on every
// measurement of its device, and screens again; it reports how the shortlist and the model's
// accuracy on the newly measured configurations changed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <random>
#include <set>

#include <unistd.h>

#include "carb/campaign.hpp"
#include "carb/error.hpp"
#include "screening.hpp"

namespace carb::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double percent(std::size_t part, std::size_t whole) {
  return whole == 0 ? 0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

// Appends row `i` of `from` to `to` (the same schema and targets).
void append_row(Dataset& to, const Dataset& from, std::size_t i) {
  to.x.insert(to.x.end(), from.row(i), from.row(i) + from.cols());
  to.ids.push_back(from.ids[i]);
  for (std::size_t t = 0; t < to.y.size(); ++t) to.y[t].push_back(from.y[t][i]);
  to.batch.push_back(from.batch[i]);
  to.stratum.push_back(from.stratum[i]);
}

// The measured values of a dataset's rows by key, per Target.
std::map<std::string, MeasuredValues> values_by_key(const Dataset& data) {
  std::map<std::string, MeasuredValues> out;
  for (std::size_t i = 0; i < data.rows(); ++i) {
    MeasuredValues& values = out[data.ids[i]];
    for (std::size_t t = 0; t < data.targets.size(); ++t) {
      const auto target = parse_target(data.targets[t].name);
      if (target && !std::isnan(data.y[t][i]))
        values[static_cast<std::size_t>(*target)] = data.y[t][i];
    }
  }
  return out;
}

// What one round found.
struct Round {
  int round = 0;
  std::size_t acquired = 0;       // configurations chosen to measure
  std::size_t measured = 0;       // of those, measured ok (now training rows)
  std::size_t training_rows = 0;  // after this round's measurements
  std::array<std::optional<Metrics>, kTargetCount> new_errors;  // old model on the new rows
  std::optional<double> new_budget_accuracy;
  std::size_t front = 0, front_in = 0, front_out = 0, front_measured = 0, front_meets = 0;
  std::optional<double> recall, precision;
  // With the truth: the feasible set's budget decisions over every candidate.
  std::optional<double> accuracy;
  std::size_t false_accepts = 0, false_rejects = 0;
  double measure_s = 0, fit_s = 0, screen_s = 0;
};

nlohmann::json to_json(const Round& r) {
  nlohmann::json errors = nlohmann::json::object();
  for (std::size_t t = 0; t < kTargetCount; ++t) {
    if (!r.new_errors[t]) continue;
    const Metrics& m = *r.new_errors[t];
    errors[std::string(to_string(static_cast<Target>(t)))] = {
        {"n", m.n}, {"mape_pct", m.mape}, {"coverage_pct", m.coverage.value_or(0)}};
  }
  const auto optional = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json();
  };
  return {{"round", r.round},
          {"acquired", r.acquired},
          {"measured", r.measured},
          {"training_rows", r.training_rows},
          {"new_errors", errors},
          {"new_budget_accuracy_pct", optional(r.new_budget_accuracy)},
          {"front", r.front},
          {"front_entered", r.front_in},
          {"front_left", r.front_out},
          {"front_measured", r.front_measured},
          {"front_measured_within_budgets", r.front_meets},
          {"recall_pct", optional(r.recall)},
          {"precision_pct", optional(r.precision)},
          {"budget_accuracy_pct", optional(r.accuracy)},
          {"false_accepts", r.accuracy ? nlohmann::json(r.false_accepts) : nlohmann::json()},
          {"false_rejects", r.accuracy ? nlohmann::json(r.false_rejects) : nlohmann::json()},
          {"measure_s", r.measure_s},
          {"fit_s", r.fit_s},
          {"screen_s", r.screen_s}};
}

// Every candidate of the selection, when it is small enough to list (a key list, a sample, or a
// space of at most 200,000 points); else nothing.
std::optional<std::vector<Config>> listable_candidates(const Selection& selection) {
  if (selection.keys_file.empty() && selection.sample == 0 &&
      Space::from_file(selection.spec).size() > 200'000) {
    return std::nullopt;
  }
  return select_configs(selection);
}

// The front's keys, best first.
std::vector<std::string> front_keys(const ScreenOutcome& outcome) {
  std::vector<std::string> keys;
  for (std::size_t r = 0; r < outcome.ranked.size(); ++r) {
    keys.push_back(outcome.pool[outcome.ranked_pool_index(r)].key);
  }
  return keys;
}

}  // namespace

void run_refine(const ScreenCommand& command, ScreenSetup& setup) {
  if (command.db.empty()) {
    throw Error(ErrorCategory::kUsage,
                "--refine needs --db: the campaign the model was fitted on, which the new "
                "measurements join");
  }
  if (command.rounds < 1) throw Error(ErrorCategory::kUsage, "--rounds must be at least 1");
  if (command.acquire != "informative" && command.acquire != "random") {
    throw Error(ErrorCategory::kUsage, "--acquire must be informative or random");
  }
  const double time_budget = command.refine_time.empty() ? std::numeric_limits<double>::infinity()
                                                         : parse_duration_s(command.refine_time);
  const bool replay = !command.replay.empty();
  const std::string fingerprint = setup.model.device_fingerprint();
  if (!replay) {
    const std::string here = device_fingerprint_of(command.device);
    if (here != fingerprint) {
      throw Error(ErrorCategory::kInput,
                  "--refine measures on device '" + command.device + "' of this machine (" + here +
                      "), but " + command.model + " is a model of another device (" + fingerprint +
                      "): refine on the machine the model's campaign ran on");
    }
  }
  std::string refit_output = command.refit_output;
  if (refit_output.empty()) {
    std::filesystem::path path(command.model);
    refit_output = (path.parent_path() / (path.stem().string() + ".refined.json")).string();
  }

  // The training data: every ok measurement of the model's device in --db.
  Dataset train = dataset_from_store(Store::open(command.db), fingerprint);
  // Replay: measurements of a finished campaign, by key.
  Dataset replay_data;
  std::map<std::string, std::size_t> replay_row;
  if (replay) {
    replay_data = dataset_from_store(Store::open(command.replay), fingerprint);
    for (std::size_t i = 0; i < replay_data.rows(); ++i) replay_row[replay_data.ids[i]] = i;
  }
  // The truth to score the front against: what the replay (or --db) measured, when it covers
  // every candidate.
  const std::optional<std::vector<Config>> candidates = listable_candidates(command.selection);
  std::optional<std::vector<std::string>> true_front;
  std::set<std::string> truly_feasible;
  {
    const auto truth = values_by_key(replay ? replay_data : train);
    bool covered = candidates.has_value();
    std::vector<ObjectiveValues> values;
    std::vector<std::string> keys;
    for (std::size_t i = 0; covered && i < candidates->size(); ++i) {
      const std::string key = to_key((*candidates)[i]);
      const auto found = truth.find(key);
      if (found == truth.end()) {
        covered = false;
        break;
      }
      if (!meets(setup.budgets, found->second)) continue;
      truly_feasible.insert(key);
      ObjectiveValues v{};
      for (std::size_t k = 0; k < setup.objectives.size(); ++k) {
        v[k] = found->second[static_cast<std::size_t>(setup.objectives[k])].value_or(0);
      }
      values.push_back(v);
      keys.push_back(key);
    }
    if (covered) {
      true_front.emplace();
      for (std::size_t f : pareto_front(values, setup.objectives.size())) {
        true_front->push_back(keys[f]);
      }
    }
  }

  const auto start = Clock::now();
  std::set<std::string> attempted(train.ids.begin(), train.ids.end());
  std::vector<Round> rounds;
  std::vector<std::string> previous_front;
  std::mt19937_64 random(command.seed);
  ScreenOutcome outcome;
  std::vector<Config> chosen;
  for (int r = 0; r <= command.rounds; ++r) {
    Round round;
    round.round = r;
    if (r > 0) {
      // Measure what round r-1's screening chose, score the model that chose it on them, refit.
      round.acquired = chosen.size();
      const auto measure_start = Clock::now();
      if (replay) {
        for (const Config& config : chosen) {
          const auto found = replay_row.find(to_key(config));
          if (found != replay_row.end()) append_row(train, replay_data, found->second);
        }
      } else {
        CampaignOptions options;
        options.db_path = command.db;
        options.device = command.device;
        options.name = "refine round " + std::to_string(r) + " of " + command.model;
        for (const Config& config : chosen) options.spec_text += to_key(config) + "\n";
        options.worker = {"/proc/self/exe", {"__worker"}};
        options.protocol = command.protocol;
        if (std::isfinite(time_budget)) {
          options.time_budget_s = std::max(1.0, time_budget - seconds_since(start));
        }
        const bool terminal = ::isatty(STDERR_FILENO) != 0;
        run_campaign(chosen, options, [terminal](const CampaignProgress& progress) {
          print_progress(progress, terminal);
        });
        if (terminal) std::cerr << "\n";
        train = dataset_from_store(Store::open(command.db), fingerprint);
      }
      round.measure_s = seconds_since(measure_start);
      for (const Config& config : chosen) attempted.insert(to_key(config));

      // The model that chose them, on them: honest held-out errors.
      const auto truth = values_by_key(train);
      std::vector<Config> measured;
      for (const Config& config : chosen) {
        if (truth.count(to_key(config))) measured.push_back(config);
      }
      round.measured = measured.size();
      round.training_rows = train.rows();
      if (!measured.empty()) {
        const FeatureRows rows = feature_rows(measured);
        const auto predictions =
            setup.model.predict(rows.x.data(), measured.size(), rows.batch.data());
        FeasibilityOptions feasibility;
        feasibility.coverage = setup.model.coverage();
        feasibility.safe = command.safe;
        std::size_t correct = 0;
        for (std::size_t i = 0; i < measured.size(); ++i) {
          const bool predicted =
              assess_budgets(setup.budgets,
                             gather_predictions(setup.model.targets(), predictions, i), feasibility)
                  .feasible;
          correct += predicted == meets(setup.budgets, truth.at(to_key(measured[i]))) ? 1 : 0;
        }
        if (!setup.budgets.empty()) round.new_budget_accuracy = percent(correct, measured.size());
        for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
          const std::size_t t = target_index(setup.model, target);
          if (t == std::string::npos) continue;
          std::vector<double> value, predicted, low, high;
          for (std::size_t i = 0; i < measured.size(); ++i) {
            const auto& v = truth.at(to_key(measured[i]))[static_cast<std::size_t>(target)];
            if (!v || !predictions[t][i].available) continue;
            value.push_back(*v);
            predicted.push_back(predictions[t][i].value);
            low.push_back(predictions[t][i].low);
            high.push_back(predictions[t][i].high);
          }
          if (!value.empty()) {
            round.new_errors[static_cast<std::size_t>(target)] =
                score(value, predicted, &low, &high);
          }
        }
      }

      const auto fit_start = Clock::now();
      FitOptions options;
      options.seed = command.seed;
      options.coverage = setup.model.coverage();
      options.threads = command.threads;
      options.baselines = false;
      setup.model = Predictor::fit(train, options, nullptr);
      setup.model.save(refit_output);
      round.fit_s = seconds_since(fit_start);
    } else {
      round.training_rows = train.rows();
    }

    const auto screen_start = Clock::now();
    const auto measured_now = values_by_key(train);
    outcome = screen_once(command, setup, &measured_now);
    round.screen_s = seconds_since(screen_start);
    const std::vector<std::string> front = front_keys(outcome);
    round.front = front.size();
    const std::set<std::string> now(front.begin(), front.end());
    const std::set<std::string> before(previous_front.begin(), previous_front.end());
    if (r > 0) {
      for (const std::string& key : front) round.front_in += before.count(key) ? 0 : 1;
      for (const std::string& key : previous_front) round.front_out += now.count(key) ? 0 : 1;
    }
    previous_front = front;
    const auto& truth = measured_now;
    for (const std::string& key : front) {
      const auto found = truth.find(key);
      if (found == truth.end()) continue;
      ++round.front_measured;
      round.front_meets += meets(setup.budgets, found->second) ? 1 : 0;
    }
    if (true_front) {
      std::size_t hits = 0;
      for (const std::string& key : *true_front) hits += now.count(key);
      round.recall = percent(hits, true_front->size());
      round.precision = percent(hits, front.size());
      // Screening calls feasible exactly its stage-2 feasible set; all else is rejected.
      std::set<std::string> accepted;
      for (std::size_t i : outcome.feasible) accepted.insert(outcome.pool[i].key);
      for (const std::string& key : accepted)
        round.false_accepts += truly_feasible.count(key) ? 0 : 1;
      for (const std::string& key : truly_feasible)
        round.false_rejects += accepted.count(key) ? 0 : 1;
      round.accuracy = 100 - percent(round.false_accepts + round.false_rejects, candidates->size());
    }

    std::cerr << "refine round " << r << ": ";
    if (r > 0) {
      std::cerr << "measured " << round.measured << " of " << round.acquired << " chosen ("
                << (replay ? "replayed from " + command.replay : "on " + command.device) << ", "
                << cell_text(round.measure_s) << " s), refitted on " << round.training_rows << " ("
                << cell_text(round.fit_s) << " s); ";
    } else {
      std::cerr << "the model as given, " << round.training_rows << " measured; ";
    }
    std::cerr << "front " << round.front << " (" << round.front_measured << " measured, "
              << round.front_meets << " of them within budgets)";
    if (round.recall) {
      std::cerr << ", recall " << cell_text(*round.recall) << "%, precision "
                << cell_text(*round.precision) << "%; budget decisions "
                << cell_text(*round.accuracy) << "% right (" << round.false_accepts
                << " false accepts, " << round.false_rejects << " false rejects of "
                << truly_feasible.size() << " truly feasible)";
    }
    std::cerr << "\n";
    rounds.push_back(round);

    // Choose the next round's configurations.
    if (r == command.rounds || seconds_since(start) >= time_budget) break;
    chosen.clear();
    if (command.acquire == "random") {
      std::vector<Config> pool =
          candidates
              ? *candidates
              : select_configs({command.selection.spec, "", command.refine + attempted.size(),
                                command.seed + r, "random"});
      std::erase_if(pool, [&](const Config& c) { return attempted.count(to_key(c)) > 0; });
      std::shuffle(pool.begin(), pool.end(), random);
      pool.resize(std::min(pool.size(), command.refine));
      chosen = std::move(pool);
    } else {
      std::vector<AcquisitionCandidate> open;
      std::vector<std::size_t> index;  // into outcome.pool
      for (std::size_t i = 0; i < outcome.pool.size(); ++i) {
        if (attempted.count(outcome.pool[i].key)) continue;
        AcquisitionCandidate c;
        for (std::size_t k = 0; k < setup.objectives.size(); ++k) {
          const auto& p = outcome.predictions[target_index(setup.model, setup.objectives[k])][i];
          c.estimate.value[k] = p.value;
          c.estimate.low[k] = p.low;
          c.estimate.high[k] = p.high;
        }
        c.p_feasible = outcome.assessed[i].probability;
        open.push_back(c);
        index.push_back(i);
      }
      std::vector<ObjectiveValues> front_values;
      for (std::size_t f = 0; f < outcome.ranked.size(); ++f) {
        const std::size_t i = outcome.ranked_pool_index(f);
        ObjectiveValues v{};
        for (std::size_t k = 0; k < setup.objectives.size(); ++k) {
          v[k] = outcome.predictions[target_index(setup.model, setup.objectives[k])][i].value;
        }
        front_values.push_back(v);
      }
      const std::vector<double> scores =
          acquisition_scores(open, front_values, setup.objectives.size(), !setup.budgets.empty());
      for (std::size_t j : top_scores(scores, command.refine)) {
        chosen.push_back(parse_key(outcome.pool[index[j]].key));
      }
    }
    if (chosen.empty()) {
      std::cerr << "refine: every candidate is measured already\n";
      break;
    }
  }

  // The rounds as a table, then the final shortlist.
  std::vector<std::string> columns = {"round", "measured", "training_rows"};
  std::vector<Target> scored;
  for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
    for (const Round& round : rounds) {
      if (round.new_errors[static_cast<std::size_t>(target)]) {
        scored.push_back(target);
        break;
      }
    }
  }
  for (Target target : scored) {
    const std::string name(to_string(target));
    columns.insert(columns.end(), {"new_" + name + "_mape_pct", "new_" + name + "_coverage_pct"});
  }
  columns.insert(columns.end(), {"new_budget_acc_pct", "front", "entered", "left", "front_measured",
                                 "front_within_budgets"});
  if (true_front) {
    columns.insert(columns.end(), {"recall_pct", "precision_pct", "budget_acc_pct", "false_accepts",
                                   "false_rejects"});
  }
  auto writer = make_row_writer(Format::kTable, columns, std::cerr);
  const auto cell = [](const std::optional<double>& v) { return v ? Cell(*v) : Cell("-"); };
  for (const Round& round : rounds) {
    std::vector<Cell> row = {static_cast<std::int64_t>(round.round),
                             static_cast<std::int64_t>(round.measured),
                             static_cast<std::int64_t>(round.training_rows)};
    for (Target target : scored) {
      const auto& m = round.new_errors[static_cast<std::size_t>(target)];
      row.push_back(m ? Cell(m->mape) : Cell("-"));
      row.push_back(m ? cell(m->coverage) : Cell("-"));
    }
    row.push_back(cell(round.new_budget_accuracy));
    for (std::size_t v :
         {round.front, round.front_in, round.front_out, round.front_measured, round.front_meets}) {
      row.emplace_back(static_cast<std::int64_t>(v));
    }
    if (true_front) {
      row.push_back(cell(round.recall));
      row.push_back(cell(round.precision));
      row.push_back(cell(round.accuracy));
      row.emplace_back(static_cast<std::int64_t>(round.false_accepts));
      row.emplace_back(static_cast<std::int64_t>(round.false_rejects));
    }
    writer->row(row);
  }
  writer->finish();
  std::cerr << "refitted model: " << refit_output << " ("
            << (replay ? "replayed measurements from " + command.replay
                       : "measurements in " + command.db)
            << ", acquisition " << command.acquire << ", " << cell_text(seconds_since(start))
            << " s)\n";

  nlohmann::json rounds_json = nlohmann::json::array();
  for (const Round& round : rounds) rounds_json.push_back(to_json(round));
  report_screen(
      command, setup, outcome,
      {{"refine",
        {{"acquire", command.acquire},
         {"replay", command.replay},
         {"refit_model", refit_output},
         {"true_front", true_front ? nlohmann::json(true_front->size()) : nlohmann::json()},
         {"rounds", rounds_json}}}});
}

}  // namespace carb::cli
