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
struct Additive {
  std::vector<std::size_t> columns;  // feature indices
  std::vector<bool> logged;          // the column holds log1p of the total (else the total)
  std::vector<double> coef;          // >= 0, per column
  double intercept = 0;              // >= 0

  bool empty() const { return columns.empty(); }

  double linear(const float* row) const {
    double value = intercept;
    for (std::size_t k = 0; k < columns.size(); ++k) {
      const double x = row[columns[k]];
      value += coef[k] * (logged[k] ? std::expm1(x) : x);
    }
    return value;
  }
  double log_prediction(const float* row) const { return std::log1p(std::max(0.0, linear(row))); }

  // The columns of the per-layer-class totals in a feature list (none for a table).
  static Additive columns_of(const std::vector<std::string>& names);
  // Peak memory's: the weights' bytes, the activations' (all, the analytic peak's and the
  // analytic peak with the weights), so value ~ intercept + sum of non-negative multiples of
  // them (none for a table).
  static Additive memory_columns_of(const std::vector<std::string>& names);

  // Fits the coefficients on `rows` of `x` (`cols` wide) to linear targets `y` (> 0):
  // min sum_i ((prediction_i - y_i) / y_i)^2 subject to coef >= 0, by projected coordinate
  // descent on the normal equations of the column-scaled problem.
  void fit(const float* x, std::size_t cols, const std::vector<std::size_t>& rows,
           const std::vector<double>& y);

  nlohmann::json to_json(const std::vector<std::string>& names) const;
  static Additive from_json(const nlohmann::json& j, const std::vector<std::string>& names);
};

}  // namespace carb::model_detail
