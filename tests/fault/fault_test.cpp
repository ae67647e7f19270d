// carb profile under faults, with real processes and real signals: kill -9 at random moments
// then resume, workers that crash, hang or run out of memory (a real RLIMIT_AS), a database
// file that cannot grow (a real RLIMIT_FSIZE, and a full tmpfs where one can be mounted), and
// several campaigns on one database. Tiny configurations and a short protocol keep it fast.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run.hpp"
#include "test_support.hpp"

#ifndef CARB_KILL_ROUNDS
#define CARB_KILL_ROUNDS 20
#endif

namespace carb {
namespace {

using Clock = std::chrono::steady_clock;
using carb_test::Launch;
using carb_test::slurp;
using carb_test::start;
using carb_test::wait_for;
using store_test::expect_consistent;
using store_test::RawDb;
using store_test::ScratchDir;

const std::string kQuick =
    " --min-time 0.02 --max-time 0.2 --target-ci 0.5 --idle-window 0.1 --timeout 60";

std::string tiny_key(int batch) {
  return "basic10_w0.25_nods_r32_b" + std::to_string(batch) + "_fp32_k10";
}

std::string write_keys(const std::string& path, const std::vector<std::string>& keys) {
  std::ofstream file(path);
  for (const std::string& key : keys) file << key << "\n";
  return path;
}

std::vector<std::string> tiny_keys(int count) {
  std::vector<std::string> keys;
  for (int batch = 1; batch <= count; ++batch) keys.push_back(tiny_key(batch));
  return keys;
}

std::string last_line(const std::string& text) {
  const std::string trimmed = text.substr(0, text.find_last_not_of('\n') + 1);
  return trimmed.substr(trimmed.rfind('\n') + 1);
}

// The processes whose parent is `pid` (from /proc).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    char state = 0;
    pid_t parent = 0;
    rest >> state >> parent;
    if (parent == pid) children.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return children;
}

// Every key of the campaign measured exactly once, ok, and nothing left half done.
void expect_measured_exactly_once(const std::string& db, const std::vector<std::string>& keys) {
  expect_consistent(db);
  RawDb raw(db);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurements"), static_cast<long long>(keys.size()));
  for (const std::string& key : keys) {
    EXPECT_EQ(raw.text("SELECT group_concat(status || ' ' || attempts) FROM measurements WHERE "
                       "configuration_key = '" +
                       key + "'"),
              "ok 1")
        << key;
  }
  EXPECT_EQ(raw.integer("SELECT count(*) FROM claims"), 0);
}

// The test process adopts orphans (a child subreaper), so a worker whose campaign was killed
// becomes its child and can be waited for.
class FaultTest : public testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0); }
  ScratchDir dir;
};

