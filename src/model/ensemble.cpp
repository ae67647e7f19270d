// The CARB ensemble of one target (ensemble.hpp): the split, the members and their training
// with early stopping, the blend, the corrector, conformal intervals and out-of-fold predictions.
#include "ensemble.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "carb/error.hpp"

namespace carb::model_detail {

namespace {

constexpr double kMinRankCorrelation = 0.02;

int thread_count(int requested) {
  if (requested > 0) return requested;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

Matrix augment(const float* x, std::size_t rows, std::size_t cols,
               const std::vector<const std::vector<double>*>& extra) {
  Matrix m;
  m.cols = cols + extra.size();
  m.x.resize(rows * m.cols);
  for (std::size_t i = 0; i < rows; ++i) {
    std::copy(x + i * cols, x + (i + 1) * cols, m.x.begin() + static_cast<long>(i * m.cols));
    for (std::size_t e = 0; e < extra.size(); ++e) {
      m.x[i * m.cols + cols + e] = static_cast<float>((*extra[e])[i]);
    }
  }
  return m;
}

Matrix select(const Matrix& m, const std::vector<std::size_t>& rows) {
  Matrix out;
  out.cols = m.cols;
  out.x.reserve(rows.size() * m.cols);
  for (std::size_t i : rows) out.x.insert(out.x.end(), m.row(i), m.row(i) + m.cols);
  return out;
}

std::map<std::string, std::string> learner_params(LearnerKind kind, const FitOptions& options,
                                                  int member_index) {
  std::map<std::string, std::string> params = {
      {"objective", "reg:squarederror"},
      {"tree_method", "hist"},
      {"nthread", std::to_string(thread_count(options.threads))},
      {"seed", std::to_string(options.seed + static_cast<std::uint64_t>(member_index))},
      {"base_score", "0"},
      {"verbosity", "0"},
  };
  const std::string eta = std::to_string(options.learning_rate);
  switch (kind) {
    case LearnerKind::kDepthwise:
      params.insert({{"eta", eta},
                     {"max_depth", "8"},
                     {"subsample", "0.8"},
                     {"colsample_bytree", "0.8"},
                     {"min_child_weight", "1"}});
      break;
    case LearnerKind::kLeafwise:
      params.insert({{"eta", eta},
                     {"grow_policy", "lossguide"},
                     {"max_leaves", "63"},
                     {"max_depth", "0"},
                     {"subsample", "0.8"},
                     {"colsample_bynode", "0.8"},
                     {"min_child_weight", "2"}});
      break;
    case LearnerKind::kForest:
      params.insert({{"eta", "1"},
                     {"num_parallel_tree", std::to_string(options.forest_trees)},
                     {"subsample", "0.632"},
                     {"colsample_bynode", "0.6"},
                     {"max_depth", "12"},
                     {"lambda", "1e-5"},
                     {"min_child_weight", "1"}});
      break;
    case LearnerKind::kRidge:
      break;
  }
  return params;
}

std::vector<float> to_float(const std::vector<double>& values) {
  return {values.begin(), values.end()};
}

// The lambda of the ridge that predicts `validation` best.
Ridge fit_ridge(const Matrix& m, const std::vector<std::size_t>& train,
                const std::vector<std::size_t>& validation, const std::vector<double>& y) {
  std::vector<const float*> rows;
  std::vector<double> labels;
  for (std::size_t i : train) {
    rows.push_back(m.row(i));
    labels.push_back(y[i]);
  }
  Ridge best;
  double best_error = std::numeric_limits<double>::infinity();
  for (double lambda : {1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0}) {
    Ridge ridge = Ridge::fit(rows, m.cols, labels, lambda);
    double error = 0;
    for (std::size_t i : validation) {
      const double e = ridge.predict(m.row(i)) - y[i];
      error += e * e;
    }
    if (error < best_error) {
      best_error = error;
      best = std::move(ridge);
    }
  }
  return best;
}

// Every weight vector on the simplex with steps of 1/20.
void simplex_grid(std::size_t members, int steps, std::vector<int>& current,
                  std::vector<std::vector<double>>& out) {
  if (current.size() + 1 == members) {
    const int used = std::accumulate(current.begin(), current.end(), 0);
    std::vector<double> weights;
    weights.reserve(current.size() + 1);
    for (int c : current) weights.push_back(static_cast<double>(c) / steps);
    weights.push_back(static_cast<double>(steps - used) / steps);
    out.push_back(std::move(weights));
    return;
  }
  const int used = std::accumulate(current.begin(), current.end(), 0);
  for (int c = 0; c <= steps - used; ++c) {
    current.push_back(c);
    simplex_grid(members, steps, current, out);
    current.pop_back();
  }
}

void apply_corrector(const TargetModel& model, const Matrix& m, const int* batch,
                     std::vector<double>& values) {
  if (model.corrector.empty() || batch == nullptr) return;
  std::vector<std::size_t> low;
  for (std::size_t i = 0; i < m.rows(); ++i) {
    if (batch[i] > 0 && batch[i] <= kLowBatch) low.push_back(i);
  }
  if (low.empty()) return;
  const Matrix rows = select(m, low);
  const std::vector<float> corrections = model.corrector.predict(rows.x.data(), low.size(), m.cols);
  for (std::size_t k = 0; k < low.size(); ++k) values[low[k]] += kDamping * corrections[k];
}

// The base the trees of `model` correct, in log1p space, for a row of its matrix (`cols` wide).
double base_of(const TargetModel& model, const float* row, std::size_t cols) {
  switch (model.prior_mode) {
    case PriorMode::kBase:
      return model.prior.predict(row);
    case PriorMode::kAdditive:
      return row[cols - 1];  // the additive prior's log1p prediction
    case PriorMode::kNone:
    case PriorMode::kMember:
      break;
  }
  return 0;
}

// Trains the members of a specialist on `train` rows (early stopping on `validation`, or a fixed
// round count per member when `rounds` is given).
void train_members(TargetModel& model, const Matrix& m, const std::vector<double>& y,
                   const std::vector<std::size_t>& train,
                   const std::vector<std::size_t>& validation, const FitOptions& options,
                   const std::vector<int>* rounds) {
  if (model.prior_mode == PriorMode::kBase) model.prior = fit_ridge(m, train, validation, y);
  const auto labels_of = [&](const std::vector<std::size_t>& rows, const Matrix& sub) {
    std::vector<float> labels;
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const double base = base_of(model, sub.row(k), sub.cols);
      labels.push_back(static_cast<float>(y[rows[k]] - base));
    }
    return labels;
  };
  const Matrix train_rows = select(m, train);
  const Matrix validation_rows = select(m, validation);
  const xgb::Matrix dtrain(train_rows.x.data(), train.size(), m.cols, labels_of(train, train_rows));
  const xgb::Matrix dvalidation(validation_rows.x.data(), validation.size(), m.cols,
                                labels_of(validation, validation_rows));
  for (std::size_t k = 0; k < model.members.size(); ++k) {
    Member& member = model.members[k];
    if (member.kind == LearnerKind::kRidge) {
      member.ridge = fit_ridge(m, train, validation, y);
      continue;
    }
    const auto params = learner_params(member.kind, options, static_cast<int>(k));
    if (member.kind == LearnerKind::kForest) {
      member.booster = xgb::Booster::train(params, dtrain, nullptr, 1, 0);
    } else if (rounds != nullptr) {
      member.booster = xgb::Booster::train(params, dtrain, nullptr, (*rounds)[k], 0);
    } else if (options.fixed_rounds > 0) {
      member.booster = xgb::Booster::train(params, dtrain, nullptr, options.fixed_rounds, 0);
    } else {
      member.booster = xgb::Booster::train(params, dtrain, &dvalidation, options.max_rounds,
                                           options.early_stopping_rounds);
    }
  }
}

}  // namespace

bool held_out(const Dataset& data, const FitOptions& options, std::size_t row) {
  if (options.hold_out.empty() || row >= data.family.size()) return false;
  return std::find(options.hold_out.begin(), options.hold_out.end(), data.family[row]) !=
         options.hold_out.end();
}

void check_hold_out(const Dataset& data, const FitOptions& options) {
  if (options.hold_out.empty()) return;
  if (data.family.size() != data.rows()) {
    throw Error(ErrorCategory::kUsage,
                "leave-family-out needs a carb database: a table's rows name no family",
                "hold-out");
  }
  const std::set<std::string> families(data.family.begin(), data.family.end());
  for (const std::string& name : options.hold_out) {
    if (families.count(name) != 0) continue;
    std::string message = "no rows of family '" + name + "' to hold out; the data's families: ";
    const char* separator = "";
    for (const std::string& family : families) {
      message += separator;
      message += family;
      separator = ", ";
    }
    throw Error(ErrorCategory::kInput, message, "hold-out");
  }
}

std::vector<Role> split_rows(const Dataset& data, const FitOptions& options) {
  std::mt19937_64 random(options.seed);
  std::map<int, std::vector<std::size_t>> strata;
  for (std::size_t i = 0; i < data.rows(); ++i) {
    const bool low = data.batch[i] > 0 && data.batch[i] <= kLowBatch;
    const bool held = held_out(data, options, i);
    const int stratum = (options.leave_low_batch_out && low) || held ? -1 : data.stratum[i];
    strata[stratum].push_back(i);
  }
  std::vector<Role> roles(data.rows(), Role::kTrain);
  const double train = options.train_fraction;
  const double validation = options.validation_fraction;
  const double calibration = options.calibration_fraction;
  // Leave-low-batch-out and leave-family-out: the left-out rows are the test rows, the rest are
  // split without a test.
  const bool leave_out = options.leave_low_batch_out || !options.hold_out.empty();
  const double kept = leave_out ? train + validation + calibration : 1.0;
  for (auto& [stratum, rows] : strata) {
    if (stratum == -1) {
      for (std::size_t i : rows) roles[i] = Role::kTest;
      continue;
    }
    for (std::size_t i = rows.size(); i > 1; --i) {
      std::swap(rows[i - 1], rows[random() % i]);
    }
    const double offset = static_cast<double>(random() >> 11) * 0x1p-53;
    const double n = static_cast<double>(rows.size());
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const double q = std::fmod((static_cast<double>(k) + offset) / n, 1.0) * kept;
      roles[rows[k]] = q < train                              ? Role::kTrain
                       : q < train + validation               ? Role::kValidation
                       : q < train + validation + calibration ? Role::kCalibration
                                                              : Role::kTest;
    }
  }
  return roles;
}

