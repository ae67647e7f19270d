#include <gtest/gtest.h>

#include "carb/error.hpp"
#include "carb/screen.hpp"

namespace carb {
namespace {

// Expected probabilities below were computed independently with Python's statistics.NormalDist:
// sigma = ln(high / value) / NormalDist().inv_cdf((1 + c) / 2),
// p = NormalDist().cdf(ln(limit / value) / sigma).

TargetPrediction predicted(double value, double low, double high) {
  TargetPrediction prediction;
  prediction.available = true;
  prediction.value = value;
  prediction.low = low;
  prediction.high = high;
  return prediction;
}

TargetPredictions candidate(TargetPrediction memory, TargetPrediction energy,
                            TargetPrediction latency) {
  return {memory, energy, latency};
}

TargetPrediction unavailable(const std::string& reason) {
  TargetPrediction prediction;
  prediction.reason = reason;
  return prediction;
}

TEST(Normal, QuantilesMatchReferenceValues) {
  EXPECT_NEAR(normal_quantile(0.95), 1.6448536269514715, 1e-13);
  EXPECT_NEAR(normal_quantile(0.975), 1.9599639845400536, 1e-13);
  EXPECT_NEAR(normal_quantile(0.995), 2.5758293035489, 1e-13);
  EXPECT_NEAR(normal_quantile(0.999), 3.090232306167813, 1e-12);
  EXPECT_NEAR(normal_quantile(1e-10), -6.361340902404056, 1e-11);
  EXPECT_NEAR(normal_quantile(0.5), 0.0, 1e-15);
  EXPECT_NEAR(normal_cdf(1.0), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(normal_cdf(-2.5), 0.006209665325776159, 1e-16);
  for (double p : {0.01, 0.2, 0.6, 0.9, 0.99})
    EXPECT_NEAR(normal_cdf(normal_quantile(p)), p, 1e-15);
}

TEST(Feasibility, OneBudgetGivesTheLogNormalProbability) {
  const std::vector<Budget> budgets = parse_budgets("energy<=10J");
  const TargetPredictions prediction =
      candidate(predicted(1e6, 1e6, 1e6), predicted(8, 5, 12), predicted(3, 2, 4));
  const Feasibility plain = assess_budgets(budgets, prediction);
  EXPECT_TRUE(plain.feasible);
  EXPECT_NEAR(plain.probability, 0.8173277668527976, 1e-12);
  // Safe mode asks the interval's upper end (12 J) to meet the budget: it does not.
  const Feasibility safe = assess_budgets(budgets, prediction, {0.9, true});
  EXPECT_FALSE(safe.feasible);
  EXPECT_NEAR(safe.probability, 0.8173277668527976, 1e-12);
  // A narrower nominal coverage means the same interval is wider in sigma terms.
  EXPECT_NEAR(assess_budgets(budgets, prediction, {0.8, false}).probability, 0.7596847109466089,
              1e-12);
}

TEST(Feasibility, ABudgetAtTheUpperEndIsMetWithProbabilityOfTheUpperQuantile) {
  const TargetPredictions prediction =
      candidate(predicted(1, 1, 1), predicted(1, 1, 1), predicted(15, 11, 20));
  const Feasibility at_end = assess_budgets(parse_budgets("latency<=20ms"), prediction);
  EXPECT_TRUE(at_end.feasible);
  EXPECT_NEAR(at_end.probability, 0.95, 1e-12);
  EXPECT_TRUE(assess_budgets(parse_budgets("latency<=20ms"), prediction, {0.9, true}).feasible);
  EXPECT_FALSE(assess_budgets(parse_budgets("latency<20ms"), prediction, {0.9, true}).feasible);
  EXPECT_TRUE(assess_budgets(parse_budgets("latency<0.021s"), prediction, {0.9, true}).feasible);
}

TEST(Feasibility, ProbabilitiesMultiplyAcrossBudgets) {
  const TargetPredictions prediction =
      candidate(predicted(3e9, 2e9, 4e9), predicted(8, 5, 12), predicted(15, 11, 20));
  const Feasibility result = assess_budgets(parse_budgets("energy<=10J,memory<=2GiB"), prediction);
  // Memory's prediction (3e9 B) is over 2 GiB (2.147e9 B).
  EXPECT_FALSE(result.feasible);
  EXPECT_NEAR(result.probability, 0.8173277668527976 * 0.02797110941783204, 1e-12);
  EXPECT_NEAR(result.probability, 0.022861564396871918, 1e-12);
}

TEST(Feasibility, ZeroWidthIntervalsGiveAStep) {
  const auto probability = [](std::string_view budget, double value) {
    return assess_budgets(
               parse_budgets(budget),
               candidate(predicted(1, 1, 1), predicted(value, value, value), predicted(1, 1, 1)))
        .probability;
  };
  EXPECT_EQ(probability("energy<=10J", 8), 1.0);
  EXPECT_EQ(probability("energy<=10J", 12), 0.0);
  EXPECT_EQ(probability("energy<=10J", 10), 1.0);
  EXPECT_EQ(probability("energy<10J", 10), 0.0);
  // A prediction of nothing meets any positive budget; no logarithm is taken.
  EXPECT_EQ(probability("energy<=10J", 0), 1.0);
}

TEST(Feasibility, NoBudgetsIsFeasible) {
  const Feasibility result =
      assess_budgets({}, candidate(unavailable("x"), unavailable("y"), unavailable("z")));
  EXPECT_TRUE(result.feasible);
  EXPECT_EQ(result.probability, 1.0);
}

TEST(Feasibility, ABudgetOnAnUnavailableTargetIsAnInputErrorWithTheReason) {
  const TargetPredictions prediction =
      candidate(predicted(1e6, 1e6, 2e6),
                unavailable("the store has no energy readings (no sensor)"), predicted(15, 11, 20));
  // Unbudgeted, the missing target does not matter.
  EXPECT_TRUE(assess_budgets(parse_budgets("latency<=30ms"), prediction).feasible);
  try {
    (void)assess_budgets(parse_budgets("latency<=30ms,energy<=1J"), prediction);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    EXPECT_STREQ(error.what(),
                 "a budget on energy, which the model cannot predict: the store has no energy "
                 "readings (no sensor)");
  }
}

TEST(Feasibility, GathersPredictorRowsByTargetName) {
  const std::vector<TargetInfo> targets = {{"memory", "B", "engine_peak_bytes"},
                                           {"throughput", "", "fps"},
                                           {"latency", "ms", "latency_median_ms"}};
  const std::vector<std::vector<TargetPrediction>> rows = {
      {predicted(1e6, 9e5, 2e6), predicted(3e6, 2e6, 4e6)},
      {predicted(100, 90, 110), predicted(50, 40, 60)},
      {predicted(5, 4, 6), predicted(7, 6, 9)}};
  const TargetPredictions second = gather_predictions(targets, rows, 1);
  EXPECT_TRUE(second[static_cast<std::size_t>(Target::kMemory)].available);
  EXPECT_EQ(second[static_cast<std::size_t>(Target::kMemory)].value, 3e6);
  EXPECT_EQ(second[static_cast<std::size_t>(Target::kLatency)].high, 9.0);
  EXPECT_FALSE(second[static_cast<std::size_t>(Target::kEnergy)].available);
  EXPECT_EQ(second[static_cast<std::size_t>(Target::kEnergy)].reason,
            "the model has no energy target");
}

}  // namespace
}  // namespace carb
