// carb screen | carb validate: two-stage screening of a space to a Pareto shortlist, and its
// check against measurements (method.md §5).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>

#include "carb/campaign.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/model.hpp"
#include "carb/screen.hpp"
#include "carb/store.hpp"
#include "domain.hpp"
#include "output.hpp"
#include "screening.hpp"
#include "select.hpp"
#include "verbs.hpp"

namespace carb::cli {

namespace {

constexpr std::size_t kChunk = 65536;  // candidates per stage-1 chunk: bounds memory

double percent(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

std::size_t target_index(const Predictor& predictor, Target target) {
  for (std::size_t t = 0; t < predictor.targets().size(); ++t) {
    if (predictor.targets()[t].name == to_string(target)) return t;
  }
  return std::string::npos;
}

ScreenSetup prepare_screen(const ScreenCommand& command) {
  Predictor model = Predictor::load(command.model);
  if (model.schema() != kArchitectureSchema) {
    throw Error(ErrorCategory::kInput,
                command.model + " was fitted on a table; screening needs a model of a device");
  }
  std::unique_ptr<Predictor> source;
  if (!command.stage1_model.empty()) {
    source = std::make_unique<Predictor>(Predictor::load(command.stage1_model));
  }
  parse_format(command.format);  // a bad --format fails before the work
  if (!parse_rank_method(command.rank))
    throw Error(ErrorCategory::kUsage, "--rank must be ideal or knee");
  std::vector<Budget> budgets =
      command.budget.empty() ? std::vector<Budget>{} : parse_budgets(command.budget);
  std::vector<Target> objectives;
  if (command.objectives.empty()) {
    for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
      if (target_index(model, target) != std::string::npos) objectives.push_back(target);
    }
  } else {
    objectives = parse_objectives(command.objectives);
  }
  // Every objective and budget must be a target the models can predict.
  const auto check_available = [&](const Predictor& predictor, Target target,
                                   const std::string& what) {
    const std::size_t t = target_index(predictor, target);
    if (t == std::string::npos) {
      throw Error(ErrorCategory::kInput, what + " " + std::string(to_string(target)) + ": " +
                                             command.model + " has no such target");
    }
  };
  for (Target target : objectives) check_available(model, target, "objective");
  for (const Budget& budget : budgets) check_available(model, budget.target, "budget on");
  if (command.keep == 0 && command.keep_fraction <= 0) {
    throw Error(ErrorCategory::kUsage, "--keep must be at least 1");
  }

  // Probe availability on one row so an unavailable objective is an error up front.
  {
    const std::vector<float> row(model.feature_names().size(), 1.0F);
    const int batch = 1;
    const auto probe = model.predict(row.data(), 1, &batch);
    std::vector<Target> usable;
    for (Target target : objectives) {
      const auto& p = probe[target_index(model, target)][0];
      if (p.available) {
        usable.push_back(target);
      } else if (!command.objectives.empty()) {
        throw Error(ErrorCategory::kInput, "objective " + std::string(to_string(target)) +
                                               " cannot be predicted: " + p.reason);
      }
    }
    objectives = usable;
    for (const Budget& budget : budgets) {
      const auto& p = probe[target_index(model, budget.target)][0];
      if (!p.available) {
        throw Error(ErrorCategory::kInput, "a budget on " + std::string(to_string(budget.target)) +
                                               ", which the model cannot predict: " + p.reason);
      }
    }
  }
  if (objectives.empty()) throw Error(ErrorCategory::kInput, "no objective the model can predict");
  return ScreenSetup{std::move(model), std::move(source), std::move(budgets),
                     std::move(objectives)};
}

ScreenOutcome screen_once(const ScreenCommand& command, const ScreenSetup& setup,
                          const std::map<std::string, MeasuredValues>* measured) {
  const Predictor& model = setup.model;
  const Predictor* source = setup.source.get();
  const Predictor& ranker = source ? *source : model;
  const std::vector<Budget>& budgets = setup.budgets;
  const std::vector<Target>& objectives = setup.objectives;
  const std::size_t d = objectives.size();
  ScreenOutcome out;
  // Named references, not a structured binding: clang 14 lambdas cannot capture those.
  auto& total = out.total;
  auto& excluded = out.excluded;
  auto& over_budget = out.over_budget;
  auto& rank_pruned = out.rank_pruned;
  auto& overlap_kept = out.overlap_kept;
  auto& expected_lost = out.expected_lost;
  auto& outside_domain = out.outside_domain;
  auto& domain_warning = out.domain_warning;
  auto& pool = out.pool;
  auto& predictions = out.predictions;
  auto& assessed = out.assessed;
  auto& feasible = out.feasible;
  auto& front = out.front;
  auto& ranked = out.ranked;

  // Stage 1: stream the space in chunks; cheap predictions; drop what is confidently over a
  // budget (only with the target device's own model); keep the best by combined rank unless
  // not confidently worse.
  // Per budget: stage-1 predictions meeting it, and the configuration closest to it.
  std::vector<std::uint64_t> meeting(budgets.size(), 0);
  std::vector<std::pair<std::string, double>> closest(
      budgets.size(), {"", std::numeric_limits<double>::infinity()});
  const bool budget_prune = !source && !budgets.empty();
  const std::size_t cols = model.feature_names().size();
  DomainCheck domain(model);
  const auto stage1 = [&](std::vector<Candidate>&& chunk, const FeatureRows& rows) {
    const auto cheap = ranker.predict_cheap(rows.x.data(), chunk.size());
    for (std::size_t i = 0; i < chunk.size(); ++i) {
      Candidate& c = chunk[i];
      domain.add(rows.x.data() + i * cols, c.key);
      c.x.assign(rows.x.begin() + static_cast<long>(i * cols),
                 rows.x.begin() + static_cast<long>((i + 1) * cols));
      c.batch = rows.batch[i];
      bool over = false;
      for (std::size_t b = 0; b < budgets.size(); ++b) {
        const auto& p = cheap[target_index(ranker, budgets[b].target)][i];
        if (budget_prune && p.available && p.low > budgets[b].limit) over = true;
        if (p.available) {
          meeting[b] += p.value <= budgets[b].limit ? 1 : 0;
          if (p.value < closest[b].second) closest[b] = {c.key, p.value};
        }
      }
      if (over && !(measured && measured->count(c.key))) {
        ++over_budget;
        // The chance it was feasible after all, by its own interval (assess_budgets' model).
        FeasibilityOptions cheap_options;
        cheap_options.coverage = ranker.coverage();
        expected_lost +=
            assess_budgets(budgets, gather_predictions(ranker.targets(), cheap, i), cheap_options)
                .probability;
        continue;
      }
      for (std::size_t k = 0; k < d; ++k) {
        const std::size_t t = target_index(ranker, objectives[k]);
        if (t == std::string::npos || !cheap[t][i].available) {
          throw Error(ErrorCategory::kInput, "stage-1 model " + command.stage1_model +
                                                 " cannot rank " +
                                                 std::string(to_string(objectives[k])));
        }
        c.stage1.value[k] = cheap[t][i].value;
        c.stage1.low[k] = cheap[t][i].low;
        c.stage1.high[k] = cheap[t][i].high;
      }
      pool.push_back(std::move(c));
    }
  };
  const auto prune_pool = [&](std::size_t keep) {
    if (pool.size() <= keep) return;
    std::vector<IntervalEstimate> estimates;
    for (const Candidate& c : pool) estimates.push_back(c.stage1);
    const PruneResult result = prune_stage1(estimates, d, keep);
    std::vector<Candidate> kept;
    for (std::size_t i : result.kept) kept.push_back(std::move(pool[i]));
    rank_pruned += result.pruned;
    overlap_kept = result.kept_by_overlap;
    pool = std::move(kept);
  };
  const auto keep_for = [&](std::uint64_t candidates) {
    return command.keep_fraction > 0 ? keep_count(command.keep_fraction, candidates) : command.keep;
  };

  if (!command.selection.spec.empty() && command.selection.sample == 0) {
    const Space space = Space::from_file(command.selection.spec);
    SpaceFeatures features(space);
    std::vector<std::uint64_t> indices;
    std::vector<Candidate> chunk;
    const auto flush = [&] {
      if (indices.empty()) return;
      const FeatureRows rows = feature_rows(space, features, indices);
      stage1(std::move(chunk), rows);
      chunk.clear();
      indices.clear();
      // A fraction is of the whole space, known only at the end: prune in chunks by count.
      if (command.keep_fraction <= 0) prune_pool(command.keep);
    };
    for (std::uint64_t index = 0; index < space.size(); ++index) {
      ++total;
      if (!space.constraints().empty() && !features.violated_constraint(index).empty()) {
        ++excluded;
        continue;
      }
      indices.push_back(index);
      chunk.push_back(Candidate{to_key(space.at(index)), {}, 0, {}});
      if (indices.size() == kChunk) flush();
    }
    flush();
  } else {
    const std::vector<Config> configs = select_configs(command.selection);
    total = configs.size();
    for (std::size_t begin = 0; begin < configs.size(); begin += kChunk) {
      const std::vector<Config> part(
          configs.begin() + static_cast<long>(begin),
          configs.begin() + static_cast<long>(std::min(configs.size(), begin + kChunk)));
      std::vector<Candidate> chunk;
      for (const Config& config : part) chunk.push_back(Candidate{to_key(config), {}, 0, {}});
      stage1(std::move(chunk), feature_rows(part));
      if (command.keep_fraction <= 0) prune_pool(command.keep);
    }
  }
  prune_pool(keep_for(total - excluded));
  outside_domain = domain.outside();
  domain_warning = domain.warning(total - excluded, "candidates", command.model);
  if (total == excluded) {
    throw Error(
        ErrorCategory::kInput,
        "the space is empty: " + (total == 0 ? std::string("it has no configurations")
                                             : "all " + std::to_string(total) +
                                                   " configurations break its constraints"));
  }

  // Stage 2: the target device's full ensemble rescores the survivors.
  std::vector<float> x;
  std::vector<int> batch;
  for (const Candidate& c : pool) {
    x.insert(x.end(), c.x.begin(), c.x.end());
    batch.push_back(c.batch);
  }
  predictions = model.predict(x.data(), pool.size(), batch.data());
  if (measured) {
    // What is measured is known: its values replace the predictions, as points.
    out.measured.assign(pool.size(), false);
    for (std::size_t i = 0; i < pool.size(); ++i) {
      const auto found = measured->find(pool[i].key);
      if (found == measured->end()) continue;
      for (std::size_t t = 0; t < model.targets().size(); ++t) {
        const auto target = parse_target(model.targets()[t].name);
        if (!target || !predictions[t][i].available) continue;
        if (const auto& v = found->second[static_cast<std::size_t>(*target)]) {
          predictions[t][i] = {true, "", *v, *v, *v};
          out.measured[i] = true;
        }
      }
    }
  }
  FeasibilityOptions feasibility_options;
  feasibility_options.coverage = model.coverage();
  feasibility_options.safe = command.safe;
  assessed.resize(pool.size());
  for (std::size_t i = 0; i < pool.size(); ++i) {
    assessed[i] = assess_budgets(budgets, gather_predictions(model.targets(), predictions, i),
                                 feasibility_options);
    if (assessed[i].feasible) feasible.push_back(i);
  }
  if (feasible.empty() && !budgets.empty()) {
    // Say which budget rules everything out, and the configuration that comes closest.
    std::string why;
    for (std::size_t b = 0; b < budgets.size(); ++b) {
      if (meeting[b] > 0) continue;
      const std::string unit(canonical_unit(budgets[b].target));
      why += std::string(why.empty() ? "" : "; ") + std::string(to_string(budgets[b].target)) +
             " <= " + cell_text(budgets[b].limit) + " " + unit + " rules out all " +
             std::to_string(total - excluded) + " configurations (closest: " + closest[b].first +
             " at " + cell_text(closest[b].second) + " " + unit + ")";
    }
    throw Error(
        ErrorCategory::kInput,
        "no configuration meets the budgets" +
            (why.empty() ? std::string(" together (each alone is met by some)") : ": " + why));
  }
  std::vector<ObjectiveValues> values;
  for (std::size_t i : feasible) {
    ObjectiveValues v{};
    for (std::size_t k = 0; k < d; ++k)
      v[k] = predictions[target_index(model, objectives[k])][i].value;
    values.push_back(v);
  }
  front = pareto_front(values, d);
  std::vector<ObjectiveValues> front_values;
  for (std::size_t f : front) front_values.push_back(values[f]);
  ranked = rank_front(front_values, d, *parse_rank_method(command.rank));
  return out;
}

void report_screen(const ScreenCommand& command, const ScreenSetup& setup,
                   const ScreenOutcome& outcome, const nlohmann::json& extra) {
  const Predictor& model = setup.model;
  // Named references, not a structured binding: clang 14 lambdas cannot capture those.
  const auto& total = outcome.total;
  const auto& excluded = outcome.excluded;
  const auto& over_budget = outcome.over_budget;
  const auto& rank_pruned = outcome.rank_pruned;
  const auto& overlap_kept = outcome.overlap_kept;
  const auto& expected_lost = outcome.expected_lost;
  const auto& outside_domain = outcome.outside_domain;
  const auto& domain_warning = outcome.domain_warning;
  const auto& pool = outcome.pool;
  const auto& predictions = outcome.predictions;
  const auto& assessed = outcome.assessed;
  const auto& feasible = outcome.feasible;
  const auto& front = outcome.front;
  // First on stderr: which device the budgets were judged for.
  if (const std::string note = this_machine_note(model, command.model); !note.empty()) {
    std::cerr << note << "\n";
  }
  const auto& ranked = outcome.ranked;
  const auto& measured = outcome.measured;
  const std::vector<Budget>& budgets = setup.budgets;
  const std::vector<Target>& objectives = setup.objectives;
  const bool source = setup.source != nullptr;
  const double tail = (1 - (source ? *setup.source : model).coverage()) / 2;
  const std::size_t cols = model.feature_names().size();

  // The shortlist: the ranked front, best first, at most --top.
  std::vector<std::string> columns = {"rank", "key", "p_feasible"};
  for (const TargetInfo& target : model.targets()) {
    const std::size_t t = &target - model.targets().data();
    if (predictions.empty() || pool.empty() || !predictions[t][0].available) continue;
    const std::string name = target.name + "_" + target.unit;
    columns.insert(columns.end(), {name, name + "_low", name + "_high"});
  }
  if (!measured.empty()) columns.emplace_back("measured");
  const std::size_t shown = std::min(command.top, ranked.size());
  const auto row_of = [&](std::size_t r) {
    const std::size_t i = feasible[front[ranked[r].index]];
    std::vector<Cell> row = {static_cast<std::int64_t>(r + 1), pool[i].key,
                             assessed[i].probability};
    for (std::size_t t = 0; t < model.targets().size(); ++t) {
      if (!predictions[t][i].available) continue;
      row.insert(row.end(),
                 {predictions[t][i].value, predictions[t][i].low, predictions[t][i].high});
    }
    if (!measured.empty()) row.emplace_back(static_cast<bool>(measured[i]));
    return row;
  };
  auto writer = make_row_writer(parse_format(command.format), columns, std::cout);
  for (std::size_t r = 0; r < shown; ++r) writer->row(row_of(r));
  writer->finish();
  std::cout.flush();

  const std::uint64_t candidates = total - excluded;
  std::cerr << "screened " << total << " configurations (" << excluded
            << " outside the space's constraints)\n"
            << "  stage 1 ("
            << (source ? "source model " + command.stage1_model : "cheapest member")
            << "): " << over_budget << " confidently over budget, " << rank_pruned
            << " confidently outranked, " << pool.size() << " kept (" << overlap_kept
            << " only because their intervals overlap the top)\n"
            << "  pruned " << (over_budget + rank_pruned) << " of " << candidates << " ("
            << percent(over_budget + rank_pruned, candidates)
            << "%); expected feasible candidates among the over-budget ones, by their own "
               "intervals: "
            << expected_lost << "; an outranked one beats the kept top only if an interval "
            << "missed (probability <= " << tail << " per interval)\n"
            << "  stage 2 (full ensemble): " << feasible.size() << " feasible"
            << (command.safe ? " (interval upper ends within budget)" : "") << ", Pareto front "
            << front.size() << " over " <<
      [&] {
        std::string names;
        for (Target t : objectives)
          names += (names.empty() ? "" : ", ") + std::string(to_string(t));
        return names;
      }() << "; shortlist "
            << shown << "\n";
  if (!domain_warning.empty()) std::cerr << domain_warning << "\n";

  // The whole ranked front with features, as CSV and JSON files.
  if (!command.output.empty()) {
    std::ofstream file(command.output);
    if (!file) throw Error(ErrorCategory::kRuntime, command.output + ": cannot write");
    std::vector<std::string> all = columns;
    all.insert(all.end(), model.feature_names().begin(), model.feature_names().end());
    auto csv = make_row_writer(Format::kCsv, all, file);
    for (std::size_t r = 0; r < ranked.size(); ++r) {
      std::vector<Cell> row = row_of(r);
      const std::size_t i = feasible[front[ranked[r].index]];
      for (float f : pool[i].x) row.emplace_back(static_cast<double>(f));
      csv->row(row);
    }
    csv->finish();
    std::cerr << "wrote " << command.output << " (" << ranked.size() << " rows)\n";
  }
  // Every candidate stage 2 scored: the feasible set around the front (the report draws it).
  if (!command.candidates_output.empty()) {
    std::ofstream file(command.candidates_output);
    if (!file) throw Error(ErrorCategory::kRuntime, command.candidates_output + ": cannot write");
    std::vector<std::string> candidate_columns = {"key", "feasible", "p_feasible", "front_rank"};
    candidate_columns.insert(candidate_columns.end(), columns.begin() + 3, columns.end());
    std::vector<std::size_t> front_rank(pool.size(), 0);
    for (std::size_t r = 0; r < ranked.size(); ++r)
      front_rank[feasible[front[ranked[r].index]]] = r + 1;
    auto csv = make_row_writer(Format::kCsv, candidate_columns, file);
    for (std::size_t i = 0; i < pool.size(); ++i) {
      std::vector<Cell> row = {
          pool[i].key, assessed[i].feasible, assessed[i].probability,
          front_rank[i] > 0 ? Cell(static_cast<std::int64_t>(front_rank[i])) : Cell(std::string())};
      for (std::size_t t = 0; t < model.targets().size(); ++t) {
        if (!predictions[t][i].available) continue;
        row.insert(row.end(),
                   {predictions[t][i].value, predictions[t][i].low, predictions[t][i].high});
      }
      if (!measured.empty()) row.emplace_back(static_cast<bool>(measured[i]));
      csv->row(row);
    }
    csv->finish();
    std::cerr << "wrote " << command.candidates_output << " (" << pool.size() << " rows)\n";
  }
  if (!command.json_output.empty()) {
    nlohmann::json shortlist = nlohmann::json::array();
    for (std::size_t r = 0; r < ranked.size(); ++r) {
      const std::size_t i = feasible[front[ranked[r].index]];
      nlohmann::json entry = {{"rank", r + 1},
                              {"key", pool[i].key},
                              {"p_feasible", assessed[i].probability},
                              {"score", ranked[r].score}};
      if (!measured.empty()) entry["measured"] = static_cast<bool>(measured[i]);
      for (std::size_t t = 0; t < model.targets().size(); ++t) {
        if (!predictions[t][i].available) continue;
        entry[model.targets()[t].name] = {{"value", predictions[t][i].value},
                                          {"low", predictions[t][i].low},
                                          {"high", predictions[t][i].high},
                                          {"unit", model.targets()[t].unit}};
      }
      nlohmann::json features = nlohmann::json::object();
      for (std::size_t f = 0; f < cols; ++f) features[model.feature_names()[f]] = pool[i].x[f];
      entry["features"] = std::move(features);
      shortlist.push_back(std::move(entry));
    }
    nlohmann::json budgets_json = nlohmann::json::array();
    for (const Budget& b : budgets) {
      budgets_json.push_back({{"target", to_string(b.target)},
                              {"limit", b.limit},
                              {"unit", canonical_unit(b.target)},
                              {"strict", b.strict}});
    }
    nlohmann::json out = {
        {"model", command.model},
        {"stage1_model", command.stage1_model.empty() ? command.model : command.stage1_model},
        {"budgets", budgets_json},
        {"safe", command.safe},
        {"counts",
         {{"configurations", total},
          {"outside_constraints", excluded},
          {"stage1_over_budget", over_budget},
          {"stage1_expected_feasible_lost", expected_lost},
          {"stage1_outranked", rank_pruned},
          {"stage2_scored", pool.size()},
          {"stage1_kept_by_overlap", overlap_kept},
          {"outside_training_domain", outside_domain},
          {"feasible", feasible.size()},
          {"front", front.size()}}},
        {"shortlist", shortlist}};
    for (const auto& [name, value] : extra.items()) out[name] = value;
    std::ofstream file(command.json_output);
    if (!file) throw Error(ErrorCategory::kRuntime, command.json_output + ": cannot write");
    file << out.dump(1) << "\n";
    std::cerr << "wrote " << command.json_output << "\n";
  }
}

std::map<std::string, MeasuredValues> measured_by_key(const Store& store,
                                                      const std::string& device) {
  std::map<std::string, MeasuredValues> out;
  std::string fingerprint = device;
  if (fingerprint.empty()) {
    const auto devices = store.devices();
    if (devices.size() > 1) {
      throw Error(ErrorCategory::kUsage, store.path() + " holds " + std::to_string(devices.size()) +
                                             " devices; choose one with --device");
    }
    if (!devices.empty()) fingerprint = devices.front().fingerprint;
  }
  for (const MeasuredTargets& m : combine_repeated(store.ok_measurements(fingerprint))) {
    auto& values = out[m.configuration_key];
    if (m.engine_peak_bytes) values[0] = static_cast<double>(*m.engine_peak_bytes);
    values[1] = m.energy_j;
    values[2] = m.latency_ms;
  }
  return out;
}

bool meets(const std::vector<Budget>& budgets, const MeasuredValues& v) {
  for (const Budget& b : budgets) {
    const auto& value = v[static_cast<std::size_t>(b.target)];
    if (!value) return false;
    if (b.strict ? !(*value < b.limit) : !(*value <= b.limit)) return false;
  }
  return true;
}

void run_screen(const ScreenCommand& command) {
  ScreenSetup setup = prepare_screen(command);
  if (command.refine > 0) {
    run_refine(command, setup);
  } else {
    report_screen(command, setup, screen_once(command, setup));
  }
}

// --- carb validate --------------------------------------------------------------------------

namespace {

struct ValidateCommand {
  std::string shortlist;
  std::string db;
  std::string device;
  std::string budget;
  bool measure = false;
  std::string measure_device = "cpu";
  std::string model;
  Selection space;
  std::string format = "table";
};

void run_validate(const ValidateCommand& command) {
  const CsvTable table = read_csv(command.shortlist);
  const std::size_t key_column = table.column("key");
  std::vector<std::string> keys;
  for (const auto& row : table.rows) keys.push_back(row[key_column]);
  if (command.measure) {
    CampaignOptions options;
    options.db_path = command.db;
    options.device = command.measure_device;
    options.name = "validate " + command.shortlist;
    options.spec_text = read_file(command.shortlist, "shortlist");
    options.worker = {"/proc/self/exe", {"__worker"}};
    std::vector<Config> configs;
    for (const std::string& key : keys) configs.push_back(parse_key(key));
    const CampaignSummary summary = run_campaign(configs, options, {});
    std::int64_t measured_now = 0;
    for (const auto& [status, count] : summary.measured) measured_now += count;
    std::cerr << "measured " << measured_now << " of " << configs.size()
              << " shortlisted configurations now (" << summary.already_done
              << " already measured) into " << command.db << "\n";
  }
  const Store store = Store::open(command.db);
  const auto measured = measured_by_key(store, command.device);
  const std::vector<Budget> budgets =
      command.budget.empty() ? std::vector<Budget>{} : parse_budgets(command.budget);

  auto writer = make_row_writer(
      parse_format(command.format),
      {"target", "n", "mape_pct", "median_error_pct", "within10_pct", "coverage_pct", "spearman"},
      std::cout);
  for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
    std::string prefix = std::string(to_string(target)) + "_" + std::string(canonical_unit(target));
    if (std::find(table.header.begin(), table.header.end(), prefix) == table.header.end()) continue;
    const std::size_t value_column = table.column(prefix);
    const std::size_t low_column = table.column(prefix + "_low");
    const std::size_t high_column = table.column(prefix + "_high");
    std::vector<double> truth, predicted, low, high;
    for (std::size_t r = 0; r < table.rows.size(); ++r) {
      const auto found = measured.find(keys[r]);
      if (found == measured.end() || !found->second[static_cast<std::size_t>(target)]) continue;
      truth.push_back(*found->second[static_cast<std::size_t>(target)]);
      predicted.push_back(std::stod(table.rows[r][value_column]));
      low.push_back(std::stod(table.rows[r][low_column]));
      high.push_back(std::stod(table.rows[r][high_column]));
    }
    if (truth.empty()) continue;
    const Metrics m = score(truth, predicted, &low, &high);
    std::vector<double> errors;
    for (std::size_t i = 0; i < truth.size(); ++i) {
      errors.push_back(100 * std::abs(predicted[i] - truth[i]) / truth[i]);
    }
    std::nth_element(errors.begin(), errors.begin() + static_cast<long>(errors.size() / 2),
                     errors.end());
    writer->row({std::string(to_string(target)), static_cast<std::int64_t>(m.n), m.mape,
                 errors[errors.size() / 2], m.within10, *m.coverage, m.spearman});
  }
  writer->finish();
  std::size_t found = 0;
  for (const std::string& key : keys) found += measured.count(key);
  std::cerr << found << " of " << keys.size() << " shortlisted configurations have measurements in "
            << command.db << "\n";

