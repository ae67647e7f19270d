// The CARB ensemble of one target (docs/model.md): the split of rows into roles, the members
// (depth-wise, leaf-wise and forest trees, the ridge), their blend, the low-batch corrector,
// conformal intervals and the out-of-fold predictions the cascade feeds downstream. Private to
// the model module.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "carb/model.hpp"
#include "priors.hpp"
#include "xgb.hpp"

namespace carb::model_detail {

constexpr int kLowBatch = 8;      // the corrector's regime (method.md §4)
constexpr double kDamping = 0.9;  // the corrector's damping

// The split

enum class Role { kTrain, kValidation, kCalibration, kTest };

// Stratified, seeded assignment of rows to roles; within each stratum the shares are exact up to
// rounding. Our own Fisher-Yates over mt19937_64 (fully specified by the standard), so the same
// seed splits the same way with any standard library.
std::vector<Role> split_rows(const Dataset& data, const FitOptions& options);
/// Whether row `row` belongs to a family FitOptions::hold_out names (leave-family-out).
bool held_out(const Dataset& data, const FitOptions& options, std::size_t row);
/// Throws carb::Error when FitOptions::hold_out names a family the data has no rows of (the
/// message lists those it has), or the data names no families (a table).
void check_hold_out(const Dataset& data, const FitOptions& options);

// The rows of `role` where `y` is measured (not NaN).
std::vector<std::size_t> rows_with(const std::vector<Role>& roles, Role role,
                                   const std::vector<double>& y);

// One target's specialist

struct Member {
  LearnerKind kind = LearnerKind::kDepthwise;
  double weight = 0;
  xgb::Booster booster;  // tree learners
  Ridge ridge;           // the ridge member
};

struct TargetModel {
  TargetInfo info;
  bool available = false;
  std::string reason;
  std::vector<std::size_t> upstream;  // targets whose log1p predictions are extra features
  std::vector<std::size_t> columns;   // the features its learners see, in order; empty: all
  PriorMode prior_mode = PriorMode::kNone;
  Ridge prior;  // when prior_mode is kBase
  // Empty when the target has none; its prediction is the last extra column (the base of
  // prior_mode kAdditive).
  Additive additive;
  std::vector<Member> members;
  xgb::Booster corrector;  // empty when skipped
  double half_width = 0;   // conformal half-width, log1p space
  // Targets are modelled as log1p(scale x value): a power of ten that puts the smallest training
  // value at 10 or more, so log1p is a log where the data are (not linear near 0).
  double scale = 1;
  double cheap_half_width = std::numeric_limits<double>::infinity();  // of cheap_log()
  // For a network family the model never saw (family_half_width; >= half_width), 0 where the
  // fit had too few families to say.
  double new_family_half_width = 0;
  std::size_t calibration_rows = 0;
};

// Row-major rows of a feature matrix with extra columns appended (upstream predictions).
struct Matrix {
  std::vector<float> x;
  std::size_t cols = 0;
  const float* row(std::size_t i) const { return x.data() + i * cols; }
  std::size_t rows() const { return cols == 0 ? 0 : x.size() / cols; }
};

// The matrix a target's learners see: the features, the log1p predictions of its upstream
// targets (`logs`, by target) and its additive prior's log1p prediction.
Matrix target_matrix(const TargetModel& model, const float* x, std::size_t rows, std::size_t cols,
                     const std::vector<std::vector<double>>& logs);

// Each member's predictions (log1p space, prior base included) for the rows of `m`.
std::vector<std::vector<double>> member_predictions(const TargetModel& model, const Matrix& m);

// The members' predictions weighted by their blend weights.
std::vector<double> blend(const TargetModel& model,
                          const std::vector<std::vector<double>>& members);

// Log1p predictions of a target: blend plus the corrector.
std::vector<double> predict_log(const TargetModel& model, const Matrix& m, const int* batch);

// The cheapest member's log1p predictions (stage 1 of screening): the ridge prior when the
// trees correct it or it is a member, else the first tree learner.
std::vector<double> cheap_log(const TargetModel& model, const Matrix& m);

// The split-conformal half-width of predictions `predicted` of the calibration rows' `y`:
// the ceil((n+1)·coverage)-th smallest absolute residual (infinite when n is too small).
double conformal_half_width(const std::vector<double>& measured,
                            const std::vector<double>& predicted, double coverage);

// The log1p half-width of a prediction for a network family the model never saw: the
// `coverage` quantile of leave-one-family-out residuals of the additive base (`additive`'s
// terms refitted on `rows` without each family in turn, to `linear`, and scored in log1p space
// against `y`), each family weighing alike, at level coverage x (F + 1) / F over F families (at
// most 1: the largest residual). 0 (none) with fewer than kMinFamilies families among `rows`.
inline constexpr std::size_t kMinFamilies = 3;
double family_half_width(const Additive& additive, const float* x, std::size_t cols,
                         const std::vector<std::size_t>& rows,
                         const std::vector<std::string>& family, const std::vector<double>& y,
                         const std::vector<double>& linear, double coverage);

// A fitted target and the notes of its fit (a corrector skipped, unbounded intervals).
struct TargetFit {
  TargetModel model;
  std::vector<std::string> notes;
};

// Fits a target's specialist on the rows of `m` by `roles`: members, blend weights, the
// low-batch corrector when `corrector`, and the conformal half-width. `additive`: `m`'s last
// column is the target's additive prior (PriorMode::kAdditive's base; without it the ridge is).
TargetFit fit_target(const TargetInfo& info, const Matrix& m, const std::vector<double>& y,
                     const std::vector<Role>& roles, const Dataset& data, const FitOptions& options,
                     bool corrector, bool additive);

// Out-of-fold log1p predictions of a fitted target for its training rows: each fold's members
// are retrained (same round counts, prior and weights) on the other folds.
std::vector<double> out_of_fold(const TargetModel& fitted, const Matrix& m,
                                const std::vector<double>& y, const std::vector<Role>& roles,
                                const Dataset& data, const FitOptions& options);

}  // namespace carb::model_detail
