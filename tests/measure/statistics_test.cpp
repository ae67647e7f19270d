#include <gtest/gtest.h>

#include "carb/error.hpp"
#include "carb/measure.hpp"

namespace carb {
namespace {

TEST(Statistics, PercentilesAndSpreadOfKnownSamples) {
  // 1..100 ms in scrambled order.
  std::vector<double> samples;
  for (int i = 0; i < 100; ++i) samples.push_back((i * 37) % 100 + 1);
  const LatencyStats stats = summarize_latency(samples, 0.01);
  EXPECT_EQ(stats.count, 100);
  EXPECT_DOUBLE_EQ(stats.median_ms, 50.5);
  EXPECT_DOUBLE_EQ(stats.mean_ms, 50.5);
  EXPECT_DOUBLE_EQ(stats.p5_ms, 5.95);  // numpy.percentile(range(1, 101), 5)
  EXPECT_DOUBLE_EQ(stats.p95_ms, 95.05);
  EXPECT_NEAR(stats.cv, 29.011491975882016 / 50.5, 1e-12);  // sample standard deviation
  // The median's 95% CI spans order statistics 40 and 61 (1-based) for n = 100.
  EXPECT_DOUBLE_EQ(stats.ci_half_width_ms, (61.0 - 40.0) / 2);
  EXPECT_FALSE(stats.converged);
  EXPECT_TRUE(summarize_latency(samples, 0.25).converged);
}

TEST(Statistics, IdenticalSamplesConvergeAtOnce) {
  const std::vector<double> samples(10, 3.0);
  const LatencyStats stats = summarize_latency(samples, 0.01);
  EXPECT_DOUBLE_EQ(stats.median_ms, 3.0);
  EXPECT_DOUBLE_EQ(stats.ci_half_width_ms, 0.0);
  EXPECT_DOUBLE_EQ(stats.cv, 0.0);
  EXPECT_TRUE(stats.converged);
}

TEST(Statistics, OneSample) {
  const std::vector<double> samples = {7.0};
  const LatencyStats stats = summarize_latency(samples, 0.01);
  EXPECT_EQ(stats.count, 1);
  EXPECT_DOUBLE_EQ(stats.p5_ms, 7.0);
  EXPECT_DOUBLE_EQ(stats.p95_ms, 7.0);
}

TEST(ProtocolJson, RoundTripsAndRejectsBadFields) {
  Protocol protocol;
  protocol.min_time_s = 0.25;
  protocol.seed = 99;
  protocol.timeout_s = 12;
  const Protocol back = Protocol::from_json(protocol.to_json());
  EXPECT_EQ(back.to_json(), protocol.to_json());
  EXPECT_FALSE(protocol.key_json().contains("timeout_s"));  // a limit, not part of the key
  EXPECT_THROW(Protocol::from_json({{"min_samples", 0}}), Error);
  EXPECT_THROW(Protocol::from_json({{"min_time_s", "long"}}), Error);
  EXPECT_THROW(Protocol::from_json(nlohmann::json::array()), Error);
}

}  // namespace
}  // namespace carb
