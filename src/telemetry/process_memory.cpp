// This process's resident memory: the peak for the protocol's process-level figure and the
// current value for the context baseline.
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "carb/error.hpp"
#include "carb/telemetry.hpp"
#include "sysfs.hpp"

namespace carb {

std::uint64_t peak_rss_bytes() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) {
    throw Error(ErrorCategory::kRuntime,
                std::string("getrusage(RUSAGE_SELF) failed: ") + std::strerror(errno));
  }
  // Linux reports ru_maxrss in KiB.
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
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
