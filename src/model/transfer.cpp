// Transfer to a new device (docs/model.md, "Transfer"): a source model of one device and a few
// measurements of another make a model of the other. Per target, candidate corrections of the
// source's predictions are cross-validated on the target rows; the chosen one's out-of-fold
// residuals give the intervals. Also: which rows to measure for it.
#include "transfer.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <tuple>

#include "carb/error.hpp"
#include "carb/statistics.hpp"

namespace carb {

namespace model_detail {

namespace {

using json = nlohmann::json;

constexpr double kTiny = 1e-300;  // a prediction of 0 has no log; this one does
/// Ridge strength pulling loglinear's slope towards 1 (the source's scale), in units of squared
/// natural-log deviations: with 8 rows spread over a 50x range it barely moves the fit; with 2
/// rows close together it keeps the slope near 1.
constexpr double kSlopeShrink = 2.0;
/// Ridge strength pulling structural's weights towards their targets, in average rows: 0.3 let
/// 16 rows of one seed in the engine campaign set the MAC weight to 0.04 (28% off); over 5 seeds
/// 3 gave 25.3% and 1 gave 21.6% (19.6-22.7; docs/benchmarks.md, "From carb's engine to
/// PyTorch").
constexpr double kStructuralShrink = 1.0;
constexpr std::size_t kMinRowsSource = kTransferFamilyRows;
constexpr std::size_t kMinRowsLogLinear = 3;
constexpr std::size_t kMinRowsStructural = kTransferFamilyRows;
constexpr std::size_t kMinRowsFeatureRidge = 8;
constexpr std::size_t kMinRowsResidualTrees = 32;
constexpr std::size_t kMinRowsSources = 4;
/// Ridge strength pulling sources' weights towards an equal share each (the intercept free), in
/// units of squared natural-log deviations, as kSlopeShrink. With the AMD reference and carb's
/// engine on another Intel host as sources, 16 random rows of the Intel rounds campaign fitted
/// with it predicted the rest within 6.96% where the AMD source's line alone reached 8.39%
/// (bench/transfer_sources.py; docs/benchmarks.md, "Two sources").
constexpr double kSourcesShrink = 2.0;
constexpr std::size_t kMaxFolds = 10;
constexpr std::size_t kRefitFolds = 5;

/// Ridge strength of feature-ridge's line, in rows' worth of a standardized feature: 16 rows
/// barely move a weight the rows do not show plainly, 300 rows hardly feel it. Over the
/// exported rows of bench/transfer.sh's K = 16 models, 3-30 did about as well; 100 gave back
/// most of the gain (docs/benchmarks.md, "A line in the features").
constexpr double kFeatureRidgeShrink = 10.0;
/// The features of feature-ridge's line: what sets a network's size and shape in any CNN, not
/// one space's knobs (a ResNet's block type is 0 for every other network, so it drops out).
constexpr std::array<std::string_view, 9> kRidgeFeatures = {
    "log_batch",       "resolution",           "log_flops_per_image",
    "log_params",      "log_activation_bytes", "depth",
    "widest_channels", "bottleneck",           "log_arithmetic_intensity"};

constexpr std::array<std::pair<TransferMethod, std::string_view>, 8> kMethodNames = {{
    {TransferMethod::kSource, "source"},
    {TransferMethod::kScale, "scale"},
    {TransferMethod::kLogLinear, "loglinear"},
    {TransferMethod::kStructural, "structural"},
    {TransferMethod::kFeatureRidge, "feature-ridge"},
    {TransferMethod::kResidualTrees, "residual-trees"},
    {TransferMethod::kSources, "sources"},
    {TransferMethod::kRefit, "refit"},
}};

double log_of(double value) { return std::log(std::max(value, kTiny)); }

// The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz).
double incomplete_beta(double x, double a, double b) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  if (x > (a + 1) / (a + b + 2)) return 1 - incomplete_beta(1 - x, b, a);
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log(1 - x)) /
                       a;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  d = 1 / (std::abs(d) < 1e-300 ? 1e-300 : d);
  double f = d;
  for (int m = 1; m < 300; ++m) {
    for (int step = 0; step < 2; ++step) {
      const double md = m;
      const double numerator =
          step == 0 ? md * (b - md) * x / ((a + 2 * md - 1) * (a + 2 * md))
                    : -(a + md) * (a + b + md) * x / ((a + 2 * md) * (a + 2 * md + 1));
      d = 1 + numerator * d;
      d = 1 / (std::abs(d) < 1e-300 ? 1e-300 : d);
      c = 1 + numerator / c;
      if (std::abs(c) < 1e-300) c = 1e-300;
      f *= c * d;
    }
    if (std::abs(c * d - 1) < 1e-12) break;
  }
  return front * f;
}

// P(T <= t) for Student's t with `df` degrees of freedom.
double student_t_cdf(double t, double df) {
  const double tail = 0.5 * incomplete_beta(df / (df + t * t), df / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  double low = -1e3, high = 1e3;
  for (int i = 0; i < 200; ++i) {
    const double mid = (low + high) / 2;
    (student_t_cdf(mid, df) < p ? low : high) = mid;
  }
  return (low + high) / 2;
}

// Rows of out-of-fold residuals from which intervals are cross-conformal; below, a Student-t
// interval whose variance pools the residuals' with the source's own where the source still holds
// on the new device (source_holds).
constexpr std::size_t kConformalRows = 40;
// How many rows the source's variance counts for in the pool.
constexpr double kSourceVarianceRows = 3;
// Rows from which the residuals' variance is residual_scale's square (below, their sample
// variance).
constexpr std::size_t kRobustScaleRows = 4;

// The half-width of intervals around predictions whose residuals (prediction - measurement,
// natural-log space) on held-out rows are `residuals`: cross-conformal, the ceil((n+1) coverage)
// smallest absolute residual, from kConformalRows rows on; below, a Student-t interval whose
// variance pools theirs with `source_sd` (the source's log-residual standard deviation, 0 when
// unknown or where the source does not hold, source_holds) as kSourceVarianceRows rows. From
// kRobustScaleRows rows on, their scale is residual_scale's: measured from zero, as the interval is
// centred on the prediction, and the larger of what the median and the upper quartile of the
// absolute residuals imply. The median absolute deviation about the residuals' median alone left
// Intel -> AMD at K = 16 covering 77% over 10 seeds (three seeds 40-54%): it ignored the residuals'
// shared offset and their tail. The root mean square instead of the upper quartile covered 94.5% on
// AMD -> local host, and one wild row among 16 widened its intervals by more than 1.3x
// (tests/model/transfer_test.cpp; docs/benchmarks.md, "Transfer"). (Pooling only below 8 rows was
// tried too: at 8 and 16 rows it left coverage further from nominal.)
double interval_half_width(const std::vector<double>& residuals, double coverage, double source_sd,
                           std::string* method) {
  const std::size_t n = residuals.size();
  std::vector<double> scores;
  scores.reserve(n);
  for (double r : residuals) scores.push_back(std::abs(r));
  std::sort(scores.begin(), scores.end());
  const auto rank = static_cast<std::size_t>(std::ceil((static_cast<double>(n) + 1) * coverage));
  if (n >= kConformalRows && rank >= 1 && rank <= n) {
    *method = "cross-conformal";
    return scores[rank - 1];
  }
  const double prior_rows = source_sd > 0 ? kSourceVarianceRows : 0;
  *method = std::string(n >= kRobustScaleRows ? "student-t, scale about zero" : "student-t") +
            (prior_rows > 0 ? ", pooled with the source's" : "");
  const double df = prior_rows + static_cast<double>(n) - 1;
  if (df < 1) return std::numeric_limits<double>::infinity();
  double squares = prior_rows * source_sd * source_sd;
  if (n >= kRobustScaleRows) {
    const double scale = residual_scale(residuals);
    squares += static_cast<double>(n - 1) * scale * scale;
  } else {
    const double residual_mean = mean(residuals);
    for (double r : residuals) squares += (r - residual_mean) * (r - residual_mean);
  }
  const double quantile = student_t_quantile((1 + coverage) / 2, df);
  // Out-of-fold residuals already carry the fitted correction's own error: no widening for it.
  return quantile * std::sqrt(squares / df);
}

// The source's log-residual standard deviation implied by its intervals on `rows`: the median
// log(high / value) over the normal quantile of its coverage; 0 where it has none.
double source_sd_of(const std::vector<TargetPrediction>& predictions,
                    const std::vector<std::size_t>& rows, double coverage) {
  std::vector<double> widths;
  for (std::size_t i : rows) {
    const TargetPrediction& p = predictions[i];
    if (p.available && p.value > 0 && p.high > p.value)
      widths.push_back(std::log(p.high / p.value));
  }
  if (widths.empty()) return 0;
  return upper_median(std::move(widths)) / normal_quantile_bisected((1 + coverage) / 2);
}

// One target's candidate fitted on some rows: the parameters that predict from s (and features).
struct Fitted {
  double scale = 0;
  double intercept = 0, slope = 1;
  AdditiveParts weights{};
  FeatureRidge ridge;
  xgb::Booster residual;
  SourcesLine sources;
};

// The rows a candidate learns from, and what it sees of each.
struct Rows {
  std::vector<double> s;             // natural log of the source's prediction
  std::vector<double> ly;            // natural log of the measurement
  std::vector<AdditiveParts> parts;  // the source's additive prior parts (or empty)
  std::vector<std::vector<double>>
      more;                          // per row, natural logs of the further sources' predictions
  std::vector<float> x;              // features + s, for the residual trees and the ridge
  std::size_t cols = 0;
  // feature-ridge's candidate features: name and column in x (those the source has)
  std::vector<std::pair<std::string, std::size_t>> ridge_features;
};

// The level of the chi-square test in source_holds.
constexpr double kSourceHoldsLevel = 0.95;

// Whether the source's spread still holds on the new device's rows (`rows`: their log
// measurements and the source's out-of-sample log predictions where it has them): their
// log-residuals' mean square about zero (an offset counts) over source_sd's square, in
// `*mean_square`, is within what a chi-square with one degree per row allows at
// kSourceHoldsLevel. Where it holds, the corrected model errs about as the
// source does and the source's variance, measured on many rows, is evidence for the intervals;
// where not, the correction's error has nothing to do with it. Measured (HOLD_OUT=4
// bench/transfer.sh, 10 seeds, K = 16; docs/benchmarks.md, "Pooled where the source holds"):
// pooling everywhere left Intel -> AMD covering 86.0%; pooling nowhere, AMD -> local host 83.7%
// and unseen knob values 83.6%, and the memory of the AMD -> Intel test fixture 67.7%.
bool source_holds(const Rows& rows, double source_sd, double* mean_square) {
  const std::size_t n = rows.s.size();
  if (n == 0 || !(source_sd > 0)) return false;
  double squares = 0;
  for (std::size_t k = 0; k < n; ++k)
    squares += (rows.ly[k] - rows.s[k]) * (rows.ly[k] - rows.s[k]);
  const auto rows_n = static_cast<double>(n);
  *mean_square = squares / rows_n / (source_sd * source_sd);
  return *mean_square <= chi_square_mean_quantile(kSourceHoldsLevel, rows_n);
}

double fit_scale(const Rows& rows, const std::vector<std::size_t>& use) {
  std::vector<double> residuals;
  residuals.reserve(use.size());
  for (std::size_t i : use) residuals.push_back(rows.ly[i] - rows.s[i]);
  return median(residuals);
}

// ly ~ a + b s with weights w, least squares with a ridge of kSlopeShrink on (b - 1).
std::pair<double, double> weighted_loglinear(const Rows& rows, const std::vector<std::size_t>& use,
                                             const std::vector<double>& w) {
  double total = 0, mean_s = 0, mean_y = 0;
  for (std::size_t k = 0; k < use.size(); ++k) total += w[k];
  for (std::size_t k = 0; k < use.size(); ++k) {
    mean_s += w[k] * rows.s[use[k]] / total;
    mean_y += w[k] * rows.ly[use[k]] / total;
  }
  double sxy = 0, sxx = 0;
  for (std::size_t k = 0; k < use.size(); ++k) {
    const std::size_t i = use[k];
    sxy += w[k] * (rows.s[i] - mean_s) * (rows.ly[i] - mean_y);
    sxx += w[k] * (rows.s[i] - mean_s) * (rows.s[i] - mean_s);
  }
  const double slope = (sxy + kSlopeShrink) / (sxx + kSlopeShrink);
  return {mean_y - slope * mean_s, slope};
}

// Huber's tuning constant, in units of the residuals' robust scale (95% efficiency at the
// normal).
constexpr double kHuber = 1.345;

// ly ~ a + b s, robustly: Huber's loss by iteratively reweighted least squares, the residuals'
// scale from their median absolute deviation, so that one badly measured or unusual row among a
// few does not tilt the line (a tiny network timed at a third of the others' factor, say); with
// the ridge on (b - 1).
std::pair<double, double> fit_loglinear(const Rows& rows, const std::vector<std::size_t>& use) {
  std::vector<double> w(use.size(), 1.0);
  auto fit = weighted_loglinear(rows, use, w);
  for (int iteration = 0; iteration < 50; ++iteration) {
    std::vector<double> residuals;
    residuals.reserve(use.size());
    for (std::size_t i : use)
      residuals.push_back(rows.ly[i] - (fit.first + fit.second * rows.s[i]));
    const double scale = robust_sd(residuals);
    if (!(scale > 1e-9)) break;
    for (std::size_t k = 0; k < use.size(); ++k) {
      const double size = std::abs(residuals[k]) / (kHuber * scale);
      w[k] = size <= 1 ? 1.0 : 1.0 / size;
    }
    const auto next = weighted_loglinear(rows, use, w);
    const bool settled =
        std::abs(next.first - fit.first) < 1e-10 && std::abs(next.second - fit.second) < 1e-10;
    fit = next;
    if (settled) break;
  }
  return fit;
}

// The source's additive prior: the sum of the parts that are its terms.
double prior_total(const AdditiveParts& parts) {
  return std::accumulate(parts.begin(), parts.begin() + kPriorPartCount, 0.0);
}

// measurement / source ~ (w . parts) / prior_total(parts), for the least relative squared error,
// w >= 0, with a ridge of kStructuralShrink average rows pulling the prior's weights towards the
// common factor (fit_scale's) and the activation bytes' weight, which the source has no term
// for, towards 0.
AdditiveParts fit_structural(const Rows& rows, const std::vector<std::size_t>& use) {
  constexpr auto kParts = static_cast<Eigen::Index>(kAdditivePartCount);
  const double common = std::exp(fit_scale(rows, use));
  Eigen::VectorXd target = Eigen::VectorXd::Constant(kParts, common);
  target(static_cast<Eigen::Index>(AdditivePart::kActivationBytes)) = 0;
  target(static_cast<Eigen::Index>(AdditivePart::kFcMacs)) = 0;
  const Eigen::Index n = static_cast<Eigen::Index>(use.size());
  Eigen::MatrixXd a(n + kParts, kParts);
  Eigen::VectorXd b(n + kParts);
  for (Eigen::Index r = 0; r < n; ++r) {
    const std::size_t i = use[static_cast<std::size_t>(r)];
    const AdditiveParts& parts = rows.parts[i];
    const double total = prior_total(parts);
    // Relative residual: (source x (w . parts) / total - y) / y.
    const double factor = std::exp(rows.s[i] - rows.ly[i]) / (total > 0 ? total : 1);
    for (Eigen::Index c = 0; c < kParts; ++c) a(r, c) = parts[static_cast<std::size_t>(c)] * factor;
    b(r) = 1;
  }
  // Each weight's ridge is worth kStructuralShrink average rows of what the rows say about it
  // (its column's mean square): a part the rows hardly show stays near its target, and
  // one they show plainly may move far. PyTorch's native convs cost 20-40 times the source's
  // MACs on a generic BLAS, which a ridge in the weight's own units would not let 16 rows say.
  for (Eigen::Index c = 0; c < kParts; ++c) {
    const double root =
        std::sqrt(kStructuralShrink) * (n > 0 ? a.col(c).head(n).norm() / std::sqrt(n) : 1.0);
    a.row(n + c).setZero();
    a(n + c, c) = root;
    b(n + c) = root * target(c);
  }
  // Non-negative least squares by projected coordinate descent on the normal equations.
  const Eigen::MatrixXd gram = a.transpose() * a;
  const Eigen::VectorXd rhs = a.transpose() * b;
  Eigen::VectorXd w = target;
  for (int sweep = 0; sweep < 2000; ++sweep) {
    double change = 0;
    for (Eigen::Index c = 0; c < kParts; ++c) {
      if (gram(c, c) <= 0) continue;
      const double gradient = gram.row(c).dot(w) - rhs(c);
      const double next = std::max(0.0, w(c) - gradient / gram(c, c));
      change = std::max(change, std::abs(next - w(c)));
      w(c) = next;
    }
    if (change < 1e-12) break;
  }
  AdditiveParts weights{};
  for (Eigen::Index c = 0; c < kParts; ++c) weights[static_cast<std::size_t>(c)] = w(c);
  return weights;
}

double structural_log(const AdditiveParts& w, double s, const AdditiveParts& p) {
  const double total = prior_total(p);
  const double weighted = std::inner_product(w.begin(), w.end(), p.begin(), 0.0);
  if (!(total > 0)) {
    const double mean = prior_total(w) / static_cast<double>(kPriorPartCount);
    return s + std::log(std::max(mean, kTiny));
  }
  return s + std::log(std::max(weighted / total, kTiny));
}

// Feature `k` of the ridge's line on row `i`: the column in log1p unless it is a log already.
double ridge_feature(const std::string& name, std::size_t column, const Rows& rows, std::size_t i) {
  const double value = rows.x[i * rows.cols + column];
  return name.rfind("log_", 0) == 0 ? value : std::log1p(std::max(value, 0.0));
}

double ridge_log(const FeatureRidge& ridge, const Rows& rows, std::size_t i) {
  double out = ridge.intercept;
  for (std::size_t k = 0; k < ridge.features.size(); ++k) {
    const double value = ridge_feature(ridge.features[k], ridge.columns[k], rows, i);
    out += ridge.weights[k] * (value - ridge.center[k]) / ridge.scale[k];
  }
  return out;
}

// The log residuals of `base` (natural-log predictions of the `use` rows, in their order) as a
// line in the standardized features that vary over those rows, with a ridge of
// kFeatureRidgeShrink on every weight and none on the intercept.
FeatureRidge fit_feature_ridge(const Rows& rows, const std::vector<std::size_t>& use,
                               const std::vector<double>& base) {
  FeatureRidge ridge;
  const auto n = static_cast<Eigen::Index>(use.size());
  Eigen::VectorXd residual(n);
  for (Eigen::Index r = 0; r < n; ++r) {
    const auto k = static_cast<std::size_t>(r);
    residual(r) = rows.ly[use[k]] - base[k];
  }
  std::vector<Eigen::VectorXd> columns;
  for (const auto& [name, column] : rows.ridge_features) {
    Eigen::VectorXd values(n);
    for (Eigen::Index r = 0; r < n; ++r) {
      values(r) = ridge_feature(name, column, rows, use[static_cast<std::size_t>(r)]);
    }
    const double center = values.mean();
    const double scale = std::sqrt((values.array() - center).square().mean());
    if (!(scale > 1e-9)) continue;  // the same on every row: nothing to learn from
    ridge.features.push_back(name);
    ridge.columns.push_back(column);
    ridge.center.push_back(center);
    ridge.scale.push_back(scale);
    columns.push_back((values.array() - center) / scale);
  }
  ridge.intercept = residual.mean();
  const auto p = static_cast<Eigen::Index>(columns.size());
  if (p == 0) return ridge;
  Eigen::MatrixXd z(n, p);
  for (Eigen::Index c = 0; c < p; ++c) z.col(c) = columns[static_cast<std::size_t>(c)];
  // The columns are centred, so the intercept is the residuals' mean apart from the weights.
  const Eigen::MatrixXd gram =
      z.transpose() * z + kFeatureRidgeShrink * Eigen::MatrixXd::Identity(p, p);
  const Eigen::VectorXd w =
      gram.ldlt().solve(z.transpose() * (residual.array() - ridge.intercept).matrix());
  ridge.weights.assign(w.data(), w.data() + p);
  return ridge;
}

std::map<std::string, std::string> residual_tree_params(std::size_t rows, std::uint64_t seed,
                                                        int threads) {
  return {{"objective", "reg:squarederror"},
          {"tree_method", "hist"},
          {"max_depth", "3"},
          {"eta", "0.05"},
          {"subsample", "0.8"},
          {"lambda", "1"},
          {"min_child_weight", std::to_string(std::max<std::size_t>(3, rows / 20))},
          {"base_score", "0"},
          {"seed", std::to_string(seed)},
          {"nthread", std::to_string(threads > 0 ? threads : 0)},
          {"verbosity", "0"}};
}
constexpr int kResidualRounds = 200;

// ly ~ a + w0 s + sum_j w_j s_j (sources' line): least squares with a ridge of kSourcesShrink
// pulling every weight towards an equal share, the intercept free.
SourcesLine fit_sources(const Rows& rows, const std::vector<std::size_t>& use) {
  const auto m = static_cast<Eigen::Index>(rows.more.empty() ? 0 : rows.more.front().size());
  const Eigen::Index p = m + 2;
  Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(p, p);
  Eigen::VectorXd right = Eigen::VectorXd::Zero(p);
  Eigen::VectorXd row(p);
  for (std::size_t i : use) {
    row(0) = 1;
    row(1) = rows.s[i];
    for (Eigen::Index j = 0; j < m; ++j) row(j + 2) = rows.more[i][static_cast<std::size_t>(j)];
    gram += row * row.transpose();
    right += row * rows.ly[i];
  }
  const double share = 1.0 / static_cast<double>(m + 1);
  for (Eigen::Index j = 1; j < p; ++j) {
    gram(j, j) += kSourcesShrink;
    right(j) += kSourcesShrink * share;
  }
  const Eigen::VectorXd w = gram.ldlt().solve(right);
  SourcesLine line;
  line.intercept = w(0);
  line.weights.assign(w.data() + 1, w.data() + p);
  return line;
}

double sources_log(const SourcesLine& line, const Rows& rows, std::size_t i) {
  double value = line.intercept + line.weights[0] * rows.s[i];
  for (std::size_t j = 1; j < line.weights.size(); ++j)
    value += line.weights[j] * rows.more[i][j - 1];
  return value;
}

xgb::Booster fit_residual(const Rows& rows, const std::vector<std::size_t>& use, double intercept,
                          double slope, std::uint64_t seed, int threads) {
  std::vector<float> x;
  std::vector<float> labels;
  for (std::size_t i : use) {
    x.insert(x.end(), rows.x.begin() + static_cast<long>(i * rows.cols),
             rows.x.begin() + static_cast<long>((i + 1) * rows.cols));
    labels.push_back(static_cast<float>(rows.ly[i] - (intercept + slope * rows.s[i])));
  }
  const xgb::Matrix train(x.data(), use.size(), rows.cols, labels);
  return xgb::Booster::train(residual_tree_params(use.size(), seed, threads), train, nullptr,
                             kResidualRounds, 0);
}

Fitted fit_method(TransferMethod method, const Rows& rows, const std::vector<std::size_t>& use,
                  std::uint64_t seed, int threads) {
  Fitted fitted;
  fitted.scale = fit_scale(rows, use);
  std::tie(fitted.intercept, fitted.slope) = use.size() >= kMinRowsLogLinear
                                                 ? fit_loglinear(rows, use)
                                                 : std::pair<double, double>{fitted.scale, 1.0};
  if (method == TransferMethod::kStructural || method == TransferMethod::kFeatureRidge) {
    fitted.weights = fit_structural(rows, use);
  }
  if (method == TransferMethod::kFeatureRidge) {
    std::vector<double> base;
    base.reserve(use.size());
    for (std::size_t i : use)
      base.push_back(structural_log(fitted.weights, rows.s[i], rows.parts[i]));
    fitted.ridge = fit_feature_ridge(rows, use, base);
  }
  if (method == TransferMethod::kResidualTrees) {
    fitted.residual = fit_residual(rows, use, fitted.intercept, fitted.slope, seed, threads);
  }
  if (method == TransferMethod::kSources) fitted.sources = fit_sources(rows, use);
  return fitted;
}

// A fitted candidate's natural-log predictions for `which` rows of `rows`.
std::vector<double> predict_method(TransferMethod method, const Fitted& fitted, const Rows& rows,
                                   const std::vector<std::size_t>& which) {
  std::vector<double> out;
  out.reserve(which.size());
  for (std::size_t i : which) {
    switch (method) {
      case TransferMethod::kSource:
        out.push_back(rows.s[i]);
        break;
      case TransferMethod::kScale:
        out.push_back(rows.s[i] + fitted.scale);
        break;
      case TransferMethod::kStructural:
        out.push_back(structural_log(fitted.weights, rows.s[i], rows.parts[i]));
        break;
      case TransferMethod::kFeatureRidge:
        out.push_back(structural_log(fitted.weights, rows.s[i], rows.parts[i]) +
                      ridge_log(fitted.ridge, rows, i));
        break;
      case TransferMethod::kSources:
        out.push_back(sources_log(fitted.sources, rows, i));
        break;
      default:
        out.push_back(fitted.intercept + fitted.slope * rows.s[i]);
    }
  }
  if (method == TransferMethod::kResidualTrees) {
    std::vector<float> x;
    for (std::size_t i : which) {
      x.insert(x.end(), rows.x.begin() + static_cast<long>(i * rows.cols),
               rows.x.begin() + static_cast<long>((i + 1) * rows.cols));
    }
    const std::vector<float> trees = fitted.residual.predict(x.data(), which.size(), rows.cols);
    for (std::size_t k = 0; k < out.size(); ++k) out[k] += trees[k];
  }
  return out;
}

// Fold of each of `n` rows: a seeded permutation dealt round-robin into `folds` folds.
std::vector<std::size_t> fold_of(std::size_t n, std::size_t folds, std::uint64_t seed) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 random(seed);
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[random() % i]);
  std::vector<std::size_t> fold(n);
  for (std::size_t k = 0; k < n; ++k) fold[order[k]] = k % folds;
  return fold;
}

