#include "sysfs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <utility>

namespace carb::telemetry_detail {

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

FileDescriptor::FileDescriptor(FileDescriptor&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)) {}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

std::string describe_read_failure(const std::filesystem::path& path, int error_number) {
  switch (error_number) {
    case ENOENT:
    case ENOTDIR:
      return path.string() + " missing";
    case EACCES:
    case EPERM:
      return "permission denied reading " + path.string();
    default:
      return path.string() + " unreadable (" + std::strerror(error_number) + ")";
  }
}

FileDescriptor open_read_only(const std::filesystem::path& path) {
  return FileDescriptor(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
}

namespace {

FileText read_failure(const std::filesystem::path& path, int error_number) {
  return FileText{std::nullopt, error_number, describe_read_failure(path, error_number)};
}

}  // namespace

FileText read_file_text(const std::filesystem::path& path) {
  FileDescriptor fd = open_read_only(path);
  if (!fd.valid()) {
    return read_failure(path, errno);
  }
  std::string text;
  std::array<char, 16384> buffer{};
  while (true) {
    const ssize_t count = ::read(fd.get(), buffer.data(), buffer.size());
    if (count < 0) {
      if (errno == EINTR) {
        continue;
      }
      return read_failure(path, errno);
    }
    if (count == 0) {
      return FileText{std::move(text), 0, {}};
    }
    text.append(buffer.data(), static_cast<std::size_t>(count));
  }
}

FileText reread_text(const FileDescriptor& fd, const std::filesystem::path& path) {
  // A sysfs attribute is at most one page; one pread at offset 0 returns all of it.
  std::array<char, 4096> buffer{};
  ssize_t count = 0;
  do {
    count = ::pread(fd.get(), buffer.data(), buffer.size(), 0);
  } while (count < 0 && errno == EINTR);
  if (count < 0) {
    return read_failure(path, errno);
  }
  return FileText{std::string(buffer.data(), static_cast<std::size_t>(count)), 0, {}};
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view kWhitespace = " \t\n\r\f\v";
  const std::size_t first = text.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) {
    return {};
  }
  const std::size_t last = text.find_last_not_of(kWhitespace);
  return text.substr(first, last - first + 1);
}

std::optional<std::uint64_t> parse_u64(std::string_view text) {
  const std::string_view digits = trim(text);
  std::uint64_t value = 0;
  const char* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  if (digits.empty() || ec != std::errc() || ptr != end) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::string_view> proc_field(std::string_view text, std::string_view key) {
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    if (line.starts_with(key)) return trim(line.substr(key.size()));
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> parse_kib_bytes(std::string_view value) {
  constexpr std::string_view kUnit = " kB";
  value = trim(value);
  if (value.size() <= kUnit.size() || !value.ends_with(kUnit)) return std::nullopt;
  const auto kib = parse_u64(value.substr(0, value.size() - kUnit.size()));
  if (!kib) return std::nullopt;
  return *kib * 1024;
}

std::optional<double> parse_double(std::string_view text) {
  const std::string_view number = trim(text);
  double value = 0.0;
  const char* end = number.data() + number.size();
  const auto [ptr, ec] = std::from_chars(number.data(), end, value);
  if (number.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  std::string_view rest = trim(text);
  if (rest.empty()) {
    return std::nullopt;
  }
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t dash = item.find('-');
    const auto first = parse_u64(item.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : parse_u64(item.substr(dash + 1));
    // Real CPU ids stay far below this; the bound keeps a corrupt range from allocating gigabytes.
    constexpr std::uint64_t kMaxCpuId = 1u << 20;
    if (!first || !last || *first > *last || *last > kMaxCpuId) {
      return std::nullopt;
    }
    for (std::uint64_t cpu = *first; cpu <= *last; ++cpu) {
      cpus.push_back(static_cast<int>(cpu));
    }
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::filesystem::path under_root(const std::filesystem::path& root, std::string_view relative) {
  return root / std::filesystem::path(relative);
}

std::string quote_content(std::string_view text) {
  constexpr std::size_t kMaxShown = 40;
  std::string quoted = "'";
  for (const char c : text.substr(0, kMaxShown)) {
    if (c == '\n') {
      quoted += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      quoted += "\\x";
      constexpr std::string_view kHex = "0123456789abcdef";
      quoted += kHex[static_cast<unsigned char>(c) >> 4];
      quoted += kHex[static_cast<unsigned char>(c) & 0xf];
    } else {
      quoted += c;
    }
  }
  quoted += text.size() > kMaxShown ? "...'" : "'";
  return quoted;
}

}  // namespace carb::telemetry_detail