  // Budget classification of every measured configuration the model can score.
  if (!budgets.empty() && !command.model.empty()) {
    const Predictor model = Predictor::load(command.model);
    std::vector<Config> configs;
    std::vector<std::string> config_keys;
    if (!command.space.spec.empty() || !command.space.keys_file.empty()) {
      for (const Config& c : select_configs(command.space)) {
        if (measured.count(to_key(c))) configs.push_back(c);
      }
    } else {
      for (const auto& [key, values] : measured) configs.push_back(parse_key(key));
    }
    const FeatureRows rows = feature_rows(configs);
    const auto predictions = model.predict(rows.x.data(), configs.size(), rows.batch.data());
    FeasibilityOptions options;
    options.coverage = model.coverage();
    std::size_t correct = 0, false_accept = 0, false_reject = 0, truly_feasible = 0, accepted = 0;
    std::vector<ObjectiveValues> true_values;
    std::vector<std::string> true_keys;
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const auto& truth = measured.at(to_key(configs[i]));
      const bool actual = meets(budgets, truth);
      const bool predicted =
          assess_budgets(budgets, gather_predictions(model.targets(), predictions, i), options)
              .feasible;
      correct += actual == predicted ? 1 : 0;
      false_accept += predicted && !actual ? 1 : 0;
      false_reject += !predicted && actual ? 1 : 0;
      truly_feasible += actual ? 1 : 0;
      accepted += predicted ? 1 : 0;
    }
    std::cerr << "budget classification over " << configs.size()
              << " measured configurations: accuracy " << percent(correct, configs.size())
              << "%, false accepts " << percent(false_accept, configs.size()) << "% of all ("
              << false_accept << " of " << accepted << " accepted), false rejects "
              << percent(false_reject, configs.size()) << "% (" << false_reject << " of "
              << truly_feasible << " truly feasible)\n";
  }