// Out-of-fold natural-log predictions of a candidate on every row, fitted on `rows` and
// predicting what `held_view` (the same rows, or the source's out-of-sample view of them) says
// of the held-out ones.
std::vector<double> out_of_fold(TransferMethod method, const Rows& rows, std::size_t folds,
                                std::uint64_t seed, int threads, const Rows& held_view) {
  const std::size_t n = rows.s.size();
  const std::vector<std::size_t> fold = fold_of(n, folds, seed);
  std::vector<double> oof(n, std::nan(""));
  for (std::size_t f = 0; f < folds; ++f) {
    std::vector<std::size_t> train, held;
    for (std::size_t i = 0; i < n; ++i) (fold[i] == f ? held : train).push_back(i);
    if (held.empty() || train.empty()) continue;
    const Fitted fitted = fit_method(method, rows, train, seed, threads);
    const std::vector<double> predicted = predict_method(method, fitted, held_view, held);
    for (std::size_t k = 0; k < held.size(); ++k) oof[held[k]] = predicted[k];
  }
  return oof;
}

// Per-row absolute percentage errors of natural-log predictions.
std::vector<double> percentage_errors(const std::vector<double>& predicted,
                                      const std::vector<double>& ly) {
  std::vector<double> errors;
  for (std::size_t i = 0; i < ly.size(); ++i) {
    errors.push_back(100 * std::abs(std::expm1(predicted[i] - ly[i])));
  }
  return errors;
}

