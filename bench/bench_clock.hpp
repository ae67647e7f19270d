// The benchmarks' clock: a steady clock and seconds since a point on it.
#pragma once

#include <chrono>

namespace carb_bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace carb_bench