  // Pareto recall and precision against the measured front of the whole space.
  if (!command.space.spec.empty() || !command.space.keys_file.empty()) {
    const std::vector<Config> space = select_configs(command.space);
    std::vector<std::string> missing;
    for (const Config& c : space) {
      if (!measured.count(to_key(c))) missing.push_back(to_key(c));
    }
    if (!missing.empty()) {
      std::cerr << "Pareto recall/precision need every configuration of the space measured: "
                << missing.size() << " of " << space.size() << " are not (e.g. " << missing.front()
                << ")\n";
      return;
    }
    std::vector<Target> objectives;
    for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
      const std::string column =
          std::string(to_string(target)) + "_" + std::string(canonical_unit(target));
      if (std::find(table.header.begin(), table.header.end(), column) != table.header.end()) {
        objectives.push_back(target);
      }
    }
    std::vector<ObjectiveValues> values;
    std::vector<std::string> feasible_keys;
    for (const Config& c : space) {
      const auto& truth = measured.at(to_key(c));
      if (!meets(budgets, truth)) continue;
      ObjectiveValues v{};
      bool complete = true;
      for (std::size_t k = 0; k < objectives.size(); ++k) {
        const auto& value = truth[static_cast<std::size_t>(objectives[k])];
        if (!value) complete = false;
        v[k] = value.value_or(0);
      }
      if (!complete) continue;
      values.push_back(v);
      feasible_keys.push_back(to_key(c));
    }
    const auto front = pareto_front(values, objectives.size());
    std::size_t hits = 0;
    for (std::size_t f : front) {
      hits += std::count(keys.begin(), keys.end(), feasible_keys[f]) > 0 ? 1 : 0;
    }
    std::cerr << "true Pareto front (measured, within budget): " << front.size()
              << " configurations; shortlist recall " << percent(hits, front.size())
              << "%, precision " << percent(hits, keys.size()) << "% (" << hits
              << " shortlisted configurations are on it)\n";
  }
}

}  // namespace

