// Active profiling (carb/refine.hpp): each round measures what the previous screening chose,
// scores the model that chose it on those measurements, refits on every measurement of the
// device, and screens again.
#include "carb/refine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/statistics.hpp"

namespace carb {

namespace {

using Clock = std::chrono::steady_clock;

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

constexpr std::uint64_t kMostListed = 200'000;

// Every candidate, when there are few enough to list (a list, or a space of at most
// kMostListed points, its constraints applied); else nothing.
std::optional<std::vector<Config>> listable(const CandidateSet& candidates) {
  if (candidates.space == nullptr) return candidates.configs;
  const Space& space = *candidates.space;
  if (space.size() > kMostListed) return std::nullopt;
  SpaceFeatures features(space);
  std::vector<Config> out;
  for (std::uint64_t index = 0; index < space.size(); ++index) {
    if (space.constraints().empty() || features.violated_constraint(index).empty()) {
      out.push_back(space.at(index));
    }
  }
  return out;
}

// `count` random configurations of a space too large to list, its constraints applied.
std::vector<Config> random_sample(const Space& space, std::uint64_t count, std::uint64_t seed) {
  SpaceFeatures features(space);
  const IndexFilter accept =
      space.constraints().empty() ? IndexFilter() : IndexFilter([&](std::uint64_t index) {
        return features.violated_constraint(index).empty();
      });
  std::vector<Config> out;
  for (std::uint64_t index : sample_random(space, count, seed, accept)) {
    out.push_back(space.at(index));
  }
  return out;
}

// The front's keys, best first.
std::vector<std::string> front_keys(const ScreenResult& result) {
  std::vector<std::string> keys;
  for (std::size_t r = 0; r < result.ranked.size(); ++r) {
    keys.push_back(result.pool[result.ranked_pool_index(r)].key);
  }
  return keys;
}

// The model that chose `measured` (configurations now measured, `truth` by key), on them.
void score_on_new(const Predictor& model, const ScreenRequest& request,
                  const std::vector<Config>& measured,
                  const std::map<std::string, MeasuredValues>& truth, RefineRound& round) {
  if (measured.empty()) return;
  const FeatureRows rows = feature_rows(measured);
  const auto predictions = model.predict(rows.x.data(), measured.size(), rows.batch.data());
  FeasibilityOptions feasibility;
  feasibility.coverage = model.coverage();
  feasibility.safe = request.safe;
  std::size_t correct = 0;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const bool predicted =
        assess_budgets(request.budgets, gather_predictions(model.targets(), predictions, i),
                       feasibility)
            .feasible;
    correct += predicted == meets(request.budgets, truth.at(to_key(measured[i]))) ? 1 : 0;
  }
  if (!request.budgets.empty()) round.new_budget_accuracy = percent(correct, measured.size());
  for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
    const std::size_t t = target_index(model, target);
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
      round.new_errors[static_cast<std::size_t>(target)] = score(value, predicted, &low, &high);
    }
  }
}

// The informative choice: the `n` unmeasured pool members of highest acquisition score.
std::vector<Config> informative_choice(const ScreenResult& result, const ScreenRequest& request,
                                       const std::set<std::string>& attempted, std::size_t n) {
  const std::size_t objectives = result.objectives();
  std::vector<AcquisitionCandidate> open;
  std::vector<std::size_t> index;  // into result.pool
  for (std::size_t i = 0; i < result.pool.size(); ++i) {
    if (attempted.count(result.pool[i].key)) continue;
    AcquisitionCandidate c;
    for (std::size_t k = 0; k < request.costs.size(); ++k) {
      const std::size_t t =
          static_cast<std::size_t>(std::find_if(result.targets.begin(), result.targets.end(),
                                                [&](const TargetInfo& info) {
                                                  return info.name == to_string(request.costs[k]);
                                                }) -
                                   result.targets.begin());
      const TargetPrediction& p = result.predictions[t][i];
      c.estimate.value[k] = p.value;
      c.estimate.low[k] = p.low;
      c.estimate.high[k] = p.high;
    }
    // The value is exact: a point, negated as the front minimises it.
    if (result.value) {
      const double v = -result.pool[i].value.value_or(0);
      c.estimate.value[request.costs.size()] = v;
      c.estimate.low[request.costs.size()] = v;
      c.estimate.high[request.costs.size()] = v;
    }
    c.p_feasible = result.assessed[i].probability;
    open.push_back(c);
    index.push_back(i);
  }
  std::vector<ObjectiveValues> front_values;
  for (std::size_t f = 0; f < result.ranked.size(); ++f) {
    front_values.push_back(result.objective_values(result.ranked_pool_index(f)));
  }
  const std::vector<double> scores =
      acquisition_scores(open, front_values, objectives, !request.budgets.empty());
  std::vector<Config> chosen;
  for (std::size_t j : top_scores(scores, n))
    chosen.push_back(parse_key(result.pool[index[j]].key));
  return chosen;
}

}  // namespace

