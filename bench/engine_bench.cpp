// Times carb's CPU engine on configurations given by key: warm-up, then forward passes for a
// fixed time; prints one JSON object per key (median, p5, p95 in ms). bench/pytorch_compare.py
// runs it side by side with PyTorch.
// Usage: bench_engine [--seconds S] KEY...
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "carb/error.hpp"
#include "carb/measure.hpp"

int main(int argc, char** argv) {
  double seconds = 3.0;
  std::vector<std::string> keys;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::stod(argv[++i]);
    } else {
      keys.emplace_back(argv[i]);
    }
  }
  try {
    const auto backends = carb::make_backends();
    const carb::Device& device = *backends.front()->devices().front();
    using Clock = std::chrono::steady_clock;
    for (const std::string& key : keys) {
      const auto session = device.prepare(carb::parse_key(key), 1);
      for (int i = 0; i < 5; ++i) {
        session->run();
        session->sync();
      }
      std::vector<double> samples_ms;
      const auto start = Clock::now();
      while (std::chrono::duration<double>(Clock::now() - start).count() < seconds ||
             samples_ms.size() < 10) {
        const auto before = Clock::now();
        session->run();
        session->sync();
        samples_ms.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - before).count());
      }
      const carb::LatencyStats stats = carb::summarize_latency(samples_ms, 0.01);
      std::printf(
          "{\"key\": \"%s\", \"median_ms\": %.4f, \"p5_ms\": %.4f, \"p95_ms\": %.4f, "
          "\"samples\": %lld, \"threads\": %d}\n",
          key.c_str(), stats.median_ms, stats.p5_ms, stats.p95_ms,
          static_cast<long long>(stats.count), device.info().threads);
      std::fflush(stdout);
    }
  } catch (const carb::Error& error) {
    std::fprintf(stderr, "bench_engine: %s\n", error.what());
    return error.exit_code();
  }
  return 0;
}
