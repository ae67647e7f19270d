// Runs the carb binary as a user does, for the CLI tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace carb_test {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout, and stderr unless left out
};

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

}  // namespace carb_test