std::vector<std::size_t> rows_with(const std::vector<Role>& roles, Role role,
                                   const std::vector<double>& y) {
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < roles.size(); ++i) {
    if (roles[i] == role && !std::isnan(y[i])) rows.push_back(i);
  }
  return rows;
}

Matrix target_matrix(const TargetModel& model, const float* x, std::size_t rows, std::size_t cols,
                     const std::vector<std::vector<double>>& logs) {
  std::vector<const std::vector<double>*> extra;
  for (std::size_t u : model.upstream) extra.push_back(&logs[u]);
  std::vector<double> additive;
  if (!model.additive.empty()) {
    additive.resize(rows);
    for (std::size_t i = 0; i < rows; ++i) {
      additive[i] = model.additive.log_prediction(x + i * cols);
    }
    extra.push_back(&additive);
  }
  if (model.columns.empty()) return augment(x, rows, cols, extra);
  std::vector<float> selected(rows * model.columns.size());
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t k = 0; k < model.columns.size(); ++k) {
      selected[i * model.columns.size() + k] = x[i * cols + model.columns[k]];
    }
  }
  return augment(selected.data(), rows, model.columns.size(), extra);
}

std::vector<std::vector<double>> member_predictions(const TargetModel& model, const Matrix& m) {
  const std::size_t rows = m.rows();
  std::vector<double> base(rows, 0);
  for (std::size_t i = 0; i < rows; ++i) base[i] = base_of(model, m.row(i), m.cols);
  std::vector<std::vector<double>> out;
  for (const Member& member : model.members) {
    std::vector<double> values(rows);
    if (member.kind == LearnerKind::kRidge) {
      for (std::size_t i = 0; i < rows; ++i) values[i] = member.ridge.predict(m.row(i));
    } else {
      const std::vector<float> trees = member.booster.predict(m.x.data(), rows, m.cols);
      for (std::size_t i = 0; i < rows; ++i) values[i] = base[i] + trees[i];
    }
    out.push_back(std::move(values));
  }
  return out;
}

