// The priors of a target's learners: the ridge in log space (a member, or the base the trees
// correct) and the additive layer-cost prior of a time-like target. Private to the model module.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace carb::model_detail {

// Ridge regression in log space on standardised features (Eigen), the physics prior.
struct Ridge {
  std::vector<double> mean, scale, coef;
  double intercept = 0;
  double lambda = 0;

  double predict(const float* row) const {
    double value = intercept;
    for (std::size_t j = 0; j < coef.size(); ++j) {
      value += coef[j] * ((static_cast<double>(row[j]) - mean[j]) / scale[j]);
    }
    return value;
  }

  static Ridge fit(const std::vector<const float*>& rows, std::size_t cols,
                   const std::vector<double>& y, double lambda);

  nlohmann::json to_json() const;
  static Ridge from_json(const nlohmann::json& j);
};

// The additive layer-cost prior of a time-like target (latency, energy): a non-negative linear
// model in the target's linear space over the per-layer-class totals, value ~ intercept +
// sum_c (a_c MACs_c + b_c bytes_c + d_c layers_c), fitted for least relative squared error
// on the training rows. Its log1p prediction is an extra feature of the target's learners.
// A kernel's (kernel_columns_of) is the same over one kernel: its MACs and bytes, each gated by
// the indicator of its kind (0 or 1), and the indicator itself.
struct Additive {
  static constexpr std::size_t kUngated = static_cast<std::size_t>(-1);
  // The ridge on a gated term, in the column-scaled problem (a column's squared norm is 1).
  static constexpr double kGatedRidge = 0.1;
  std::vector<std::size_t> columns;  // feature indices
  std::vector<bool> logged;          // the column holds log1p of the total (else the total)
  std::vector<std::size_t> gates;    // the column a term is multiplied by, or kUngated
  std::vector<double> coef;          // >= 0, per column
  double intercept = 0;              // >= 0

  bool empty() const { return columns.empty(); }

  // Term k's value on a row, before its coefficient.
  double input(std::size_t k, const float* row) const {
    const double x = row[columns[k]];
    const double value = logged[k] ? std::expm1(x) : x;
    return gates[k] == kUngated ? value : value * row[gates[k]];
  }

  double linear(const float* row) const {
    double value = intercept;
    for (std::size_t k = 0; k < columns.size(); ++k) value += coef[k] * input(k, row);
    return value;
  }
  double log_prediction(const float* row) const { return std::log1p(std::max(0.0, linear(row))); }

  // The columns of the per-layer-class totals in a feature list (none for a table).
  static Additive columns_of(const std::vector<std::string>& names);
  // Peak memory's: the weights' bytes, the activations' (all, the analytic peak's and the
  // analytic peak with the weights), so value ~ intercept + sum of non-negative multiples of
  // them (none for a table).
  static Additive memory_columns_of(const std::vector<std::string>& names);
  // A kernel's (engine::kernel_feature_names): per kind of kernel ("is_" columns), its MACs and
  // input, output and weight bytes, and the kind's indicator (none where those are absent).
  static Additive kernel_columns_of(const std::vector<std::string>& names);

  // The same terms with no coefficients, for a refit.
  Additive terms() const {
    Additive copy;
    copy.columns = columns;
    copy.logged = logged;
    copy.gates = gates;
    return copy;
  }

  // Fits the coefficients on `rows` of `x` (`cols` wide) to linear targets `y` (> 0):
  // min sum_i ((prediction_i - y_i) / y_i)^2 subject to coef >= 0, by projected coordinate
  // descent on the normal equations of the column-scaled problem.
  void fit(const float* x, std::size_t cols, const std::vector<std::size_t>& rows,
           const std::vector<double>& y);

  nlohmann::json to_json(const std::vector<std::string>& names) const;
  static Additive from_json(const nlohmann::json& j, const std::vector<std::string>& names);
};

}  // namespace carb::model_detail
