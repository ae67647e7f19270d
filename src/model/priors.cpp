// The ridge and additive priors (priors.hpp): their fits and their parts of the model file.
#include "priors.hpp"

#include <Eigen/Dense>
#include <numeric>
#include <stdexcept>

#include "carb/model.hpp"

namespace carb::model_detail {

using nlohmann::json;

Ridge Ridge::fit(const std::vector<const float*>& rows, std::size_t cols,
                 const std::vector<double>& y, double lambda) {
  Ridge ridge;
  ridge.lambda = lambda;
  const auto n = static_cast<Eigen::Index>(rows.size());
  ridge.mean.assign(cols, 0);
  ridge.scale.assign(cols, 1);
  for (std::size_t j = 0; j < cols; ++j) {
    double sum = 0, squares = 0;
    for (const float* row : rows) sum += row[j];
    const double mean = sum / static_cast<double>(n);
    for (const float* row : rows) squares += (row[j] - mean) * (row[j] - mean);
    const double sd = std::sqrt(squares / static_cast<double>(n));
    ridge.mean[j] = mean;
    ridge.scale[j] = sd > 1e-12 ? sd : 1.0;  // a constant column contributes nothing
  }
  Eigen::MatrixXd x(n, static_cast<Eigen::Index>(cols));
  Eigen::VectorXd target(n);
  const double y_mean = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      x(i, static_cast<Eigen::Index>(j)) =
          (rows[static_cast<std::size_t>(i)][j] - ridge.mean[j]) / ridge.scale[j];
    }
    target(i) = y[static_cast<std::size_t>(i)] - y_mean;
  }
  Eigen::MatrixXd gram = x.transpose() * x;
  gram.diagonal().array() += lambda * static_cast<double>(n);
  const Eigen::VectorXd beta = gram.ldlt().solve(x.transpose() * target);
  ridge.coef.assign(beta.data(), beta.data() + beta.size());
  ridge.intercept = y_mean;
  return ridge;
}

json Ridge::to_json() const {
  return {{"mean", mean},
          {"scale", scale},
          {"coef", coef},
          {"intercept", intercept},
          {"lambda", lambda}};
}

Ridge Ridge::from_json(const json& j) {
  Ridge ridge;
  j.at("mean").get_to(ridge.mean);
  j.at("scale").get_to(ridge.scale);
  j.at("coef").get_to(ridge.coef);
  j.at("intercept").get_to(ridge.intercept);
  j.at("lambda").get_to(ridge.lambda);
  if (ridge.mean.size() != ridge.coef.size() || ridge.scale.size() != ridge.coef.size()) {
    throw std::invalid_argument("ridge prior: mean, scale and coef differ in length");
  }
  return ridge;
}

Additive Additive::columns_of(const std::vector<std::string>& names) {
  Additive additive;
  for (std::size_t j = 0; j < names.size(); ++j) {
    const std::string& name = names[j];
    // The per-class totals, and the MACs PyTorch runs off oneDNN at a cost of their own.
    const bool log_total = name.rfind("log_macs_", 0) == 0 || name.rfind("log_bytes_", 0) == 0 ||
                           name == "log_torch_native_macs";
    if (log_total || name.rfind("layers_", 0) == 0) {
      additive.columns.push_back(j);
      additive.logged.push_back(log_total);
    }
  }
  return additive;
}

Additive Additive::memory_columns_of(const std::vector<std::string>& names) {
  Additive additive;
  for (const char* wanted :
       {"log_param_bytes", "log_activation_bytes", "log_peak_activation_bytes",
        "log_analytic_peak_bytes", "log_engine_arena_bytes", "log_prepare_peak_bytes"}) {
    const std::optional<std::size_t> column = feature_column(names, wanted);
    if (!column) continue;
    additive.columns.push_back(*column);
    additive.logged.push_back(true);
  }
  return additive;
}

void Additive::fit(const float* x, std::size_t cols, const std::vector<std::size_t>& rows,
                   const std::vector<double>& y) {
  const std::size_t k = columns.size() + 1;  // + the intercept
  Eigen::MatrixXd a(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(k));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const float* row = x + rows[r] * cols;
    const double weight = y[rows[r]] > 0 ? 1.0 / y[rows[r]] : 0.0;  // a zero adds nothing
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const double value = row[columns[c]];
      a(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c)) =
          (logged[c] ? std::expm1(value) : value) * weight;
    }
    a(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(k - 1)) = weight;
  }
  Eigen::VectorXd norm = a.colwise().norm().transpose();
  for (Eigen::Index c = 0; c < norm.size(); ++c) {
    if (norm(c) == 0) norm(c) = 1;  // a column that is zero on every row stays zero
    a.col(c) /= norm(c);
  }
  Eigen::MatrixXd gram = a.transpose() * a;
  gram.diagonal().array() += 1e-9;
  const Eigen::VectorXd b = a.transpose() * Eigen::VectorXd::Ones(a.rows());
  Eigen::VectorXd w = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(k));
  Eigen::VectorXd gradient = -b;  // gram * w - b
  for (int sweep = 0; sweep < 5000; ++sweep) {
    double change = 0;
    for (Eigen::Index c = 0; c < w.size(); ++c) {
      const double next = std::max(0.0, w(c) - gradient(c) / gram(c, c));
      const double delta = next - w(c);
      if (delta != 0) {
        gradient += delta * gram.col(c);
        w(c) = next;
        change = std::max(change, std::abs(delta));
      }
    }
    if (change < 1e-12) break;
  }
  coef.resize(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c) {
    coef[c] = w(static_cast<Eigen::Index>(c)) / norm(static_cast<Eigen::Index>(c));
  }
  intercept = w(static_cast<Eigen::Index>(k - 1)) / norm(static_cast<Eigen::Index>(k - 1));
}

json Additive::to_json(const std::vector<std::string>& names) const {
  json terms = json::object();
  for (std::size_t c = 0; c < columns.size(); ++c) terms[names[columns[c]]] = coef[c];
  return {{"intercept", intercept}, {"coef", terms}};
}

Additive Additive::from_json(const json& j, const std::vector<std::string>& names) {
  // The terms are those of columns_of (latency, energy) or memory_columns_of (memory).
  Additive additive = columns_of(names);
  const json& terms = j.at("coef");
  if (additive.columns.empty() || terms.size() != additive.columns.size() ||
      !terms.contains(names[additive.columns[0]])) {
    additive = memory_columns_of(names);
  }
  if (additive.columns.empty() || terms.size() != additive.columns.size()) {
    throw std::invalid_argument("additive prior: its terms differ from the features");
  }
  j.at("intercept").get_to(additive.intercept);
  for (std::size_t c = 0; c < additive.columns.size(); ++c) {
    additive.coef.push_back(terms.at(names[additive.columns[c]]).get<double>());
  }
  // The fit keeps every coefficient finite and >= 0; anything else is not a fitted prior.
  const auto fitted = [](double value) { return std::isfinite(value) && value >= 0; };
  if (!fitted(additive.intercept) ||
      !std::all_of(additive.coef.begin(), additive.coef.end(), fitted)) {
    throw std::invalid_argument("additive prior: a coefficient is negative or not finite");
  }
  return additive;
}

}  // namespace carb::model_detail
