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
  // The peak is a high-water mark: releasing memory never lowers it.
  EXPECT_GE(peak_rss_bytes(), peak);
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
