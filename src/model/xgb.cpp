#include "xgb.hpp"

#include <cmath>
#include <limits>

#include "carb/error.hpp"

namespace carb::xgb {

void check(int status, std::string_view what) {
  if (status != 0) {
    throw Error(ErrorCategory::kRuntime,
                "XGBoost: " + std::string(what) + ": " + std::string(XGBGetLastError()));
  }
}

Matrix::Matrix(const float* x, std::size_t rows, std::size_t cols,
               const std::vector<float>& labels) {
  check(XGDMatrixCreateFromMat(x, rows, cols, std::numeric_limits<float>::quiet_NaN(), &handle_),
        "creating a matrix");
  if (!labels.empty()) {
    CARB_CHECK(labels.size() == rows, "one label per row");
    check(XGDMatrixSetFloatInfo(handle_, "label", labels.data(), labels.size()), "setting labels");
  }
}

Matrix::~Matrix() {
  if (handle_ != nullptr) XGDMatrixFree(handle_);
}

Booster& Booster::operator=(Booster&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) XGBoosterFree(handle_);
    handle_ = other.handle_;
    other.handle_ = nullptr;
  }
  return *this;
}

Booster::~Booster() {
  if (handle_ != nullptr) XGBoosterFree(handle_);
}

namespace {

// The metric value of XGBoosterEvalOneIter's text, e.g. "[12]\tvalidation-rmse:0.0123".
double parse_eval(const char* text) {
  const std::string_view view(text);
  const auto colon = view.rfind(':');
  CARB_CHECK(colon != std::string_view::npos, "XGBoost evaluation text without a value");
  return std::stod(std::string(view.substr(colon + 1)));
}

}  // namespace

Booster Booster::train(const std::map<std::string, std::string>& params, const Matrix& train,
                       const Matrix* validation, int max_rounds, int patience) {
  std::vector<DMatrixHandle> cache = {train.get()};
  if (validation != nullptr) cache.push_back(validation->get());
  BoosterHandle handle = nullptr;
  check(XGBoosterCreate(cache.data(), cache.size(), &handle), "creating a booster");
  Booster booster(handle);
  for (const auto& [name, value] : params) {
    check(XGBoosterSetParam(handle, name.c_str(), value.c_str()), "setting " + name);
  }
  double best = std::numeric_limits<double>::infinity();
  int best_round = 0;
  for (int round = 0; round < max_rounds; ++round) {
    check(XGBoosterUpdateOneIter(handle, round, train.get()), "training");
    if (validation == nullptr) continue;
    DMatrixHandle eval[] = {validation->get()};
    const char* names[] = {"validation"};
    const char* result = nullptr;
    check(XGBoosterEvalOneIter(handle, round, eval, names, 1, &result), "evaluating");
    const double rmse = parse_eval(result);
    if (rmse < best - 1e-12) {
      best = rmse;
      best_round = round;
    } else if (round - best_round >= patience) {
      break;
    }
  }
  if (validation != nullptr && best_round + 1 < booster.rounds()) {
    BoosterHandle sliced = nullptr;
    check(XGBoosterSlice(handle, 0, best_round + 1, 1, &sliced), "keeping the best rounds");
    booster = Booster(sliced);
  }
  return booster;
}

Booster Booster::from_json(std::string_view json) {
  BoosterHandle handle = nullptr;
  check(XGBoosterCreate(nullptr, 0, &handle), "creating a booster");
  Booster booster(handle);
  check(XGBoosterLoadModelFromBuffer(handle, json.data(), json.size()), "loading a model");
  return booster;
}

std::string Booster::to_json() const {
  bst_ulong length = 0;
  const char* data = nullptr;
  check(XGBoosterSaveModelToBuffer(handle_, R"({"format": "json"})", &length, &data),
        "saving a model");
  return std::string(data, length);
}

int Booster::rounds() const {
  int rounds = 0;
  check(XGBoosterBoostedRounds(handle_, &rounds), "counting rounds");
  return rounds;
}

void Booster::set_threads(int threads) {
  check(XGBoosterSetParam(handle_, "nthread", std::to_string(threads).c_str()), "setting threads");
}

std::vector<float> Booster::predict(const float* x, std::size_t rows, std::size_t cols) const {
  if (rows == 0) return {};
  const std::string array = R"({"data": [)" + std::to_string(reinterpret_cast<std::uintptr_t>(x)) +
                            R"(, true], "shape": [)" + std::to_string(rows) + ", " +
                            std::to_string(cols) + R"(], "typestr": "<f4", "version": 3})";
  const char* config =
      R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, "cache_id": 0, )"
      R"("strict_shape": false, "missing": NaN})";
  const bst_ulong* shape = nullptr;
  bst_ulong dims = 0;
  const float* result = nullptr;
  check(XGBoosterPredictFromDense(handle_, array.c_str(), config, nullptr, &shape, &dims, &result),
        "predicting");
  return std::vector<float>(result, result + rows);
}

}  // namespace carb::xgb