// Which candidates a target's rows can fit, and the default among them.
struct Candidates {
  bool new_family_rows = false;  // rows of a network family the source never saw
  bool structural = false;       // a time-like target whose source has additive parts
  bool ridge = false;            // feature-ridge has features
  bool sources = false;          // further sources predict the target
  bool time_like = false;        // latency or energy

  // For rows of a new family, the source as it is too, from 4 rows: where a few networks of the
  // family disagree, no correction fitted on some of them may be better than none (with 2 or 3
  // rows, whichever is left out decides). On a new device the source is off by the device's
  // difference, which is what a transfer is for.
  [[nodiscard]] std::vector<TransferMethod> of(std::size_t n) const {
    std::vector<TransferMethod> out = {TransferMethod::kScale};
    if (new_family_rows && n >= kMinRowsSource) out.push_back(TransferMethod::kSource);
    if (n >= kMinRowsLogLinear) out.push_back(TransferMethod::kLogLinear);
    if (structural && n >= kMinRowsStructural) out.push_back(TransferMethod::kStructural);
    if (structural && ridge && n >= kMinRowsFeatureRidge) {
      out.push_back(TransferMethod::kFeatureRidge);
    }
    if (n >= kMinRowsResidualTrees) out.push_back(TransferMethod::kResidualTrees);
    if (sources && n >= kMinRowsSources) out.push_back(TransferMethod::kSources);
    return out;
  }

  // loglinear (scale below its minimum rows; structural where the rows are of a network family
  // the source never saw, as a new family's cost differs from the source's by its mix of layer
  // classes, not by one line in the network's size; sources for a time-like target where further
  // sources are given: AMD -> Intel at 16 rows, HOLD_OUT=4 bench/transfer.sh over 10 seeds, 7.31%
  // as the default and 8.54% from the AMD source alone; docs/benchmarks.md, "Two sources").
  [[nodiscard]] TransferMethod default_for(std::size_t n) const {
    if (sources && time_like && n >= kMinRowsSources) return TransferMethod::kSources;
    if (new_family_rows && structural && n >= kMinRowsStructural) {
      return TransferMethod::kStructural;
    }
    return n >= kMinRowsLogLinear ? TransferMethod::kLogLinear : TransferMethod::kScale;
  }
};

