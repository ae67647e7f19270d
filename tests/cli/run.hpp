// Runs the carb binary as a user does, for the CLI tests.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

namespace carb_test {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout, and stderr unless left out
};

/// How to start carb in the background.
struct Launch {
  std::string arguments;                                ///< carb's, through the shell
  std::string log;                                      ///< where its stdout and stderr go
  std::map<std::string, std::string> environment = {};  ///< variables to set for it
  std::optional<rlim_t> file_size_limit_bytes = {};     ///< RLIMIT_FSIZE for it
};

/// Starts carb in a child process; returns its pid (the shell execs carb, so it is carb's).
inline pid_t start(const Launch& launch) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& [name, value] : launch.environment) ::setenv(name.c_str(), value.c_str(), 1);
    if (launch.file_size_limit_bytes) {
      const rlimit limit{*launch.file_size_limit_bytes, *launch.file_size_limit_bytes};
      ::setrlimit(RLIMIT_FSIZE, &limit);
    }
    const std::string command =
        "exec " + std::string(CARB_BINARY) + " " + launch.arguments + " >" + launch.log + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

/// Starts `carb <arguments>` with stdout and stderr to `log`.
inline pid_t start(const std::string& arguments, const std::string& log) {
  return start(Launch{arguments, log});
}

/// A child's exit code, or 128 + the signal that ended it.
inline int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// A whole file as text.
inline std::string slurp(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

/// Runs a shell command line and collects its output (stdout; stderr too if it says 2>&1).
inline CommandResult run_shell(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  CommandResult result;
  std::array<char, 4096> buffer{};
  std::size_t read = 0;
  while ((read = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.out.append(buffer.data(), read);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

/// Runs `carb <arguments>` through the shell and collects its output.
inline CommandResult run(const std::string& arguments, bool with_stderr = true) {
  return run_shell(std::string(CARB_BINARY) + " " + arguments +
                   (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

/// Runs SQL on a database behind carb's back (the tests edit copies of databases).
inline void sql(const std::string& db, const std::string& statement) {
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(handle, statement.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(handle);
}

/// The number of lines of a command's output.
inline int lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace carb_test
