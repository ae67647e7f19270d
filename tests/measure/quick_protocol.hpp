// What the measure tests share: a protocol short enough for tests and a tiny network.
#pragma once

#include "carb/measure.hpp"

namespace carb::testing {

/// A protocol of tenths of a second (warm-up 10 ms, at least 10 samples and 50 ms, at most
/// 0.5 s, a 5% CI), a 60 s worker timeout.
inline Protocol quick_protocol() {
  Protocol protocol;
  protocol.warmup_min_s = 0.01;
  protocol.min_samples = 10;
  protocol.min_time_s = 0.05;
  protocol.max_time_s = 0.5;
  protocol.target_relative_ci = 0.05;
  protocol.timeout_s = 60;
  return protocol;
}

/// A network that runs in well under a millisecond on one core.
inline constexpr const char* kTinyKey = "basic10_w0.25_nods_r32_b2_fp32_k10";

}  // namespace carb::testing
