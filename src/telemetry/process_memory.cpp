// This process's resident memory: the peak for the protocol's process-level figure and the
// current value for the context baseline.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "carb/error.hpp"
#include "carb/telemetry.hpp"
#include "sysfs.hpp"

namespace carb {

std::uint64_t peak_rss_bytes(const std::filesystem::path& root) {
  const std::filesystem::path status_path = telemetry_detail::under_root(root, "proc/self/status");
  const telemetry_detail::FileText read = telemetry_detail::read_file_text(status_path);
  if (!read.text) throw Error(ErrorCategory::kRuntime, "process memory: " + read.failure);
  // "VmHWM:\t  123456 kB": getrusage's ru_maxrss would be the same mark, except that it also
  // keeps the peak of every thread that exited, which reset_peak_rss() cannot lower.
  const auto value = telemetry_detail::proc_field(*read.text, "VmHWM:");
  const auto bytes = value ? telemetry_detail::parse_kib_bytes(*value) : std::nullopt;
  if (!bytes) {
    throw Error(ErrorCategory::kRuntime,
                "process memory: " + status_path.string() + " has no 'VmHWM: N kB' line");
  }
  return *bytes;
}

bool reset_peak_rss(std::string* why) {
  // clear_refs value 5 resets the peak RSS mark (Linux 4.0, Documentation/filesystems/proc.rst).
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = std::string("cannot open /proc/self/clear_refs: ") + std::strerror(errno);
    return false;
  }
  const ssize_t written = ::write(fd, "5", 1);
  const int error = errno;
  ::close(fd);
  if (written != 1) {
    *why = std::string("writing 5 to /proc/self/clear_refs failed: ") + std::strerror(error);
    return false;
  }
  return true;
}

std::uint64_t current_rss_bytes(const std::filesystem::path& root) {
  const std::filesystem::path statm_path = telemetry_detail::under_root(root, "proc/self/statm");
  const telemetry_detail::FileText read = telemetry_detail::read_file_text(statm_path);
  if (!read.text) {
    throw Error(ErrorCategory::kRuntime, "process memory: " + read.failure);
  }
  // statm: size resident shared text lib data dt, all in pages.
  const std::string_view text = telemetry_detail::trim(*read.text);
  const std::size_t first_space = text.find(' ');
  const std::size_t second_space =
      first_space == std::string_view::npos ? first_space : text.find(' ', first_space + 1);
  const auto resident_pages = first_space == std::string_view::npos
                                  ? std::nullopt
                                  : telemetry_detail::parse_u64(text.substr(
                                        first_space + 1, second_space - first_space - 1));
  if (!resident_pages) {
    throw Error(ErrorCategory::kRuntime, "process memory: " + statm_path.string() + " holds " +
                                             telemetry_detail::quote_content(*read.text) +
                                             ", not statm's page counts");
  }
  return *resident_pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace carb