// The choice among candidates by their per-row errors: `default_method` unless another beats it
// by more than one standard error of the mean per-row difference (the largest such gain, in
// `*gain`).
TransferMethod choose(const std::map<TransferMethod, std::vector<double>>& errors,
                      TransferMethod default_method, double* gain) {
  TransferMethod chosen = default_method;
  double best_gain = 0;
  const std::vector<double>& base = errors.at(default_method);
  const std::size_t n = base.size();
  for (const auto& [method, error] : errors) {
    if (method == default_method) continue;
    std::vector<double> differences;
    for (std::size_t i = 0; i < n; ++i) differences.push_back(base[i] - error[i]);
    const double mean_gain = mean(differences);
    double variance = 0;
    for (double d : differences) variance += (d - mean_gain) * (d - mean_gain);
    const double standard_error =
        n > 1 ? std::sqrt(variance / static_cast<double>(n - 1) / static_cast<double>(n)) : 0;
    if (mean_gain > standard_error && mean_gain > best_gain) {
      best_gain = mean_gain;
      chosen = method;
    }
  }
  if (gain != nullptr) *gain = best_gain;
  return chosen;
}

// Rows `use` of `rows`, as rows of their own.
Rows rows_of(const Rows& rows, const std::vector<std::size_t>& use) {
  Rows out;
  out.cols = rows.cols;
  out.ridge_features = rows.ridge_features;
  for (std::size_t i : use) {
    out.s.push_back(rows.s[i]);
    out.ly.push_back(rows.ly[i]);
    out.parts.push_back(rows.parts[i]);
    if (!rows.more.empty()) out.more.push_back(rows.more[i]);
    out.x.insert(out.x.end(), rows.x.begin() + static_cast<long>(i * rows.cols),
                 rows.x.begin() + static_cast<long>((i + 1) * rows.cols));
  }
  return out;
}

// Out-of-fold natural-log predictions of the choice itself, for each view of the rows (`rows`,
// or the source's out-of-sample view of them): in each fold the candidates are cross-validated
// on the other rows, the rule chooses, and the chosen one, fitted on those rows, predicts the
// held-out ones. The chosen method's own out-of-fold residuals are optimistic, as it was chosen
// for having small ones.
std::vector<std::vector<double>> chosen_out_of_fold(const Candidates& candidates, const Rows& rows,
                                                    std::size_t folds, std::uint64_t seed,
                                                    int threads,
                                                    const std::vector<const Rows*>& views) {
  const std::size_t n = rows.s.size();
  const std::vector<std::size_t> fold = fold_of(n, folds, seed);
  std::vector<std::vector<double>> out(views.size(), std::vector<double>(n, std::nan("")));
  for (std::size_t f = 0; f < folds; ++f) {
    std::vector<std::size_t> train, held;
    for (std::size_t i = 0; i < n; ++i) (fold[i] == f ? held : train).push_back(i);
    if (held.empty() || train.empty()) continue;
    TransferMethod chosen = candidates.default_for(train.size());
    if (train.size() >= 2) {
      const Rows inner = rows_of(rows, train);
      const std::size_t inner_folds = std::min(train.size(), kMaxFolds);
      std::map<TransferMethod, std::vector<double>> errors;
      for (TransferMethod method : candidates.of(train.size())) {
        errors[method] = percentage_errors(
            out_of_fold(method, inner, inner_folds, seed, threads, inner), inner.ly);
      }
      chosen = choose(errors, chosen, nullptr);
    }
    const Fitted fitted = fit_method(chosen, rows, train, seed, threads);
    for (std::size_t v = 0; v < views.size(); ++v) {
      const std::vector<double> predicted = predict_method(chosen, fitted, *views[v], held);
      for (std::size_t k = 0; k < held.size(); ++k) out[v][held[k]] = predicted[k];
    }
  }
  return out;
}

// `value` to 3 significant digits, then `unit` ("%", "x").
std::string figure(double value, const char* unit) {
  std::ostringstream text;
  text.precision(3);
  text << value << unit;
  return text.str();
}

}  // namespace

std::string_view to_string(TransferMethod method) {
  for (const auto& [value, name] : kMethodNames) {
    if (value == method) return name;
  }
  return "?";
}

