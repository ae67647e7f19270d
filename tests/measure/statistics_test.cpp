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

TEST(ProtocolJson, GpuChoicesEnterTheKeyOnlyWhenSet) {
  // Keys measured before the GPU options existed (the reference CPU campaign) must not change.
  const nlohmann::json defaults = Protocol{}.key_json();
  EXPECT_EQ(defaults.size(), 9u);
  EXPECT_FALSE(defaults.contains("cuda_graph"));
  EXPECT_FALSE(defaults.contains("cudnn_find"));
  Protocol gpu;
  gpu.cuda_graph = true;
  gpu.cudnn_find = true;
  gpu.cudnn_cache = "/tmp/cache.tsv";
  gpu.throttle_cooldown_s = 2.5;
  gpu.throttle_retries = 4;
  EXPECT_EQ(gpu.key_json().at("cuda_graph"), true);
  EXPECT_EQ(gpu.key_json().at("cudnn_find"), true);
  // Where the cache lives and how throttling is retried bound how it is measured, not what.
  EXPECT_FALSE(gpu.key_json().contains("cudnn_cache"));
  EXPECT_FALSE(gpu.key_json().contains("throttle_cooldown_s"));
  const Protocol back = Protocol::from_json(gpu.to_json());
  EXPECT_TRUE(back.cuda_graph && back.cudnn_find);
  EXPECT_EQ(back.cudnn_cache, "/tmp/cache.tsv");
  EXPECT_EQ(back.throttle_cooldown_s, 2.5);
  EXPECT_EQ(back.throttle_retries, 4);
  EXPECT_THROW(Protocol::from_json({{"throttle_retries", -1}}), Error);
  EXPECT_THROW(Protocol::from_json({{"cudnn_cache", 3}}), Error);
  EXPECT_THROW(Protocol::from_json({{"cuda_graph", "yes"}}), Error);
}

TEST(ProtocolJson, ARoundEntersTheKeyOnlyAfterTheFirst) {
  // Round 0 keeps the keys of campaigns measured before rounds existed; later rounds differ.
  Protocol second;
  second.round = 1;
  EXPECT_FALSE(Protocol{}.key_json().contains("round"));
  EXPECT_EQ(second.key_json().at("round"), 1);
  EXPECT_NE(second.key_json(), Protocol{}.key_json());
  EXPECT_EQ(Protocol::from_json(second.to_json()).round, 1);
  EXPECT_THROW(Protocol::from_json({{"round", -1}}), Error);
}

}  // namespace
}  // namespace carb
