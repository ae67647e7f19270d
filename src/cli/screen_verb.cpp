// carb screen | carb validate: two-stage screening of a space to a ranked Pareto shortlist over a
// value and the costs (the screening library, carb/screening.hpp), active profiling
// (carb/refine.hpp), and the shortlist's check against measurements (method.md §5).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "carb/campaign.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/model.hpp"
#include "carb/refine.hpp"
#include "carb/screen.hpp"
#include "carb/screening.hpp"
#include "carb/statistics.hpp"
#include "carb/store.hpp"
#include "domain.hpp"
#include "output.hpp"
#include "screening.hpp"
#include "select.hpp"
#include "verbs.hpp"

namespace carb::cli {

namespace {

// The objective columns' names: each cost as TARGET_UNIT, the value by its name.
std::string value_column(const ScreenResult& result) {
  return result.value ? "value_" + result.value->name : "";
}

}  // namespace

ScreenSetup prepare_screen(const ScreenCommand& command) {
  if (command.selection.spec.empty() == command.selection.keys_file.empty()) {
    throw Error(ErrorCategory::kUsage, "give either --spec or --keys");
  }
  Predictor model = Predictor::load(command.model);
  std::unique_ptr<Predictor> stage1;
  if (!command.stage1_model.empty()) {
    stage1 = std::make_unique<Predictor>(Predictor::load(command.stage1_model));
  }
  std::unique_ptr<Predictor> kernel_model;
  if (!command.kernel_model.empty()) {
    kernel_model = std::make_unique<Predictor>(Predictor::load(command.kernel_model));
  }
  parse_format(command.format);  // a bad --format fails before the work
  ScreenRequest request = screen_request(command.options, model, stage1.get(), kernel_model.get());

  ScreenSetup setup{std::move(model),   std::move(stage1), std::move(kernel_model),
                    std::move(request), nullptr,           {}};
  if (!command.selection.spec.empty() && command.selection.sample == 0) {
    setup.space = std::make_unique<Space>(Space::from_file(command.selection.spec));
    setup.candidates.space = setup.space.get();
  } else {
    setup.candidates.configs = select_configs(command.selection);
  }
  return setup;
}

void report_screen(const ScreenCommand& command, const ScreenSetup& setup,
                   const ScreenResult& result, const nlohmann::json& extra) {
  const Predictor& model = setup.model;
  const ScreenCounts& counts = result.counts;
  const auto& pool = result.pool;
  const auto& predictions = result.predictions;
  // First on stderr: which device the budgets were judged for.
  if (const std::string note = this_machine_note(model, command.model); !note.empty()) {
    std::cerr << note << "\n";
  }
  if (setup.kernel_model != nullptr) {
    // Which device and host timed the kernels, against those that measured the model's data.
    const Predictor& kernels = *setup.kernel_model;
    const std::string what = "the kernel timings of " + command.kernel_model;
    std::string note;
    if (kernels.device_fingerprint().empty()) {
      note = "note: " + what +
             " do not record their device (a carb before they did timed them): they are taken "
             "to be of " +
             model.device_name() + ", " + command.model + "'s device";
    } else if (kernels.device_fingerprint() != model.device_fingerprint()) {
      note = "note: " + what + " ran on " + kernels.device_name() + ", not on " + command.model +
             "'s device (" + model.device_name() +
             ", another device fingerprint): stage 2's latency is of the kernels' device, "
             "memory and energy of the model's";
    } else {
      note = host_difference(model, command.model, kernels.device_instances(), what);
    }
    if (!note.empty()) std::cerr << note << "\n";
  }
  const bool source = setup.stage1 != nullptr;
  const double tail = (1 - (source ? *setup.stage1 : model).coverage()) / 2;

  // The shortlist: the ranked front, best first, at most --top.
  std::vector<std::string> columns = {"rank", "key"};
  // Imported networks' keys name a hash: a column names the architecture beside it.
  const bool named = std::any_of(pool.begin(), pool.end(),
                                 [](const auto& c) { return parse_key(c.key).imported(); });
  if (named) columns.emplace_back("architecture");
  if (result.value) columns.push_back(value_column(result));
  columns.emplace_back("p_feasible");
  std::vector<std::size_t> shown_targets;
  for (std::size_t t = 0; t < result.targets.size(); ++t) {
    if (predictions.empty() || pool.empty() || !predictions[t][0].available) continue;
    shown_targets.push_back(t);
    const std::string name = result.targets[t].column();
    columns.insert(columns.end(), {name, name + "_low", name + "_high"});
  }
  const bool show_domain = result.domain_policy != DomainPolicy::kExclude;
  if (show_domain) columns.emplace_back("inside_domain");
  if (!result.measured.empty()) columns.emplace_back("measured");
  const std::size_t shown = std::min(command.top, result.ranked.size());
  const auto cells_of = [&](std::size_t i) {
    std::vector<Cell> row = {pool[i].key};
    if (named) row.push_back(or_null(architecture_name(parse_key(pool[i].key))));
    // Screening refuses a candidate without a value, so null here would be a defect, shown.
    if (result.value) row.push_back(or_null(pool[i].value));
    row.emplace_back(result.assessed[i].probability);
    for (std::size_t t : shown_targets) {
      row.insert(row.end(),
                 {predictions[t][i].value, predictions[t][i].low, predictions[t][i].high});
    }
    if (show_domain) row.emplace_back(pool[i].domain.inside);
    if (!result.measured.empty()) row.emplace_back(static_cast<bool>(result.measured[i]));
    return row;
  };
  const auto ranked_row = [&](std::size_t r) {
    std::vector<Cell> row = {static_cast<std::int64_t>(r + 1)};
    const std::vector<Cell> rest = cells_of(result.ranked_pool_index(r));
    row.insert(row.end(), rest.begin(), rest.end());
    return row;
  };
  auto writer = make_row_writer(parse_format(command.format), columns, std::cout);
  for (std::size_t r = 0; r < shown; ++r) writer->row(ranked_row(r));
  writer->finish();
  std::cout.flush();

  std::string objectives = result.value ? result.value->name + " (up), " : "";
  for (std::size_t k = 0; k < result.costs.size(); ++k) {
    objectives += (k == 0 ? "" : ", ") + std::string(to_string(result.costs[k]));
  }
  objectives += result.value ? " (down)" : "";
  const std::uint64_t candidates = counts.configurations - counts.outside_constraints;
  std::cerr << "screened " << counts.configurations << " configurations ("
            << counts.outside_constraints << " outside the space's constraints)\n"
            << "  stage 1 ("
            << (source ? "source model " + command.stage1_model : "cheapest member")
            << "): " << counts.over_budget << " confidently over budget, " << counts.outranked
            << " confidently outranked, " << pool.size() << " kept (" << counts.overlap_kept
            << " only because their intervals overlap the top)\n"
            << "  pruned " << (counts.over_budget + counts.outranked) << " of " << candidates
            << " (" << percent(counts.over_budget + counts.outranked, candidates)
            << "%); expected feasible candidates among the over-budget ones, by their own "
               "intervals: "
            << counts.expected_feasible_lost << "; an outranked one beats the kept top only if "
            << "an interval missed (probability <= " << tail << " per interval)\n";
  if (counts.outside_domain > 0) {
    std::cerr << "  training domain: " << counts.outside_domain << " of "
              << candidates - counts.over_budget
              << " candidates (those not confidently over budget) lie outside the data "
              << command.model << " was fitted on (first: " << result.first_outside << "): "
              << (result.domain_policy == DomainPolicy::kExclude
                      ? "excluded, as their predictions extrapolate"
                  : result.domain_policy == DomainPolicy::kWiden
                      ? "kept with intervals widened by their distance, feasible only when the "
                        "upper ends meet the budgets (--outside-domain exclude leaves them out)"
                      : "kept as predicted: their predictions extrapolate")
              << "\n";
  }
  std::cerr << "  stage 2 (full ensemble): " << result.feasible.size() << " feasible"
            << (result.safe ? " (interval upper ends within budget)" : "") << ", Pareto front "
            << result.front.size() << " over " << objectives << ", ranked by "
            << to_string(result.rank) << "; shortlist " << shown << "\n";
  if (result.value) std::cerr << "  value: " << result.value->describe() << "\n";
  if (counts.latency_by_kernels > 0) {
    std::cerr << "  latency: " << counts.latency_by_kernels << " of " << pool.size()
              << " stage-2 candidates from the kernel model " << command.kernel_model
              << " (their planned kernels' times, predicted and summed, on the host whose "
                 "kernel timings it was fitted on)\n";
  }
  if (counts.memory_planned > 0) {
    std::cerr << "  memory: " << counts.memory_planned << " of " << pool.size()
              << " stage-2 candidates from the engine's own plan on this machine ("
              << result.memory_engine
              << "), exact: those whose interval held a memory budget, and the front's\n";
  }

  // The whole ranked front with features, as CSV.
  if (!command.output.empty()) {
    std::ofstream file(command.output);
    if (!file) throw Error(ErrorCategory::kRuntime, command.output + ": cannot write");
    std::vector<std::string> all = columns;
    all.insert(all.end(), model.feature_names().begin(), model.feature_names().end());
    auto csv = make_row_writer(Format::kCsv, all, file);
    for (std::size_t r = 0; r < result.ranked.size(); ++r) {
      std::vector<Cell> row = ranked_row(r);
      for (float f : pool[result.ranked_pool_index(r)].x) row.emplace_back(static_cast<double>(f));
      csv->row(row);
    }
    csv->finish();
    std::cerr << "wrote " << command.output << " (" << result.ranked.size() << " rows)\n";
  }
  // Every candidate stage 2 scored: the feasible set around the front.
  if (!command.candidates_output.empty()) {
    std::ofstream file(command.candidates_output);
    if (!file) throw Error(ErrorCategory::kRuntime, command.candidates_output + ": cannot write");
    std::vector<std::string> candidate_columns = {"key", "feasible", "front_rank"};
    candidate_columns.insert(candidate_columns.end(), columns.begin() + 2, columns.end());
    const std::vector<std::size_t> ranks = result.front_ranks();
    auto csv = make_row_writer(Format::kCsv, candidate_columns, file);
    for (std::size_t i = 0; i < pool.size(); ++i) {
      std::vector<Cell> row = {
          pool[i].key, result.assessed[i].feasible,
          ranks[i] > 0 ? Cell(static_cast<std::int64_t>(ranks[i])) : Cell(kNull)};
      const std::vector<Cell> rest = cells_of(i);
      row.insert(row.end(), rest.begin() + 1, rest.end());
      csv->row(row);
    }
    csv->finish();
    std::cerr << "wrote " << command.candidates_output << " (" << pool.size() << " rows)\n";
  }
  if (!command.json_output.empty()) {
    nlohmann::json out = screen_result_json(result, model.feature_names());
    out["model"] = command.model;
    out["stage1_model"] = command.stage1_model.empty() ? command.model : command.stage1_model;
    out["kernel_model"] = command.kernel_model.empty() ? nlohmann::json(nullptr)
                                                       : nlohmann::json(command.kernel_model);
    for (const auto& [name, value] : extra.items()) out[name] = value;
    std::ofstream file(command.json_output);
    if (!file) throw Error(ErrorCategory::kRuntime, command.json_output + ": cannot write");
    file << out.dump(1) << "\n";
    std::cerr << "wrote " << command.json_output << "\n";
  }
}

namespace {

// Prints one round of active profiling on stderr.
void print_round(const RefineRound& round, const ScreenCommand& command) {
  std::cerr << "refine round " << round.round << ": ";
  if (round.round > 0) {
    std::cerr << "measured " << round.measured << " of " << round.acquired << " chosen ("
              << (command.replay.empty() ? "on " + command.device
                                         : "replayed from " + command.replay)
              << ", " << cell_text(round.measure_s) << " s), refitted on " << round.training_rows
              << " (" << cell_text(round.fit_s) << " s); ";
  } else {
    std::cerr << "the model as given, " << round.training_rows << " measured; ";
  }
  std::cerr << "front " << round.front << " (" << round.front_measured << " measured, "
            << round.front_meets << " of them within budgets)";
  if (round.recall) {
    std::cerr << ", recall " << cell_text(*round.recall) << "%, precision "
              << cell_text(*round.precision) << "%; budget decisions " << cell_text(*round.accuracy)
              << "% right (" << round.false_accepts << " false accepts, " << round.false_rejects
              << " false rejects of " << round.truly_feasible << " truly feasible)";
  }
  std::cerr << "\n";
}

// The rounds as a table on stderr.
void print_rounds(const RefineResult& result) {
  std::vector<std::string> columns = {"round", "measured", "training_rows"};
  std::vector<Target> scored;
  for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
    for (const RefineRound& round : result.rounds) {
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
  const bool truth = result.true_front.has_value();
  if (truth) {
    columns.insert(columns.end(), {"recall_pct", "precision_pct", "budget_acc_pct", "false_accepts",
                                   "false_rejects"});
  }
  auto writer = make_row_writer(Format::kTable, columns, std::cerr);
  const auto cell = [](const std::optional<double>& v) { return v ? Cell(*v) : Cell("-"); };
  for (const RefineRound& round : result.rounds) {
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
    if (truth) {
      row.push_back(cell(round.recall));
      row.push_back(cell(round.precision));
      row.push_back(cell(round.accuracy));
      row.emplace_back(static_cast<std::int64_t>(round.false_accepts));
      row.emplace_back(static_cast<std::int64_t>(round.false_rejects));
    }
    writer->row(row);
  }
  writer->finish();
}

void run_refine(const ScreenCommand& command, ScreenSetup& setup) {
  if (command.db.empty()) {
    throw Error(ErrorCategory::kUsage,
                "--refine needs --db: the campaign the model was fitted on, which the new "
                "measurements join");
  }
  if (command.rounds < 1) throw Error(ErrorCategory::kUsage, "--rounds must be at least 1");
  const auto acquisition = parse_acquisition(command.acquire);
  if (!acquisition) throw Error(ErrorCategory::kUsage, "--acquire must be informative or random");
  RefineOptions options;
  options.per_round = command.refine;
  options.rounds = command.rounds;
  if (!command.refine_time.empty()) options.time_budget_s = parse_duration_s(command.refine_time);
  options.db = command.db;
  options.device = command.device;
  options.replay = command.replay;
  options.acquisition = *acquisition;
  options.seed = command.seed;
  options.threads = command.threads;
  options.protocol = command.protocol;
  options.worker = {"/proc/self/exe", {"__worker"}};
  options.name = command.model;
  options.refit_output = command.refit_output;
  if (options.refit_output.empty()) {
    std::filesystem::path path(command.model);
    options.refit_output = (path.parent_path() / (path.stem().string() + ".refined.json")).string();
  }
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  options.progress = [terminal](const CampaignProgress& progress) {
    print_progress(progress, terminal);
  };
  options.round_done = [&](const RefineRound& round) {
    if (terminal && round.round > 0 && command.replay.empty()) std::cerr << "\n";
    print_round(round, command);
  };
  const RefineResult result =
      refine(setup.model, setup.stage1.get(), setup.candidates, setup.request, options);
  if (result.exhausted) std::cerr << "refine: every candidate is measured already\n";
  print_rounds(result);
  std::cerr << "refitted model: " << options.refit_output << " ("
            << (command.replay.empty() ? "measurements in " + command.db
                                       : "replayed measurements from " + command.replay)
            << ", acquisition " << command.acquire << ", " << cell_text(result.seconds) << " s)\n";
  nlohmann::json rounds = nlohmann::json::array();
  for (const RefineRound& round : result.rounds) rounds.push_back(refine_round_json(round));
  report_screen(
      command, setup, result.screen,
      {{"refine",
        {{"acquire", command.acquire},
         {"replay", command.replay},
         {"refit_model", options.refit_output},
         {"true_front", result.true_front ? nlohmann::json(*result.true_front) : nlohmann::json()},
         {"rounds", rounds}}}});
}

void run_screen(const ScreenCommand& command) {
  ScreenSetup setup = prepare_screen(command);
  if (command.refine > 0) {
    run_refine(command, setup);
  } else {
    const ScreenResult result =
        screen(setup.model, setup.stage1.get(), setup.candidates, setup.request);
    report_screen(command, setup, result);
  }
}

// --- carb validate --------------------------------------------------------------------------

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

// A shortlist as validate reads it: from carb screen's JSON result or its -o CSV.
struct Shortlist {
  std::vector<std::string> keys;  // ranked
  std::vector<Target> costs;      // the front's costs
  std::optional<ValueObjective> value;
  std::vector<Budget> budgets;  // as the screening used them (JSON only)
  bool safe = false;            // feasible only with interval upper ends in budget (JSON only)
  std::optional<DomainPolicy> domain;  // the screening's (JSON only)
  // Per Target: each key's prediction (available = false where the shortlist has none).
  std::array<std::vector<TargetPrediction>, kTargetCount> predictions;
};

Shortlist read_shortlist(const std::string& path) {
  Shortlist out;
  std::ifstream probe(path);
  if (!probe) throw Error(ErrorCategory::kInput, path + ": cannot open the shortlist");
  char first = 0;
  probe >> first;
  if (first == '{') {
    nlohmann::json j;
    try {
      probe.seekg(0);
      j = nlohmann::json::parse(probe);
    } catch (const nlohmann::json::exception& e) {
      throw Error(ErrorCategory::kInput, path + ": not JSON: " + e.what());
    }
    const ScreenResult result = screen_result_from_json(j, path);
    out.costs = result.costs;
    out.budgets = result.budgets;
    out.safe = result.safe;
    out.domain = result.domain_policy;
    if (result.value) {
      out.value = result.value->analytic()
                      ? analytic_value(result.value->name)
                      : read_value_file(result.value->file, result.value->name);
    }
    for (std::size_t r = 0; r < result.ranked.size(); ++r) {
      const std::size_t i = result.ranked_pool_index(r);
      out.keys.push_back(result.pool[i].key);
      for (std::size_t t = 0; t < result.targets.size(); ++t) {
        const auto target = parse_target(result.targets[t].name);
        if (target)
          out.predictions[static_cast<std::size_t>(*target)].push_back(result.predictions[t][i]);
      }
    }
    for (auto& p : out.predictions) p.resize(out.keys.size());
    return out;
  }
  const CsvTable table = read_csv(path);
  const std::size_t key_column = table.column("key");
  for (const auto& row : table.rows) out.keys.push_back(row[key_column]);
  for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
    const std::string prefix =
        std::string(to_string(target)) + "_" + std::string(canonical_unit(target));
    auto& predictions = out.predictions[static_cast<std::size_t>(target)];
    predictions.resize(out.keys.size());
    if (std::find(table.header.begin(), table.header.end(), prefix) == table.header.end()) continue;
    out.costs.push_back(target);
    const std::size_t columns[3] = {table.column(prefix), table.column(prefix + "_low"),
                                    table.column(prefix + "_high")};
    for (std::size_t r = 0; r < table.rows.size(); ++r) {
      double numbers[3];
      for (int c = 0; c < 3; ++c) {
        try {
          numbers[c] = std::stod(table.rows[r][columns[c]]);
        } catch (const std::exception&) {
          throw input_error_at(path, table.lines[r], static_cast<int>(columns[c]) + 1,
                               "'" + table.rows[r][columns[c]] + "' is not a number");
        }
      }
      predictions[r] = {true, "", numbers[0], numbers[1], numbers[2]};
    }
  }
  return out;
}

void run_validate(const ValidateCommand& command) {
  const Shortlist shortlist = read_shortlist(command.shortlist);
  const std::vector<std::string>& keys = shortlist.keys;
  if (command.measure) {
    CampaignOptions options;
    options.db_path = command.db;
    options.device = command.measure_device;
    options.name = "validate " + command.shortlist;
    for (const std::string& key : keys) options.spec_text += key + "\n";
    options.worker = {"/proc/self/exe", {"__worker"}};
    std::vector<Config> configs;
    configs.reserve(keys.size());
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
      command.budget.empty() ? shortlist.budgets : parse_budgets(command.budget, "--budget");

  auto writer = make_row_writer(
      parse_format(command.format),
      {"target", "n", "mape_pct", "median_error_pct", "within10_pct", "coverage_pct", "spearman"},
      std::cout);
  for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
    const auto& predictions = shortlist.predictions[static_cast<std::size_t>(target)];
    std::vector<double> truth, predicted, low, high;
    for (std::size_t r = 0; r < keys.size(); ++r) {
      const auto found = measured.find(keys[r]);
      if (!predictions[r].available || found == measured.end() ||
          !found->second[static_cast<std::size_t>(target)]) {
        continue;
      }
      truth.push_back(*found->second[static_cast<std::size_t>(target)]);
      predicted.push_back(predictions[r].value);
      low.push_back(predictions[r].low);
      high.push_back(predictions[r].high);
    }
    if (truth.empty()) continue;
    const Metrics m = score(truth, predicted, &low, &high);
    std::vector<double> errors;
    for (std::size_t i = 0; i < truth.size(); ++i) {
      errors.push_back(100 * std::abs(predicted[i] - truth[i]) / truth[i]);
    }
    writer->row({std::string(to_string(target)), static_cast<std::int64_t>(m.n), m.mape,
                 upper_median(std::move(errors)), m.within10, *m.coverage, m.spearman});
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
    if (!command.space.spec.empty() || !command.space.keys_file.empty()) {
      for (const Config& c : select_configs(command.space)) {
        if (measured.count(to_key(c))) configs.push_back(c);
      }
    } else {
      for (const auto& [key, values] : measured) configs.push_back(parse_key(key));
    }
    const FeatureRows rows = feature_rows(configs);
    // With each configuration's family, as screening predicts (a new family's intervals).
    std::vector<std::string> families;
    families.reserve(configs.size());
    for (const Config& c : configs) families.push_back(family_of(c));
    auto predictions = model.predict(rows.x.data(), configs.size(), rows.batch.data(), &families);
    // Memory from the engine's own plan where screening would take it: where this machine runs
    // the model's engine, for the configurations a memory budget's limit lies within the
    // interval of.
    std::string engine;
    if (const std::size_t planned =
            plan_deciding_memory(model, budgets, configs, predictions, &engine)) {
      std::cerr << "note: memory of " << planned << " of " << configs.size()
                << " configurations is the engine's own plan on this machine (" << engine
                << "), as screening takes it: those whose interval held a memory budget\n";
    }
    FeasibilityOptions options;
    options.coverage = model.coverage();
    options.safe = shortlist.safe;
    // Screening's decision under each domain policy (decide_budgets): allow judges every
    // configuration by its predictions; exclude rejects those outside the training domain;
    // widen judges those by their widened intervals' upper ends.
    struct Tally {
      std::size_t correct = 0, false_accept = 0, false_reject = 0, accepted = 0;
    };
    const std::array<DomainPolicy, 3> policies = {DomainPolicy::kAllow, DomainPolicy::kExclude,
                                                  DomainPolicy::kWiden};
    std::array<Tally, 3> tallies{};
    std::size_t truly_feasible = 0, outside = 0;
    const std::size_t cols = model.feature_names().size();
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const auto& truth = measured.at(to_key(configs[i]));
      const bool actual = meets(budgets, truth);
      const DomainJudgement domain =
          model.training_domain().judge(rows.x.data() + i * cols, families[i]);
      outside += domain.inside ? 0 : 1;
      truly_feasible += actual ? 1 : 0;
      for (std::size_t p = 0; p < policies.size(); ++p) {
        TargetPredictions prediction = gather_predictions(model.targets(), predictions, i);
        const bool accept =
            decide_budgets(budgets, prediction, domain, policies[p], options).feasible;
        Tally& tally = tallies[p];
        tally.correct += actual == accept ? 1 : 0;
        tally.false_accept += accept && !actual ? 1 : 0;
        tally.false_reject += !accept && actual ? 1 : 0;
        tally.accepted += accept ? 1 : 0;
      }
    }
    std::cerr << "budget classification over " << configs.size() << " measured configurations ("
              << outside << " outside the training domain, " << truly_feasible << " truly feasible"
              << (options.safe ? "; safe: by interval upper ends" : "") << "):\n";
    for (std::size_t p = 0; p < policies.size(); ++p) {
      const Tally& t = tallies[p];
      std::cerr << "  outside-domain " << to_string(policies[p]) << ": accuracy "
                << cell_text(percent(t.correct, configs.size())) << "%, false accepts "
                << cell_text(percent(t.false_accept, configs.size())) << "% of all ("
                << t.false_accept << " of " << t.accepted << " accepted), false rejects "
                << cell_text(percent(t.false_reject, configs.size())) << "% (" << t.false_reject
                << " of " << truly_feasible << " truly feasible)"
                << (shortlist.domain == policies[p] ? "  <- the screening's" : "") << "\n";
    }
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
    const std::vector<Target>& costs = shortlist.costs;
    const std::size_t objectives = costs.size() + (shortlist.value ? 1 : 0);
    FeatureRows rows;
    if (shortlist.value && shortlist.value->analytic()) rows = feature_rows(space);
    const std::vector<std::string>& names = architecture_feature_names();
    std::vector<ObjectiveValues> values;
    std::vector<std::string> feasible_keys;
    for (std::size_t s = 0; s < space.size(); ++s) {
      const Config& c = space[s];
      const auto& truth = measured.at(to_key(c));
      if (!meets(budgets, truth)) continue;
      ObjectiveValues v{};
      bool complete = true;
      for (std::size_t k = 0; k < costs.size(); ++k) {
        const auto& value = truth[static_cast<std::size_t>(costs[k])];
        if (!value) complete = false;
        v[k] = value.value_or(0);
      }
      if (shortlist.value) {
        const float* row = rows.x.empty() ? nullptr : rows.x.data() + s * names.size();
        const auto value = objective_value(*shortlist.value, names, row, c);
        if (!value) complete = false;
        v[costs.size()] = -value.value_or(0);
      }
      if (!complete) continue;
      values.push_back(v);
      feasible_keys.push_back(to_key(c));
    }
    const auto front = pareto_front(values, objectives);
    const std::set<std::string> listed(keys.begin(), keys.end());
    std::size_t hits = 0;
    for (std::size_t f : front) hits += listed.count(feasible_keys[f]);
    std::string over = shortlist.value ? shortlist.value->name + " (up), " : "";
    for (std::size_t k = 0; k < costs.size(); ++k) {
      over += (k == 0 ? "" : ", ") + std::string(to_string(costs[k]));
    }
    std::cerr << "true Pareto front (measured, within budget, over " << over
              << "): " << front.size() << " configurations; shortlist recall "
              << percent(hits, front.size()) << "%, precision " << percent(hits, keys.size())
              << "% (" << hits << " shortlisted configurations are on it)\n";
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
  verb->add_option("--kernel-model", screen->kernel_model,
                   "a kernel model (carb fit --kernels) that prices stage 2's latency: each "
                   "candidate's planned kernels, predicted and summed");
  verb->add_option("--spec", screen->selection.spec, "design-space spec (YAML)");
  verb->add_option("--keys", screen->selection.keys_file, "or a file of configuration keys");
  verb->add_option("--sample", screen->selection.sample, "screen N configurations of the spec");
  verb->add_option("--seed", screen->selection.seed, "seed of the sample");
  verb->add_option("--budget", screen->options.budget,
                   "e.g. 'energy<=75J,latency<=20ms,memory<=2GiB'");
  verb->add_option("--maximize", screen->options.maximize,
                   "the value to maximise beside the costs: params, macs, flops, depth, width "
                   "(analytic, per image) or none")
      ->capture_default_str();
  verb->add_option("--value", screen->options.value,
                   "or a value per configuration from a CSV: FILE:COLUMN (a 'key' column of "
                   "configuration or network keys), e.g. accuracy.csv:top1");
  verb->add_option("--objectives", screen->options.objectives,
                   "costs to minimise, e.g. latency,memory (default: all the model has)");
  verb->add_option("--outside-domain", screen->options.outside_domain,
                   "candidates outside the model's training data: widen (their intervals, and "
                   "judge them by the upper ends), exclude or allow")
      ->capture_default_str();
  verb->add_option("--keep", screen->options.keep,
                   "stage 1 keeps the best K by combined rank (2000)");
  verb->add_option("--keep-fraction", screen->options.keep_fraction,
                   "or a fraction of the candidates");
  verb->add_flag("--safe", screen->options.safe,
                 "feasible only when the interval's upper end meets "
                 "every budget");
  verb->add_option("--rank", screen->options.rank,
                   "order of the front: value (the most capable first; the default with a "
                   "value), ideal (the default without) or knee");
  verb->add_option("--top", screen->top, "rows to print (20); the files hold the whole front");
  verb->add_option("-o,--output", screen->output, "the ranked front as CSV, with features");
  verb->add_option("--json", screen->json_output,
                   "the whole result as JSON: request, counts, every stage-2 candidate (for "
                   "carb report and carb validate)");
  verb->add_option("--candidates", screen->candidates_output,
                   "every candidate stage 2 scored, feasible or not, as CSV");
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
  verb->callback([screen] { run_screen(*screen); });

  auto validate = std::make_shared<ValidateCommand>();
  CLI::App* vverb =
      app.add_subcommand("validate", "check a shortlist against measurements (or measure it now)");
  vverb
      ->add_option("--shortlist", validate->shortlist,
                   "carb screen's --json result (or its -o CSV: costs only)")
      ->required();
  vverb->add_option("--db", validate->db, "database of measurements")->required();
  vverb->add_option("--device", validate->device, "device fingerprint in the database");
  vverb->add_flag("--measure", validate->measure, "profile the shortlist now into --db first");
  vverb->add_option("--measure-device", validate->measure_device, "device to measure on (cpu)");
  vverb->add_option("--budget", validate->budget,
                    "the budgets screening used (default: the JSON result's)");
  vverb->add_option("--model", validate->model,
                    "with budgets: classify every measured configuration");
  vverb->add_option("--spec", validate->space.spec, "the screened space: Pareto recall/precision");
  vverb->add_option("--keys", validate->space.keys_file, "or the screened keys");
  vverb->add_option("--format", validate->format, "table, csv or json");
  vverb->callback([validate] { run_validate(*validate); });
}

}  // namespace carb::cli
