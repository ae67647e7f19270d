// Small-file readers for procfs and sysfs that keep errno, so a reason can say whether a file is
// missing, forbidden or unreadable; plus the parsers the telemetry readers share.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace carb::telemetry_detail {

/// An owned POSIX file descriptor, closed on destruction.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(FileDescriptor&& other) noexcept;
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

/// The text of a small file, or the errno and a sentence naming the path that say why not.
struct FileText {
  std::optional<std::string> text;
  int error_number = 0;  ///< errno of the failed open/read; 0 on success
  std::string failure;   ///< e.g. "permission denied reading /sys/..."; empty on success
};

/// "permission denied reading P", "P missing" or "P unreadable (strerror)".
std::string describe_read_failure(const std::filesystem::path& path, int error_number);

/// Opens `path` read-only (close-on-exec); an invalid descriptor with errno set on failure.
FileDescriptor open_read_only(const std::filesystem::path& path);

/// Reads a whole file (procfs files report size 0, so this reads until end of file).
FileText read_file_text(const std::filesystem::path& path);

/// Re-reads an open sysfs attribute from offset 0 (sysfs regenerates the value on each such read).
FileText reread_text(const FileDescriptor& fd, const std::filesystem::path& path);

/// `text` without leading and trailing whitespace.
std::string_view trim(std::string_view text);

/// A whole unsigned decimal number, surrounding whitespace allowed; nullopt for anything else.
std::optional<std::uint64_t> parse_u64(std::string_view text);

/// The value of a procfs "Key: value" line (/proc/meminfo, /proc/self/status), trimmed; nullopt
/// when no line starts with `key` (e.g. "MemTotal:").
std::optional<std::string_view> proc_field(std::string_view text, std::string_view key);

/// A procfs size such as "16384 kB", in bytes; nullopt for anything else.
std::optional<std::uint64_t> parse_kib_bytes(std::string_view value);

/// A whole finite floating-point number, surrounding whitespace allowed; nullopt otherwise.
std::optional<double> parse_double(std::string_view text);

/// A Linux CPU list such as "0-3,8,10-11" in ascending order; nullopt when malformed or empty.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

/// `root` joined with a path written relative to "/", e.g. under_root(root, "sys/class/powercap").
std::filesystem::path under_root(const std::filesystem::path& root, std::string_view relative);

/// "'text'" with control characters escaped and long content cut, for quoting garbage in reasons.
std::string quote_content(std::string_view text);

}  // namespace carb::telemetry_detail
