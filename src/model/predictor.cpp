// The CARB ensemble: fitting (split, prior, members with early stopping, blend, cascade with
// out-of-fold upstream predictions, low-batch corrector, conformal intervals), prediction, and
// the model file.
#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include "carb/error.hpp"
#include "carb/model.hpp"
#include "carb/version.hpp"
#include "transfer.hpp"
#include "xgb.hpp"

namespace carb {

using nlohmann::json;

std::string_view to_string(PriorMode mode) {
  switch (mode) {
    case PriorMode::kNone:
      return "none";
    case PriorMode::kMember:
      return "member";
    case PriorMode::kBase:
      return "base";
  }
  return "?";
}

std::optional<PriorMode> parse_prior_mode(std::string_view text) {
  for (PriorMode mode : {PriorMode::kNone, PriorMode::kMember, PriorMode::kBase}) {
    if (to_string(mode) == text) return mode;
  }
  return std::nullopt;
}

std::string_view to_string(LearnerKind kind) {
  switch (kind) {
    case LearnerKind::kDepthwise:
      return "depthwise";
    case LearnerKind::kLeafwise:
      return "leafwise";
    case LearnerKind::kForest:
      return "forest";
    case LearnerKind::kRidge:
      return "ridge";
  }
  return "?";
}

namespace {

// An integer field of a model file. nlohmann's get<int>() converts a real such as 2e107 with a
// cast whose result is undefined (UBSan, fuzz/model_fuzz.cpp); this refuses what is no integer
// of the type instead. Throws std::invalid_argument.
template <typename Integer>
Integer integer_of(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const auto number = value.get<std::uint64_t>();
    if (number <= static_cast<std::uint64_t>(std::numeric_limits<Integer>::max())) {
      return static_cast<Integer>(number);
    }
  } else if (value.is_number_integer()) {
    const auto number = value.get<std::int64_t>();
    if (number >= static_cast<std::int64_t>(std::numeric_limits<Integer>::min()) &&
        (number < 0 || static_cast<std::uint64_t>(number) <=
                           static_cast<std::uint64_t>(std::numeric_limits<Integer>::max()))) {
      return static_cast<Integer>(number);
    }
  }
  throw std::invalid_argument(value.dump().substr(0, 40) + " is not an integer in range");
}

// A number XGBoost writes as a string ("4"), as a whole number >= 0.
long long count_of(const nlohmann::json& params, const char* field) {
  const std::string text = params.at(field).get<std::string>();
  std::size_t used = 0;
  long long value = -1;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < 0 || value > (1LL << 31)) {
    throw std::invalid_argument(std::string(field) + " '" + text + "'");
  }
  return value;
}

// XGBoost 1.7 trusts a model's trees: node arrays shorter than num_nodes corrupt its heap and a
// child pointing back up makes prediction loop forever (both found by fuzz/model_fuzz.cpp). So
// every tree of a model file is checked before XGBoost sees it; throws std::invalid_argument.
void check_tree(const nlohmann::json& tree) {
  const auto count = [&](const char* field) {
    return static_cast<std::size_t>(count_of(tree.at("tree_param"), field));
  };
  const std::size_t nodes = count("num_nodes");
  const std::size_t features = count("num_feature");
  if (nodes == 0) throw std::invalid_argument("a tree without nodes");
  // XGBoost indexes its categorical arrays by one another unchecked; carb's trees have no
  // categorical splits, no deleted nodes and scalar leaves.
  for (const char* field :
       {"categories", "categories_nodes", "categories_segments", "categories_sizes"}) {
    if (!tree.at(field).is_array() || !tree.at(field).empty()) {
      throw std::invalid_argument(std::string("a tree's ") + field + " is not empty");
    }
  }
  if (count("num_deleted") != 0 || count("size_leaf_vector") != 0) {
    throw std::invalid_argument("a tree with deleted nodes or leaf vectors");
  }
  for (const char* field :
       {"left_children", "right_children", "parents", "split_indices", "split_conditions",
        "split_type", "default_left", "base_weights", "loss_changes", "sum_hessian"}) {
    if (!tree.at(field).is_array() || tree.at(field).size() != nodes) {
      throw std::invalid_argument(std::string("a tree's ") + field + " does not have num_nodes (" +
                                  std::to_string(nodes) + ") entries");
    }
  }
  const nlohmann::json& left = tree.at("left_children");
  const nlohmann::json& right = tree.at("right_children");
  // XGBoost looks every node's parent up unchecked: each node's parent is the node that names it
  // as a child, the root's is XGBoost's "none" (2^31 - 1).
  std::vector<long long> parent_of(nodes, -1);
  parent_of[0] = (1LL << 31) - 1;
  for (std::size_t node = 0; node < nodes; ++node) {
    const auto child = [&](const nlohmann::json& children) {
      return integer_of<long long>(children[node]);
    };
    const long long l = child(left);
    const long long r = child(right);
    if (l == -1 && r == -1) continue;  // a leaf
    // Nodes are numbered as the tree grows, so a child always comes after its parent.
    if (l <= static_cast<long long>(node) || r <= static_cast<long long>(node) ||
        l >= static_cast<long long>(nodes) || r >= static_cast<long long>(nodes)) {
      throw std::invalid_argument("a tree node's children are not later nodes of the tree");
    }
    if (parent_of[static_cast<std::size_t>(l)] != -1 ||
        parent_of[static_cast<std::size_t>(r)] != -1 || l == r) {
      throw std::invalid_argument("a tree node with two parents");
    }
    parent_of[static_cast<std::size_t>(l)] = static_cast<long long>(node);
    parent_of[static_cast<std::size_t>(r)] = static_cast<long long>(node);
    if (integer_of<int>(tree.at("split_type")[node]) != 0) {
      throw std::invalid_argument("a categorical split (carb models have none)");
    }
    const long long feature = integer_of<long long>(tree.at("split_indices")[node]);
    if (feature < 0 || feature >= static_cast<long long>(std::max<std::size_t>(features, 1))) {
      throw std::invalid_argument("a split on feature " + std::to_string(feature) + " of " +
                                  std::to_string(features));
    }
  }
  for (std::size_t node = 0; node < nodes; ++node) {
    if (parent_of[node] == -1 ||
        integer_of<long long>(tree.at("parents")[node]) != parent_of[node]) {
      throw std::invalid_argument("a tree's parents do not match its children");
    }
  }
}

