// Real processes against one database: a writer killed with SIGKILL at random moments never
// leaves a half-written measurement and a resumed run completes the rest; two writers claiming
// from one key list measure every key exactly once.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace carb {
namespace {

using store_test::expect_consistent;
using store_test::key_of;
using store_test::RawDb;
using store_test::ScratchDir;

// Starts the store_writer helper with `args`; its stdin is `stdin_fd` when given.
pid_t spawn_writer(const std::vector<std::string>& args, int stdin_fd = -1) {
  std::vector<std::string> words = {CARB_STORE_WRITER};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(words.size() + 1);
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (stdin_fd >= 0) dup2(stdin_fd, 0);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every write the writer logged as done is in the database: a commit survives SIGKILL.
void expect_logged_writes_stored(const std::string& path, const std::string& log) {
  std::map<std::string, std::string> logged;
  for (const std::string& line : read_lines(log)) {
    std::istringstream words(line);
    std::string verb, key, status;
    words >> verb >> key >> status;
    if (verb == "wrote") logged[key] = status;
  }
  if (logged.empty()) return;
  RawDb raw(path);
  for (const auto& [key, status] : logged) {
    const std::string stored =
        raw.text("SELECT status FROM measurements WHERE measurement_key = '" + key + "'");
    // A logged failure may since have been retried successfully.
    EXPECT_TRUE(stored == status || (status == "error" && stored == "ok"))
        << key << " logged " << status << ", stored '" << stored << "'";
  }
}

TEST(StoreProcesses, KillNineNeverLeavesAHalfWrittenMeasurement) {
  ScratchDir dir;
  const std::string path = dir.file("crash.db");
  const std::string log = dir.file("writer.log");
  constexpr int kConfigurations = 250;
  constexpr int kFailEvery = 7;
  constexpr int kRounds = 8;
  const std::vector<std::string> args = {path,
                                         std::to_string(kConfigurations),
                                         "300",
                                         "--fail-first-every",
                                         std::to_string(kFailEvery),
                                         "--log",
                                         log};
  // Each round lets the writer finish a random number of writes (0: it may still be creating
  // the database), then kills it a random 0-3 ms later: in the middle of a write most of the
  // time, since writing 600 samples is most of what the writer does. Waiting for progress
  // rather than for a fixed time keeps this independent of the machine's speed.
  std::mt19937 random(20240611);
  std::uniform_int_distribution<std::size_t> writes(0, 20);
  std::uniform_int_distribution<int> delay_us(0, 3000);
  const auto count_writes = [&] {
    std::size_t count = 0;
    for (const std::string& line : read_lines(log)) count += line.starts_with("wrote ") ? 1 : 0;
    return count;
  };
  int killed = 0;
  int killed_while_writing = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::size_t target = count_writes() + writes(random);
    const pid_t writer = spawn_writer(args);
    ASSERT_GT(writer, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (count_writes() < target) {
      ASSERT_EQ(waitpid(writer, nullptr, WNOHANG), 0) << "the writer stopped by itself";
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the writer makes no progress";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(random)));
    kill(writer, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(writer, &status, 0), writer);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ++killed;
    // A log ending in "measured" means the kill landed inside write_measurement.
    const auto lines = read_lines(log);
    if (!lines.empty() && lines.back().starts_with("measured ")) ++killed_while_writing;
    SCOPED_TRACE("after kill " + std::to_string(round));
    expect_consistent(path);
    expect_logged_writes_stored(path, log);
  }
  // The writer must really have been interrupted part-way, and at least once in the middle of
  // a write, or this test proves nothing.
  EXPECT_EQ(killed, kRounds);
  EXPECT_GE(killed_while_writing, 1);

  // Resuming finishes the rest: every configuration ok, failures retried exactly once.
  ASSERT_EQ(wait_exit_code(spawn_writer(args)), 0);
  expect_consistent(path);
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurements WHERE status = 'ok'"), kConfigurations);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM claims"), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM samples"), kConfigurations * 600);
  for (int index = 0; index < kConfigurations; ++index) {
    EXPECT_EQ(raw.integer("SELECT attempts FROM measurements WHERE measurement_key = '" +
                          key_of(index) + "'"),
              index % kFailEvery == 0 ? 2 : 1)
        << index;
  }
}

TEST(StoreProcesses, TwoWritersMeasureEveryKeyExactlyOnce) {
  ScratchDir dir;
  const std::string path = dir.file("shared.db");
  constexpr int kConfigurations = 60;
  int barrier[2];
  // Close-on-exec, so the writers hold only the read end (as stdin) and see end of file.
  ASSERT_EQ(pipe2(barrier, O_CLOEXEC), 0);
  std::vector<pid_t> writers;
  for (const char* name : {"a.log", "b.log"}) {
    // Both start the moment the barrier closes, racing even to create the database. A
    // measurement takes 20 ms, so one writer alone needs over a second for all keys: at 3 ms, in
    // the sanitizer build under ctest -j2, one writer once measured all 60 before the other
    // claimed any.
    writers.push_back(spawn_writer({path, std::to_string(kConfigurations), "50", "--wait-stdin",
                                    "--measure-us", "20000", "--log", dir.file(name)},
                                   barrier[0]));
  }
  close(barrier[0]);
  close(barrier[1]);
  for (pid_t writer : writers) EXPECT_EQ(wait_exit_code(writer), 0);

  std::map<std::string, int> measured;
  std::vector<int> per_writer;
  for (const char* name : {"a.log", "b.log"}) {
    int count = 0;
    for (const std::string& line : read_lines(dir.file(name))) {
      if (line.starts_with("measured ")) {
        ++measured[line.substr(9)];
        ++count;
      }
    }
    per_writer.push_back(count);
  }
  EXPECT_EQ(measured.size(), static_cast<std::size_t>(kConfigurations));
  for (int index = 0; index < kConfigurations; ++index) {
    EXPECT_EQ(measured[key_of(index)], 1) << index;
  }
  // Both took part, so the claims were really contended.
  EXPECT_GT(per_writer[0], 0);
  EXPECT_GT(per_writer[1], 0);
  expect_consistent(path);
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurements WHERE status = 'ok' AND attempts = 1"),
            kConfigurations);
}

}  // namespace
}  // namespace carb
