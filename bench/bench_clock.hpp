// The benchmarks' clock: a steady clock and seconds since a point on it (carb/statistics.hpp).
#pragma once

#include <chrono>

#include "carb/statistics.hpp"

namespace carb_bench {

using Clock = std::chrono::steady_clock;
using carb::seconds_since;

}  // namespace carb_bench
