// This process's resident memory, live, and statm parsing on replayed files.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "carb/error.hpp"
#include "carb/telemetry.hpp"
#include "fake_root.hpp"

namespace carb {
namespace {

TEST(ProcessMemory, TouchingMemoryRaisesCurrentAndPeakRss) {
  // mmap directly, so no allocator (or sanitizer quarantine) decides when pages come and go.
  constexpr std::size_t kBytes = 64u << 20;
  constexpr std::uint64_t kSlackBytes = 4u << 20;
  const std::uint64_t before = current_rss_bytes();
  void* block = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(block, MAP_FAILED);
  std::memset(block, 1, kBytes);  // resident only once written
  const std::uint64_t during = current_rss_bytes();
  EXPECT_GE(during, before + kBytes - kSlackBytes) << "before " << before << ", during " << during;
  // The two figures come from different kernel counters that can disagree by a few hundred KiB
  // of per-CPU batching, so the peak is compared with the block, not with `during` exactly.
  const std::uint64_t peak = peak_rss_bytes();
  EXPECT_GE(peak, before + kBytes - kSlackBytes) << "peak " << peak;

  ASSERT_EQ(::munmap(block, kBytes), 0);
  EXPECT_LT(current_rss_bytes(), during - kBytes + kSlackBytes) << "unmapping returns the pages";
  // The peak is a high-water mark: releasing memory never lowers it (beyond the kernel's
  // per-thread counter batching, a few hundred KiB).
  EXPECT_GE(peak_rss_bytes() + kSlackBytes, peak) << "the block stays in the peak";
  EXPECT_GE(peak_rss_bytes(), before + kBytes - kSlackBytes);
}

TEST(ProcessMemory, ResettingThePeakLowersItToWhatIsResidentNow) {
  constexpr std::size_t kBytes = 64u << 20;
  constexpr std::uint64_t kSlackBytes = 4u << 20;
  void* block = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(block, MAP_FAILED);
  std::memset(block, 1, kBytes);
  ASSERT_EQ(::munmap(block, kBytes), 0);
  const std::uint64_t peak = peak_rss_bytes();
  const std::uint64_t now = current_rss_bytes();
  ASSERT_GE(peak, now + kBytes - kSlackBytes) << "the block is in the peak";
  std::string why;
  ASSERT_TRUE(reset_peak_rss(&why)) << why;
  const std::uint64_t after = peak_rss_bytes();
  EXPECT_LT(after, now + kSlackBytes) << "peak " << peak << ", now " << now << ", reset " << after;
  // And it rises again with what is touched after the reset.
  block = ::mmap(nullptr, kBytes / 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(block, MAP_FAILED);
  std::memset(block, 1, kBytes / 2);
  EXPECT_GE(peak_rss_bytes(), after + kBytes / 2 - kSlackBytes);
  ASSERT_EQ(::munmap(block, kBytes / 2), 0);
}

TEST(ProcessMemory, StatusReplayReadsVmHwmAndRefusesWhatLacksIt) {
  test::FakeRoot root;
  root.write("proc/self/status",
             "Name:\tcarb\nVmPeak:\t  999 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n");
  EXPECT_EQ(peak_rss_bytes(root.path()), 1234ull * 1024);
  root.write("proc/self/status", "Name:\tcarb\nVmRSS:\t 1000 kB\n");
  try {
    peak_rss_bytes(root.path());
    ADD_FAILURE() << "expected carb::Error";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kRuntime);
    EXPECT_EQ(std::string(error.what()), "process memory: " + root.at("proc/self/status").string() +
                                             " has no 'VmHWM: N kB' line");
  }
}

TEST(ProcessMemory, StatmReplayResidentPagesTimesPageSize) {
  test::FakeRoot root;
  root.write("proc/self/statm", "5000 1234 300 10 0 900 0\n");
  EXPECT_EQ(current_rss_bytes(root.path()),
            1234ull * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)));
}

TEST(ProcessMemory, StatmReplayGarbageAndMissingAreRuntimeErrors) {
  test::FakeRoot root;
  const std::string statm = root.at("proc/self/statm").string();
  try {
    current_rss_bytes(root.path());
    ADD_FAILURE() << "expected carb::Error";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kRuntime);
    EXPECT_EQ(std::string(error.what()), "process memory: " + statm + " missing");
  }
  root.write("proc/self/statm", "5000\n");
  try {
    current_rss_bytes(root.path());
    ADD_FAILURE() << "expected carb::Error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "process memory: " + statm + " holds '5000\\n', not statm's page counts");
  }
}

}  // namespace
}  // namespace carb
