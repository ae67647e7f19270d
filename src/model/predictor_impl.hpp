// What a Predictor holds (Predictor::Impl), shared by the fit (predictor.cpp) and the model file
// (model_io.cpp). Private to the model module.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "carb/model.hpp"
#include "ensemble.hpp"
#include "transfer.hpp"

namespace carb {

struct Predictor::Impl {
  std::string schema;
  std::vector<std::string> feature_names;
  std::vector<TargetInfo> targets;
  std::string device_fingerprint, device_name;
  std::map<std::string, std::size_t> instances;  // host instance -> rows fitted on
  DriftCorrection drift;
  double coverage = 0.9;
  FitOptions options;
  std::vector<model_detail::TargetModel> models;  // one per target, cascade order
  FitReport report;
  TrainingDomain domain;                          // of the fitted rows
  OutOfSample out_of_sample;                      // of the fitted rows (architecture models)
  std::optional<KernelPassInterval> kernel_pass;  // a kernel model's whole-pass interval
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
      const model_detail::TargetModel& model = models[t];
      if (!model.available) continue;
      logs[t] = predict_one(
          model, model_detail::target_matrix(model, x, rows, feature_names.size(), logs));
    }
    return logs;
  }

  std::vector<std::vector<double>> predict_logs(const float* x, std::size_t rows,
                                                const int* batch) const {
    return cascade(x, rows,
                   [batch](const model_detail::TargetModel& model, const model_detail::Matrix& m) {
                     return model_detail::predict_log(model, m, batch);
                   });
  }

  // The same with each target's cheapest member, cascading cheap predictions.
  std::vector<std::vector<double>> predict_cheap_logs(const float* x, std::size_t rows) const {
    return cascade(x, rows,
                   [](const model_detail::TargetModel& model, const model_detail::Matrix& m) {
                     return model_detail::cheap_log(model, m);
                   });
  }

  // `new_family`: per row, whether it is of a family the model never saw (null: none is).
  std::vector<std::vector<TargetPrediction>> with_intervals(
      const std::vector<std::vector<double>>& logs, std::size_t rows, bool cheap,
      const std::vector<bool>* new_family = nullptr) const {
    std::vector<std::vector<TargetPrediction>> out(models.size());
    for (std::size_t t = 0; t < models.size(); ++t) {
      const model_detail::TargetModel& model = models[t];
      const double own = cheap ? model.cheap_half_width : model.half_width;
      out[t].resize(rows);
      for (std::size_t i = 0; i < rows; ++i) {
        TargetPrediction& p = out[t][i];
        if (!model.available) {
          p.reason = model.reason;
          continue;
        }
        const double width = new_family != nullptr && (*new_family)[i]
                                 ? std::max(own, model.new_family_half_width)
                                 : own;
        p.available = true;
        p.value = std::max(0.0, std::expm1(logs[t][i]) / model.scale);
        p.low = std::min(p.value, std::max(0.0, std::expm1(logs[t][i] - width) / model.scale));
        p.high = std::max(p.value, std::expm1(logs[t][i] + width) / model.scale);
      }
    }
    return out;
  }
};

}  // namespace carb
