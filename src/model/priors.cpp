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
      additive.gates.push_back(kUngated);
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
    additive.gates.push_back(kUngated);
  }
  return additive;
}

Additive Additive::kernel_columns_of(const std::vector<std::string>& names) {
  Additive additive;
  // A table's column spanning 1.5 decades or more is in log1p space, named "log_..."
  // (dataset_from_table).
  std::vector<std::pair<std::size_t, bool>> sizes;  // column, logged
  for (const std::string wanted : {"macs", "in_bytes", "out_bytes", "weight_bytes"}) {
    if (const auto column = feature_column(names, wanted)) {
      sizes.emplace_back(*column, false);
    } else if (const auto logged = feature_column(names, "log_" + wanted)) {
      sizes.emplace_back(*logged, true);
    } else {
      return additive;
    }
  }
  // Every kind's, shared: what a kind with no rows of its own (or few) is priced by.
  for (const auto& [size, logged] : sizes) {
    additive.columns.push_back(size);
    additive.logged.push_back(logged);
    additive.gates.push_back(kUngated);
  }
  for (std::size_t j = 0; j < names.size(); ++j) {
    if (names[j].rfind("is_", 0) != 0) continue;
    for (const auto& [size, logged] : sizes) {
      additive.columns.push_back(size);
      additive.logged.push_back(logged);
      additive.gates.push_back(j);
    }
    additive.columns.push_back(j);  // the kind's own cost per kernel
    additive.logged.push_back(false);
    additive.gates.push_back(kUngated);
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
      a(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c)) = input(c, row) * weight;
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
  // A gated term is a kind's own difference from the shared ones: ridged towards 0.
  for (std::size_t c = 0; c < columns.size(); ++c) {
    if (gates[c] != kUngated)
      gram(static_cast<Eigen::Index>(c), static_cast<Eigen::Index>(c)) += kGatedRidge;
  }
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

namespace {

// A term's name in the model file: its column's, times its gate's ("macs*is_fc").
std::string term_name(const Additive& additive, std::size_t k,
                      const std::vector<std::string>& names) {
  const std::string& name = names[additive.columns[k]];
  return additive.gates[k] == Additive::kUngated ? name : name + "*" + names[additive.gates[k]];
}

}  // namespace

json Additive::to_json(const std::vector<std::string>& names) const {
  json terms = json::object();
  for (std::size_t c = 0; c < columns.size(); ++c) terms[term_name(*this, c, names)] = coef[c];
  return {{"intercept", intercept}, {"coef", terms}};
}

Additive Additive::from_json(const json& j, const std::vector<std::string>& names) {
  // The terms are those of columns_of (latency, energy), memory_columns_of (memory) or
  // kernel_columns_of (a kernel's latency).
  const json& terms = j.at("coef");
  Additive additive;
  for (const auto of : {&columns_of, &memory_columns_of, &kernel_columns_of}) {
    additive = of(names);
    if (!additive.empty() && terms.size() == additive.columns.size() &&
        terms.contains(term_name(additive, 0, names))) {
      break;
    }
    additive = Additive{};
  }
  if (additive.empty()) {
    throw std::invalid_argument("additive prior: its terms differ from the features");
  }
  j.at("intercept").get_to(additive.intercept);
  for (std::size_t c = 0; c < additive.columns.size(); ++c) {
    const std::string name = term_name(additive, c, names);
    if (!terms.contains(name)) {
      throw std::invalid_argument("additive prior: no term " + name);
    }
    additive.coef.push_back(terms.at(name).get<double>());
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
