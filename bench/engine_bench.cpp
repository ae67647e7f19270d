// Times carb's engine on configurations given by key: warm-up, then forward passes for a fixed
// time; prints one JSON object per key (host wall-clock median, p5, p95 of run()+sync() in ms,
// and the device clock's median where the device has one). bench/pytorch_compare.py (CPU) and
// bench/gpu/torch_compare.py (GPU) run it side by side with PyTorch.
// An imported architecture's keys (graph-<hash>_...) need its model file: --onnx FILE, repeated.
// Usage: bench_engine [--device ID] [--seconds S] [--cuda-graph] [--cudnn-find] [--onnx FILE]
//        KEY...
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/measure.hpp"
#include "carb/statistics.hpp"

int main(int argc, char** argv) {
  double seconds = 3.0;
  std::string device_id = "cpu:0";
  carb::SessionOptions options;
  std::vector<std::string> keys, models;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::stod(argv[++i]);
    } else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device_id = argv[++i];
    } else if (std::strcmp(argv[i], "--onnx") == 0 && i + 1 < argc) {
      models.emplace_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--cuda-graph") == 0) {
      options.cuda_graph = true;
    } else if (std::strcmp(argv[i], "--cudnn-find") == 0) {
      options.cudnn_find = true;
    } else {
      keys.emplace_back(argv[i]);
    }
  }
  try {
    for (const std::string& model : models)
      (void)carb::register_architecture(carb::import_model(model));
    const auto backend = carb::make_backend_for(device_id);
    const carb::Device* found = nullptr;
    for (const auto& candidate : backend->devices()) {
      if (candidate->info().id == device_id) found = candidate.get();
    }
    if (found == nullptr) {
      throw carb::Error(carb::ErrorCategory::kUsage,
                        "no device '" + device_id + "' here: " + backend->unavailable_reason());
    }
    const carb::Device& device = *found;
    using Clock = std::chrono::steady_clock;
    // A key that fails is one error line, and the next key still runs (a GPU check wants every
    // figure it can get).
    int failures = 0;
    for (const std::string& key : keys) {
      try {
        const auto session = device.prepare(carb::parse_key(key), 1, options);
        for (int i = 0; i < 5; ++i) {
          session->run();
          session->sync();
        }
        std::vector<double> samples_ms;
        std::vector<double> device_samples_ms;
        const auto start = Clock::now();
        while (carb::seconds_since(start) < seconds || samples_ms.size() < 10) {
          const auto before = Clock::now();
          session->run();
          session->sync();
          samples_ms.push_back(
              std::chrono::duration<double, std::milli>(Clock::now() - before).count());
          if (const auto device_ms = session->last_run_device_ms()) {
            device_samples_ms.push_back(*device_ms);
          }
        }
        const carb::LatencyStats stats = carb::summarize_latency(samples_ms, 0.01);
        std::string device_median = "null";
        if (!device_samples_ms.empty()) {
          device_median =
              std::to_string(carb::summarize_latency(device_samples_ms, 0.01).median_ms);
        }
        std::printf(
            "{\"key\": \"%s\", \"median_ms\": %.4f, \"p5_ms\": %.4f, \"p95_ms\": %.4f, "
            "\"device_median_ms\": %s, \"samples\": %lld, \"threads\": %d}\n",
            key.c_str(), stats.median_ms, stats.p5_ms, stats.p95_ms, device_median.c_str(),
            static_cast<long long>(stats.count), device.info().threads);
        std::fflush(stdout);
      } catch (const carb::Error& error) {
        std::fprintf(stderr, "bench_engine: %s: %s\n", key.c_str(), error.what());
        ++failures;
      } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "bench_engine: %s: out of memory\n", key.c_str());
        ++failures;
      }
    }
    return failures == 0 ? 0 : 1;
  } catch (const carb::Error& error) {
    std::fprintf(stderr, "bench_engine: %s\n", error.what());
    return error.exit_code();
  }
}
