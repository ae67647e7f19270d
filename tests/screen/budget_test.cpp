#include <gtest/gtest.h>

#include "carb/error.hpp"
#include "carb/screen.hpp"

namespace carb {
namespace {

std::string budget_error(std::string_view text) {
  try {
    (void)parse_budgets(text);
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    EXPECT_EQ(error.exit_code(), 2);
    return error.what();
  }
  return "(no error)";
}

std::string objectives_error(std::string_view text) {
  try {
    (void)parse_objectives(text);
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    return error.what();
  }
  return "(no error)";
}

TEST(Budgets, ParsesTheUsualForm) {
  const std::vector<Budget> budgets = parse_budgets("energy<=75J,latency<=20ms,memory<=2GiB");
  ASSERT_EQ(budgets.size(), 3u);
  EXPECT_EQ(budgets[0].target, Target::kEnergy);
  EXPECT_DOUBLE_EQ(budgets[0].limit, 75.0);
  EXPECT_FALSE(budgets[0].strict);
  EXPECT_EQ(budgets[0].column, 1);
  EXPECT_EQ(budgets[1].target, Target::kLatency);
  EXPECT_DOUBLE_EQ(budgets[1].limit, 20.0);
  EXPECT_EQ(budgets[1].column, 13);
  EXPECT_EQ(budgets[2].target, Target::kMemory);
  EXPECT_DOUBLE_EQ(budgets[2].limit, 2147483648.0);
  EXPECT_EQ(budgets[2].column, 27);
}

TEST(Budgets, ConvertsEveryUnitToTheCanonicalOne) {
  const auto limit = [](std::string_view text) {
    const std::vector<Budget> budgets = parse_budgets(text);
    EXPECT_EQ(budgets.size(), 1u) << text;
    return budgets.empty() ? -1.0 : budgets[0].limit;
  };
  EXPECT_DOUBLE_EQ(limit("energy<=3J"), 3.0);
  EXPECT_DOUBLE_EQ(limit("energy<=5mJ"), 0.005);
  EXPECT_DOUBLE_EQ(limit("energy<=250uJ"), 2.5e-4);
  EXPECT_DOUBLE_EQ(limit("latency<=1.5s"), 1500.0);
  EXPECT_DOUBLE_EQ(limit("latency<=20ms"), 20.0);
  EXPECT_DOUBLE_EQ(limit("latency<=250us"), 0.25);
  EXPECT_DOUBLE_EQ(limit("memory<=512B"), 512.0);
  EXPECT_DOUBLE_EQ(limit("memory<=3KB"), 3000.0);
  EXPECT_DOUBLE_EQ(limit("memory<=3KiB"), 3072.0);
  EXPECT_DOUBLE_EQ(limit("memory<=2MB"), 2e6);
  EXPECT_DOUBLE_EQ(limit("memory<=2MiB"), 2097152.0);
  EXPECT_DOUBLE_EQ(limit("memory<=1.5GB"), 1.5e9);
  EXPECT_DOUBLE_EQ(limit("memory<=0.5GiB"), 536870912.0);
  EXPECT_DOUBLE_EQ(limit("energy<=1e3mJ"), 1.0);
  EXPECT_DOUBLE_EQ(limit("energy<=.5J"), 0.5);
}

TEST(Budgets, ToleratesWhitespaceAndReadsStrictness) {
  const std::vector<Budget> budgets = parse_budgets("  energy <  75 J ,\tlatency<= 3 ms  ");
  ASSERT_EQ(budgets.size(), 2u);
  EXPECT_EQ(budgets[0].target, Target::kEnergy);
  EXPECT_TRUE(budgets[0].strict);
  EXPECT_DOUBLE_EQ(budgets[0].limit, 75.0);
  EXPECT_EQ(budgets[0].column, 3);
  EXPECT_EQ(budgets[1].target, Target::kLatency);
  EXPECT_FALSE(budgets[1].strict);
  EXPECT_DOUBLE_EQ(budgets[1].limit, 3.0);
  EXPECT_EQ(budgets[1].column, 20);
}

TEST(Budgets, EveryErrorSaysWhereAndWhat) {
  EXPECT_EQ(budget_error(""),
            "budget:1:1: no budgets given (write e.g. energy<=75J,latency<=20ms,memory<=2GiB)");
  EXPECT_EQ(budget_error("   "),
            "budget:1:1: no budgets given (write e.g. energy<=75J,latency<=20ms,memory<=2GiB)");
  EXPECT_EQ(budget_error("energy <= 75 Jz"),
            "budget:1:14: unknown unit 'Jz' for energy (use J, mJ or uJ)");
  EXPECT_EQ(budget_error("energy<=75ms"),
            "budget:1:11: unknown unit 'ms' for energy (use J, mJ or uJ)");
  EXPECT_EQ(budget_error("memory<=2 gib"),
            "budget:1:11: unknown unit 'gib' for memory (use B, KB, KiB, MB, MiB, GB or GiB)");
  EXPECT_EQ(budget_error("latency<=2.5.1ms"),
            "budget:1:13: unknown unit '.1ms' for latency (use s, ms or us)");
  EXPECT_EQ(budget_error("latency<=20"),
            "budget:1:12: missing unit after '20' for latency (use s, ms or us)");
  EXPECT_EQ(budget_error("energy<=75J,latency<=20 ,memory<=1GB"),
            "budget:1:24: missing unit after '20' for latency (use s, ms or us)");
  EXPECT_EQ(budget_error("energy<=75J,,latency<=20ms"),
            "budget:1:13: empty budget (remove the extra comma)");
  EXPECT_EQ(budget_error("energy<=75J,"), "budget:1:13: empty budget (remove the extra comma)");
  EXPECT_EQ(budget_error(",energy<=75J"), "budget:1:1: empty budget (remove the extra comma)");
  EXPECT_EQ(budget_error("power<=5W"),
            "budget:1:1: unknown target 'power' (use energy, latency or memory)");
  EXPECT_EQ(budget_error("Energy<=5J"),
            "budget:1:1: unknown target 'Energy' (use energy, latency or memory)");
  EXPECT_EQ(budget_error("<=5J"), "budget:1:1: expected a target (energy, latency or memory)");
  EXPECT_EQ(budget_error("energy<=75J, energy<1J"),
            "budget:1:14: duplicate budget for energy (already given at column 1)");
  EXPECT_EQ(budget_error("energy>=75J"),
            "budget:1:7: unsupported operator '>=' (budgets are upper limits: use <= or <)");
  EXPECT_EQ(budget_error("energy = 75J"),
            "budget:1:8: unsupported operator '=' (budgets are upper limits: use <= or <)");
  EXPECT_EQ(budget_error("energy<==75J"),
            "budget:1:7: unsupported operator '<==' (budgets are upper limits: use <= or <)");
  EXPECT_EQ(budget_error("energy 75J"), "budget:1:8: expected <= or < after 'energy'");
  EXPECT_EQ(budget_error("energy"), "budget:1:7: expected <= or < after 'energy'");
  EXPECT_EQ(budget_error("energy<=J"), "budget:1:9: expected a number after '<=', found 'J'");
  EXPECT_EQ(budget_error("energy< +5J"), "budget:1:9: expected a number after '<', found '+5J'");
  EXPECT_EQ(budget_error("energy<= "), "budget:1:10: expected a number after '<='");
  EXPECT_EQ(budget_error("energy<=-5J"),
            "budget:1:9: energy budget must be a positive finite number, found '-5'");
  EXPECT_EQ(budget_error("energy<=0J"),
            "budget:1:9: energy budget must be a positive finite number, found '0'");
  EXPECT_EQ(budget_error("energy<=inf J"),
            "budget:1:9: energy budget must be a positive finite number, found 'inf'");
  EXPECT_EQ(budget_error("energy<=nanJ"),
            "budget:1:9: energy budget must be a positive finite number, found 'nan'");
  EXPECT_EQ(budget_error("energy<=1e999J"),
            "budget:1:9: energy budget must be a positive finite number, found '1e999'");
  EXPECT_EQ(budget_error("memory<=1e300GiB"), "budget:1:9: memory budget 1e300GiB is out of range");
  EXPECT_EQ(budget_error("energy<=75J latency<=20ms"),
            "budget:1:13: unexpected 'latency<=20ms' after the energy budget (separate budgets "
            "with commas)");
}

TEST(Budgets, ErrorsNameTheGivenOrigin) {
  try {
    (void)parse_budgets("latency<=5", "budgets.txt");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(),
                 "budgets.txt:1:11: missing unit after '5' for latency (use s, ms or us)");
  }
}

TEST(Objectives, ParsesSubsetsInTheGivenOrder) {
  EXPECT_EQ(parse_objectives("memory,energy,latency"),
            (std::vector<Target>{Target::kMemory, Target::kEnergy, Target::kLatency}));
  EXPECT_EQ(parse_objectives(" latency , energy "),
            (std::vector<Target>{Target::kLatency, Target::kEnergy}));
  EXPECT_EQ(parse_objectives("energy"), (std::vector<Target>{Target::kEnergy}));
}

TEST(Objectives, EveryErrorSaysWhereAndWhat) {
  EXPECT_EQ(objectives_error(""),
            "objectives:1:1: no objectives given (write e.g. energy,latency)");
  EXPECT_EQ(objectives_error("energy,,latency"),
            "objectives:1:8: empty objective (remove the extra comma)");
  EXPECT_EQ(objectives_error("energy,"),
            "objectives:1:8: empty objective (remove the extra comma)");
  EXPECT_EQ(objectives_error("energy,power"),
            "objectives:1:8: unknown objective 'power' (use memory, energy or latency)");
  EXPECT_EQ(objectives_error("energy latency"),
            "objectives:1:1: unknown objective 'energy latency' (use memory, energy or latency)");
  EXPECT_EQ(objectives_error("energy, energy"), "objectives:1:9: duplicate objective 'energy'");
}

TEST(Targets, NamesAndUnitsRoundTrip) {
  for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
    EXPECT_EQ(parse_target(to_string(target)), target);
  }
  EXPECT_EQ(parse_target("power"), std::nullopt);
  EXPECT_EQ(canonical_unit(Target::kMemory), "B");
  EXPECT_EQ(canonical_unit(Target::kEnergy), "J");
  EXPECT_EQ(canonical_unit(Target::kLatency), "ms");
}

}  // namespace
}  // namespace carb
