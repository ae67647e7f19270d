// Contention from /proc/stat: recorded text (labelled as such) and this machine's real file.
#include <gtest/gtest.h>

#include "carb/telemetry.hpp"

namespace carb {
namespace {

// Two /proc/stat readings recorded on a 2-CPU VM 1 s apart, USER_HZ 100 (recorded values).
constexpr const char* kBefore =
    "cpu  1000 10 500 80000 20 0 30 40 0 0\n"
    "cpu0 500 5 250 40000 10 0 15 20 0 0\n"
    "cpu1 500 5 250 40000 10 0 15 20 0 0\n"
    "intr 12345\nctxt 678\n";
constexpr const char* kAfter =
    "cpu  1150 10 530 80010 20 0 40 50 0 0\n"
    "cpu0 575 5 265 40005 10 0 20 25 0 0\n"
    "cpu1 575 5 265 40005 10 0 20 25 0 0\n"
    "intr 12399\nctxt 700\n";

TEST(CpuUsage, ParsesBusyAndStealTimeAndCountsCpus) {
  const auto usage = parse_proc_stat(kBefore, 100);
  ASSERT_TRUE(usage.has_value());
  EXPECT_EQ(usage->cpus, 2);
  EXPECT_DOUBLE_EQ(usage->busy_s, (1000 + 10 + 500 + 0 + 30) / 100.0);  // iowait and idle left out
  EXPECT_DOUBLE_EQ(usage->steal_s, 0.4);
  EXPECT_FALSE(parse_proc_stat("intr 1\n", 100).has_value());
  EXPECT_FALSE(parse_proc_stat("cpu 1 2\n", 100).has_value());
}

TEST(CpuUsage, ContentionIsOtherWorkOverTheWindowsCapacity) {
  CpuUsage before = *parse_proc_stat(kBefore, 100);
  CpuUsage after = *parse_proc_stat(kAfter, 100);
  // The machine was busy for 1.9 CPU-seconds; this process used 1.2 of them.
  before.own_s = 10.0;
  after.own_s = 11.2;
  const Contention contention = contention_between(before, after, 1.0);
  EXPECT_NEAR(contention.other_share, (1.9 - 1.2) / 2.0, 1e-9);
  EXPECT_NEAR(contention.steal_share, 0.1 / 2.0, 1e-9);
  // Own time beyond the machine's (rounding of ticks) is no contention, never negative.
  after.own_s = 13.0;
  EXPECT_EQ(contention_between(before, after, 1.0).other_share, 0.0);
}

TEST(CpuUsage, ReadsThisMachine) {
  std::string why;
  const auto usage = read_cpu_usage(&why);
  ASSERT_TRUE(usage.has_value()) << why;
  EXPECT_GT(usage->cpus, 0);
  EXPECT_GT(usage->busy_s, 0);
  EXPECT_GT(usage->own_s, 0);
  const auto missing = read_cpu_usage(&why, "/nonexistent-root");
  EXPECT_FALSE(missing.has_value());
  EXPECT_NE(why.find("proc/stat"), std::string::npos) << why;
}

}  // namespace
}  // namespace carb
