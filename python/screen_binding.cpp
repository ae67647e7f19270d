// Screening: a space or keys, budgets, a value objective and the costs to a ranked Pareto
// shortlist (carb/screening.hpp), returned as columns, with the whole result as JSON text.
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "binding.hpp"
#include "carb/error.hpp"
#include "carb/screening.hpp"

namespace carb::python {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

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
                  py::arg("excluded_outside_domain") = counts.excluded_outside_domain,
                  py::arg("memory_planned") = counts.memory_planned,
                  py::arg("latency_by_kernels") = counts.latency_by_kernels);
}

}  // namespace

void bind_screen(py::module_& m) {
  py::class_<ScreenOptions>(m, "ScreenOptions")
      .def(py::init<>())
      .def_readwrite("budget", &ScreenOptions::budget)
      .def_readwrite("objectives", &ScreenOptions::objectives)
      .def_readwrite("maximize", &ScreenOptions::maximize)
      .def_readwrite("value", &ScreenOptions::value)
      .def_readwrite("rank", &ScreenOptions::rank)
      .def_readwrite("outside_domain", &ScreenOptions::outside_domain)
      .def_readwrite("keep", &ScreenOptions::keep)
      .def_readwrite("keep_fraction", &ScreenOptions::keep_fraction)
      .def_readwrite("safe", &ScreenOptions::safe);

  m.def(
      "screen",
      [](const Predictor& model, const Predictor* stage1, const Predictor* kernel_model,
         SpaceHandle* space, const std::optional<std::vector<std::string>>& keys,
         const ScreenOptions& options, const std::optional<std::map<std::string, double>>& values,
         const std::string& values_name) {
        ScreenOptions given = options;
        if (values) {
          ValueObjective held;
          held.name = values_name;
          held.file = "values given by key";
          for (const auto& [key, number] : *values) held.values.emplace(key, number);
          given.values = std::move(held);
        }
        const ScreenRequest request =
            without_gil([&] { return screen_request(given, model, stage1, kernel_model); });
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
      py::arg("model"), py::arg("stage1").none(true), py::arg("kernel_model").none(true),
      py::arg("space").none(true), py::arg("keys").none(true), py::arg("options"),
      py::arg("values").none(true), py::arg("values_name"));
}

}  // namespace carb::python
