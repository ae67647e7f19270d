// Test support: a temporary directory standing in for "/" that holds recorded or synthetic
// procfs/sysfs files, and a way to run a probe as an unprivileged user.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace carb::test {

/// A fresh directory under the system temp directory, removed with everything in it on
/// destruction. Readable by every user so a probe can run unprivileged against it.
class FakeRoot {
 public:
  FakeRoot() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "carb-telemetry-XXXXXX").string();
    const char* made = ::mkdtemp(pattern.data());
    if (made == nullptr) {
      ADD_FAILURE() << "mkdtemp failed";
    }
    path_ = pattern;
    std::filesystem::permissions(path_, std::filesystem::perms(0755));
  }
  ~FakeRoot() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  FakeRoot(const FakeRoot&) = delete;
  FakeRoot& operator=(const FakeRoot&) = delete;

  const std::filesystem::path& path() const { return path_; }

  /// root/relative as a path.
  std::filesystem::path at(std::string_view relative) const { return path_ / relative; }

  /// Writes `content` to root/relative, creating parent directories. An existing file is
  /// truncated and rewritten in place (same inode), as sysfs updates a value under an open fd.
  void write(std::string_view relative, std::string_view content) const {
    const std::filesystem::path file = at(relative);
    std::filesystem::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out) {
      ADD_FAILURE() << "cannot write " << file;
    }
  }

  /// Creates root/relative as a directory (e.g. where a file is expected).
  void make_directory(std::string_view relative) const {
    std::filesystem::create_directories(at(relative));
  }

 private:
  std::filesystem::path path_;
};

/// Runs `probe` as user and group "nobody" (65534) in a child process when this process is root,
/// directly otherwise, and returns the string it produced: tests run as root, which reads any
/// file whatever its mode, so a real permission failure needs an unprivileged process. nullopt
/// when root cannot become nobody here (a user namespace without that id).
inline std::optional<std::string> run_unprivileged(const std::function<std::string()>& probe) {
  if (::geteuid() != 0) {
    return probe();
  }
  constexpr int kCannotDropPrivileges = 3;
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) {
    ADD_FAILURE() << "pipe failed";
    return std::nullopt;
  }
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) {
      ::_exit(kCannotDropPrivileges);
    }
    const std::string result = probe();
    const bool written =
        ::write(pipe_fds[1], result.data(), result.size()) == static_cast<ssize_t>(result.size());
    ::_exit(written ? 0 : 4);
  }
  ::close(pipe_fds[1]);
  std::string result;
  char buffer[4096];
  ssize_t count = 0;
  while ((count = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) {
    result.append(buffer, static_cast<std::size_t>(count));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == kCannotDropPrivileges) {
    return std::nullopt;
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "unprivileged child failed";
  return result;
}

}  // namespace carb::test
