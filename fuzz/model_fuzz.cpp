// Fuzzes the model-file loader (carb predict --model): any text either loads or throws
// carb::Error naming the file; a loaded model predicts one row of its schema without crashing.
#include <vector>

#include "carb/error.hpp"
#include "carb/model.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const carb::Predictor predictor =
        carb::Predictor::from_json_text(carb_fuzz::text_of(data, size), "fuzz.json");
    const std::vector<float> row(predictor.feature_names().size(), 1.0F);
    const int batch = 1;
    const auto predictions = predictor.predict(row.data(), 1, &batch);
    carb_fuzz::require(predictions.size() == predictor.targets().size(),
                       "predictions for " + std::to_string(predictions.size()) + " of " +
                           std::to_string(predictor.targets().size()) + " targets");
  } catch (const carb::Error&) {
  }
  return 0;
}