void add_screen_verbs(CLI::App& app) {
  auto screen = std::make_shared<ScreenCommand>();
  CLI::App* verb = app.add_subcommand(
      "screen", "two-stage screening of a space to a ranked Pareto shortlist under budgets");
  verb->add_option("--model", screen->model, "the target device's model")->required();
  verb->add_option("--stage1-model", screen->stage1_model,
                   "a source device's model to rank with in stage 1 (default: the target "
                   "model's cheapest member)");
  verb->add_option("--spec", screen->selection.spec, "design-space spec (YAML)");
  verb->add_option("--keys", screen->selection.keys_file, "or a file of configuration keys");
  verb->add_option("--sample", screen->selection.sample, "screen N configurations of the spec");
  verb->add_option("--seed", screen->selection.seed, "seed of the sample");
  verb->add_option("--budget", screen->budget, "e.g. 'energy<=75J,latency<=20ms,memory<=2GiB'");
  verb->add_option("--objectives", screen->objectives,
                   "targets to minimise, e.g. latency,memory (default: all the model has)");
  verb->add_option("--keep", screen->keep, "stage 1 keeps the best K by combined rank (2000)");
  verb->add_option("--keep-fraction", screen->keep_fraction, "or a fraction of the candidates");
  verb->add_flag("--safe", screen->safe,
                 "feasible only when the interval's upper end meets "
                 "every budget");
  verb->add_option("--rank", screen->rank, "order of the front: ideal (default) or knee");
  verb->add_option("--top", screen->top, "rows to print (20); the files hold the whole front");
  verb->add_option("-o,--output", screen->output, "the ranked front as CSV, with features");
  verb->add_option("--json", screen->json_output, "the ranked front and the counts as JSON");
  verb->add_option("--candidates", screen->candidates_output,
                   "every candidate stage 2 scored, feasible or not, as CSV (for carb report)");
  verb->add_option("--format", screen->format, "table, csv or json");
  verb->add_option("--refine", screen->refine,
                   "active profiling: measure N configurations per round that could most change "
                   "the shortlist, refit, screen again");
  verb->add_option("--rounds", screen->rounds, "refine: rounds (3)");
  verb->add_option("--refine-time", screen->refine_time,
                   "refine: no round starts after this long (e.g. 20m)");
  verb->add_option("--db", screen->db,
                   "refine: the model's campaign database; new measurements join it");
  verb->add_option("--device", screen->device, "refine: device to measure on (cpu)");
  verb->add_option("--replay", screen->replay,
                   "refine: take each chosen configuration's measurement from this finished "
                   "campaign instead of measuring (evaluates the acquisition; writes nothing)");
  verb->add_option("--acquire", screen->acquire,
                   "refine: informative (default) or random (the baseline)");
  verb->add_option("--refit-output", screen->refit_output,
                   "refine: the refitted model (default MODEL.refined.json)");
  verb->add_option("--refine-seed", screen->seed, "refine: seed of the refits and of random (1)");
  verb->add_option("--threads", screen->threads, "refine: XGBoost threads (0: all cores)");
  verb->add_option("--target-ci", screen->protocol.target_relative_ci,
                   "refine: relative CI half-width to stop timing at (0.01)");
  verb->add_option("--max-time", screen->protocol.max_time_s, "refine: timed seconds, at most");
  verb->callback([screen] {
    if (screen->selection.spec.empty() == screen->selection.keys_file.empty()) {
      throw Error(ErrorCategory::kUsage, "give either --spec or --keys");
    }
    run_screen(*screen);
  });

  auto validate = std::make_shared<ValidateCommand>();
  CLI::App* vverb =
      app.add_subcommand("validate", "check a shortlist against measurements (or measure it now)");
  vverb->add_option("--shortlist", validate->shortlist, "CSV written by carb screen -o")
      ->required();
  vverb->add_option("--db", validate->db, "database of measurements")->required();
  vverb->add_option("--device", validate->device, "device fingerprint in the database");
  vverb->add_flag("--measure", validate->measure, "profile the shortlist now into --db first");
  vverb->add_option("--measure-device", validate->measure_device, "device to measure on (cpu)");
  vverb->add_option("--budget", validate->budget, "the budgets screening used");
  vverb->add_option("--model", validate->model,
                    "with --budget: classify every measured configuration");
  vverb->add_option("--spec", validate->space.spec, "the screened space: Pareto recall/precision");
  vverb->add_option("--keys", validate->space.keys_file, "or the screened keys");
  vverb->add_option("--format", validate->format, "table, csv or json");
  vverb->callback([validate] { run_validate(*validate); });
}

}  // namespace carb::cli