TEST_F(FaultTest, KillNineAtRandomMomentsThenResumeMeasuresEveryKeyOnce) {
  const std::string db = dir.file("kill.sqlite");
  const std::vector<std::string> keys = tiny_keys(12);
  const Launch profile{
      "profile --keys " + write_keys(dir.file("keys.txt"), keys) + " --db " + db + kQuick,
      "/dev/null",
      {},
      std::nullopt};
  // Kill moments spread over a whole run, chosen by progress rather than by the clock so that
  // a slow or loaded machine sees the same mix: a random moment of the start (opening the
  // database, the idle window), a random moment after a worker has started (measuring), or
  // just after a result was written (the next claim, the next worker). A campaign that
  // finished before its kill starts over (the file is removed) so every round has something
  // to interrupt.
  std::mt19937 random(20261129);
  std::uniform_int_distribution<int> delay_ms(0, 300);
  const auto rows_now = [&]() -> long long {
    try {
      RawDb raw(db);
      return raw.integer("SELECT count(*) FROM measurements");
    } catch (const std::exception&) {
      return -1;  // no file or no schema yet
    }
  };
  const auto wait_until = [](pid_t pid, const std::function<bool()>& done) {
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    // Whether carb still runs, without reaping it (wait_for does that).
    const auto running = [pid] {
      siginfo_t info{};
      return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
             info.si_pid == 0;
    };
    while (!done() && Clock::now() < deadline && running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  int killed = 0;
  int finished_first = 0;  // the campaign's last keys were done before the kill came
  int killed_mid_campaign = 0;
  int orphaned_workers = 0;
  for (int round = 0; round < CARB_KILL_ROUNDS; ++round) {
    const long long rows_before = std::filesystem::exists(db) ? rows_now() : -1;
    const pid_t pid = start(profile);
    if (round % 3 == 1) {
      wait_until(pid, [&] { return !children_of(pid).empty(); });
    } else if (round % 3 == 2) {
      wait_until(pid, [&] { return rows_now() > std::max(rows_before, 0LL); });
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(round % 3 == 2 ? delay_ms(random) / 10 : delay_ms(random)));
    const bool had_worker = !children_of(pid).empty();
    ::kill(pid, SIGKILL);
    const int code = wait_for(pid);
    ASSERT_TRUE(code == 128 + SIGKILL || code == 0) << code;
    ++(code == 0 ? finished_first : killed);
    // Its worker, if it had one, dies with it (PR_SET_PDEATHSIG), reparented to this process.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      int status = 0;
      const pid_t orphan = ::waitpid(-1, &status, WNOHANG);
      if (orphan > 0) {
        // Killed with its campaign, or it had just finished and exited by itself.
        ++orphaned_workers;
      } else if (orphan < 0) {
        break;  // no children left
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    ASSERT_LT(Clock::now(), deadline) << "a worker outlived its killed campaign";
    SCOPED_TRACE("after kill " + std::to_string(round));
    expect_consistent(db);
    if (std::filesystem::exists(db)) {
      RawDb raw(db);
      const long long rows =
          raw.integer("SELECT count(*) FROM sqlite_schema WHERE name = 'measurements'") == 0
              ? 0
              : raw.integer("SELECT count(*) FROM measurements");
      if (rows > 0 && rows < static_cast<long long>(keys.size()) && had_worker) {
        ++killed_mid_campaign;
      }
      if (rows == static_cast<long long>(keys.size())) {
        expect_measured_exactly_once(db, keys);
        for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
      }
    }
  }
  std::printf(
      "kill -9 rounds: %d of %d killed (%d finished first), %d mid-campaign with a worker "
      "running, %d orphaned workers reaped\n",
      killed, CARB_KILL_ROUNDS, finished_first, killed_mid_campaign, orphaned_workers);
  // The kills must really have landed in the middle of campaigns, or this proves nothing.
  EXPECT_GE(killed, CARB_KILL_ROUNDS * 9 / 10);
  EXPECT_GE(killed_mid_campaign, CARB_KILL_ROUNDS / 5);

  const std::string log = dir.file("resume.log");
  ASSERT_EQ(wait_for(start({profile.arguments, log, {}, std::nullopt})), 0) << slurp(log);
  expect_measured_exactly_once(db, keys);
}

TEST_F(FaultTest, AWorkerDiesWithItsKilledCampaign) {
  const std::string db = dir.file("orphan.sqlite");
  const pid_t pid = start(
      {"profile --keys " + write_keys(dir.file("keys.txt"), {tiny_key(1)}) + " --db " + db + kQuick,
       dir.file("orphan.log"),
       {{"CARB_WORKER_FAULT", "hang"}},
       std::nullopt});
  // Wait for the worker to be carb's __worker verb (it hangs after prepare), then kill the
  // campaign under it. A child found between fork and exec could see its parent gone before its
  // death signal was armed and exit 127 on its own (worker.cpp's getppid check): that is not the
  // case this test is about.
  const auto is_worker = [](pid_t child) {
    std::ifstream file("/proc/" + std::to_string(child) + "/cmdline");
    const std::string cmdline((std::istreambuf_iterator<char>(file)), {});
    return cmdline.find(std::string("__worker") + '\0') != std::string::npos;
  };
  std::vector<pid_t> workers;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    workers = children_of(pid);
    if (workers.size() == 1 && is_worker(workers[0])) break;
  }
  ASSERT_EQ(workers.size(), 1u) << slurp(dir.file("orphan.log"));
  ASSERT_TRUE(is_worker(workers[0])) << slurp(dir.file("orphan.log"));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  EXPECT_EQ(wait_for(pid), 128 + SIGKILL);
  // Without PR_SET_PDEATHSIG the hung worker would run on forever; it must be killed now.
  const auto reap_deadline = Clock::now() + std::chrono::seconds(10);
  int status = 0;
  pid_t reaped = 0;
  while ((reaped = ::waitpid(workers[0], &status, WNOHANG)) == 0 && Clock::now() < reap_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (reaped == 0) ::kill(workers[0], SIGKILL);
  ASSERT_EQ(reaped, workers[0]) << "the hung worker outlived its campaign";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST_F(FaultTest, WorkerCrashHangAndOutOfMemoryAreStatusRowsAndTheCampaignGoesOn) {
  const std::string db = dir.file("faults.sqlite");
  // A network far bigger than the workers' 512 MiB of address space (it runs in about 1 GiB).
  const std::string big = "bottleneck50_w1_ds_r224_b128_fp32";
  const std::vector<std::string> keys = {tiny_key(1), tiny_key(2), tiny_key(3),
                                         big,         tiny_key(5), tiny_key(6)};
  const Launch profile{
      "profile --keys " + write_keys(dir.file("keys.txt"), keys) + " --db " + db +
          " --min-time 0.02 --max-time 0.2 --target-ci 0.5 --idle-window 0.1 --timeout 3 "
          "--worker-memory-limit 512MiB --retry-limit 2",
      dir.file("faults.log"),
      // Two threads, so the limit leaves the small networks room on any machine.
      {{"CARB_WORKER_FAULT",
        "segv:" + tiny_key(2) + ",hang:" + tiny_key(3) + ",abort:" + tiny_key(5)},
       {"OMP_NUM_THREADS", "2"}},
      std::nullopt};
  ASSERT_EQ(wait_for(start(profile)), 0) << slurp(profile.log);
  EXPECT_NE(slurp(profile.log).find("measured now:   6 (crashed 2, ok 2, oom 1, timeout 1)"),
            std::string::npos)
      << slurp(profile.log);

  RawDb raw(db);
  const auto row = [&](const std::string& key) {
    return raw.text(
        "SELECT status || ' ' || attempts || ': ' || detail FROM measurements WHERE "
        "configuration_key = '" +
        key + "'");
  };
  EXPECT_EQ(row(tiny_key(1)).rfind("ok 1", 0), 0u) << row(tiny_key(1));
  EXPECT_EQ(row(tiny_key(2)).rfind("crashed 1: worker died of SIGSEGV", 0), 0u) << row(tiny_key(2));
  EXPECT_EQ(row(tiny_key(3)), "timeout 1: no result after 3.000000 s; worker killed");
  EXPECT_EQ(row(big), "oom 1: out of memory (std::bad_alloc)");
  EXPECT_EQ(row(tiny_key(5)).rfind("crashed 1: worker died of SIGABRT", 0), 0u) << row(tiny_key(5));
  EXPECT_EQ(row(tiny_key(6)).rfind("ok 1", 0), 0u) << row(tiny_key(6));
  expect_consistent(db);

  // Resumed, the failures are tried once more (--retry-limit 2), then given up.
  ASSERT_EQ(wait_for(start(profile)), 0) << slurp(profile.log);
  EXPECT_NE(slurp(profile.log).find("measured now:   4 (crashed 2, oom 1, timeout 1)"),
            std::string::npos)
      << slurp(profile.log);
  EXPECT_EQ(row(tiny_key(2)).rfind("crashed 2: ", 0), 0u) << row(tiny_key(2));
  EXPECT_EQ(row(big).rfind("oom 2: ", 0), 0u) << row(big);
  ASSERT_EQ(wait_for(start(profile)), 0) << slurp(profile.log);
  EXPECT_NE(slurp(profile.log).find("measured now:   0\n"), std::string::npos)
      << slurp(profile.log);
  EXPECT_NE(slurp(profile.log).find("6 already done"), std::string::npos) << slurp(profile.log);
}

TEST_F(FaultTest, AFileSizeLimitStopsTheCampaignCleanlyAndResumeCompletesIt) {
  const std::string db = dir.file("fsize.sqlite");
  const std::vector<std::string> keys = tiny_keys(12);
  const std::string arguments =
      "profile --keys " + write_keys(dir.file("keys.txt"), keys) + " --db " + db + kQuick;
  // The database exists and holds its first measurement; then the file size limit (what
  // `ulimit -f` or a batch system sets) leaves room for a few more measurements' pages only.
  ASSERT_EQ(wait_for(start({"profile --keys " + write_keys(dir.file("first.txt"), {keys.front()}) +
                                " --db " + db + kQuick,
                            "/dev/null",
                            {},
                            std::nullopt})),
            0);
  const auto size = std::filesystem::file_size(db);
  const std::string log = dir.file("full.log");
  EXPECT_EQ(wait_for(start({arguments, log, {}, size + 64 * 1024})), 1) << slurp(log);
  const std::string error = last_line(slurp(log));
  EXPECT_EQ(error.rfind("carb: error: ", 0), 0u) << slurp(log);
  EXPECT_NE(error.find("this process may write files of at most " +
                       std::to_string(size + 64 * 1024) + " bytes (ulimit -f)"),
            std::string::npos)
      << error;
  expect_consistent(db);
  {
    RawDb raw(db);
    const long long rows = raw.integer("SELECT count(*) FROM measurements");
    EXPECT_GE(rows, 1);
    EXPECT_LT(rows, static_cast<long long>(keys.size()));
  }
  // With room again, the same command finishes the campaign.
  ASSERT_EQ(wait_for(start({arguments, log, {}, std::nullopt})), 0) << slurp(log);
  expect_measured_exactly_once(db, keys);
}

TEST_F(FaultTest, AFullFileSystemStopsTheCampaignCleanlyAndResumeCompletesIt) {
  // A real tmpfs of 320 KiB, most of it taken, in a private mount namespace (root, or an
  // unprivileged user namespace); the script grows it to 8 MiB after the first run, then resumes.
  const std::string mount_point = dir.file("tmpfs");
  std::filesystem::create_directories(mount_point);
  const std::string db = mount_point + "/runs.sqlite";
  const std::string keys = write_keys(dir.file("keys.txt"), tiny_keys(12));
  const std::string carb = std::string(CARB_BINARY) + " profile --keys " + keys + " --db " + db +
                           kQuick + " >>" + dir.file("tmpfs.log") + " 2>&1";
  const std::string script =
      "mount -t tmpfs -o size=320k tmpfs " + mount_point + " || exit 77; " +
      // Fill most of it, so the campaign runs out of space after a few measurements.
      "head -c 80000 /dev/zero > " + mount_point + "/filler; " + carb + "; echo full=\\$?; " +
      "sqlite3 " + db + " 'PRAGMA integrity_check; SELECT count(*) FROM measurements'; " + "rm " +
      mount_point + "/filler; mount -o remount,size=8m " + mount_point + "; " + carb +
      "; echo resumed=\\$?; cp " + db + " " + dir.file("copy.sqlite");
  const std::string command =
      "(unshare -m sh -c \"" + script + "\" || unshare -rm sh -c \"" + script + "\") 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
    out.append(buffer, got);
  }
  const int status = ::pclose(pipe);
  if (out.find("full=") == std::string::npos) {
    GTEST_SKIP() << "cannot mount a tmpfs here (no mount namespace): " << out;
  }
  ASSERT_EQ(WEXITSTATUS(status), 0) << out;
  const std::string log = slurp(dir.file("tmpfs.log"));
  EXPECT_NE(out.find("full=1\nok\n"), std::string::npos) << out << log;
  EXPECT_NE(log.find("database or disk is full"), std::string::npos) << log;
  EXPECT_EQ(out.find("full=1\nok\n0\n"), std::string::npos)
      << "the disk filled before the first measurement: " << out;
  EXPECT_NE(out.find("resumed=0"), std::string::npos) << out << log;
  expect_measured_exactly_once(dir.file("copy.sqlite"), tiny_keys(12));
}

TEST_F(FaultTest, TwoAndFourCampaignsOnOneDatabaseMeasureEveryKeyOnce) {
  for (int processes : {2, 4}) {
    SCOPED_TRACE(std::to_string(processes) + " processes");
    const std::string db = dir.file("shared-" + std::to_string(processes) + ".sqlite");
    const std::vector<std::string> keys = tiny_keys(10);
    const std::string key_file = write_keys(dir.file("keys.txt"), keys);
    std::vector<pid_t> pids;
    for (int i = 0; i < processes; ++i) {
      pids.push_back(start({"profile --keys " + key_file + " --db " + db + kQuick,
                            dir.file("concurrent" + std::to_string(i) + ".log"),
                            {},
                            std::nullopt}));
    }
    int measured = 0;
    int took_part = 0;
    for (int i = 0; i < processes; ++i) {
      const std::string log = slurp(dir.file("concurrent" + std::to_string(i) + ".log"));
      EXPECT_EQ(wait_for(pids[static_cast<std::size_t>(i)]), 0) << log;
      const std::string summary = slurp(dir.file("concurrent" + std::to_string(i) + ".log"));
      const std::size_t at = summary.find("measured now:   ");
      ASSERT_NE(at, std::string::npos) << summary;
      const int mine = std::stoi(summary.substr(at + 16));
      measured += mine;
      took_part += mine > 0 ? 1 : 0;
    }
    // Ten measurements made in all: no key was measured by two processes.
    EXPECT_EQ(measured, 10);
    EXPECT_GE(took_part, 2);
    expect_measured_exactly_once(db, keys);
  }
}

}  // namespace
}  // namespace carb