std::vector<double> blend(const TargetModel& model,
                          const std::vector<std::vector<double>>& members) {
  std::vector<double> out(members.empty() ? 0 : members.front().size(), 0);
  for (std::size_t k = 0; k < members.size(); ++k) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] += model.members[k].weight * members[k][i];
  }
  return out;
}

std::vector<double> predict_log(const TargetModel& model, const Matrix& m, const int* batch) {
  std::vector<double> values = blend(model, member_predictions(model, m));
  apply_corrector(model, m, batch, values);
  return values;
}

std::vector<double> cheap_log(const TargetModel& model, const Matrix& m) {
  std::vector<double> values(m.rows());
  const Member* ridge = nullptr;
  for (const Member& member : model.members) {
    if (member.kind == LearnerKind::kRidge) ridge = &member;
  }
  if (model.prior_mode == PriorMode::kAdditive) {
    for (std::size_t i = 0; i < m.rows(); ++i) values[i] = base_of(model, m.row(i), m.cols);
    return values;
  }
  if (model.prior_mode == PriorMode::kBase || ridge != nullptr) {
    const Ridge& prior = ridge != nullptr ? ridge->ridge : model.prior;
    for (std::size_t i = 0; i < m.rows(); ++i) values[i] = prior.predict(m.row(i));
    return values;
  }
  const std::vector<float> trees =
      model.members.front().booster.predict(m.x.data(), m.rows(), m.cols);
  for (std::size_t i = 0; i < m.rows(); ++i) values[i] = trees[i];
  return values;
}