std::string_view to_string(Acquisition acquisition) {
  return acquisition == Acquisition::kRandom ? "random" : "informative";
}

std::optional<Acquisition> parse_acquisition(std::string_view text) {
  if (text == "informative") return Acquisition::kInformative;
  if (text == "random") return Acquisition::kRandom;
  return std::nullopt;
}

RefineResult refine(Predictor& model, const Predictor* stage1, const CandidateSet& candidates,
                    const ScreenRequest& request, const RefineOptions& options) {
  if (options.db.empty()) {
    throw Error(ErrorCategory::kUsage,
                "active profiling needs the campaign the model was fitted on, which the new "
                "measurements join");
  }
  if (options.rounds < 1) throw Error(ErrorCategory::kUsage, "at least one round");
  if (options.per_round == 0) {
    throw Error(ErrorCategory::kUsage, "at least one configuration per round");
  }
  const bool replay = !options.replay.empty();
  const std::string fingerprint = model.device_fingerprint();
  if (!replay) {
    const std::string here = device_fingerprint_of(options.device);
    if (here != fingerprint) {
      throw Error(ErrorCategory::kInput,
                  "active profiling measures on device '" + options.device + "' of this machine (" +
                      here + "), but the model is of another device (" + fingerprint +
                      "): refine on the machine the model's campaign ran on");
    }
  }

  RefineResult result;
  // The training data: every ok measurement of the model's device in the database.
  Dataset train = dataset_from_store(Store::open(options.db), fingerprint);
  // Replay: measurements of a finished campaign, by key.
  Dataset replay_data;
  std::map<std::string, std::size_t> replay_row;
  if (replay) {
    replay_data = dataset_from_store(Store::open(options.replay), fingerprint);
    for (std::size_t i = 0; i < replay_data.rows(); ++i) replay_row[replay_data.ids[i]] = i;
  }
  // The truth to score the front against: what the replay (or the database) measured, when it
  // covers every candidate. The value objective's values are those screening gives: exact.
  const std::optional<std::vector<Config>> listed = listable(candidates);
  std::optional<std::vector<std::string>> true_front;
  std::set<std::string> truly_feasible;
  {
    const auto truth = values_by_key(replay ? replay_data : train);
    bool covered = listed.has_value();
    std::vector<ObjectiveValues> values;
    std::vector<std::string> keys;
    const std::size_t costs = request.costs.size();
    FeatureRows rows;
    if (covered && request.value) rows = feature_rows(*listed);
    for (std::size_t i = 0; covered && i < listed->size(); ++i) {
      const std::string key = to_key((*listed)[i]);
      const auto found = truth.find(key);
      if (found == truth.end()) {
        covered = false;
        break;
      }
      if (!meets(request.budgets, found->second)) continue;
      ObjectiveValues v{};
      for (std::size_t k = 0; k < costs; ++k) {
        v[k] = found->second[static_cast<std::size_t>(request.costs[k])].value_or(0);
      }
      if (request.value) {
        const auto value =
            objective_value(*request.value, model.feature_names(),
                            rows.x.data() + i * model.feature_names().size(), (*listed)[i]);
        if (!value) continue;
        v[costs] = -*value;
      }
      truly_feasible.insert(key);
      values.push_back(v);
      keys.push_back(key);
    }
    if (covered) {
      true_front.emplace();
      for (std::size_t f : pareto_front(values, costs + (request.value ? 1 : 0))) {
        true_front->push_back(keys[f]);
      }
      result.true_front = true_front->size();
      result.truly_feasible = truly_feasible.size();
    }
  }

  const auto start = Clock::now();
  std::set<std::string> attempted(train.ids.begin(), train.ids.end());
  std::vector<std::string> previous_front;
  std::mt19937_64 random(options.seed);
  std::vector<Config> chosen;
  for (int r = 0; r <= options.rounds; ++r) {
    RefineRound round;
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
        CampaignOptions campaign;
        campaign.db_path = options.db;
        campaign.device = options.device;
        campaign.name = "refine round " + std::to_string(r) + " of " + options.name;
        for (const Config& config : chosen) campaign.spec_text += to_key(config) + "\n";
        campaign.worker = options.worker;
        campaign.protocol = options.protocol;
        if (std::isfinite(options.time_budget_s)) {
          campaign.time_budget_s = std::max(1.0, options.time_budget_s - seconds_since(start));
        }
        run_campaign(chosen, campaign, options.progress);
        train = dataset_from_store(Store::open(options.db), fingerprint);
      }
      round.measure_s = seconds_since(measure_start);
      for (const Config& config : chosen) attempted.insert(to_key(config));

      const auto truth = values_by_key(train);
      std::vector<Config> measured;
      for (const Config& config : chosen) {
        if (truth.count(to_key(config))) measured.push_back(config);
      }
      round.measured = measured.size();
      round.training_rows = train.rows();
      score_on_new(model, request, measured, truth, round);

      const auto fit_start = Clock::now();
      FitOptions fit;
      fit.seed = options.seed;
      fit.coverage = model.coverage();
      fit.threads = options.threads;
      fit.baselines = false;
      model = Predictor::fit(train, fit, nullptr);
      if (!options.refit_output.empty()) model.save(options.refit_output);
      round.fit_s = seconds_since(fit_start);
    } else {
      round.training_rows = train.rows();
    }

    const auto screen_start = Clock::now();
    const auto measured_now = values_by_key(train);
    result.screen = screen(model, stage1, candidates, request, &measured_now);
    round.screen_s = seconds_since(screen_start);
    const std::vector<std::string> front = front_keys(result.screen);
    round.front = front.size();
    const std::set<std::string> now(front.begin(), front.end());
    const std::set<std::string> before(previous_front.begin(), previous_front.end());
    if (r > 0) {
      for (const std::string& key : front) round.front_in += before.count(key) ? 0 : 1;
      for (const std::string& key : previous_front) round.front_out += now.count(key) ? 0 : 1;
    }
    previous_front = front;
    for (const std::string& key : front) {
      const auto found = measured_now.find(key);
      if (found == measured_now.end()) continue;
      ++round.front_measured;
      round.front_meets += meets(request.budgets, found->second) ? 1 : 0;
    }
    if (true_front) {
      std::size_t hits = 0;
      for (const std::string& key : *true_front) hits += now.count(key);
      round.recall = percent(hits, true_front->size());
      round.precision = percent(hits, front.size());
      // Screening calls feasible exactly its stage-2 feasible set; all else is rejected.
      std::set<std::string> accepted;
      for (std::size_t i : result.screen.feasible) accepted.insert(result.screen.pool[i].key);
      for (const std::string& key : accepted)
        round.false_accepts += truly_feasible.count(key) ? 0 : 1;
      for (const std::string& key : truly_feasible)
        round.false_rejects += accepted.count(key) ? 0 : 1;
      round.accuracy = 100 - percent(round.false_accepts + round.false_rejects, listed->size());
      round.truly_feasible = truly_feasible.size();
    }
    result.rounds.push_back(round);
    if (options.round_done) options.round_done(round);

    // Choose the next round's configurations.
    if (r == options.rounds || seconds_since(start) >= options.time_budget_s) break;
    chosen.clear();
    if (options.acquisition == Acquisition::kRandom) {
      std::vector<Config> pool =
          listed ? *listed
                 : random_sample(*candidates.space, options.per_round + attempted.size(),
                                 options.seed + static_cast<std::uint64_t>(r));
      std::erase_if(pool, [&](const Config& c) { return attempted.count(to_key(c)) > 0; });
      std::shuffle(pool.begin(), pool.end(), random);
      pool.resize(std::min(pool.size(), options.per_round));
      chosen = std::move(pool);
    } else {
      // Candidates outside the training domain are what measuring teaches most about: choose
      // among them too, with intervals widened by their distance, even when the shortlist
      // excludes them.
      if (request.domain == DomainPolicy::kExclude && result.screen.counts.outside_domain > 0) {
        ScreenRequest widened = request;
        widened.domain = DomainPolicy::kWiden;
        chosen = informative_choice(screen(model, stage1, candidates, widened, &measured_now),
                                    request, attempted, options.per_round);
      } else {
        chosen = informative_choice(result.screen, request, attempted, options.per_round);
      }
    }
    if (chosen.empty()) {
      result.exhausted = true;
      break;
    }
  }
  result.seconds = seconds_since(start);
  return result;
}

nlohmann::json refine_round_json(const RefineRound& r) {
  const auto optional = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json();
  };
  nlohmann::json errors = nlohmann::json::object();
  for (std::size_t t = 0; t < kTargetCount; ++t) {
    if (!r.new_errors[t]) continue;
    const Metrics& m = *r.new_errors[t];
    // No intervals, no coverage: null, not 0%.
    errors[std::string(to_string(static_cast<Target>(t)))] = {
        {"n", m.n}, {"mape_pct", m.mape}, {"coverage_pct", optional(m.coverage)}};
  }
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

}  // namespace carb