std::optional<TransferMethod> parse_transfer_method(std::string_view text) {
  for (const auto& [value, name] : kMethodNames) {
    if (name == text) return value;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Prediction

namespace {

// What a layer predicts from: the source's predictions per target, and its additive parts for
// the targets `parts_for` marks (a structural line's; empty for every other target).
struct SourceView {
  std::vector<std::vector<TargetPrediction>> predictions;
  std::vector<std::vector<AdditiveParts>> parts;
};

SourceView view_source(const Predictor& source, const float* x, std::size_t rows, const int* batch,
                       bool cheap, const std::vector<char>& parts_for) {
  SourceView view;
  view.predictions = cheap ? source.predict_cheap(x, rows) : source.predict(x, rows, batch);
  view.parts.resize(source.targets().size());
  for (std::size_t t = 0; t < view.parts.size() && t < parts_for.size(); ++t) {
    if (parts_for[t] != 0) view.parts[t] = source.additive_parts(x, rows, t);
  }
  return view;
}

// Each further source's predictions of the rows (the sources line needs no parts of them).
std::vector<SourceView> view_more(const std::vector<std::shared_ptr<const Predictor>>& more,
                                  const float* x, std::size_t rows, const int* batch, bool cheap) {
  std::vector<SourceView> views;
  views.reserve(more.size());
  for (const auto& model : more) views.push_back(view_source(*model, x, rows, batch, cheap, {}));
  return views;
}

// Per target of `corrections`, whether `needs` holds for it (and it is available).
template <typename Needs>
std::vector<char> targets_where(const std::vector<TargetCorrection>& corrections, Needs needs) {
  std::vector<char> out;
  out.reserve(corrections.size());
  for (const TargetCorrection& c : corrections) out.push_back(c.available && needs(c) ? 1 : 0);
  return out;
}

// The further sources' predictions where some target's chosen line is sources, the only line
// that reads them; none otherwise.
std::vector<SourceView> view_more_for(const std::vector<TargetCorrection>& targets,
                                      const std::vector<std::shared_ptr<const Predictor>>& more,
                                      const float* x, std::size_t rows, const int* batch,
                                      bool cheap) {
  const bool read = std::any_of(targets.begin(), targets.end(), [](const TargetCorrection& c) {
    return c.available && c.method == TransferMethod::kSources;
  });
  return read ? view_more(more, x, rows, batch, cheap) : std::vector<SourceView>{};
}

// Whether every further source predicts target t.
bool more_have(const std::vector<SourceView>& more, std::size_t t) {
  return !more.empty() && std::all_of(more.begin(), more.end(), [t](const SourceView& view) {
    return !view.predictions[t].empty() && view.predictions[t].front().available;
  });
}

// Row i's natural logs of the further sources' predictions of target t.
std::vector<double> more_logs(const std::vector<SourceView>& more, std::size_t t, std::size_t i) {
  std::vector<double> logs;
  logs.reserve(more.size());
  for (const SourceView& view : more) logs.push_back(log_of(view.predictions[t][i].value));
  return logs;
}

Rows rows_for(const SourceView& view, const std::vector<SourceView>& more, std::size_t t,
              const float* x, std::size_t rows, std::size_t cols) {
  Rows out;
  out.cols = cols + 1;
  const bool with_more = more_have(more, t);
  for (std::size_t i = 0; i < rows; ++i) {
    out.s.push_back(log_of(view.predictions[t][i].value));
    out.parts.push_back(view.parts[t].empty() ? AdditiveParts{} : view.parts[t][i]);
    if (with_more) out.more.push_back(more_logs(more, t, i));
    out.x.insert(out.x.end(), x + i * cols, x + (i + 1) * cols);
    out.x.push_back(static_cast<float>(out.s.back()));
  }
  out.ly.assign(rows, 0);
  return out;
}

Fitted fitted_of(const TargetCorrection& correction) {
  Fitted fitted;
  fitted.scale = correction.scale;
  fitted.intercept = correction.intercept;
  fitted.slope = correction.slope;
  fitted.weights = correction.weights;
  fitted.ridge = correction.ridge;
  fitted.sources = correction.sources;
  return fitted;
}

}  // namespace

std::vector<std::vector<TargetPrediction>> TransferLayer::predict(const float* x,
                                                                  std::size_t rows_count,
                                                                  const int* batch,
                                                                  bool cheap) const {
  const std::size_t cols = source->feature_names().size();
  // Only what the chosen lines use: the source's parts for a structural line, the further
  // sources' predictions for a sources line (screening predicts whole spaces through here).
  const SourceView view =
      view_source(*source, x, rows_count, batch, cheap, targets_where(targets, [](const auto& c) {
        return c.method == TransferMethod::kStructural || c.method == TransferMethod::kFeatureRidge;
      }));
  const std::vector<SourceView> more =
      view_more_for(targets, more_sources, x, rows_count, batch, cheap);
  std::vector<std::vector<TargetPrediction>> refitted;
  if (refit)
    refitted = cheap ? refit->predict_cheap(x, rows_count) : refit->predict(x, rows_count, batch);
  std::vector<std::size_t> all(rows_count);
  std::iota(all.begin(), all.end(), 0);
  // Which rows no configuration of the source's domain has, judged once for every target that
  // gives them their own width (the cheap path, which ranks whole spaces, keeps one).
  std::vector<char> new_to_source;
  const bool any_by_row =
      !cheap && std::any_of(targets.begin(), targets.end(), [](const TargetCorrection& c) {
        return c.available && c.new_half_width != c.half_width;
      });
  if (any_by_row) {
    new_to_source.resize(rows_count);
    for (std::size_t i = 0; i < rows_count; ++i)
      new_to_source[i] =
          static_cast<char>(source->training_domain().judge(x + i * cols).distance_ratio > 0);
  }
  std::vector<std::vector<TargetPrediction>> out(targets.size());
  for (std::size_t t = 0; t < targets.size(); ++t) {
    const TargetCorrection& correction = targets[t];
    out[t].resize(rows_count);
    if (!correction.available) {
      for (TargetPrediction& p : out[t]) p.reason = correction.reason;
      continue;
    }
    const bool by_row = any_by_row && correction.new_half_width != correction.half_width;
    std::vector<double> logs;
    if (correction.method == TransferMethod::kRefit) {
      for (std::size_t i = 0; i < rows_count; ++i) logs.push_back(log_of(refitted[t][i].value));
    } else {
      const Rows source_rows = rows_for(view, more, t, x, rows_count, cols);
      Fitted fitted = fitted_of(correction);
      // The cheap path leaves the trees out: loglinear is their base.
      TransferMethod method = correction.method;
      if (method == TransferMethod::kResidualTrees) {
        if (cheap) {
          method = TransferMethod::kLogLinear;
        } else {
          logs = predict_method(TransferMethod::kLogLinear, fitted, source_rows, all);
          const std::vector<float> trees =
              correction.residual.predict(source_rows.x.data(), rows_count, source_rows.cols);
          for (std::size_t i = 0; i < rows_count; ++i) logs[i] += trees[i];
        }
      }
      if (logs.empty()) logs = predict_method(method, fitted, source_rows, all);
    }
    for (std::size_t i = 0; i < rows_count; ++i) {
      const double width = cheap                        ? correction.cheap_half_width
                           : by_row && new_to_source[i] ? correction.new_half_width
                                                        : correction.half_width;
      TargetPrediction& p = out[t][i];
      p.available = true;
      p.value = std::exp(logs[i]);
      p.low = std::isfinite(width) ? std::exp(logs[i] - width) : 0;
      p.high = std::isfinite(width) ? std::exp(logs[i] + width)
                                    : std::numeric_limits<double>::infinity();
    }
  }
  return out;
}

std::vector<std::vector<std::pair<std::string, std::vector<double>>>> TransferLayer::members(
    const float* x, std::size_t rows_count, const int* batch) const {
  const std::size_t cols = source->feature_names().size();
  const SourceView view =
      view_source(*source, x, rows_count, batch, false,
                  targets_where(targets, [](const auto& c) { return c.has_structural; }));
  const std::vector<SourceView> more =
      view_more_for(targets, more_sources, x, rows_count, batch, false);
  std::vector<std::size_t> all(rows_count);
  std::iota(all.begin(), all.end(), 0);
  std::vector<std::vector<std::pair<std::string, std::vector<double>>>> out(targets.size());
  for (std::size_t t = 0; t < targets.size(); ++t) {
    const TargetCorrection& correction = targets[t];
    if (!correction.available) continue;
    const Rows source_rows = rows_for(view, more, t, x, rows_count, cols);
    std::vector<double> source_values;
    for (std::size_t i = 0; i < rows_count; ++i)
      source_values.push_back(view.predictions[t][i].value);
    out[t].emplace_back("source", std::move(source_values));
    const Fitted fitted = fitted_of(correction);
    std::vector<TransferMethod> simple = {TransferMethod::kScale, TransferMethod::kLogLinear};
    if (correction.has_structural) simple.push_back(TransferMethod::kStructural);
    if (correction.method == TransferMethod::kSources) simple.push_back(TransferMethod::kSources);
    for (TransferMethod method : simple) {
      std::vector<double> values = predict_method(method, fitted, source_rows, all);
      for (double& value : values) value = std::exp(value);
      out[t].emplace_back(std::string(to_string(method)), std::move(values));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The model file

namespace {

// feature-ridge's line from the model file, its features found among the source's columns.
FeatureRidge ridge_from_json(const json& j, const std::vector<std::string>& names) {
  FeatureRidge ridge;
  j.at("features").get_to(ridge.features);
  j.at("center").get_to(ridge.center);
  j.at("scale").get_to(ridge.scale);
  j.at("weights").get_to(ridge.weights);
  j.at("intercept").get_to(ridge.intercept);
  const std::size_t p = ridge.features.size();
  if (ridge.center.size() != p || ridge.scale.size() != p || ridge.weights.size() != p) {
    throw std::invalid_argument(
        "transfer: feature-ridge needs a center, scale and weight per feature");
  }
  bool finite = std::isfinite(ridge.intercept);
  for (std::size_t k = 0; k < p; ++k) {
    finite = finite && std::isfinite(ridge.center[k]) && std::isfinite(ridge.weights[k]) &&
             std::isfinite(ridge.scale[k]) && ridge.scale[k] > 0;
    const std::optional<std::size_t> column = feature_column(names, ridge.features[k]);
    if (!column) {
      throw std::invalid_argument("transfer: feature-ridge's feature " + ridge.features[k] +
                                  " is not one of the source's");
    }
    ridge.columns.push_back(*column);
  }
  if (!finite) throw std::invalid_argument("transfer: feature-ridge's line is not finite");
  return ridge;
}

}  // namespace

json TransferLayer::to_json() const {
  json corrections = json::array();
  for (const TargetCorrection& c : targets) {
    json entry = {{"available", c.available}};
    if (!c.available) {
      entry["reason"] = c.reason;
      corrections.push_back(std::move(entry));
      continue;
    }
    const auto finite = [](double value) {
      return std::isfinite(value) ? json(value) : json(nullptr);
    };
    entry["method"] = to_string(c.method);
    entry["scale"] = c.scale;
    entry["loglinear"] = {{"intercept", c.intercept}, {"slope", c.slope}};
    entry["structural"] = c.has_structural ? json(c.weights) : json(nullptr);
    entry["feature_ridge"] = c.method == TransferMethod::kFeatureRidge
                                 ? json{{"features", c.ridge.features},
                                        {"center", c.ridge.center},
                                        {"scale", c.ridge.scale},
                                        {"weights", c.ridge.weights},
                                        {"intercept", c.ridge.intercept}}
                                 : json(nullptr);
    entry["residual_trees"] =
        c.residual.empty() ? json(nullptr) : json::parse(c.residual.to_json());
    entry["sources"] =
        c.method == TransferMethod::kSources
            ? json{{"intercept", c.sources.intercept}, {"weights", c.sources.weights}}
            : json(nullptr);
    entry["log_half_width"] = finite(c.half_width);
    entry["cheap_log_half_width"] = finite(c.cheap_half_width);
    entry["new_log_half_width"] = finite(c.new_half_width);
    json cv = json::object();
    for (const auto& [name, mape] : c.report.cv_mape) cv[name] = mape;
    entry["choice"] = {{"why", c.report.why},
                       {"cv_mape", cv},
                       {"rows", c.report.rows},
                       {"folds", c.report.folds},
                       {"interval", c.report.interval}};
    corrections.push_back(std::move(entry));
  }
  json more = json::array();
  for (const auto& model : more_sources) more.push_back(PredictorFactory::to_json(*model));
  return {{"source", PredictorFactory::to_json(*source)},
          {"more_sources", std::move(more)},
          {"refit", refit ? PredictorFactory::to_json(*refit) : json(nullptr)},
          {"rows", rows},
          {"notes", notes},
          {"targets", corrections}};
}

std::shared_ptr<const TransferLayer> TransferLayer::from_json(const json& j,
                                                              const std::string& origin) {
  auto layer = std::make_shared<TransferLayer>();
  layer->source = std::make_shared<Predictor>(
      PredictorFactory::from_json(j.at("source"), origin + " (its source model)"));
  if (!j.at("refit").is_null()) {
    layer->refit = std::make_shared<Predictor>(
        PredictorFactory::from_json(j.at("refit"), origin + " (its refit model)"));
  }
  // Absent from transfers before carb took further sources.
  if (j.contains("more_sources")) {
    for (const json& model : j.at("more_sources")) {
      auto more = std::make_shared<Predictor>(PredictorFactory::from_json(
          model,
          origin + " (its source model " + std::to_string(layer->more_sources.size() + 2) + ")"));
      if (more->schema() != layer->source->schema() ||
          more->feature_names() != layer->source->feature_names() ||
          more->targets().size() != layer->source->targets().size()) {
        throw std::invalid_argument(
            "transfer: a further source's features or targets differ from the source's");
      }
      layer->more_sources.push_back(std::move(more));
    }
  }
  j.at("rows").get_to(layer->rows);
  j.at("notes").get_to(layer->notes);
  const json& corrections = j.at("targets");
  if (corrections.size() != layer->source->targets().size()) {
    throw std::invalid_argument("transfer: one correction per target of the source is needed");
  }
  for (std::size_t t = 0; t < corrections.size(); ++t) {
    const json& entry = corrections[t];
    TargetCorrection c;
    c.report.target = layer->source->targets()[t].name;
    c.available = entry.at("available").get<bool>();
    c.report.available = c.available;
    if (!c.available) {
      c.reason = entry.at("reason").get<std::string>();
      c.report.reason = c.reason;
      layer->targets.push_back(std::move(c));
      continue;
    }
    const auto method = parse_transfer_method(entry.at("method").get<std::string>());
    if (!method)
      throw std::invalid_argument("transfer: unknown method " + entry.at("method").dump());
    c.method = *method;
    c.scale = entry.at("scale").get<double>();
    c.intercept = entry.at("loglinear").at("intercept").get<double>();
    c.slope = entry.at("loglinear").at("slope").get<double>();
    if (!std::isfinite(c.scale) || !std::isfinite(c.intercept) || !std::isfinite(c.slope)) {
      throw std::invalid_argument("transfer: a correction is not finite");
    }
    if (!entry.at("structural").is_null()) {
      c.has_structural = true;
      // An earlier carb split the prior into fewer parts, whose weights mean something else.
      const auto weights = entry.at("structural").get<std::vector<double>>();
      if (weights.size() != kAdditivePartCount) {
        throw Error(ErrorCategory::kInput,
                    origin + ": its structural correction has " + std::to_string(weights.size()) +
                        " weights, this carb's " + std::to_string(kAdditivePartCount) +
                        " (an earlier carb's transfer); refit the transfer");
      }
      std::copy(weights.begin(), weights.end(), c.weights.begin());
      for (double w : c.weights) {
        if (!std::isfinite(w) || w < 0)
          throw std::invalid_argument("transfer: bad structural weight");
      }
    }
    const bool needs_structural =
        c.method == TransferMethod::kStructural || c.method == TransferMethod::kFeatureRidge;
    if (needs_structural && !c.has_structural) {
      throw std::invalid_argument("transfer: " + std::string(to_string(c.method)) +
                                  " without its structural weights");
    }
    // Files of carbs before feature-ridge have no "feature_ridge".
    if (entry.contains("feature_ridge") && !entry.at("feature_ridge").is_null()) {
      c.ridge = ridge_from_json(entry.at("feature_ridge"), layer->source->feature_names());
    } else if (c.method == TransferMethod::kFeatureRidge) {
      throw std::invalid_argument("transfer: feature-ridge without its line");
    }
    if (!entry.at("residual_trees").is_null()) {
      c.residual = xgb::Booster::from_json(entry.at("residual_trees").dump());
      c.residual.set_threads(1);
    }
    if (c.method == TransferMethod::kResidualTrees && c.residual.empty()) {
      throw std::invalid_argument("transfer: residual trees without their trees");
    }
    if (entry.contains("sources") && !entry.at("sources").is_null()) {
      entry.at("sources").at("intercept").get_to(c.sources.intercept);
      entry.at("sources").at("weights").get_to(c.sources.weights);
      if (c.sources.weights.size() != layer->more_sources.size() + 1) {
        throw std::invalid_argument("transfer: sources needs a weight per source");
      }
      bool finite = std::isfinite(c.sources.intercept);
      for (double w : c.sources.weights) finite = finite && std::isfinite(w);
      if (!finite) throw std::invalid_argument("transfer: sources' line is not finite");
    } else if (c.method == TransferMethod::kSources) {
      throw std::invalid_argument("transfer: sources without its line");
    }
    if (c.method == TransferMethod::kRefit && !layer->refit) {
      throw std::invalid_argument("transfer: refit without the refit model");
    }
    const auto width = [](const json& value) {
      return value.is_null() ? std::numeric_limits<double>::infinity() : value.get<double>();
    };
    c.half_width = width(entry.at("log_half_width"));
    c.cheap_half_width = width(entry.at("cheap_log_half_width"));
    // Absent from transfers before carb kept their sources' out-of-sample predictions.
    c.new_half_width =
        entry.contains("new_log_half_width") ? width(entry.at("new_log_half_width")) : c.half_width;
    const json& choice = entry.at("choice");
    c.report.available = true;
    c.report.method = std::string(to_string(c.method));
    choice.at("why").get_to(c.report.why);
    for (const auto& [name, mape] : choice.at("cv_mape").items()) {
      c.report.cv_mape.emplace_back(name, mape.get<double>());
    }
    choice.at("rows").get_to(c.report.rows);
    choice.at("folds").get_to(c.report.folds);
    choice.at("interval").get_to(c.report.interval);
    c.report.half_width = c.half_width;
    c.report.new_half_width = c.new_half_width;
    layer->targets.push_back(std::move(c));
  }
  return layer;
}

}  // namespace model_detail

// ---------------------------------------------------------------------------------------------
// Fitting

namespace {

bool time_like_target(const TargetInfo& info) {
  return info.name == "latency" || info.name == "energy";
}

// The model and the data share a feature schema and targets, and the data has rows.
void check_schema(const Predictor& source, const Dataset& data) {
  if (data.schema != source.schema() || data.feature_names != source.feature_names()) {
    throw Error(ErrorCategory::kInput, "the source model's feature schema (" + source.schema() +
                                           ") differs from the data's (" + data.schema +
                                           "); refit the source with this carb");
  }
  std::string source_targets, data_targets;
  for (const TargetInfo& info : source.targets())
    source_targets += (source_targets.empty() ? "" : ",") + info.name;
  for (const TargetInfo& info : data.targets)
    data_targets += (data_targets.empty() ? "" : ",") + info.name;
  if (source_targets != data_targets) {
    throw Error(ErrorCategory::kInput, "the source model's targets (" + source_targets +
                                           ") differ from the data's (" + data_targets + ")");
  }
  if (data.rows() == 0) {
    throw Error(ErrorCategory::kInput, "no measured rows of the new device to transfer to");
  }
}

void check_compatible(const Predictor& source, const Dataset& data, const std::string& name) {
  check_transfer_source(source, name);
  check_schema(source, data);
}

// A model's out-of-sample predictions of the configurations its data has, by key: per target
// (NaN where it kept none).
std::map<std::string, std::vector<double>> out_of_sample_by_id(const Predictor& model) {
  std::map<std::string, std::vector<double>> out;
  const Predictor::OutOfSample& kept = model.out_of_sample();
  for (std::size_t i = 0; i < kept.ids.size(); ++i) {
    std::vector<double>& values = out[kept.ids[i]];
    for (const std::vector<double>& target : kept.values) {
      values.push_back(target.empty() ? std::nan("") : target[i]);
    }
  }
  return out;
}

// Natural log of `model`'s out-of-sample prediction of target t for configuration `id`, if kept.
std::optional<double> out_of_sample_log(const std::map<std::string, std::vector<double>>& kept,
                                        const std::string& id, std::size_t t) {
  const auto value = kept.find(id);
  if (value == kept.end() || t >= value->second.size() || !std::isfinite(value->second[t])) {
    return std::nullopt;
  }
  return model_detail::log_of(value->second[t]);
}

// A copy of a model through its file, as a transfer's layer keeps it (the model file embeds it).
std::shared_ptr<const Predictor> kept_copy(const Predictor& model, const std::string& origin) {
  return std::make_shared<Predictor>(model_detail::PredictorFactory::from_json(
      model_detail::PredictorFactory::to_json(model), origin));
}

}  // namespace

std::vector<DeviceDistance> device_distance(const Predictor& model, const Dataset& data) {
  check_schema(model, data);
  const auto predictions = model.predict(data.x.data(), data.rows(), data.batch.data());
  std::vector<DeviceDistance> out;
  for (std::size_t t = 0; t < model.targets().size(); ++t) {
    DeviceDistance& d = out.emplace_back();
    d.target = model.targets()[t].name;
    std::vector<double> logs;
    for (std::size_t i = 0; i < data.rows(); ++i) {
      const double measured = data.y[t][i];
      const TargetPrediction& p = predictions[t][i];
      if (!p.available || !(measured > 0) || !(p.value > 0)) continue;
      logs.push_back(std::log(measured / p.value));
    }
    d.rows = logs.size();
    if (logs.empty()) continue;
    double sum = 0;
    for (double v : logs) sum += v;
    const double mean = sum / static_cast<double>(logs.size());
    double squares = 0;
    for (double v : logs) squares += (v - mean) * (v - mean);
    d.ratio = std::exp(mean);
    d.low = std::exp(*std::min_element(logs.begin(), logs.end()));
    d.high = std::exp(*std::max_element(logs.begin(), logs.end()));
    d.spread = logs.size() > 1 ? std::sqrt(squares / static_cast<double>(logs.size() - 1)) : 0;
  }
  return out;
}

std::string distance_text(const std::vector<DeviceDistance>& distances) {
  std::string text;
  for (const DeviceDistance& d : distances) {
    if (d.rows == 0) continue;
    char part[160];
    std::snprintf(part, sizeof part, "%s %.3gx (%.3gx-%.3gx over %zu rows)", d.target.c_str(),
                  d.ratio, d.low, d.high, d.rows);
    text += (text.empty() ? "" : ", ") + std::string(part);
  }
  return text.empty() ? "nothing to compare" : text;
}

void check_transfer_source(const Predictor& model, const std::string& name) {
  if (model.schema() != kArchitectureSchema) {
    throw Error(ErrorCategory::kInput,
                name + " was fitted on " +
                    (model.schema() == kKernelSchema ? "kernel timings" : "a table") +
                    "; a transfer needs a model of carb's measurements of networks");
  }
  if (model.transferred()) {
    throw Error(ErrorCategory::kInput,
                name + " is itself a transfer; fit the new device from its source model");
  }
}

Predictor transfer_fit(const Predictor& source_model, const Dataset& data,
                       const TransferOptions& options, TransferReport* report_out) {
  using namespace model_detail;
  const auto started = std::chrono::steady_clock::now();
  check_compatible(source_model, data, "the source model");
  for (const Predictor* more : options.more_sources)
    check_compatible(*more, data, "a further source model");
  if (options.coverage <= 0 || options.coverage >= 1) {
    throw Error(ErrorCategory::kUsage, "coverage must be between 0 and 1 (exclusive)", "coverage");
  }
  TransferReport report;
  report.source_device =
      source_model.device_name() + " (" + source_model.device_fingerprint() + ")";
  auto layer = std::make_shared<TransferLayer>();
  layer->source = kept_copy(source_model, "the source model");
  for (const Predictor* more : options.more_sources) {
    report.more_source_devices.push_back(more->device_name() + " (" + more->device_fingerprint() +
                                         ")");
    layer->more_sources.push_back(kept_copy(*more, "a further source model"));
  }
  if (!options.more_sources.empty()) {
    std::string devices;
    for (const std::string& device : report.more_source_devices) {
      devices += (devices.empty() ? "" : "; ") + device;
    }
    report.notes.push_back(
        "further sources (" + devices +
        "): a line in the natural logs of every source's prediction is the sources candidate");
  }
  layer->rows = data.rows();
  const std::size_t cols = data.cols();
  // The structural candidates' parts, for latency and energy; the cheap path keeps the full
  // path's parts.
  std::vector<char> time_like;
  time_like.reserve(data.targets.size());
  for (const TargetInfo& target : data.targets)
    time_like.push_back(time_like_target(target) ? 1 : 0);
  const SourceView view = model_detail::view_source(*layer->source, data.x.data(), data.rows(),
                                                    data.batch.data(), false, time_like);
  const SourceView cheap_view = model_detail::view_source(*layer->source, data.x.data(),
                                                          data.rows(), data.batch.data(), true, {});
  const std::vector<SourceView> more_view =
      view_more(layer->more_sources, data.x.data(), data.rows(), data.batch.data(), false);
  const std::vector<SourceView> more_cheap_view =
      view_more(layer->more_sources, data.x.data(), data.rows(), data.batch.data(), true);

  // A fit from scratch, where there are rows enough: on all of them, and per fold for its
  // out-of-fold predictions.
  std::vector<std::vector<double>> refit_oof;  // [target][row], natural log
  bool refit_offered = false;
  std::size_t measured_rows = 0;
  for (std::size_t i = 0; i < data.rows(); ++i) {
    bool any = false;
    for (const auto& y : data.y) any = any || !std::isnan(y[i]);
    measured_rows += any ? 1 : 0;
  }
  FitOptions refit_options;
  refit_options.seed = options.seed;
  refit_options.coverage = options.coverage;
  refit_options.threads = options.threads;
  refit_options.baselines = false;
  std::shared_ptr<const Predictor> refit;
  if (measured_rows >= kTransferRefitRows) {
    refit_offered = true;
    refit_oof.assign(data.targets.size(), std::vector<double>(data.rows(), std::nan("")));
    const std::vector<std::size_t> fold = fold_of(data.rows(), kRefitFolds, options.seed);
    for (std::size_t f = 0; f < kRefitFolds; ++f) {
      std::vector<std::size_t> train, held;
      for (std::size_t i = 0; i < data.rows(); ++i) (fold[i] == f ? held : train).push_back(i);
      const Predictor fitted = Predictor::fit(subset(data, train), refit_options, nullptr);
      const Dataset held_data = subset(data, held);
      const auto predicted =
          fitted.predict(held_data.x.data(), held.size(), held_data.batch.data());
      for (std::size_t t = 0; t < data.targets.size(); ++t) {
        if (!predicted[t].front().available) continue;
        for (std::size_t k = 0; k < held.size(); ++k) {
          refit_oof[t][held[k]] = log_of(predicted[t][k].value);
        }
      }
    }
    refit = std::make_shared<Predictor>(Predictor::fit(data, refit_options, nullptr));
  } else {
    report.notes.push_back("refit from scratch not offered: " + std::to_string(measured_rows) +
                           " rows, it needs " + std::to_string(kTransferRefitRows));
  }

  // feature-ridge's features, where the source has them.
  std::vector<std::pair<std::string, std::size_t>> ridge_features;
  const std::vector<std::string>& names = layer->source->feature_names();
  for (std::string_view name : kRidgeFeatures) {
    if (const std::optional<std::size_t> column = feature_column(names, name)) {
      ridge_features.emplace_back(name, *column);
    }
  }

  // Whether any row is of a network family the source's training rows are not of.
  const TrainingDomain& source_domain = layer->source->training_domain();
  const bool new_family_rows =
      std::any_of(data.family.begin(), data.family.end(), [&](const std::string& family) {
        return !family.empty() && source_domain.new_family(family);
      });
  if (new_family_rows && measured_rows < kTransferFamilyRows) {
    report.notes.push_back(
        std::to_string(measured_rows) + (measured_rows == 1 ? " row" : " rows") +
        " of a network family the source never saw: one factor from them; the structural "
        "correction and the source as it is need " +
        std::to_string(kTransferFamilyRows) +
        " (on the zoo, 2 rows left 3 of 11 families 6-34 points worse than none, 4 rows none "
        "more than a point worse: docs/benchmarks.md, \"Zoo campaign\")");
  }

  // Each source's out-of-sample predictions of the configurations its data has, by key.
  const std::map<std::string, std::vector<double>> out_of_sample =
      out_of_sample_by_id(*layer->source);
  std::vector<std::map<std::string, std::vector<double>>> more_out_of_sample;
  for (const auto& more : layer->more_sources)
    more_out_of_sample.push_back(out_of_sample_by_id(*more));

  bool refit_used = false;
  bool any_available = false;
  for (std::size_t t = 0; t < data.targets.size(); ++t) {
    TargetCorrection correction;
    TransferTargetReport& target_report = correction.report;
    target_report.target = data.targets[t].name;
    std::vector<std::size_t> measured;
    for (std::size_t i = 0; i < data.rows(); ++i) {
      const double y = data.y[t][i];
      if (!std::isnan(y) && y > 0) measured.push_back(i);
    }
    const bool source_has = !view.predictions[t].empty() && view.predictions[t].front().available;
    if (!source_has || measured.empty()) {
      correction.reason = !source_has ? view.predictions[t].front().reason
                          : !data.missing_reason[t].empty()
                              ? data.missing_reason[t]
                              : "no " + data.targets[t].name + " values on the new device";
      target_report.reason = correction.reason;
      layer->targets.push_back(std::move(correction));
      continue;
    }
    any_available = true;
    correction.available = true;
    target_report.available = true;
    const std::size_t n = measured.size();
    // The target's rows, in the order of `measured`.
    Rows rows;
    rows.cols = cols + 1;
    rows.ridge_features = ridge_features;
    const bool structural = time_like_target(data.targets[t]) && !view.parts[t].empty();
    const bool with_more = more_have(more_view, t);
    for (std::size_t i : measured) {
      if (with_more) rows.more.push_back(more_logs(more_view, t, i));
      rows.s.push_back(log_of(view.predictions[t][i].value));
      rows.ly.push_back(std::log(data.y[t][i]));
      rows.parts.push_back(structural ? view.parts[t][i] : AdditiveParts{});
      rows.x.insert(rows.x.end(), data.row(i), data.row(i) + cols);
      rows.x.push_back(static_cast<float>(rows.s.back()));
    }
    Candidates candidates_of;
    candidates_of.new_family_rows = new_family_rows;
    candidates_of.structural = structural;
    candidates_of.ridge = !ridge_features.empty();
    candidates_of.sources = with_more;
    candidates_of.time_like = time_like_target(data.targets[t]);
    const std::vector<TransferMethod> candidates = candidates_of.of(n);
    const std::size_t folds = std::min(n, kMaxFolds);
    target_report.rows = n;
    target_report.folds = folds;
    std::map<TransferMethod, std::vector<double>> oof;
    if (n >= 2) {
      for (TransferMethod method : candidates) {
        oof[method] = out_of_fold(method, rows, folds, options.seed, options.threads, rows);
      }
    }
    if (refit_offered) {
      std::vector<double> values;
      values.reserve(measured.size());
      for (std::size_t i : measured) values.push_back(refit_oof[t][i]);
      if (std::none_of(values.begin(), values.end(), [](double v) { return std::isnan(v); })) {
        oof[TransferMethod::kRefit] = std::move(values);
      }
    }
    std::map<TransferMethod, std::vector<double>> errors;
    for (const auto& [method, predicted] : oof) {
      errors[method] = percentage_errors(predicted, rows.ly);
      target_report.cv_mape.emplace_back(std::string(to_string(method)), mean(errors[method]));
    }
    // The default unless another candidate beats it by more than one standard error.
    const TransferMethod default_method = candidates_of.default_for(n);
    TransferMethod chosen = default_method;
    std::string why = n < 2 ? "one row: its factor, no cross-validation"
                            : std::string(to_string(chosen)) + " (the default)";
    if (n >= 2) {
      double best_gain = 0;
      chosen = choose(errors, default_method, &best_gain);
      std::ostringstream text;
      text << to_string(chosen) << ": cross-validated MAPE " << figure(mean(errors[chosen]), "%")
           << " over " << n << " rows in " << folds << " folds";
      if (chosen == default_method) {
        text << "; the default"
             << (new_family_rows && chosen == TransferMethod::kStructural
                     ? " for rows of a network family the source never saw"
                 : chosen == TransferMethod::kSources ? " where further sources are given"
                                                      : "")
             << ", as no other candidate beat it by more than one standard error";
      } else {
        text << ", " << figure(best_gain, "%") << " better than " << to_string(default_method)
             << " (more than one standard error)";
      }
      why = text.str();
    }
    correction.method = chosen;
    target_report.method = std::string(to_string(chosen));
    target_report.why = why;
    std::vector<std::size_t> all(n);
    std::iota(all.begin(), all.end(), 0);
    Fitted fitted =
        fit_method(chosen == TransferMethod::kRefit ? TransferMethod::kLogLinear : chosen, rows,
                   all, options.seed, options.threads);
    correction.scale = fitted.scale;
    correction.intercept = fitted.intercept;
    correction.slope = fitted.slope;
    if (structural && n >= kMinRowsStructural) {
      correction.has_structural = true;
      correction.weights = fit_structural(rows, all);
    }
    if (chosen == TransferMethod::kFeatureRidge) correction.ridge = std::move(fitted.ridge);
    if (chosen == TransferMethod::kResidualTrees) correction.residual = std::move(fitted.residual);
    if (chosen == TransferMethod::kSources) correction.sources = std::move(fitted.sources);
    if (chosen == TransferMethod::kRefit) refit_used = true;
    // The sources' out-of-sample view of the rows: on the rows a source's data has, its
    // predictions are in-sample, and residuals there are smaller than on a configuration new to it.
    Rows held_view = rows;
    std::size_t of_source = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const std::string& id = data.ids[measured[k]];
      if (const std::optional<double> value = out_of_sample_log(out_of_sample, id, t)) {
        held_view.s[k] = *value;
        held_view.x[k * held_view.cols + cols] = static_cast<float>(held_view.s[k]);
        ++of_source;
      }
      for (std::size_t j = 0; with_more && j < more_out_of_sample.size(); ++j) {
        if (const std::optional<double> value = out_of_sample_log(more_out_of_sample[j], id, t)) {
          held_view.more[k][j] = *value;
        }
      }
    }
    // Intervals from out-of-fold residuals: below kConformalRows rows, of the choice itself, each
    // fold choosing anew on its other rows (the chosen method's own residuals are those it won
    // on: Intel -> AMD at K = 16 chose feature-ridge at a cross-validated 6.3% where it then
    // erred by 13.5%, and its intervals covered 61%); from there on, the chosen method's.
    std::vector<double> chosen_oof, honest;
    const bool whole_choice = n >= 2 && n < kConformalRows && chosen != TransferMethod::kRefit;
    if (whole_choice) {
      std::vector<std::vector<double>> views = chosen_out_of_fold(
          candidates_of, rows, folds, options.seed, options.threads, {&rows, &held_view});
      chosen_oof = std::move(views[0]);
      honest = std::move(views[1]);
    } else {
      if (oof.contains(chosen)) chosen_oof = oof[chosen];
      if (n >= 2 && chosen != TransferMethod::kRefit) {
        honest = out_of_fold(chosen, rows, folds, options.seed, options.threads, held_view);
      }
    }
    std::vector<double> residuals;
    for (std::size_t i = 0; i < chosen_oof.size(); ++i)
      residuals.push_back(chosen_oof[i] - rows.ly[i]);
    double source_sd = source_sd_of(view.predictions[t], measured, source_model.coverage());
    double mean_square = 0;
    if (source_sd > 0 && !source_holds(held_view, source_sd, &mean_square)) source_sd = 0;
    correction.half_width =
        interval_half_width(residuals, options.coverage, source_sd, &target_report.interval);
    if (whole_choice)
      target_report.interval += ", from residuals of the choice cross-validated whole";
    if (source_sd == 0 && mean_square > 0 && n < kConformalRows) {
      target_report.interval +=
          "; not pooled with the source's spread, which does not hold here (" +
          figure(mean_square, "x") + " its variance)";
    }
    target_report.half_width = correction.half_width;
    // Configurations new to the source: the same out-of-fold fits applied to its out-of-sample
    // predictions of the rows its data has give their intervals.
    correction.new_half_width = correction.half_width;
    if (of_source > 0 && !honest.empty()) {
      std::vector<double> new_residuals;
      for (std::size_t i = 0; i < n; ++i) new_residuals.push_back(honest[i] - rows.ly[i]);
      std::string new_interval;
      correction.new_half_width =
          std::max(correction.half_width,
                   interval_half_width(new_residuals, options.coverage, source_sd, &new_interval));
      target_report.interval += "; new to the source: from its out-of-sample predictions of the " +
                                std::to_string(of_source) + " rows its data has";
    }
    target_report.new_half_width = correction.new_half_width;
    // The cheap path: the source's cheap prediction through the same correction (loglinear for
    // residual trees, the refit's own cheap path for refit), judged on the rows it was fitted on.
    std::vector<double> cheap_residuals;
    if (chosen == TransferMethod::kRefit) {
      const auto cheap = refit->predict_cheap(data.x.data(), data.rows());
      for (std::size_t k = 0; k < n; ++k) {
        cheap_residuals.push_back(log_of(cheap[t][measured[k]].value) - rows.ly[k]);
      }
    } else {
      Rows cheap_rows = rows;
      for (std::size_t k = 0; k < n; ++k) {
        cheap_rows.s[k] = log_of(cheap_view.predictions[t][measured[k]].value);
        if (with_more) cheap_rows.more[k] = more_logs(more_cheap_view, t, measured[k]);
      }
      const TransferMethod cheap_method =
          chosen == TransferMethod::kResidualTrees ? TransferMethod::kLogLinear : chosen;
      const Fitted parametric = fitted_of(correction);
      const std::vector<double> predicted =
          predict_method(cheap_method, parametric, cheap_rows, all);
      for (std::size_t k = 0; k < n; ++k) cheap_residuals.push_back(predicted[k] - rows.ly[k]);
    }
    std::string cheap_interval;
    correction.cheap_half_width =
        interval_half_width(cheap_residuals, options.coverage, source_sd, &cheap_interval);
    layer->targets.push_back(std::move(correction));
  }
  if (!any_available) {
    throw Error(ErrorCategory::kInput, "no target has measured values on the new device");
  }
  if (refit_used) layer->refit = refit;
  for (const TargetCorrection& correction : layer->targets)
    report.targets.push_back(correction.report);
  layer->notes = report.notes;
  report.fit_seconds = seconds_since(started);
  FitReport fit_report;
  fit_report.fitted_ids = data.ids;
  fit_report.train_rows = data.rows();
  fit_report.notes = report.notes;
  fit_report.fit_seconds = report.fit_seconds;
  for (const TransferTargetReport& target : report.targets) {
    if (target.available) fit_report.notes.push_back(target.target + ": " + target.why);
  }
  if (report_out != nullptr) *report_out = report;
  return PredictorFactory::transferred(layer, data, options.coverage, std::move(fit_report));
}

// ---------------------------------------------------------------------------------------------
// What to measure

namespace {

double uniform01(std::mt19937_64& random) { return static_cast<double>(random() >> 11) * 0x1p-53; }

// How many of `k` each stratum gets: in proportion to its size (largest remainder), never more
// than it has, the rest passed on to those with room.
std::vector<std::size_t> allocate(const std::vector<std::size_t>& sizes, std::size_t k) {
  const std::size_t total = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  std::vector<std::size_t> share(sizes.size(), 0);
  std::size_t left = std::min(k, total);
  while (left > 0) {
    std::size_t room_total = 0;
    for (std::size_t s = 0; s < sizes.size(); ++s) room_total += sizes[s] - share[s];
    std::vector<std::pair<double, std::size_t>> remainders;
    std::size_t given = 0;
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      const double room = static_cast<double>(sizes[s] - share[s]);
      const double exact = static_cast<double>(left) * room / static_cast<double>(room_total);
      const auto whole = static_cast<std::size_t>(exact);
      share[s] += whole;
      given += whole;
      remainders.emplace_back(exact - static_cast<double>(whole), s);
    }
    std::sort(remainders.begin(), remainders.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    for (const auto& [remainder, s] : remainders) {
      if (given == left) break;
      if (share[s] < sizes[s]) {
        ++share[s];
        ++given;
      }
    }
    left -= given;
  }
  return share;
}

}  // namespace

std::vector<std::size_t> choose_transfer_rows(const Predictor& source, const float* x,
                                              std::size_t rows, const int* batch, std::size_t k,
                                              std::uint64_t seed) {
  std::vector<std::size_t> chosen;
  if (k >= rows) {
    chosen.resize(rows);
    std::iota(chosen.begin(), chosen.end(), 0);
    return chosen;
  }
  // What to spread over: latency where the source predicts it, else its last available target.
  const auto predictions = source.predict_cheap(x, rows);
  std::size_t target = predictions.size();
  for (std::size_t t = 0; t < predictions.size(); ++t) {
    if (predictions[t].empty() || !predictions[t].front().available) continue;
    if (target == predictions.size() || source.targets()[t].name == "latency") target = t;
  }
  const auto& names = source.feature_names();
  const std::optional<std::size_t> block = feature_column(names, "bottleneck");
  std::map<int, std::vector<std::size_t>> strata;
  for (std::size_t i = 0; i < rows; ++i) {
    const int bottleneck = block && x[i * names.size() + *block] > 0.5f ? 1 : 0;
    const int low_batch = batch != nullptr && batch[i] > 0 && batch[i] <= 8;
    strata[2 * bottleneck + low_batch].push_back(i);
  }
  std::vector<std::size_t> sizes;
  sizes.reserve(strata.size());
  for (const auto& [key, members] : strata) sizes.push_back(members.size());
  const std::vector<std::size_t> share = allocate(sizes, k);
  std::mt19937_64 random(seed);
  std::size_t s = 0;
  for (auto& [key, members] : strata) {
    const std::size_t a = share[s++];
    const double offset = uniform01(random);
    if (a == 0) continue;
    if (target < predictions.size()) {
      std::stable_sort(members.begin(), members.end(), [&](std::size_t p, std::size_t q) {
        return predictions[target][p].value < predictions[target][q].value;
      });
    }
    // Evenly spaced quantiles: distinct positions, as a <= the stratum's size.
    for (std::size_t j = 0; j < a; ++j) {
      const auto position =
          static_cast<std::size_t>((static_cast<double>(j) + offset) / static_cast<double>(a) *
                                   static_cast<double>(members.size()));
      chosen.push_back(members[std::min(position, members.size() - 1)]);
    }
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

std::vector<bool> known_to(const Predictor& source, const std::vector<std::string>& ids) {
  const TrainingDomain& domain = source.training_domain();
  std::vector<std::string> fitted;
  fitted.reserve(domain.rows());
  for (std::size_t i = 0; i < domain.rows(); ++i) fitted.push_back(domain.id(i));
  std::sort(fitted.begin(), fitted.end());
  std::vector<bool> known;
  known.reserve(ids.size());
  for (const std::string& id : ids) {
    known.push_back(std::binary_search(fitted.begin(), fitted.end(), id));
  }
  return known;
}

std::vector<std::size_t> choose_random_rows(std::size_t rows, std::size_t k, std::uint64_t seed) {
  std::vector<std::size_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 random(seed);
  for (std::size_t i = rows; i > 1; --i) std::swap(order[i - 1], order[random() % i]);
  order.resize(std::min(k, rows));
  std::sort(order.begin(), order.end());
  return order;
}

std::optional<TransferChoice> parse_transfer_choice(std::string_view text) {
  if (text == "spread") return TransferChoice::kSpread;
  if (text == "random") return TransferChoice::kRandom;
  return std::nullopt;
}

HeldOutTransfer transfer_held_out(const Predictor& source, const Dataset& data, std::size_t k,
                                  TransferChoice choice, const TransferOptions& options) {
  std::vector<std::size_t> fitted(data.rows()), held;
  std::iota(fitted.begin(), fitted.end(), 0);
  if (k > 0 && k < data.rows()) {
    fitted = choice == TransferChoice::kRandom
                 ? choose_random_rows(data.rows(), k, options.seed)
                 : choose_transfer_rows(source, data.x.data(), data.rows(), data.batch.data(), k,
                                        options.seed);
    std::vector<bool> taken(data.rows(), false);
    for (std::size_t i : fitted) taken[i] = true;
    for (std::size_t i = 0; i < data.rows(); ++i) {
      if (!taken[i]) held.push_back(i);
    }
  }
  TransferReport report;
  Predictor model = transfer_fit(source, subset(data, fitted), options, &report);
  std::vector<std::size_t> held_new;
  const std::vector<bool> known = known_to(source, data.ids);
  for (std::size_t i : held) {
    if (!known[i]) held_new.push_back(i);
  }
  std::vector<MethodScores> scores, scores_new;
  std::string no_plan;
  const std::unique_ptr<EngineMemoryPlanner> planner =
      held.empty() ? nullptr : EngineMemoryPlanner::for_model(model, &no_plan);
  if (!held.empty()) scores = evaluate(model, subset(data, held), planner.get());
  if (!held_new.empty()) scores_new = evaluate(model, subset(data, held_new), planner.get());
  return HeldOutTransfer{std::move(model),      std::move(report),   std::move(fitted),
                         std::move(held),       std::move(held_new), std::move(scores),
                         std::move(scores_new), planner != nullptr};
}
}  // namespace carb
