// Importing an ONNX file and computing its features, as `carb space show --onnx` does: the file
// read (its weights skipped), the architecture registered, its network built at the file's own
// resolution and its features computed, repeated in one process; the median and the fastest.
// Goal (issue 19): under 50 ms for resnet50.
// Usage: bench_onnx_import [directory of <model>-bn.onnx and -folded.onnx exports]
//        (default <build>/onnx-zoo, written by scripts/onnx_zoo.py or ctest's fixture onnx_zoo)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_clock.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/statistics.hpp"

using carb_bench::Clock;
using carb_bench::seconds_since;

namespace {

constexpr int kRepetitions = 21;
constexpr double kGoalMs = 50;

const std::vector<std::string> kModels = {
    "resnet50",       "mobilenet_v2",    "mobilenet_v3_large", "efficientnet_b0",
    "regnet_x_400mf", "resnext50_32x4d", "densenet121",        "shufflenet_v2_x1_0",
    "mnasnet1_0",     "vgg11",           "squeezenet1_1"};

struct Timing {
  double median_ms = 0;
  double fastest_ms = 0;
  std::size_t layers = 0;
  std::int64_t checksum = 0;
};

Timing time_import(const std::string& path) {
  std::vector<double> times_ms;
  Timing timing;
  for (int i = 0; i < kRepetitions; ++i) {
    const auto start = Clock::now();
    const carb::Architecture architecture = carb::import_model(path);
    const std::string hash = carb::register_architecture(architecture);
    const carb::Features features = carb::compute_features(carb::build_network(
        carb::imported_config(*carb::find_architecture(hash), architecture.native_resolution, 1,
                              carb::Precision::kFp32)));
    times_ms.push_back(1000 * seconds_since(start));
    timing.layers = architecture.layers.size();
    timing.checksum += features.macs;
  }
  timing.median_ms = carb::median(times_ms);
  timing.fastest_ms = *std::min_element(times_ms.begin(), times_ms.end());
  return timing;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string directory = argc > 1 ? argv[1] : std::string(CARB_ONNX_ZOO_DIR);
  try {
    std::printf("import + features of ONNX exports in %s, %d times each, one process\n\n",
                directory.c_str(), kRepetitions);
    std::printf("%-30s %10s %7s %11s %11s\n", "file", "size_MB", "layers", "median_ms",
                "fastest_ms");
    std::int64_t checksum = 0;
    double resnet50_ms = -1;
    for (const std::string& model : kModels) {
      for (const char* variant : {"-bn.onnx", "-folded.onnx"}) {
        const std::string path = directory + "/" + model + variant;
        if (!std::filesystem::exists(path)) continue;
        const Timing timing = time_import(path);
        checksum += timing.checksum;
        std::printf("%-30s %10.1f %7zu %11.2f %11.2f\n", (model + variant).c_str(),
                    static_cast<double>(std::filesystem::file_size(path)) / 1e6, timing.layers,
                    timing.median_ms, timing.fastest_ms);
        if (model == "resnet50") resnet50_ms = std::max(resnet50_ms, timing.median_ms);
      }
    }
    if (resnet50_ms < 0) {
      std::fprintf(stderr,
                   "bench_onnx_import: no resnet50 export in %s (scripts/onnx_zoo.py writes it)\n",
                   directory.c_str());
      return 2;
    }
    std::printf("\ngoal: resnet50 under %.0f ms: %s (median %.2f ms, the slower of its exports)\n",
                kGoalMs, resnet50_ms < kGoalMs ? "met" : "NOT met", resnet50_ms);
    std::printf("checksum %lld\n", static_cast<long long>(checksum));
  } catch (const carb::Error& error) {
    std::fprintf(stderr, "bench_onnx_import: %s\n", error.what());
    return error.exit_code();
  }
  return 0;
}