double conformal_half_width(const std::vector<double>& measured,
                            const std::vector<double>& predicted, double coverage) {
  std::vector<double> scores;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    scores.push_back(std::abs(measured[i] - predicted[i]));
  }
  std::sort(scores.begin(), scores.end());
  const auto n = static_cast<double>(scores.size());
  const auto rank = static_cast<std::size_t>(std::ceil((n + 1) * coverage));
  return rank > scores.size() || rank == 0 ? std::numeric_limits<double>::infinity()
                                           : scores[rank - 1];
}

double family_half_width(const Additive& additive, const float* x, std::size_t cols,
                         const std::vector<std::size_t>& rows,
                         const std::vector<std::string>& family, const std::vector<double>& y,
                         const std::vector<double>& linear, double coverage) {
  std::map<std::string, std::vector<std::size_t>> members;
  for (std::size_t row : rows) members[family.at(row)].push_back(row);
  if (members.size() < kMinFamilies) return 0;
  const auto families = static_cast<double>(members.size());
  std::vector<std::pair<double, double>> scored;  // (residual, weight)
  for (const auto& [name, left_out] : members) {
    std::vector<std::size_t> others;
    for (std::size_t row : rows) {
      if (family[row] != name) others.push_back(row);
    }
    Additive refit = additive.terms();
    refit.fit(x, cols, others, linear);
    for (std::size_t row : left_out) {
      scored.emplace_back(std::abs(y[row] - refit.log_prediction(x + row * cols)),
                          1.0 / (families * static_cast<double>(left_out.size())));
    }
  }
  std::sort(scored.begin(), scored.end());
  const double level = std::min(1.0, coverage * (families + 1) / families);
  double cumulative = 0;
  for (const auto& [residual, weight] : scored) {
    cumulative += weight;
    if (cumulative >= level - 1e-12) return residual;
  }
  return scored.back().first;
}

