// Feature rows and predictions of what a user names: a table model's rows by column name, and
// memory from the engine's own plan for a few configurations.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "carb/error.hpp"
#include "carb/model.hpp"

namespace carb {

std::size_t plan_memory(const Predictor& model, const std::vector<Config>& configs,
                        std::vector<std::vector<TargetPrediction>>& predictions,
                        std::string* engine) {
  if (configs.empty() || configs.size() > kMostPlannedConfigurations) return 0;
  std::string no_plan;
  const std::unique_ptr<EngineMemoryPlanner> planner =
      EngineMemoryPlanner::for_model(model, &no_plan);
  if (!planner) return 0;
  const std::size_t planned = planner->apply(configs, predictions);
  if (planned > 0 && engine != nullptr) *engine = planner->engine();
  return planned;
}

namespace {

// Whether a table model's feature `name` is a column of `table` through log1p: "log_" marks one,
// unless the table has a column of that name itself.
bool logged_column(const std::string& name, const CsvTable& table) {
  return name.rfind("log_", 0) == 0 &&
         std::find(table.header.begin(), table.header.end(), name) == table.header.end();
}

}  // namespace

FeatureRows table_feature_rows(const Predictor& model, const CsvTable& table) {
  // The model's features by their column names.
  std::vector<std::size_t> columns;
  std::vector<bool> logged;
  for (const std::string& name : model.feature_names()) {
    const bool log = logged_column(name, table);
    logged.push_back(log);
    columns.push_back(table.column(log ? name.substr(4) : name));
  }
  FeatureRows rows;
  rows.x.reserve(table.rows.size() * columns.size());
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    for (std::size_t f = 0; f < columns.size(); ++f) {
      const std::string& cell = table.rows[r][columns[f]];
      char* end = nullptr;
      const double value = std::strtod(cell.c_str(), &end);
      if (cell.empty() || end != cell.c_str() + cell.size() || !std::isfinite(value)) {
        throw input_error_at(table.path, table.lines[r], static_cast<int>(columns[f]) + 1,
                             "'" + cell + "' is not a finite number");
      }
      rows.x.push_back(static_cast<float>(logged[f] ? std::log1p(value) : value));
    }
    rows.batch.push_back(0);
  }
  return rows;
}

Dataset table_dataset_for(const Predictor& model, const CsvTable& table,
                          const std::string& batch_column) {
  if (model.schema() != "table") {
    throw Error(ErrorCategory::kInput, "the model was fitted on carb measurements, not on a table");
  }
  TableSpec spec;
  for (const std::string& name : model.feature_names()) {
    spec.features.push_back(logged_column(name, table) ? name.substr(4) : name);
  }
  spec.targets = model.targets();
  spec.batch_column = batch_column;
  // The targets, row names and batch sizes as a fit reads them; the features in the model's
  // layout, whatever span these rows have.
  Dataset data = dataset_from_table(table, spec);
  data.x = table_feature_rows(model, table).x;
  data.feature_names = model.feature_names();
  return data;
}

}  // namespace carb
