// Prediction throughput of a fitted CARB model over every point of a space: features (through the
// space's cache) and the whole ensemble with intervals, timed separately, best of 5 passes.
// Usage: bench_predict MODEL.json [spec.yaml] (default examples/spaces/paper.yaml)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>

#include "bench_clock.hpp"
#include "carb/error.hpp"
#include "carb/model.hpp"

using carb_bench::Clock;
using carb_bench::seconds_since;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_predict MODEL.json [spec.yaml]\n");
    return 2;
  }
  const std::string spec =
      argc > 2 ? argv[2] : std::string(CARB_SOURCE_DIR) + "/examples/spaces/paper.yaml";
  try {
    const carb::Predictor predictor = carb::Predictor::load(argv[1]);
    const carb::Space space = carb::Space::from_file(spec);
    std::vector<std::uint64_t> indices(space.size());
    std::iota(indices.begin(), indices.end(), 0);
    double best_features = 1e30, best_predict = 1e30;
    double checksum = 0;
    for (int pass = 0; pass < 5; ++pass) {
      carb::SpaceFeatures features(space);  // a cold cache every pass
      auto start = Clock::now();
      const carb::FeatureRows rows = carb::feature_rows(space, features, indices);
      best_features = std::min(best_features, seconds_since(start));
      start = Clock::now();
      const auto predictions = predictor.predict(rows.x.data(), indices.size(), rows.batch.data());
      best_predict = std::min(best_predict, seconds_since(start));
      for (const auto& target : predictions) {
        if (target.front().available) checksum += target.front().high;
      }
    }
    const double n = static_cast<double>(indices.size());
    std::printf("space %s: %zu points; model %s (%s)\n", space.name().c_str(), indices.size(),
                argv[1], predictor.device_name().c_str());
    std::printf("%-32s %10s %18s\n", "step (best of 5)", "seconds", "configurations/s");
    std::printf("%-32s %10.4f %18.0f\n", "features (cold cache)", best_features, n / best_features);
    std::printf("%-32s %10.4f %18.0f\n", "ensemble + intervals", best_predict, n / best_predict);
    std::printf("%-32s %10.4f %18.0f\n", "both", best_features + best_predict,
                n / (best_features + best_predict));
    std::printf("(checksum %g)\n", checksum);
  } catch (const carb::Error& error) {
    std::fprintf(stderr, "bench_predict: %s\n", error.what());
    return error.exit_code();
  }
  return 0;
}