TargetFit fit_target(const TargetInfo& info, const Matrix& m, const std::vector<double>& y,
                     const std::vector<Role>& roles, const Dataset& data, const FitOptions& options,
                     bool corrector, bool additive) {
  TargetFit fit;
  TargetModel& model = fit.model;
  model.info = info;
  model.available = true;
  model.prior_mode =
      options.prior == PriorMode::kAdditive && !additive ? PriorMode::kBase : options.prior;
  for (LearnerKind kind : {LearnerKind::kDepthwise, LearnerKind::kLeafwise, LearnerKind::kForest}) {
    model.members.push_back(Member{kind, 0, {}, {}});
  }
  if (options.prior == PriorMode::kMember) {
    model.members.push_back(Member{LearnerKind::kRidge, 0, {}, {}});
  }
  const auto train = rows_with(roles, Role::kTrain, y);
  const auto validation = rows_with(roles, Role::kValidation, y);
  const auto calibration = rows_with(roles, Role::kCalibration, y);
  train_members(model, m, y, train, validation, options, nullptr);

  // Blend weights: the simplex point (steps of 0.05) with the least validation error.
  const Matrix validation_rows = select(m, validation);
  const auto predictions = member_predictions(model, validation_rows);
  std::vector<std::vector<double>> grid;
  std::vector<int> current;
  simplex_grid(model.members.size(), 20, current, grid);
  double best_error = std::numeric_limits<double>::infinity();
  for (const auto& weights : grid) {
    double error = 0;
    for (std::size_t i = 0; i < validation.size(); ++i) {
      double value = 0;
      for (std::size_t k = 0; k < weights.size(); ++k) value += weights[k] * predictions[k][i];
      error += (value - y[validation[i]]) * (value - y[validation[i]]);
    }
    if (error < best_error - 1e-15) {
      best_error = error;
      for (std::size_t k = 0; k < weights.size(); ++k) model.members[k].weight = weights[k];
    }
  }

  // Low-batch corrector on the validation residuals, skipped when nothing correlates with them.
  if (corrector) {
    std::vector<std::size_t> low;
    std::vector<double> residuals;
    const std::vector<double> blended = blend(model, predictions);
    for (std::size_t i = 0; i < validation.size(); ++i) {
      const std::size_t row = validation[i];
      if (data.batch[row] > 0 && data.batch[row] <= kLowBatch) {
        low.push_back(row);
        residuals.push_back(y[row] - blended[i]);
      }
    }
    double strongest = 0;
    if (low.size() >= 10) {
      for (std::size_t j = 0; j < m.cols; ++j) {
        std::vector<double> column;
        column.reserve(low.size());
        for (std::size_t row : low) column.push_back(m.row(row)[j]);
        strongest = std::max(strongest, std::abs(spearman(column, residuals)));
      }
    }
    if (low.size() < 10) {
      fit.notes.push_back(info.name + ": corrector skipped, " + std::to_string(low.size()) +
                          " low-batch validation rows (need 10)");
    } else if (strongest < kMinRankCorrelation) {
      fit.notes.push_back(info.name + ": corrector skipped, residual rank correlation " +
                          std::to_string(strongest) + " < 0.02");
    } else {
      const Matrix low_rows = select(m, low);
      const xgb::Matrix dlow(low_rows.x.data(), low.size(), m.cols, to_float(residuals));
      auto params = learner_params(LearnerKind::kDepthwise, options, 7);
      params["max_depth"] = "3";
      params["eta"] = "0.1";
      model.corrector = xgb::Booster::train(params, dlow, nullptr, 50, 0);
    }
  }

  // Split-conformal half-width: the ceil((n+1)(1-alpha))-th smallest calibration residual.
  const Matrix calibration_rows = select(m, calibration);
  std::vector<int> calibration_batch;
  calibration_batch.reserve(calibration.size());
  for (std::size_t row : calibration) calibration_batch.push_back(data.batch[row]);
  const std::vector<double> calibrated =
      predict_log(model, calibration_rows, calibration_batch.data());
  std::vector<double> measured;
  measured.reserve(calibration.size());
  for (std::size_t row : calibration) measured.push_back(y[row]);
  model.half_width = conformal_half_width(measured, calibrated, options.coverage);
  model.calibration_rows = calibration.size();
  if (!std::isfinite(model.half_width)) {
    fit.notes.push_back(info.name + ": " + std::to_string(calibration.size()) +
                        " calibration rows are too few for " +
                        std::to_string(100 * options.coverage) + "% intervals; they are unbounded");
  }
  return fit;
}

std::vector<double> out_of_fold(const TargetModel& fitted, const Matrix& m,
                                const std::vector<double>& y, const std::vector<Role>& roles,
                                const Dataset& data, const FitOptions& options) {
  const auto train = rows_with(roles, Role::kTrain, y);
  const auto validation = rows_with(roles, Role::kValidation, y);
  std::vector<double> oof(m.rows(), std::nan(""));
  std::vector<int> rounds;
  for (const Member& member : fitted.members) {
    rounds.push_back(member.kind == LearnerKind::kRidge ? 0 : member.booster.rounds());
  }
  const int folds = std::max(2, options.cascade_folds);
  for (int fold = 0; fold < folds; ++fold) {
    std::vector<std::size_t> in, out;
    for (std::size_t k = 0; k < train.size(); ++k) {
      (static_cast<int>(k % static_cast<std::size_t>(folds)) == fold ? out : in)
          .push_back(train[k]);
    }
    TargetModel model;
    model.prior_mode = fitted.prior_mode;
    for (const Member& member : fitted.members)
      model.members.push_back(Member{member.kind, member.weight, {}, {}});
    train_members(model, m, y, in, validation, options, &rounds);
    model.corrector = xgb::Booster();  // the corrector is applied from the full fit below
    const Matrix held = select(m, out);
    std::vector<int> batch;
    batch.reserve(out.size());
    for (std::size_t row : out) batch.push_back(data.batch[row]);
    std::vector<double> values = blend(model, member_predictions(model, held));
    apply_corrector(fitted, held, batch.data(), values);
    for (std::size_t k = 0; k < out.size(); ++k) oof[out[k]] = values[k];
  }
  return oof;
}

}  // namespace carb::model_detail
