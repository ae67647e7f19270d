#include <gtest/gtest.h>

#include "carb/error.hpp"
#include "carb/screen.hpp"

namespace carb {
namespace {

IntervalEstimate estimate(double value0, double low0, double high0, double value1, double low1,
                          double high1) {
  return {{value0, value1, 0}, {low0, low1, 0}, {high0, high1, 0}};
}

// Combined ranks (objective 0 ranks + objective 1 ranks):
//   0: 1 + 1 = 2     1: 2 + 2 = 4     2: 3 + 4 = 7
//   3: 4.5 + 5 = 9.5 (tie on objective 0 with 4)   4: 4.5 + 3 = 7.5   5: 6 + 6 = 12
const std::vector<IntervalEstimate> kCandidates = {
    estimate(1, 0.9, 1.1, 1, 0.9, 1.1), estimate(2, 1.8, 2.2, 2, 1.8, 2.2),
    estimate(3, 2.0, 4.0, 3, 2.0, 4.0), estimate(10, 9, 11, 10, 9, 11),
    estimate(10, 9, 11, 2.5, 2.1, 2.9), estimate(20, 18, 22, 20, 18, 22)};

TEST(Prune, KeepsTheTopAndWhatOverlapsIt) {
  // Top 2: candidates 0 and 1, whose upper ends reach 2.2 on both objectives. Candidate 2
  // (lower ends 2.0) and candidate 4 (2.1 on objective 1) overlap; 3 and 5 are confidently worse.
  const PruneResult result = prune_stage1(kCandidates, 2, 2);
  EXPECT_EQ(result.kept, (std::vector<std::size_t>{0, 1, 2, 4}));
  EXPECT_EQ(result.top, 2u);
  EXPECT_EQ(result.kept_by_overlap, 2u);
  EXPECT_EQ(result.pruned, 2u);
}

TEST(Prune, TheWidestTopIntervalDecides) {
  // Top 3 adds candidate 2, whose upper ends (4.0) still lie below 3's and 5's lower ends.
  const PruneResult three = prune_stage1(kCandidates, 2, 3);
  EXPECT_EQ(three.kept, (std::vector<std::size_t>{0, 1, 2, 4}));
  EXPECT_EQ(three.kept_by_overlap, 1u);
  EXPECT_EQ(three.pruned, 2u);
  // Widen candidate 1's interval on objective 1 past 9: nothing below the top is certain now but 5.
  std::vector<IntervalEstimate> wide = kCandidates;
  wide[1].high[1] = 9.5;
  const PruneResult result = prune_stage1(wide, 2, 2);
  EXPECT_EQ(result.kept, (std::vector<std::size_t>{0, 1, 2, 4, 3}));
  EXPECT_EQ(result.kept_by_overlap, 3u);
  EXPECT_EQ(result.pruned, 1u);
}

TEST(Prune, OneObjectiveOverlapIsEnoughToStay) {
  // Only objective 0 is counted: candidate 4 (lower end 9 there) is now confidently worse.
  const PruneResult result = prune_stage1(kCandidates, 1, 2);
  // Ranks on objective 0 alone: 0, 1, 2, then 3 and 4 tied (by index), then 5.
  EXPECT_EQ(result.kept, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(result.kept_by_overlap, 1u);
  EXPECT_EQ(result.pruned, 3u);
}

TEST(Prune, KeepingAtLeastAllKeepsAll) {
  const PruneResult result = prune_stage1(kCandidates, 2, 10);
  EXPECT_EQ(result.kept, (std::vector<std::size_t>{0, 1, 2, 4, 3, 5}));
  EXPECT_EQ(result.top, 6u);
  EXPECT_EQ(result.pruned, 0u);
  EXPECT_EQ(result.kept_by_overlap, 0u);
  EXPECT_TRUE(prune_stage1(std::vector<IntervalEstimate>{}, 2, 1).kept.empty());
}

TEST(Prune, KeepCountsAndTheirErrors) {
  EXPECT_EQ(keep_count(100.0 / 3072, 3072), 100u);
  EXPECT_EQ(keep_count(0.1, 3072), 308u);
  EXPECT_EQ(keep_count(1.0, 5), 5u);
  EXPECT_EQ(keep_count(0.001, 10), 1u);
  for (double fraction : {0.0, -0.5, 1.5}) {
    try {
      (void)keep_count(fraction, 10);
      ADD_FAILURE() << fraction;
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::kUsage);
      EXPECT_EQ(std::string(error.what()).rfind("the fraction to keep must be in (0, 1], got ", 0),
                0u);
    }
  }
  try {
    (void)prune_stage1(kCandidates, 2, 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kUsage);
    EXPECT_STREQ(error.what(), "keep at least one candidate");
  }
}

}  // namespace
}  // namespace carb