// XGBoost 1.7 loads a gbtree's trees in parallel, each into the slot its "id" names: two trees
// with one id are loaded into one slot by two threads at once, a double free (found by
// fuzz/model_fuzz.cpp). So ids are their positions, num_trees is the count, tree_info has one
// group (0: carb's models are single-output regressions) per tree, and forests divide evenly.
void check_gbtree(const nlohmann::json& model) {
  const nlohmann::json& trees = model.at("trees");
  if (!trees.is_array()) throw std::invalid_argument("a gbtree's trees are not an array");
  const nlohmann::json& params = model.at("gbtree_model_param");
  const auto n = static_cast<long long>(trees.size());
  if (count_of(params, "num_trees") != n) {
    throw std::invalid_argument("a gbtree's num_trees is not its number of trees");
  }
  const long long parallel = count_of(params, "num_parallel_tree");
  if (parallel < 1 || n % parallel != 0) {
    throw std::invalid_argument("a gbtree's num_parallel_tree does not divide its trees");
  }
  const nlohmann::json& info = model.at("tree_info");
  if (!info.is_array() || static_cast<long long>(info.size()) != n) {
    throw std::invalid_argument("a gbtree's tree_info does not have one entry per tree");
  }
  for (long long t = 0; t < n; ++t) {
    if (integer_of<long long>(trees[static_cast<std::size_t>(t)].at("id")) != t) {
      throw std::invalid_argument("a gbtree's tree ids are not 0, 1, 2, ... in order");
    }
    if (integer_of<long long>(info[static_cast<std::size_t>(t)]) != 0) {
      throw std::invalid_argument("a tree of an output group other than 0");
    }
  }
}

// Every tree in an XGBoost model (gbtree, or dart's inner gbtree), checked, then loaded. The
// model and its trees must have `cols` features: XGBoost sizes its feature vector by the model's
// count and reads it at each split's index unchecked.
xgb::Booster load_booster(const nlohmann::json& model, std::size_t cols) {
  if (static_cast<std::size_t>(
          count_of(model.at("learner").at("learner_model_param"), "num_feature")) != cols) {
    throw std::invalid_argument("an XGBoost model with the wrong number of features");
  }
  std::vector<const nlohmann::json*> stack = {&model};
  while (!stack.empty()) {
    const nlohmann::json* node = stack.back();
    stack.pop_back();
    if (node->is_object() && node->contains("tree_param")) {
      check_tree(*node);
      if (static_cast<std::size_t>(count_of(node->at("tree_param"), "num_feature")) != cols) {
        throw std::invalid_argument("a tree with the wrong number of features");
      }
      continue;
    }
    if (node->is_object() && node->contains("gbtree_model_param")) check_gbtree(*node);
    if (node->is_structured()) {
      for (const auto& child : *node) stack.push_back(&child);
    }
  }
  return xgb::Booster::from_json(model.dump());
}

// Version 1: a model fitted on one device's data. Version 2: a transferred model (transfer_fit),
// which embeds its source model; plain models are still written as version 1, so older carbs
// read them.
constexpr int kModelFormat = 1;
constexpr int kTransferModelFormat = 2;
constexpr int kLowBatch = 8;      // the corrector's regime (method.md §4)
constexpr double kDamping = 0.9;  // the corrector's damping
constexpr double kMinRankCorrelation = 0.02;
constexpr std::size_t kMinRows = 40;

std::optional<LearnerKind> parse_learner(std::string_view text) {
  for (LearnerKind kind : {LearnerKind::kDepthwise, LearnerKind::kLeafwise, LearnerKind::kForest,
                           LearnerKind::kRidge}) {
    if (to_string(kind) == text) return kind;
  }
  return std::nullopt;
}

