// A thin RAII layer over XGBoost's C API (1.7): dense matrices, training with early stopping on
// a validation matrix, in-place prediction and JSON (de)serialisation.
#pragma once

#include <xgboost/c_api.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace carb::xgb {

/// Throws carb::Error (runtime) with XGBoost's last error when `status` is not 0.
void check(int status, std::string_view what);

/// A dense float matrix with labels.
class Matrix {
 public:
  Matrix(const float* x, std::size_t rows, std::size_t cols, const std::vector<float>& labels);
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
  ~Matrix();
  DMatrixHandle get() const { return handle_; }

 private:
  DMatrixHandle handle_ = nullptr;
};

/// A booster. Training settings are XGBoost parameters by name.
class Booster {
 public:
  Booster() = default;
  Booster(Booster&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  Booster& operator=(Booster&& other) noexcept;
  Booster(const Booster&) = delete;
  Booster& operator=(const Booster&) = delete;
  ~Booster();

  /// Trains up to `max_rounds` rounds; with a validation matrix, stops when its RMSE has not
  /// improved for `patience` rounds and keeps the best prefix. Returns the rounds kept.
  static Booster train(const std::map<std::string, std::string>& params, const Matrix& train,
                       const Matrix* validation, int max_rounds, int patience);
  /// Loads XGBoost's own JSON model format.
  static Booster from_json(std::string_view json);
  std::string to_json() const;

  int rounds() const;
  bool empty() const { return handle_ == nullptr; }
  /// Predictions for row-major `x` (rows x cols), appended to nothing: returns rows values.
  std::vector<float> predict(const float* x, std::size_t rows, std::size_t cols) const;
  /// Sets the prediction threads (0 = XGBoost's default: all cores).
  void set_threads(int threads);

 private:
  explicit Booster(BoosterHandle handle) : handle_(handle) {}
  BoosterHandle handle_ = nullptr;
};

}  // namespace carb::xgb
