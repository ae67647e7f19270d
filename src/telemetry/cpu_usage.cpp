// Machine-wide and own CPU time, to measure how much other work ran while carb was timing: on a
// small machine an unrelated process (or a busy VM host) slows the timed passes many-fold, and a
// measurement must say so rather than pass the slowdown off as the configuration's latency.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "carb/telemetry.hpp"
#include "sysfs.hpp"

namespace carb {

std::optional<CpuUsage> parse_proc_stat(std::string_view text, double ticks_per_s) {
  std::istringstream lines{std::string(text)};
  std::string line;
  std::optional<CpuUsage> usage;
  int cpus = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("cpu", 0) != 0) continue;
    if (line.size() > 3 && line[3] != ' ') {  // "cpu0", "cpu1", ...: count them
      ++cpus;
      continue;
    }
    // cpu user nice system idle iowait irq softirq steal guest guest_nice (guest is in user)
    std::istringstream fields(line.substr(3));
    double value[8] = {};
    int read = 0;
    while (read < 8 && fields >> value[read]) ++read;
    if (read < 4) return std::nullopt;
    usage = CpuUsage{};
    usage->busy_s = (value[0] + value[1] + value[2] + value[5] + value[6]) / ticks_per_s;
    usage->steal_s = value[7] / ticks_per_s;
  }
  if (usage) usage->cpus = std::max(cpus, 1);
  return usage;
}

std::optional<CpuUsage> read_cpu_usage(std::string* why, const std::filesystem::path& root) {
  const auto read =
      telemetry_detail::read_file_text(telemetry_detail::under_root(root, "proc/stat"));
  if (!read.text) {
    if (why != nullptr) *why = read.failure;
    return std::nullopt;
  }
  std::optional<CpuUsage> usage =
      parse_proc_stat(*read.text, static_cast<double>(::sysconf(_SC_CLK_TCK)));
  if (!usage) {
    if (why != nullptr) *why = "proc/stat has no cpu line";
    return std::nullopt;
  }
  rusage own{};
  if (::getrusage(RUSAGE_SELF, &own) != 0) {
    if (why != nullptr) *why = std::string("getrusage failed: ") + std::strerror(errno);
    return std::nullopt;
  }
  usage->own_s = static_cast<double>(own.ru_utime.tv_sec + own.ru_stime.tv_sec) +
                 static_cast<double>(own.ru_utime.tv_usec + own.ru_stime.tv_usec) * 1e-6;
  return usage;
}

Contention contention_between(const CpuUsage& before, const CpuUsage& after, double window_s) {
  Contention contention;
  const double capacity = window_s * std::max(after.cpus, 1);
  if (capacity <= 0) return contention;
  const double others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s);
  contention.other_share = std::clamp(others / capacity, 0.0, 1.0);
  contention.steal_share = std::clamp((after.steal_s - before.steal_s) / capacity, 0.0, 1.0);
  return contention;
}

}  // namespace carb
