// Instance vs time: how much a configuration's latency differs between two prepared instances
// of it, against how much one instance's latency moves over the same time.
// Usage: bench_instance [--instances N] [--runs R] KEY
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_clock.hpp"
#include "carb/error.hpp"
#include "carb/measure.hpp"
#include "carb/statistics.hpp"

using carb_bench::Clock;
using carb_bench::seconds_since;

namespace {
double median_ms(carb::Session& session, int runs) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    session.run();
    session.sync();
    ms.push_back(seconds_since(start) * 1e3);
  }
  return carb::upper_median(std::move(ms));
}
}  // namespace

int main(int argc, char** argv) {
  int instances = 20;
  int runs = 200;
  std::string key;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--instances") == 0 && i + 1 < argc) {
      instances = std::stoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::stoi(argv[++i]);
    } else {
      key = argv[i];
    }
  }
  const auto backends = carb::make_backends();
  const carb::Device& device = *backends.front()->devices().front();
  const carb::Config config = carb::parse_key(key);
  const auto held = device.prepare(config, 1);
  median_ms(*held, runs);
  std::printf("%8s %12s %12s %12s\n", "instance", "fresh_ms", "held_ms", "fresh/held");
  for (int i = 0; i < instances; ++i) {
    const auto session = device.prepare(config, 1);
    median_ms(*session, runs / 4);  // warm-up
    const double fresh = median_ms(*session, runs);
    const double kept = median_ms(*held, runs);
    std::printf("%8d %12.4f %12.4f %12.4f\n", i, fresh, kept, fresh / kept);
    std::fflush(stdout);
  }
  return 0;
}
