// carb merge as a user runs it: databases filled by the store tests' writer (synthetic
// measurements, fast), conflicts reported, bad sources refused, and a merge that runs out of
// file space (a real RLIMIT_FSIZE) fails cleanly and leaves the target as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "run.hpp"

namespace {

using carb_test::run;
using carb_test::run_shell;

// A fresh directory for one test's files.
std::string scratch(const std::string& name) {
  const std::string dir = testing::TempDir() + "merge-cli-" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A carb database with `count` synthetic measurements (the writer's keys 0..count-1).
std::string filled(const std::string& path, int count, int samples) {
  const auto result = run_shell(std::string(CARB_STORE_WRITER) + " " + path + " " +
                                std::to_string(count) + " " + std::to_string(samples) + " 2>&1");
  EXPECT_EQ(result.exit_code, 0) << result.out;
  return path;
}

std::string exported(const std::string& db) {
  const auto result = run("export --format jsonl --db " + db, false);
  EXPECT_EQ(result.exit_code, 0);
  return result.out;
}

int lines_with(const std::string& text, const std::string& part) {
  int count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++count;
  }
  return count;
}

TEST(MergeCli, ReportsAddedIdenticalAndConflictingMeasurements) {
  const std::string dir = scratch("report");
  // The writer stamps each write with the time, so keys 0..19 differ between the two files.
  const std::string a = filled(dir + "/a.sqlite", 20, 50);
  const std::string b = filled(dir + "/b.sqlite", 30, 50);
  const std::string out = dir + "/out.sqlite";

  auto result = run("merge --db " + out + " " + a + " --format csv", false);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_EQ(result.out, "source,measurements,added,identical,replaced,kept,conflicts,probes\n" + a +
                            ",20,20,0,0,0,0,0\n");

  result = run("merge --db " + out + " " + a + " " + b + " --format csv");
  ASSERT_EQ(result.exit_code, 0) << result.out;
  // a again: all identical; b: 10 new keys, 20 conflicts of which a's (earlier) versions stay.
  EXPECT_NE(result.out.find(a + ",20,0,20,0,0,0,0\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find(b + ",30,10,0,0,20,20,0\n"), std::string::npos) << result.out;
  EXPECT_EQ(lines_with(result.out, "conflict: basic18_w0.25_ds_r"), 20) << result.out;
  EXPECT_NE(result.out.find("differs: kept the version from " + out + ", the one from " + b +
                            " is in measurement_conflicts\n"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("20 conflicting measurements kept in " + out +
                            " (table measurement_conflicts)\n"),
            std::string::npos)
      << result.out;
  EXPECT_EQ(lines_with(exported(out), "\"measurement_key\""), 30);

  // Merging b once more changes nothing.
  const std::string before = exported(out);
  result = run("merge --db " + out + " " + b + " --format csv", false);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_NE(result.out.find(b + ",30,0,10,0,20,20,0\n"), std::string::npos) << result.out;
  EXPECT_EQ(exported(out), before);
}

TEST(MergeCli, BadSourcesAreOneLineAndMergeNothing) {
  const std::string dir = scratch("bad");
  const std::string good = filled(dir + "/good.sqlite", 5, 10);
  const std::string text = dir + "/notes.sqlite";
  std::ofstream(text) << "shard notes, not a database\n";
  const std::string out = dir + "/out.sqlite";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"merge --db " + out + " " + good + " " + text,
       "carb: error: " + text + ": not a carb database"},
      {"merge --db " + out + " " + dir + "/missing.sqlite", "missing.sqlite"},
      {"merge --db " + out, "sources is required"},
      {"merge --db " + text + " " + good, "carb: error: " + text + ": not a carb database"},
  };
  for (const auto& [arguments, expected] : cases) {
    const auto result = run(arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments << "\n" << result.out;
    EXPECT_NE(result.out.find(expected), std::string::npos) << arguments << "\n" << result.out;
    EXPECT_EQ(std::count(result.out.begin(), result.out.end(), '\n'), 1) << result.out;
  }
  // The good source listed before the bad one was not merged either.
  EXPECT_FALSE(std::filesystem::exists(out));
  const auto self = run("merge --db " + good + " " + good);
  EXPECT_EQ(self.exit_code, 2);
  EXPECT_EQ(self.out, "carb: error: " + good + ": is the database being merged into\n");
}

TEST(MergeCli, RunningOutOfFileSpaceLeavesTheTargetValidAndUnchanged) {
  const std::string dir = scratch("full");
  const std::string small = filled(dir + "/small.sqlite", 3, 10);
  const std::string big = filled(dir + "/big.sqlite", 120, 300);
  const std::string out = dir + "/out.sqlite";
  ASSERT_EQ(run("merge --db " + out + " " + small, false).exit_code, 0);
  const std::string before = exported(out);

  // 200 blocks (100 or 200 KiB, as the shell counts them): far less than big's samples need.
  // carb ignores SIGXFSZ, so the write fails with EFBIG instead of killing it.
  const auto full = run_shell("ulimit -f 200 && exec " + std::string(CARB_BINARY) + " merge --db " +
                              out + " " + big + " 2>&1");
  EXPECT_EQ(full.exit_code, 1) << full.out;
  EXPECT_EQ(full.out.rfind("carb: error: ", 0), 0u) << full.out;
  EXPECT_NE(full.out.find("File too large"), std::string::npos) << full.out;
  EXPECT_EQ(std::count(full.out.begin(), full.out.end(), '\n'), 1) << full.out;

  EXPECT_EQ(run_shell("sqlite3 " + out + " 'PRAGMA integrity_check' 2>&1").out, "ok\n");
  EXPECT_EQ(exported(out), before);
  // With room again, the same merge completes.
  const auto again = run("merge --db " + out + " " + big + " --format csv", false);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_NE(again.out.find(big + ",120,117,0,0,3,3,0\n"), std::string::npos) << again.out;
  EXPECT_EQ(lines_with(exported(out), "\"measurement_key\""), 120);
}

}  // namespace
