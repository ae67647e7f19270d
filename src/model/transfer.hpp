// A transferred model's corrections over its source model (transfer_fit, docs/model.md
// "Transfer"), and the hooks the model file (model_io.cpp) gives them. Private to the model module.
#pragma once

#include <array>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "carb/model.hpp"
#include "xgb.hpp"

namespace carb::model_detail {

/// How one target's prediction is made from the source's.
enum class TransferMethod {
  kSource,  ///< the source's prediction as it is
  kScale,
  kLogLinear,
  kStructural,
  kFeatureRidge,
  kResidualTrees,
  kSources,
  kRefit
};
std::string_view to_string(TransferMethod method);
std::optional<TransferMethod> parse_transfer_method(std::string_view text);

/// feature-ridge's line in a few of the network's features, standardized on the rows it was
/// fitted on: intercept + sum_k weights[k] (v_k - center[k]) / scale[k], where v_k is feature
/// features[k] (column columns[k] of the source's features), in log1p unless it is a "log_"
/// column already.
struct FeatureRidge {
  std::vector<std::string> features;
  std::vector<std::size_t> columns;
  std::vector<double> center, scale, weights;
  double intercept = 0;
};

/// sources' line: intercept + weights[0] s + sum_j weights[j] s_j, with s_j the natural log of
/// further source j-1's prediction (TransferLayer::more_sources, in order).
struct SourcesLine {
  double intercept = 0;
  std::vector<double> weights;  ///< empty where the method is not sources
};

/// One target's correction. With s the natural log of the source's prediction:
/// scale: s + a; loglinear: a + b s; structural: s + log(w . parts / sum(prior parts)) over the
/// source's additive prior parts (AdditivePart: compute, memory traffic, overhead, intercept,
/// the MACs PyTorch runs off oneDNN and pooling) and the activation bytes; feature ridge:
/// structural + a ridge line in standardized features (FeatureRidge); residual trees:
/// loglinear + trees([features, s]); sources: a + b s + sum_j c_j s_j over the natural logs s_j
/// of the further sources' predictions (SourcesLine); refit: the refit model's own prediction.
struct TargetCorrection {
  bool available = false;
  std::string reason;  ///< why not available
  TransferMethod method = TransferMethod::kLogLinear;
  double scale = 0;                 ///< a of scale (always fitted)
  double intercept = 0, slope = 1;  ///< a and b of loglinear (always fitted)
  bool has_structural = false;      ///< fitted where the source has an additive prior
  AdditiveParts weights{};          ///< w of structural
  FeatureRidge ridge;               ///< the line of feature ridge (that method only)
  xgb::Booster residual;            ///< the trees of residual trees (that method only)
  SourcesLine sources;              ///< the line of sources (that method only)
  double half_width = std::numeric_limits<double>::infinity();        ///< natural-log space
  double cheap_half_width = std::numeric_limits<double>::infinity();  ///< of the cheap path
  /// half_width for a configuration the source's data does not have (full path only)
  double new_half_width = std::numeric_limits<double>::infinity();
  TransferTargetReport report;
};

/// Every target's correction over a source model, and the refit model where one was chosen.
class TransferLayer {
 public:
  std::shared_ptr<const Predictor> source;
  std::shared_ptr<const Predictor> refit;  ///< null unless a target's method is kRefit
  /// Further devices' models whose predictions the sources method takes (TransferOptions).
  std::vector<std::shared_ptr<const Predictor>> more_sources;
  std::vector<TargetCorrection> targets;   ///< one per source target, in order
  std::size_t rows = 0;                    ///< target rows fitted on
  std::vector<std::string> notes;

  /// Each target's predictions with intervals (the source's cheap path for `cheap`).
  std::vector<std::vector<TargetPrediction>> predict(const float* x, std::size_t rows,
                                                     const int* batch, bool cheap) const;
  /// "source" and each simple correction, per target (Predictor::predict_members).
  std::vector<std::vector<std::pair<std::string, std::vector<double>>>> members(
      const float* x, std::size_t rows, const int* batch) const;

  nlohmann::json to_json() const;
  /// Throws std::invalid_argument or nlohmann::json's exceptions on a malformed layer, and
  /// carb::Error from the embedded models.
  static std::shared_ptr<const TransferLayer> from_json(const nlohmann::json& json,
                                                        const std::string& origin);
};

/// What model_io.cpp offers the transfer: building and reading transferred models.
struct PredictorFactory {
  /// A model of `data`'s device made of `layer`: its source's schema, features, targets and
  /// training domain; `data`'s device, name and drift correction; `report` as its fit report.
  static Predictor transferred(std::shared_ptr<const TransferLayer> layer, const Dataset& data,
                               double coverage, FitReport report);
  /// A model file's JSON object as a model (what Predictor::from_json_text does after parsing).
  static Predictor from_json(const nlohmann::json& file, const std::string& origin);
  static nlohmann::json to_json(const Predictor& predictor);
  /// Gives a kernel model its whole-pass interval (fit_kernel_model).
  static void set_kernel_pass_interval(Predictor& model, const KernelPassInterval& interval);
  /// Adds a note to the fit report the model keeps (and writes to its file).
  static void add_note(Predictor& model, std::string note);
};

}  // namespace carb::model_detail
