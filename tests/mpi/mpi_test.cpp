// carb profile --mpi under mpirun, three ranks on this machine (--oversubscribe): rank 0 owns
// the database, ranks 1 and 2 measure. A rank killed with a configuration in flight
// (CARB_MPI_TEST_DIE_RANK) loses only that one, which is handed out again; mpirun
// --enable-recovery keeps the other ranks running.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "run.hpp"
#include "test_support.hpp"

namespace carb {
namespace {

using carb_test::run_shell;
using store_test::expect_consistent;
using store_test::RawDb;
using store_test::ScratchDir;

std::string keys_file(const ScratchDir& dir, int count) {
  const std::string path = dir.file("keys.txt");
  std::ofstream file(path);
  for (int batch = 1; batch <= count; ++batch) {
    file << "basic10_w0.25_nods_r32_b" << batch << "_fp32_k10\n";
  }
  return path;
}

carb_test::CommandResult mpirun(const std::string& options, const std::string& arguments) {
  // A bounded wait: a hung MPI job fails the test instead of stalling the suite.
  return run_shell("timeout 240 " + std::string(CARB_MPIRUN) +
                   " --allow-run-as-root --oversubscribe --enable-recovery " + options + " -n 3 " +
                   CARB_BINARY + " profile --mpi " + arguments +
                   " --min-time 0.02 --max-time 0.2 --target-ci 0.5 --idle-window 0.1 2>&1");
}

void expect_each_key_once(const std::string& db, int count) {
  expect_consistent(db);
  RawDb raw(db);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurements WHERE status = 'ok' AND attempts = 1"),
            count);
  EXPECT_EQ(raw.integer("SELECT count(DISTINCT configuration_key) FROM measurements"), count);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM claims"), 0);
}

TEST(Mpi, RankZeroHandsOutEveryKeyOnce) {
  ScratchDir dir;
  const std::string db = dir.file("mpi.sqlite");
  const auto result = mpirun("", "--keys " + keys_file(dir, 8) + " --db " + db);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_NE(result.out.find("measured now:   8 (ok 8)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("mpi ranks:      2 measuring, 0 lost, 0 configurations handed out "
                            "again"),
            std::string::npos)
      << result.out;
  expect_each_key_once(db, 8);

  // Resumed, there is nothing left to hand out.
  const auto again = mpirun("", "--keys " + dir.file("keys.txt") + " --db " + db);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_NE(again.out.find("measured now:   0"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("8 already done"), std::string::npos) << again.out;
}

TEST(Mpi, ADyingRankLosesOnlyItsConfigurationInFlight) {
  ScratchDir dir;
  const std::string db = dir.file("mpi-die.sqlite");
  const auto result =
      mpirun("-x CARB_MPI_TEST_DIE_RANK=2", "--keys " + keys_file(dir, 8) + " --db " + db);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_NE(result.out.find("measured now:   8 (ok 8)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("mpi ranks:      2 measuring, 1 lost, 1 configurations handed out "
                            "again"),
            std::string::npos)
      << result.out;
  expect_each_key_once(db, 8);
}

TEST(Mpi, OneRankIsAUsageError) {
  ScratchDir dir;
  const auto result = run_shell(std::string(CARB_BINARY) + " profile --mpi --keys " +
                                keys_file(dir, 1) + " --db " + dir.file("one.sqlite") + " 2>&1");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.out,
            "carb: error: --mpi: an MPI campaign needs 2 or more ranks (rank 0 hands out "
            "configurations, the others measure), e.g. mpirun -n 3\n");
}

}  // namespace
}  // namespace carb
