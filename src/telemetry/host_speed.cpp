// A short speed probe of this machine (streaming bandwidth and multiply-add rate of one thread),
// recorded beside the host's identity so that two hosts of one CPU model can be told apart by
// how fast they run, not only by their ids.
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <vector>

#include "carb/telemetry.hpp"
#include "carb/statistics.hpp"

namespace carb {

namespace {

using Clock = std::chrono::steady_clock;

// Keeps a result alive so the compiler cannot drop the loop that made it.
volatile double sink = 0;

// a[i] = b[i] + s * c[i] over arrays of 64 MiB in all: far beyond any cache, so memory-bound.
double triad_gb_per_s(double budget_s) {
  constexpr std::size_t kElements = (std::size_t{64} << 20) / 3 / sizeof(double);
  std::vector<double> a(kElements, 0.0), b(kElements, 1.0), c(kElements, 2.0);
  double best = 0;
  const auto start = Clock::now();
  do {
    const auto pass = Clock::now();
    const double scalar = 3.0 + static_cast<double>(best > 0);
    for (std::size_t i = 0; i < kElements; ++i) a[i] = b[i] + scalar * c[i];
    const double elapsed_s = seconds_since(pass);
    sink = sink + a[kElements / 2];
    best = std::max(best, 3.0 * sizeof(double) * kElements / elapsed_s / 1e9);
  } while (seconds_since(start) < budget_s);
  return best;
}

// Four independent chains of x = x * m + k: the core's multiply-add throughput at its clock.
double fma_gflop_per_s(double budget_s) {
  constexpr int kIterations = 1 << 22;
  double best = 0;
  const auto start = Clock::now();
  do {
    double x0 = 1.0, x1 = 1.1, x2 = 1.2, x3 = 1.3;
    const double m = 0.999999, k = 1e-7;
    const auto pass = Clock::now();
    for (int i = 0; i < kIterations; ++i) {
      x0 = x0 * m + k;
      x1 = x1 * m + k;
      x2 = x2 * m + k;
      x3 = x3 * m + k;
    }
    const double elapsed_s = seconds_since(pass);
    sink = sink + x0 + x1 + x2 + x3;
    best = std::max(best, 4.0 * 2.0 * kIterations / elapsed_s / 1e9);
  } while (seconds_since(start) < budget_s);
  return best;
}

}  // namespace

HostSpeed measure_host_speed(double seconds) {
  const auto start = Clock::now();
  HostSpeed speed;
  speed.triad_gb_per_s = triad_gb_per_s(seconds / 2);
  speed.fma_gflop_per_s = fma_gflop_per_s(seconds / 2);
  speed.seconds = seconds_since(start);
  return speed;
}

nlohmann::json host_speed_json(const HostSpeed& speed) {
  return {{"triad_gb_per_s", speed.triad_gb_per_s},
          {"fma_gflop_per_s", speed.fma_gflop_per_s},
          {"seconds", speed.seconds}};
}

}  // namespace carb
