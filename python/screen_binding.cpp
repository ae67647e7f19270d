// Screening: a space or keys, budgets, a value objective and the costs to a ranked Pareto
// shortlist (carb/screening.hpp), returned as columns, with the whole result as JSON text.
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "binding.hpp"
#include "carb/error.hpp"
#include "carb/screening.hpp"

namespace carb::python {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// The value to maximise: an analytic capacity by name, a value file's column, or values given
// by key (a mapping, recorded as from `origin`).
std::optional<ValueObjective> value_of(
    const std::optional<std::string>& maximize,
    const std::optional<std::pair<std::string, std::string>>& file,
    const std::optional<std::map<std::string, double>>& values, const std::string& values_name) {
  if (file) return read_value_file(file->first, file->second);
  if (values) {
    ValueObjective value;
    value.name = values_name;
    value.file = "values given by key";
    for (const auto& [key, number] : *values) value.values.emplace(key, number);
    return value;
  }
  if (!maximize) return std::nullopt;
  auto value = analytic_value(*maximize);
  if (!value) {
    std::string names;
    for (std::string_view name : kAnalyticValues) names += std::string(name) + ", ";
    throw Error(ErrorCategory::kUsage,
                "maximize '" + *maximize + "': expected " + names + "or None", "maximize");
  }
  return value;
}

// Columns of the pool members `rows` (pool indices) in that order: key, value, the probability
// of meeting every budget, each predicted target with its interval, and the domain.
py::dict pool_columns(const ScreenResult& result, const std::vector<std::size_t>& rows) {
  const std::size_t n = rows.size();
  std::vector<std::string> keys;
  keys.reserve(n);
  auto value = new_array<double>(n);
  auto probability = new_array<double>(n);
  auto feasible = new_array<bool>(n);
  auto inside = new_array<bool>(n);
  auto measured = new_array<bool>(n);
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t i = rows[r];
    keys.push_back(result.pool[i].key);
    value.mutable_data()[r] = result.pool[i].value.value_or(kNan);
    probability.mutable_data()[r] = result.assessed[i].probability;
    feasible.mutable_data()[r] = result.assessed[i].feasible;
    inside.mutable_data()[r] = result.pool[i].domain.inside;
    measured.mutable_data()[r] = !result.measured.empty() && result.measured[i];
  }
  py::dict columns;
  columns["key"] = keys;
  if (result.value) columns[py::str("value_" + result.value->name)] = value;
  columns["p_feasible"] = probability;
  columns["feasible"] = feasible;
  for (std::size_t t = 0; t < result.targets.size(); ++t) {
    add_interval_columns(columns, result.targets[t], result.predictions[t], &rows);
  }
  columns["inside_domain"] = inside;
  if (!result.measured.empty()) columns["measured"] = measured;
  return columns;
}

py::dict counts_dict(const ScreenCounts& counts) {
  return py::dict(py::arg("configurations") = counts.configurations,
                  py::arg("outside_constraints") = counts.outside_constraints,
                  py::arg("over_budget") = counts.over_budget,
                  py::arg("expected_feasible_lost") = counts.expected_feasible_lost,
                  py::arg("outranked") = counts.outranked,
                  py::arg("overlap_kept") = counts.overlap_kept,
                  py::arg("outside_domain") = counts.outside_domain,
                  py::arg("excluded_outside_domain") = counts.excluded_outside_domain);
}

}  // namespace

void bind_screen(py::module_& m) {
  m.def(
      "screen",
      [](const Predictor& model, const Predictor* stage1, SpaceHandle* space,
         const std::optional<std::vector<std::string>>& keys, const std::string& budget,
         const std::string& objectives, const std::optional<std::string>& maximize,
         const std::optional<std::pair<std::string, std::string>>& value_file,
         const std::optional<std::map<std::string, double>>& values, const std::string& values_name,
         std::size_t keep, double keep_fraction, bool safe, const std::optional<std::string>& rank,
         const std::string& outside_domain) {
        ScreenRequest request;
        if (rank) {
          request.rank = parse_rank_method(*rank);
          if (!request.rank) {
            throw Error(ErrorCategory::kUsage,
                        "rank '" + *rank + "': expected ideal, knee or value", "rank");
          }
        }
        const auto policy = parse_domain_policy(outside_domain);
        if (!policy) {
          throw Error(ErrorCategory::kUsage,
                      "outside_domain '" + outside_domain + "': expected exclude, widen or allow",
                      "outside_domain");
        }
        request.domain = *policy;
        request.value = value_of(maximize, value_file, values, values_name);
        if (request.rank == RankMethod::kValue && !request.value) {
          throw Error(ErrorCategory::kUsage, "rank value needs a value to maximise", "rank");
        }
        if (!budget.empty()) request.budgets = parse_budgets(budget, "budget");
        if (!objectives.empty()) request.costs = parse_objectives(objectives, "objectives");
        request.keep = keep;
        request.keep_fraction = keep_fraction;
        request.safe = safe;
        check_request(model, stage1, request);
        CandidateSet candidates;
        if (keys) {
          candidates.configs = configs_of_keys(*keys);
        } else if (space != nullptr) {
          candidates.space = &space->space();
        } else {
          throw Error(ErrorCategory::kUsage, "give a space or keys to screen");
        }
        const ScreenResult result =
            without_gil([&] { return screen(model, stage1, candidates, request); });
        std::vector<std::size_t> ranked;
        for (std::size_t r = 0; r < result.ranked.size(); ++r) {
          ranked.push_back(result.ranked_pool_index(r));
        }
        std::vector<std::size_t> pool(result.pool.size());
        for (std::size_t i = 0; i < pool.size(); ++i) pool[i] = i;
        std::vector<std::int64_t> front_rank;
        for (std::size_t rank_of : result.front_ranks()) {
          front_rank.push_back(static_cast<std::int64_t>(rank_of));
        }
        py::dict candidate_columns = pool_columns(result, pool);
        candidate_columns["front_rank"] = front_rank;
        return py::dict(py::arg("shortlist") = pool_columns(result, ranked),
                        py::arg("candidates") = candidate_columns,
                        py::arg("counts") = counts_dict(result.counts),
                        py::arg("value") = result.value ? result.value->describe() : std::string(),
                        py::arg("rank") = std::string(to_string(result.rank)),
                        py::arg("first_outside") = result.first_outside,
                        py::arg("feasible") = result.feasible.size(),
                        py::arg("front") = result.front.size(),
                        py::arg("json") = screen_result_json(result, model.feature_names()).dump());
      },
      py::arg("model"), py::arg("stage1").none(true), py::arg("space").none(true),
      py::arg("keys").none(true), py::arg("budget"), py::arg("objectives"),
      py::arg("maximize").none(true), py::arg("value_file").none(true),
      py::arg("values").none(true), py::arg("values_name"), py::arg("keep"),
      py::arg("keep_fraction"), py::arg("safe"), py::arg("rank").none(true),
      py::arg("outside_domain"));
}

}  // namespace carb::python
