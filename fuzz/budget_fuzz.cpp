// Fuzzes the budget parser (carb screen --budget): any text either parses or throws
// carb::Error; every parsed limit is positive and finite, and each target appears once.
#include <cmath>
#include <set>

#include "carb/error.hpp"
#include "carb/screen.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto budgets = carb::parse_budgets(carb_fuzz::text_of(data, size));
    std::set<carb::Target> targets;
    for (const carb::Budget& budget : budgets) {
      carb_fuzz::require(std::isfinite(budget.limit) && budget.limit > 0,
                         "a budget limit of " + std::to_string(budget.limit));
      carb_fuzz::require(targets.insert(budget.target).second, "a target given twice");
      carb_fuzz::require(budget.column >= 1 && static_cast<std::size_t>(budget.column) <= size,
                         "column " + std::to_string(budget.column) + " outside the text");
    }
    carb_fuzz::require(!budgets.empty(), "no budget and no error");
  } catch (const carb::Error&) {
  }
  return 0;
}
