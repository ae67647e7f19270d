// A refine round as carb screen --json records it: what was not measured or has no interval is
// null, never 0.
#include <gtest/gtest.h>

#include "carb/refine.hpp"

namespace carb {
namespace {

TEST(RefineRoundJson, CoverageWithoutIntervalsIsNullNotZero) {
  RefineRound round;
  round.round = 2;
  Metrics with;
  with.n = 8;
  with.mape = 12.5;
  with.coverage = 87.5;
  Metrics without = with;
  without.coverage.reset();
  round.new_errors[static_cast<std::size_t>(Target::kLatency)] = with;
  round.new_errors[static_cast<std::size_t>(Target::kMemory)] = without;
  const nlohmann::json json = refine_round_json(round);
  const nlohmann::json& errors = json.at("new_errors");
  EXPECT_EQ(errors.at("latency").at("coverage_pct").get<double>(), 87.5);
  EXPECT_EQ(errors.at("latency").at("mape_pct").get<double>(), 12.5);
  EXPECT_TRUE(errors.at("memory").at("coverage_pct").is_null()) << errors;
  EXPECT_FALSE(errors.contains("energy")) << errors;     // not scored at all
  EXPECT_TRUE(json.at("recall_pct").is_null()) << json;  // no truth given
}

}  // namespace
}  // namespace carb