int thread_count(int requested) {
  if (requested > 0) return requested;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// ---------------------------------------------------------------------------------------------
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

  json to_json() const {
    return {{"mean", mean},
            {"scale", scale},
            {"coef", coef},
            {"intercept", intercept},
            {"lambda", lambda}};
  }
  static Ridge from_json(const json& j) {
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
  static Additive columns_of(const std::vector<std::string>& names) {
    Additive additive;
    for (std::size_t j = 0; j < names.size(); ++j) {
      const std::string& name = names[j];
      const bool log_total = name.rfind("log_macs_", 0) == 0 || name.rfind("log_bytes_", 0) == 0;
      if (log_total || name.rfind("layers_", 0) == 0) {
        additive.columns.push_back(j);
        additive.logged.push_back(log_total);
      }
    }
    return additive;
  }

  // Fits the coefficients on `rows` of `x` (`cols` wide) to linear targets `y` (> 0):
  // min sum_i ((prediction_i - y_i) / y_i)^2 subject to coef >= 0, by projected coordinate
  // descent on the normal equations of the column-scaled problem.
  void fit(const float* x, std::size_t cols, const std::vector<std::size_t>& rows,
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

  json to_json(const std::vector<std::string>& names) const {
    json terms = json::object();
    for (std::size_t c = 0; c < columns.size(); ++c) terms[names[columns[c]]] = coef[c];
    return {{"intercept", intercept}, {"coef", terms}};
  }
  static Additive from_json(const json& j, const std::vector<std::string>& names) {
    Additive additive = columns_of(names);
    j.at("intercept").get_to(additive.intercept);
    const json& terms = j.at("coef");
    if (terms.size() != additive.columns.size()) {
      throw std::invalid_argument("additive prior: its terms differ from the features");
    }
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
};

// ---------------------------------------------------------------------------------------------
// The split

enum class Role { kTrain, kValidation, kCalibration, kTest };

// Stratified, seeded assignment of rows to roles; within each stratum the shares are exact up to
// rounding. Our own Fisher-Yates over mt19937_64 (fully specified by the standard), so the same
// seed splits the same way with any standard library.
std::vector<Role> split_rows(const Dataset& data, const FitOptions& options) {
  std::mt19937_64 random(options.seed);
  std::map<int, std::vector<std::size_t>> strata;
  for (std::size_t i = 0; i < data.rows(); ++i) {
    const bool low = data.batch[i] > 0 && data.batch[i] <= kLowBatch;
    const int stratum =
        options.leave_low_batch_out ? (low ? -1 : data.stratum[i]) : data.stratum[i];
    strata[stratum].push_back(i);
  }
  std::vector<Role> roles(data.rows(), Role::kTrain);
  const double train = options.train_fraction;
  const double validation = options.validation_fraction;
  const double calibration = options.calibration_fraction;
  // Leave-low-batch-out: every low-batch row is a test row, the rest are split without a test.
  const double kept = options.leave_low_batch_out ? train + validation + calibration : 1.0;
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

// ---------------------------------------------------------------------------------------------
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
  Ridge prior;        // when prior_mode is kBase
  Additive additive;  // empty when the target has none; its prediction is the last extra column
  std::vector<Member> members;
  xgb::Booster corrector;  // empty when skipped
  double half_width = 0;   // conformal half-width, log1p space
  // Targets are modelled as log1p(scale x value): a power of ten that puts the smallest training
  // value at 10 or more, so log1p is a log where the data are (not linear near 0).
  double scale = 1;
  double cheap_half_width = std::numeric_limits<double>::infinity();  // of cheap_log()
  std::size_t calibration_rows = 0;
};

// Row-major rows of a feature matrix with extra columns appended (upstream predictions).
struct Matrix {
  std::vector<float> x;
  std::size_t cols = 0;
  const float* row(std::size_t i) const { return x.data() + i * cols; }
  std::size_t rows() const { return cols == 0 ? 0 : x.size() / cols; }
};

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

// The matrix a target's learners see: the features, the log1p predictions of its upstream
// targets (`logs`, by target) and its additive prior's log1p prediction.
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

// Each member's predictions (log1p space, prior base included) for the rows of `m`.
std::vector<std::vector<double>> member_predictions(const TargetModel& model, const Matrix& m) {
  const std::size_t rows = m.rows();
  std::vector<double> base(rows, 0);
  if (model.prior_mode == PriorMode::kBase) {
    for (std::size_t i = 0; i < rows; ++i) base[i] = model.prior.predict(m.row(i));
  }
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

// Log1p predictions of a target: blend plus the corrector.
std::vector<double> predict_log(const TargetModel& model, const Matrix& m, const int* batch) {
  std::vector<double> values = blend(model, member_predictions(model, m));
  apply_corrector(model, m, batch, values);
  return values;
}

// The cheapest member's log1p predictions (stage 1 of screening): the ridge prior when the
// trees correct it or it is a member, else the first tree learner.
std::vector<double> cheap_log(const TargetModel& model, const Matrix& m) {
  std::vector<double> values(m.rows());
  const Member* ridge = nullptr;
  for (const Member& member : model.members) {
    if (member.kind == LearnerKind::kRidge) ridge = &member;
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

// The split-conformal half-width of predictions `predicted` of the calibration rows' `y`:
// the ceil((n+1)·coverage)-th smallest absolute residual (infinite when n is too small).
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

struct TargetFit {
  TargetModel model;
  std::vector<std::string> notes;
};

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
      const double base =
          model.prior_mode == PriorMode::kBase ? model.prior.predict(sub.row(k)) : 0;
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

std::vector<std::size_t> rows_with(const std::vector<Role>& roles, Role role,
                                   const std::vector<double>& y) {
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < roles.size(); ++i) {
    if (roles[i] == role && !std::isnan(y[i])) rows.push_back(i);
  }
  return rows;
}

TargetFit fit_target(const TargetInfo& info, const Matrix& m, const std::vector<double>& y,
                     const std::vector<Role>& roles, const Dataset& data, const FitOptions& options,
                     bool corrector) {
  TargetFit fit;
  TargetModel& model = fit.model;
  model.info = info;
  model.available = true;
  model.prior_mode = options.prior;
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
  for (std::size_t row : calibration) calibration_batch.push_back(data.batch[row]);
  const std::vector<double> calibrated =
      predict_log(model, calibration_rows, calibration_batch.data());
  std::vector<double> measured;
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

// Out-of-fold log1p predictions of a fitted target for its training rows: each fold's members
// are retrained (same round counts, prior and weights) on the other folds.
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
    for (std::size_t row : out) batch.push_back(data.batch[row]);
    std::vector<double> values = blend(model, member_predictions(model, held));
    apply_corrector(fitted, held, batch.data(), values);
    for (std::size_t k = 0; k < out.size(); ++k) oof[out[k]] = values[k];
  }
  return oof;
}

json metrics_json(const Metrics& metrics) {
  json j = {{"n", metrics.n},
            {"r2", metrics.r2},
            {"mae", metrics.mae},
            {"mape", metrics.mape},
            {"within10", metrics.within10},
            {"spearman", metrics.spearman},
            {"slope", metrics.slope}};
  j["coverage"] = metrics.coverage ? json(*metrics.coverage) : json(nullptr);
  j["mean_width"] = metrics.mean_width ? json(*metrics.mean_width) : json(nullptr);
  return j;
}

Metrics metrics_from_json(const json& j) {
  Metrics metrics;
  j.at("n").get_to(metrics.n);
  j.at("r2").get_to(metrics.r2);
  j.at("mae").get_to(metrics.mae);
  j.at("mape").get_to(metrics.mape);
  j.at("within10").get_to(metrics.within10);
  j.at("spearman").get_to(metrics.spearman);
  j.at("slope").get_to(metrics.slope);
  if (!j.at("coverage").is_null()) metrics.coverage = j.at("coverage").get<double>();
  if (!j.at("mean_width").is_null()) metrics.mean_width = j.at("mean_width").get<double>();
  return metrics;
}

void read_evaluation(const json& evaluation, FitReport& report) {
  const json& split = evaluation.at("split");
  report.train_rows = integer_of<std::size_t>(split.at("train"));
  report.validation_rows = integer_of<std::size_t>(split.at("validation"));
  report.calibration_rows = integer_of<std::size_t>(split.at("calibration"));
  report.test_rows = integer_of<std::size_t>(split.at("test"));
  for (const json& s : evaluation.at("scores")) {
    report.scores.push_back({s.at("method").get<std::string>(), s.at("target").get<std::string>(),
                             metrics_from_json(s.at("metrics"))});
  }
  evaluation.at("notes").get_to(report.notes);
  report.fit_seconds = evaluation.at("fit_seconds").get<double>();
  if (evaluation.contains("fitted_ids")) evaluation.at("fitted_ids").get_to(report.fitted_ids);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct Predictor::Impl {
  std::string schema;
  std::vector<std::string> feature_names;
  std::vector<TargetInfo> targets;
  std::string device_fingerprint, device_name;
  std::map<std::string, std::size_t> instances;  // host instance -> rows fitted on
  DriftCorrection drift;
  double coverage = 0.9;
  FitOptions options;
  std::vector<TargetModel> models;  // one per target, cascade order
  FitReport report;
  TrainingDomain domain;  // of the fitted rows
  int threads = 0;
  // A transferred model's corrections over its source; null for a model fitted directly, and
  // then `models` holds the ensemble.
  std::shared_ptr<const model_detail::TransferLayer> transfer;

  // Log1p predictions of every available target, each from the matrix of the features plus the
  // log predictions of its upstream targets (the cascade), by `predict_one(model, matrix)`.
  template <typename PredictOne>
  std::vector<std::vector<double>> cascade(const float* x, std::size_t rows,
                                           PredictOne predict_one) const {
    std::vector<std::vector<double>> logs(models.size());
    for (std::size_t t = 0; t < models.size(); ++t) {
      const TargetModel& model = models[t];
      if (!model.available) continue;
      logs[t] = predict_one(model, target_matrix(model, x, rows, feature_names.size(), logs));
    }
    return logs;
  }

  std::vector<std::vector<double>> predict_logs(const float* x, std::size_t rows,
                                                const int* batch) const {
    return cascade(x, rows, [batch](const TargetModel& model, const Matrix& m) {
      return predict_log(model, m, batch);
    });
  }

  // The same with each target's cheapest member, cascading cheap predictions.
  std::vector<std::vector<double>> predict_cheap_logs(const float* x, std::size_t rows) const {
    return cascade(x, rows,
                   [](const TargetModel& model, const Matrix& m) { return cheap_log(model, m); });
  }

  std::vector<std::vector<TargetPrediction>> with_intervals(
      const std::vector<std::vector<double>>& logs, std::size_t rows, bool cheap) const {
    std::vector<std::vector<TargetPrediction>> out(models.size());
    for (std::size_t t = 0; t < models.size(); ++t) {
      const TargetModel& model = models[t];
      const double width = cheap ? model.cheap_half_width : model.half_width;
      out[t].resize(rows);
      for (std::size_t i = 0; i < rows; ++i) {
        TargetPrediction& p = out[t][i];
        if (!model.available) {
          p.reason = model.reason;
          continue;
        }
        p.available = true;
        p.value = std::max(0.0, std::expm1(logs[t][i]) / model.scale);
        p.low = std::min(p.value, std::max(0.0, std::expm1(logs[t][i] - width) / model.scale));
        p.high = std::max(p.value, std::expm1(logs[t][i] + width) / model.scale);
      }
    }
    return out;
  }
};

Predictor::Predictor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Predictor::Predictor(Predictor&&) noexcept = default;
Predictor& Predictor::operator=(Predictor&&) noexcept = default;
Predictor::~Predictor() = default;

const std::string& Predictor::schema() const { return impl_->schema; }
const std::vector<std::string>& Predictor::feature_names() const { return impl_->feature_names; }

const TrainingDomain& Predictor::training_domain() const { return impl_->domain; }
const std::vector<TargetInfo>& Predictor::targets() const { return impl_->targets; }
const std::string& Predictor::device_fingerprint() const { return impl_->device_fingerprint; }
const std::string& Predictor::device_name() const { return impl_->device_name; }
const std::map<std::string, std::size_t>& Predictor::device_instances() const {
  return impl_->instances;
}
const DriftCorrection& Predictor::drift() const { return impl_->drift; }
double Predictor::coverage() const { return impl_->coverage; }
const FitReport& Predictor::fit_report() const { return impl_->report; }

std::vector<std::vector<TargetPrediction>> Predictor::predict(const float* x, std::size_t rows,
                                                              const int* batch) const {
  if (impl_->transfer) return impl_->transfer->predict(x, rows, batch, false);
  return impl_->with_intervals(impl_->predict_logs(x, rows, batch), rows, false);
}

std::vector<std::vector<TargetPrediction>> Predictor::predict_cheap(const float* x,
                                                                    std::size_t rows) const {
  if (impl_->transfer) return impl_->transfer->predict(x, rows, nullptr, true);
  return impl_->with_intervals(impl_->predict_cheap_logs(x, rows), rows, true);
}

bool Predictor::transferred() const { return impl_->transfer != nullptr; }

const Predictor* Predictor::transfer_source() const {
  return impl_->transfer ? impl_->transfer->source.get() : nullptr;
}

std::vector<std::array<double, 4>> Predictor::additive_parts(const float* x, std::size_t rows,
                                                             std::size_t t) const {
  if (impl_->transfer) return impl_->transfer->source->additive_parts(x, rows, t);
  std::vector<std::array<double, 4>> parts;
  if (t >= impl_->models.size() || !impl_->models[t].available) return parts;
  const TargetModel& model = impl_->models[t];
  if (model.additive.empty()) return parts;
  const std::size_t cols = impl_->feature_names.size();
  parts.resize(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    const float* row = x + i * cols;
    std::array<double, 4> part{0, 0, 0, model.additive.intercept / model.scale};
    for (std::size_t k = 0; k < model.additive.columns.size(); ++k) {
      const std::string& name = impl_->feature_names[model.additive.columns[k]];
      const double value = row[model.additive.columns[k]];
      const double term =
          model.additive.coef[k] * (model.additive.logged[k] ? std::expm1(value) : value);
      const std::size_t kind = name.find("macs_") != std::string::npos    ? 0
                               : name.find("bytes_") != std::string::npos ? 1
                                                                          : 2;
      part[kind] += term / model.scale;
    }
    parts[i] = part;
  }
  return parts;
}

std::vector<std::vector<std::pair<std::string, std::vector<double>>>> Predictor::predict_members(
    const float* x, std::size_t rows, const int* batch) const {
  if (impl_->transfer) return impl_->transfer->members(x, rows, batch);
  const auto logs = impl_->predict_logs(x, rows, batch);
  std::vector<std::vector<std::pair<std::string, std::vector<double>>>> out(impl_->models.size());
  for (std::size_t t = 0; t < impl_->models.size(); ++t) {
    const TargetModel& model = impl_->models[t];
    if (!model.available) continue;
    const Matrix m = target_matrix(model, x, rows, impl_->feature_names.size(), logs);
    const auto members = member_predictions(model, m);
    for (std::size_t k = 0; k < members.size(); ++k) {
      out[t].emplace_back(std::string(to_string(model.members[k].kind)), members[k]);
    }
    if (model.prior_mode == PriorMode::kBase) {
      std::vector<double> prior(rows);
      for (std::size_t i = 0; i < rows; ++i) prior[i] = model.prior.predict(m.row(i));
      out[t].emplace_back("ridge-prior", std::move(prior));
    }
    if (!model.additive.empty()) {
      std::vector<double> additive(rows);
      for (std::size_t i = 0; i < rows; ++i) {
        additive[i] = model.additive.log_prediction(x + i * impl_->feature_names.size());
      }
      out[t].emplace_back("additive-prior", std::move(additive));
    }
    if (!model.corrector.empty()) out[t].emplace_back("carb-no-corrector", blend(model, members));
    for (auto& [name, values] : out[t]) {
      for (double& value : values) value = std::max(0.0, std::expm1(value) / model.scale);
    }
  }
  return out;
}

namespace {
// Whether target `t` of `data` gets an additive layer-cost prior: latency and energy of an
// architecture dataset (sums over layers; memory is a peak, not a sum).
bool time_like(const Dataset& data, std::size_t t) {
  return data.schema == kArchitectureSchema &&
         (data.targets[t].name == "latency" || data.targets[t].name == "energy") &&
         !Additive::columns_of(data.feature_names).empty();
}
}  // namespace

Predictor Predictor::fit(const Dataset& data, const FitOptions& options, FitReport* report_out) {
  const auto started = std::chrono::steady_clock::now();
  if (options.coverage <= 0 || options.coverage >= 1) {
    throw Error(ErrorCategory::kUsage, "coverage must be between 0 and 1 (exclusive)", "coverage");
  }
  auto impl = std::make_unique<Impl>();
  impl->schema = data.schema;
  impl->feature_names = data.feature_names;
  impl->targets = data.targets;
  impl->domain = TrainingDomain::of(data);
  impl->device_fingerprint = data.device_fingerprint;
  impl->device_name = data.device_name;
  impl->instances = data.instances;
  if (data.drift.applied) impl->drift = data.drift;
  impl->coverage = options.coverage;
  impl->options = options;
  FitReport& report = impl->report;

  // Targets in log1p(scale x value) space; bad values are input errors.
  std::vector<std::vector<double>> y(data.targets.size());
  std::vector<double> scales(data.targets.size(), 1.0);
  for (std::size_t t = 0; t < data.targets.size(); ++t) {
    for (std::size_t i = 0; i < data.rows(); ++i) {
      const double value = data.y[t][i];
      if (!std::isnan(value) && (value < 0 || !std::isfinite(value))) {
        throw Error(ErrorCategory::kInput, data.ids[i] + ": target " + data.targets[t].name +
                                               " is " + std::to_string(value) +
                                               "; measurements must be finite and >= 0");
      }
    }
    double smallest = std::numeric_limits<double>::infinity();
    for (double value : data.y[t]) {
      if (!std::isnan(value) && value > 0) smallest = std::min(smallest, value);
    }
    scales[t] = std::isfinite(smallest) && smallest < 10
                    ? std::pow(10.0, std::ceil(std::log10(10 / smallest)))
                    : 1.0;
    for (double value : data.y[t]) {
      y[t].push_back(std::isnan(value) ? value : std::log1p(scales[t] * value));
    }
  }
  const std::vector<Role> roles = split_rows(data, options);
  for (std::size_t i = 0; i < roles.size(); ++i) {
    if (roles[i] != Role::kTest) report.fitted_ids.push_back(data.ids[i]);
  }
  for (Role role : roles) {
    (role == Role::kTrain         ? report.train_rows
     : role == Role::kValidation  ? report.validation_rows
     : role == Role::kCalibration ? report.calibration_rows
                                  : report.test_rows)++;
  }

  std::vector<std::vector<double>> upstream_logs(data.targets.size());  // for downstream features
  bool any_available = false;
  for (std::size_t t = 0; t < data.targets.size(); ++t) {
    TargetModel unavailable;
    unavailable.info = data.targets[t];
    const std::size_t measured = static_cast<std::size_t>(
        std::count_if(y[t].begin(), y[t].end(), [](double v) { return !std::isnan(v); }));
    if (measured == 0) {
      unavailable.reason = data.missing_reason[t].empty()
                               ? "no " + data.targets[t].name + " values in the data"
                               : data.missing_reason[t];
      report.notes.push_back(data.targets[t].name + ": unavailable, " + unavailable.reason);
      impl->models.push_back(std::move(unavailable));
      continue;
    }
    const auto counts = [&](Role role) { return rows_with(roles, role, y[t]).size(); };
    if (measured < kMinRows || counts(Role::kTrain) < 10 || counts(Role::kValidation) < 2 ||
        counts(Role::kCalibration) < 2 || counts(Role::kTest) < 2) {
      throw Error(ErrorCategory::kInput,
                  "too few rows to split: " + std::to_string(measured) + " measured rows of " +
                      data.targets[t].name + ", need at least " + std::to_string(kMinRows) +
                      " (70% train, 7.5% validation, 7.5% calibration, 15% test)");
    }
    any_available = true;
    // Upstream targets that were fitted feed this one (the cascade).
    std::vector<std::size_t> upstream;
    if (options.cascade) {
      for (std::size_t u = 0; u < t; ++u) {
        if (impl->models[u].available) upstream.push_back(u);
      }
    }
    TargetModel shape;
    shape.upstream = upstream;
    if (data.schema == kArchitectureSchema && !time_like(data, t)) {
      // Memory is a peak, not a sum over layers: it keeps the whole-network features.
      for (std::size_t j = 0; j < data.cols(); ++j) {
        if (!is_layer_feature(data.feature_names[j])) shape.columns.push_back(j);
      }
    }
    if (time_like(data, t)) {
      shape.additive = Additive::columns_of(data.feature_names);
      std::vector<double> linear;
      for (double value : data.y[t]) linear.push_back(scales[t] * value);
      shape.additive.fit(data.x.data(), data.cols(), rows_with(roles, Role::kTrain, y[t]), linear);
    }
    const Matrix m = target_matrix(shape, data.x.data(), data.rows(), data.cols(), upstream_logs);
    TargetFit fit = fit_target(data.targets[t], m, y[t], roles, data, options, options.corrector);
    fit.model.upstream = upstream;
    fit.model.additive = std::move(shape.additive);
    fit.model.columns = std::move(shape.columns);
    fit.model.scale = scales[t];
    report.notes.insert(report.notes.end(), fit.notes.begin(), fit.notes.end());

    // What downstream targets see: out-of-fold predictions on training rows, the model's own
    // predictions elsewhere.
    const bool downstream = options.cascade && t + 1 < data.targets.size();
    if (downstream) {
      std::vector<double> logs = predict_log(fit.model, m, data.batch.data());
      const std::vector<double> oof = out_of_fold(fit.model, m, y[t], roles, data, options);
      for (std::size_t i = 0; i < logs.size(); ++i) {
        if (roles[i] == Role::kTrain && !std::isnan(oof[i])) logs[i] = oof[i];
      }
      upstream_logs[t] = std::move(logs);
    }
    impl->models.push_back(std::move(fit.model));
  }
  if (!any_available) {
    throw Error(ErrorCategory::kInput, "no target has any measured value: nothing to fit");
  }

  // Stage 1's cheap predictions get their own intervals, calibrated the same way.
  const auto cheap = impl->predict_cheap_logs(data.x.data(), data.rows());
  for (std::size_t t = 0; t < impl->models.size(); ++t) {
    if (!impl->models[t].available) continue;
    std::vector<double> measured, predicted;
    for (std::size_t row : rows_with(roles, Role::kCalibration, y[t])) {
      measured.push_back(y[t][row]);
      predicted.push_back(cheap[t][row]);
    }
    impl->models[t].cheap_half_width = conformal_half_width(measured, predicted, options.coverage);
  }

  Predictor predictor(std::move(impl));
  if (options.baselines) {
    // Scores on the test split, with the baselines fitted on the training split.
    Impl& self = *predictor.impl_;
    std::vector<std::size_t> test;
    for (std::size_t i = 0; i < roles.size(); ++i) {
      if (roles[i] == Role::kTest) test.push_back(i);
    }
    const Dataset test_data = subset(data, test);
    report.scores = evaluate(predictor, test_data);

    const auto flops = std::find(data.feature_names.begin(), data.feature_names.end(), "log_flops");
    for (std::size_t t = 0; t < data.targets.size(); ++t) {
      if (!self.models[t].available) continue;
      const auto train = rows_with(roles, Role::kTrain, y[t]);
      std::vector<std::size_t> scored;
      for (std::size_t i : test) {
        if (!std::isnan(y[t][i])) scored.push_back(i);
      }
      std::vector<double> measured;
      for (std::size_t i : scored) measured.push_back(data.y[t][i]);
      // FLOPs alone, log-log least squares.
      if (flops != data.feature_names.end()) {
        const auto column = static_cast<std::size_t>(flops - data.feature_names.begin());
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        for (std::size_t i : train) {
          const double fx = data.row(i)[column];
          sx += fx;
          sy += y[t][i];
          sxx += fx * fx;
          sxy += fx * y[t][i];
        }
        const double n = static_cast<double>(train.size());
        const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
        const double intercept = (sy - slope * sx) / n;
        std::vector<double> predicted;
        for (std::size_t i : scored) {
          predicted.push_back(std::expm1(intercept + slope * data.row(i)[column]) / scales[t]);
        }
        report.scores.push_back(
            {"flops-loglinear", data.targets[t].name, score(measured, predicted)});
      }
      // Energy from measured latency times the mean power of the training rows.
      if (data.targets[t].name == "energy" && t + 1 < data.targets.size()) {
        const std::size_t latency = data.targets.size() - 1;
        double power = 0;
        std::size_t count = 0;
        for (std::size_t i : train) {
          if (std::isnan(data.y[latency][i])) continue;
          power += data.y[t][i] / (data.y[latency][i] / 1e3);
          ++count;
        }
        power /= static_cast<double>(std::max<std::size_t>(count, 1));
        std::vector<double> proxy_measured, proxy;
        for (std::size_t i : scored) {
          if (std::isnan(data.y[latency][i])) continue;
          proxy_measured.push_back(data.y[t][i]);
          proxy.push_back(power * data.y[latency][i] / 1e3);
        }
        report.scores.push_back(
            {"energy-proxy", data.targets[t].name, score(proxy_measured, proxy)});
      }
    }
    // The specialist alone: no cascade, no corrector.
    if (options.cascade || options.corrector) {
      FitOptions plain = options;
      plain.cascade = false;
      plain.corrector = false;
      plain.baselines = false;
      const Predictor specialist = Predictor::fit(data, plain, nullptr);
      for (const MethodScores& scores : evaluate(specialist, test_data)) {
        if (scores.method == "carb") {
          report.scores.push_back({"specialist", scores.target, scores.metrics});
        }
      }
    }
  }
  report.fit_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (report_out != nullptr) *report_out = report;
  return predictor;
}

std::vector<MethodScores> evaluate(const Predictor& predictor, const Dataset& data,
                                   const EngineMemoryPlanner* planner) {
  if (data.schema != predictor.schema() || data.feature_names != predictor.feature_names()) {
    throw Error(ErrorCategory::kInput, "the data's feature schema (" + data.schema +
                                           ") differs from the model's (" + predictor.schema() +
                                           ")");
  }
  auto predictions = predictor.predict(data.x.data(), data.rows(), data.batch.data());
  auto members = predictor.predict_members(data.x.data(), data.rows(), data.batch.data());
  if (planner != nullptr) {
    // carb's memory is the engine's plan; the model's own prediction stays beside it.
    std::vector<Config> configs;
    for (const std::string& id : data.ids) configs.push_back(parse_key(id));
    for (std::size_t t = 0; t < predictor.targets().size(); ++t) {
      if (predictor.targets()[t].name != "memory" || predictions[t].empty() ||
          !predictions[t][0].available) {
        continue;
      }
      std::vector<double> model;
      for (const TargetPrediction& p : predictions[t]) model.push_back(p.value);
      members[t].insert(members[t].begin(), {"memory-model", std::move(model)});
    }
    planner->apply(configs, predictions);
  }
  std::vector<MethodScores> out;
  for (std::size_t t = 0; t < predictor.targets().size(); ++t) {
    const auto& target = predictor.targets()[t];
    const auto column =
        std::find_if(data.targets.begin(), data.targets.end(),
                     [&](const TargetInfo& info) { return info.name == target.name; });
    if (column == data.targets.end() || predictions[t].empty() || !predictions[t][0].available) {
      continue;
    }
    const auto& y = data.y[static_cast<std::size_t>(column - data.targets.begin())];
    std::vector<std::size_t> rows;
    for (std::size_t i = 0; i < data.rows(); ++i) {
      if (!std::isnan(y[i])) rows.push_back(i);
    }
    if (rows.empty()) continue;
    std::vector<double> measured, value, low, high;
    for (std::size_t i : rows) {
      measured.push_back(y[i]);
      value.push_back(predictions[t][i].value);
      low.push_back(predictions[t][i].low);
      high.push_back(predictions[t][i].high);
    }
    out.push_back({"carb", target.name, score(measured, value, &low, &high)});
    for (const auto& [name, logs] : members[t]) {
      std::vector<double> values;
      for (std::size_t i : rows) values.push_back(logs[i]);
      out.push_back({name, target.name, score(measured, values)});
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The model file

std::string Predictor::to_json_text() const {
  return model_detail::PredictorFactory::to_json(*this).dump();  // compact: a third of the
                                                                 // indented size, loads faster
}

namespace model_detail {

json PredictorFactory::to_json(const Predictor& predictor) {
  const Predictor::Impl& self = *predictor.impl_;
  json scores = json::array();
  for (const MethodScores& s : self.report.scores) {
    scores.push_back(
        {{"method", s.method}, {"target", s.target}, {"metrics", metrics_json(s.metrics)}});
  }
  json file = {
      {"format", "carb-model"},
      {"format_version", self.transfer ? kTransferModelFormat : kModelFormat},
      {"carb_version", kVersion},
      {"git_commit", kGitCommit},
      {"device",
       {{"fingerprint", self.device_fingerprint},
        {"name", self.device_name},
        {"instances", self.instances}}},
      {"drift", self.drift.applied ? json{{"probe", self.drift.probe_key},
                                          {"reference_ms", self.drift.reference_ms},
                                          {"probes", self.drift.probes},
                                          {"min_factor", self.drift.min_factor},
                                          {"max_factor", self.drift.max_factor}}
                                   : json(nullptr)},
      {"feature_schema", {{"name", self.schema}, {"features", self.feature_names}}},
      {"training_domain", self.domain.to_json()},
      {"evaluation",
       {{"split",
         {{"train", self.report.train_rows},
          {"validation", self.report.validation_rows},
          {"calibration", self.report.calibration_rows},
          {"test", self.report.test_rows}}},
        {"scores", scores},
        {"notes", self.report.notes},
        {"fit_seconds", self.report.fit_seconds},
        {"fitted_ids", self.report.fitted_ids}}},
  };
  if (self.transfer) {
    file["transfer"] = self.transfer->to_json();
    file["transfer"]["coverage"] = self.coverage;
    return file;
  }
  file["options"] = {{"seed", self.options.seed},
                     {"cascade", self.options.cascade},
                     {"corrector", self.options.corrector},
                     {"prior", to_string(self.options.prior)},
                     {"learning_rate", self.options.learning_rate},
                     {"early_stopping_rounds", self.options.early_stopping_rounds},
                     {"forest_trees", self.options.forest_trees},
                     {"leave_low_batch_out", self.options.leave_low_batch_out}};
  json targets = json::array();
  for (const TargetModel& model : self.models) {
    json target = {{"name", model.info.name},
                   {"unit", model.info.unit},
                   {"source", model.info.source},
                   {"available", model.available}};
    if (!model.available) {
      target["reason"] = model.reason;
      targets.push_back(std::move(target));
      continue;
    }
    json upstream = json::array();
    for (std::size_t u : model.upstream) upstream.push_back(self.models[u].info.name);
    target["cascade_inputs"] = upstream;
    target["scale"] = model.scale;
    target["prior_mode"] = to_string(model.prior_mode);
    target["prior"] = model.prior_mode == PriorMode::kBase ? model.prior.to_json() : json(nullptr);
    target["additive_prior"] =
        model.additive.empty() ? json(nullptr) : model.additive.to_json(self.feature_names);
    if (!model.columns.empty()) {
      json columns = json::array();
      for (std::size_t j : model.columns) columns.push_back(self.feature_names[j]);
      target["features"] = std::move(columns);
    }
    json members = json::array();
    for (const Member& member : model.members) {
      json entry = {{"kind", to_string(member.kind)}, {"weight", member.weight}};
      if (member.kind == LearnerKind::kRidge) {
        entry["ridge"] = member.ridge.to_json();
      } else {
        entry["rounds"] = member.booster.rounds();
        entry["xgboost"] = json::parse(member.booster.to_json());
      }
      members.push_back(std::move(entry));
    }
    target["members"] = std::move(members);
    target["corrector"] = model.corrector.empty()
                              ? json(nullptr)
                              : json{{"max_batch", kLowBatch},
                                     {"damping", kDamping},
                                     {"xgboost", json::parse(model.corrector.to_json())}};
    target["interval"] = {
        {"coverage", self.coverage},
        {"log1p_half_width",
         std::isfinite(model.half_width) ? json(model.half_width) : json(nullptr)},
        {"calibration_rows", model.calibration_rows},
        {"cheap_log1p_half_width",
         std::isfinite(model.cheap_half_width) ? json(model.cheap_half_width) : json(nullptr)}};
    targets.push_back(std::move(target));
  }
  file["targets"] = std::move(targets);
  return file;
}

}  // namespace model_detail

void Predictor::save(const std::string& path) const {
  const std::string text = to_json_text();
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorCategory::kInput, path + ": cannot write the model file");
    out << text << '\n';
    out.close();
    if (!out) throw Error(ErrorCategory::kRuntime, path + ": writing the model file failed");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw Error(ErrorCategory::kRuntime, path + ": cannot move the model file into place");
  }
}

Predictor Predictor::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCategory::kInput, path + ": cannot open the model file");
  std::ostringstream text;
  text << in.rdbuf();
  return from_json_text(text.str(), path);
}

Predictor Predictor::from_json_text(std::string_view text, const std::string& origin) {
  json file;
  try {
    file = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(ErrorCategory::kInput, origin + ": not a carb model file (truncated or not JSON: " +
                                           "byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception& e) {
    // Valid JSON syntax that nlohmann cannot hold, e.g. a number beyond a double's range.
    throw Error(ErrorCategory::kInput, origin + ": not a carb model file (" + e.what() + ")");
  }
  return model_detail::PredictorFactory::from_json(file, origin);
}

namespace model_detail {

Predictor PredictorFactory::transferred(std::shared_ptr<const TransferLayer> layer,
                                        const Dataset& data, double coverage, FitReport report) {
  auto impl = std::make_unique<Predictor::Impl>();
  const Predictor& source = *layer->source;
  impl->schema = source.schema();
  impl->feature_names = source.feature_names();
  impl->targets = source.targets();
  impl->domain = source.training_domain();
  impl->device_fingerprint = data.device_fingerprint;
  impl->device_name = data.device_name;
  impl->instances = data.instances;
  if (data.drift.applied) impl->drift = data.drift;
  impl->coverage = coverage;
  impl->report = std::move(report);
  impl->transfer = std::move(layer);
  return Predictor(std::move(impl));
}

Predictor PredictorFactory::from_json(const json& file, const std::string& origin) {
  if (!file.is_object() || file.value("format", "") != "carb-model") {
    throw Error(ErrorCategory::kInput,
                origin + ": not a carb model file (no \"format\": \"carb-model\")");
  }
  try {
    const int version = integer_of<int>(file.at("format_version"));
    if (version > kTransferModelFormat) {
      throw Error(ErrorCategory::kInput, origin + ": model format " + std::to_string(version) +
                                             " is newer than this carb (" + std::string(kVersion) +
                                             ") reads (" + std::to_string(kTransferModelFormat) +
                                             "); use a newer carb or refit");
    }
    auto impl = std::make_unique<Predictor::Impl>();
    impl->schema = file.at("feature_schema").at("name").get<std::string>();
    file.at("feature_schema").at("features").get_to(impl->feature_names);
    if (impl->schema != kArchitectureSchema && impl->schema.rfind("carb-ir-", 0) == 0) {
      throw Error(ErrorCategory::kInput,
                  origin + ": fitted on feature schema " + impl->schema + ", this carb's is " +
                      std::string(kArchitectureSchema) + "; refit the model");
    }
    if (impl->schema == kArchitectureSchema &&
        impl->feature_names != architecture_feature_names()) {
      throw Error(ErrorCategory::kInput, origin + ": its " + std::string(kArchitectureSchema) +
                                             " feature list differs from this carb's; refit the "
                                             "model");
    }
    if (const auto domain = file.find("training_domain"); domain != file.end()) {
      impl->domain = TrainingDomain::from_json(*domain, impl->feature_names, origin);
    }
    if (impl->schema != kArchitectureSchema && impl->schema != "table") {
      throw Error(ErrorCategory::kInput,
                  origin + ": unknown feature schema '" + impl->schema + "'");
    }
    file.at("device").at("fingerprint").get_to(impl->device_fingerprint);
    file.at("device").at("name").get_to(impl->device_name);
    // Absent from model files before carb recorded host instances.
    if (const auto instances = file.at("device").find("instances");
        instances != file.at("device").end()) {
      instances->get_to(impl->instances);
    }
    // Absent from model files before carb recorded drift corrections, null when none applied.
    if (const auto drift = file.find("drift"); drift != file.end() && !drift->is_null()) {
      impl->drift.applied = true;
      drift->at("probe").get_to(impl->drift.probe_key);
      drift->at("reference_ms").get_to(impl->drift.reference_ms);
      drift->at("probes").get_to(impl->drift.probes);
      drift->at("min_factor").get_to(impl->drift.min_factor);
      drift->at("max_factor").get_to(impl->drift.max_factor);
      if (!(impl->drift.reference_ms > 0) || !std::isfinite(impl->drift.reference_ms)) {
        throw Error(ErrorCategory::kInput,
                    origin + ": its drift correction's reference latency is not positive");
      }
    }
    if (const auto transfer = file.find("transfer"); transfer != file.end()) {
      if (version < kTransferModelFormat) {
        throw std::invalid_argument("a transfer in a model of format " + std::to_string(version));
      }
      impl->transfer = TransferLayer::from_json(*transfer, origin);
      impl->coverage = transfer->at("coverage").get<double>();
      impl->targets = impl->transfer->source->targets();
      if (impl->transfer->source->feature_names() != impl->feature_names) {
        throw std::invalid_argument("transfer: the source's features differ from the model's");
      }
      read_evaluation(file.at("evaluation"), impl->report);
      return Predictor(std::move(impl));
    }
    const json& options = file.at("options");
    impl->options.seed = options.at("seed").get<std::uint64_t>();
    impl->options.cascade = options.at("cascade").get<bool>();
    impl->options.corrector = options.at("corrector").get<bool>();
    impl->options.prior =
        parse_prior_mode(options.at("prior").get<std::string>()).value_or(PriorMode::kNone);
    impl->options.learning_rate = options.at("learning_rate").get<double>();
    impl->options.early_stopping_rounds = integer_of<int>(options.at("early_stopping_rounds"));
    impl->options.forest_trees = integer_of<int>(options.at("forest_trees"));
    impl->options.leave_low_batch_out = options.at("leave_low_batch_out").get<bool>();
    const std::size_t width = impl->feature_names.size();
    for (const json& target : file.at("targets")) {
      TargetModel model;
      model.info = {target.at("name").get<std::string>(), target.at("unit").get<std::string>(),
                    target.at("source").get<std::string>()};
      model.available = target.at("available").get<bool>();
      impl->targets.push_back(model.info);
      if (!model.available) {
        model.reason = target.at("reason").get<std::string>();
        impl->models.push_back(std::move(model));
        continue;
      }
      for (const json& name : target.at("cascade_inputs")) {
        const auto found = std::find_if(impl->models.begin(), impl->models.end(),
                                        [&](const TargetModel& m) { return m.info.name == name; });
        if (found == impl->models.end() || !found->available) {
          throw std::invalid_argument("cascade input " + name.dump() + " is not an earlier target");
        }
        model.upstream.push_back(static_cast<std::size_t>(found - impl->models.begin()));
      }
      if (const auto additive = target.find("additive_prior");
          additive != target.end() && !additive->is_null()) {
        model.additive = Additive::from_json(*additive, impl->feature_names);
      }
      if (const auto columns = target.find("features"); columns != target.end()) {
        for (const json& name : *columns) {
          const auto found = std::find(impl->feature_names.begin(), impl->feature_names.end(),
                                       name.get<std::string>());
          if (found == impl->feature_names.end()) {
            throw std::invalid_argument("target feature " + name.dump() + " is not a feature");
          }
          model.columns.push_back(static_cast<std::size_t>(found - impl->feature_names.begin()));
        }
      }
      const std::size_t cols = (model.columns.empty() ? width : model.columns.size()) +
                               model.upstream.size() + (model.additive.empty() ? 0 : 1);
      model.scale = target.at("scale").get<double>();
      if (!(model.scale > 0)) throw std::invalid_argument("scale must be positive");
      model.prior_mode =
          parse_prior_mode(target.at("prior_mode").get<std::string>()).value_or(PriorMode::kNone);
      if (model.prior_mode == PriorMode::kBase) {
        model.prior = Ridge::from_json(target.at("prior"));
        if (model.prior.coef.size() != cols)
          throw std::invalid_argument("prior has the wrong width");
      }
      for (const json& entry : target.at("members")) {
        const auto kind = parse_learner(entry.at("kind").get<std::string>());
        if (!kind) throw std::invalid_argument("unknown member kind " + entry.at("kind").dump());
        Member member{*kind, entry.at("weight").get<double>(), {}, {}};
        if (*kind == LearnerKind::kRidge) {
          member.ridge = Ridge::from_json(entry.at("ridge"));
          if (member.ridge.coef.size() != cols)
            throw std::invalid_argument("ridge has the wrong width");
        } else {
          member.booster = load_booster(entry.at("xgboost"), cols);
        }
        model.members.push_back(std::move(member));
      }
      if (!target.at("corrector").is_null()) {
        model.corrector = load_booster(target.at("corrector").at("xgboost"), cols);
      }
      const json& interval = target.at("interval");
      impl->coverage = interval.at("coverage").get<double>();
      model.half_width = interval.at("log1p_half_width").is_null()
                             ? std::numeric_limits<double>::infinity()
                             : interval.at("log1p_half_width").get<double>();
      model.calibration_rows = integer_of<std::size_t>(interval.at("calibration_rows"));
      model.cheap_half_width = interval.at("cheap_log1p_half_width").is_null()
                                   ? std::numeric_limits<double>::infinity()
                                   : interval.at("cheap_log1p_half_width").get<double>();
      impl->models.push_back(std::move(model));
    }
    read_evaluation(file.at("evaluation"), impl->report);
    return Predictor(std::move(impl));
  } catch (const json::exception& e) {
    throw Error(ErrorCategory::kInput, origin + ": corrupt carb model file: " + e.what());
  } catch (const std::invalid_argument& e) {
    throw Error(ErrorCategory::kInput, origin + ": corrupt carb model file: " + e.what());
  } catch (const Error& e) {
    if (e.category() == ErrorCategory::kRuntime) {
      throw Error(ErrorCategory::kInput, origin + ": corrupt carb model file: " + e.what());
    }
    throw;
  }
}

}  // namespace model_detail

}  // namespace carb
