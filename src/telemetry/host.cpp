// Host information for provenance and the device fingerprint, from procfs and sysfs.
#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "carb/error.hpp"
#include "carb/telemetry.hpp"
#include "sysfs.hpp"

namespace carb {

namespace {

namespace fs = std::filesystem;
using telemetry_detail::FileText;

constexpr std::string_view kUnavailablePrefix = "unavailable";

Error host_error(const std::string& message) {
  return Error(ErrorCategory::kRuntime, "host information: " + message);
}

std::string read_required(const fs::path& path) {
  FileText read = telemetry_detail::read_file_text(path);
  if (!read.text) {
    throw host_error(read.failure);
  }
  return std::move(*read.text);
}

// Runs of whitespace become one space: some BIOSes pad the model name.
std::string collapse_whitespace(std::string_view text) {
  std::string collapsed;
  bool pending_space = false;
  for (const char c : telemetry_detail::trim(text)) {
    if (c == ' ' || c == '\t') {
      pending_space = true;
      continue;
    }
    if (pending_space) {
      collapsed += ' ';
      pending_space = false;
    }
    collapsed += c;
  }
  return collapsed;
}

// The fields of one "processor" block of /proc/cpuinfo that HostInfo needs.
struct CpuinfoProcessor {
  int id = 0;
  std::string vendor;
  std::string model;
  std::optional<std::uint64_t> physical_id;
  std::optional<std::uint64_t> core_id;
  std::set<std::string, std::less<>> flags;
  std::map<std::string, std::string, std::less<>> identity;  // family, model, stepping, ...
};

// cpuinfo fields that tell a CPU's revision and caches apart, kept as text.
constexpr std::string_view kIdentityFields[] = {"cpu family", "model", "stepping", "microcode",
                                                "cache size"};

std::optional<std::uint64_t> parse_topology_field(const fs::path& path, std::string_view key,
                                                  std::string_view value) {
  const auto number = telemetry_detail::parse_u64(value);
  if (!number) {
    throw host_error(path.string() + ": '" + std::string(key) + "' is " +
                     telemetry_detail::quote_content(value) + ", not a number");
  }
  return number;
}

std::vector<CpuinfoProcessor> parse_cpuinfo(const fs::path& path, const std::string& text) {
  std::vector<CpuinfoProcessor> processors;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) {
      continue;  // blank separators between processor blocks
    }
    const std::string_view key = telemetry_detail::trim(std::string_view(line).substr(0, colon));
    const std::string_view value = telemetry_detail::trim(std::string_view(line).substr(colon + 1));
    if (key == "processor") {
      const auto id = telemetry_detail::parse_u64(value);
      if (!id || *id > 0xfffff) {
        throw host_error(path.string() + ": 'processor' is " +
                         telemetry_detail::quote_content(value) + ", not a CPU number");
      }
      processors.push_back(CpuinfoProcessor{static_cast<int>(*id), {}, {}, {}, {}, {}, {}});
      continue;
    }
    if (processors.empty()) {
      continue;  // lines before the first processor (e.g. s390's header) describe no CPU
    }
    CpuinfoProcessor& processor = processors.back();
    if (key == "vendor_id") {
      processor.vendor = std::string(value);
    } else if (key == "model name") {
      processor.model = collapse_whitespace(value);
    } else if (key == "physical id") {
      processor.physical_id = parse_topology_field(path, key, value);
    } else if (key == "core id") {
      processor.core_id = parse_topology_field(path, key, value);
    } else if (key == "flags") {
      std::istringstream words{std::string(value)};
      std::string flag;
      while (words >> flag) {
        processor.flags.insert(flag);
      }
    } else if (std::find(std::begin(kIdentityFields), std::end(kIdentityFields), key) !=
               std::end(kIdentityFields)) {
      processor.identity[std::string(key)] = collapse_whitespace(value);
    }
  }
  if (processors.empty()) {
    throw host_error(path.string() + " lists no processor");
  }
  return processors;
}

void fill_cpu_fields(const std::vector<CpuinfoProcessor>& processors, HostInfo& host) {
  host.cpu_model = processors.front().model;
  host.cpu_vendor = processors.front().vendor;
  host.logical_cpus = static_cast<int>(processors.size());

  const bool has_sockets = std::all_of(processors.begin(), processors.end(),
                                       [](const CpuinfoProcessor& p) { return p.physical_id; });
  const bool has_cores =
      has_sockets && std::all_of(processors.begin(), processors.end(),
                                 [](const CpuinfoProcessor& p) { return p.core_id; });
  if (has_sockets) {
    std::set<std::uint64_t> sockets;
    std::set<std::pair<std::uint64_t, std::uint64_t>> cores;
    for (const CpuinfoProcessor& processor : processors) {
      sockets.insert(*processor.physical_id);
      if (has_cores) {
        cores.emplace(*processor.physical_id, *processor.core_id);
      }
    }
    host.sockets = static_cast<int>(sockets.size());
    if (has_cores) {
      host.physical_cores = static_cast<int>(cores.size());
    }
  }

  const auto field = [&](std::string_view name) {
    const auto found = processors.front().identity.find(name);
    return found == processors.front().identity.end() ? std::string() : found->second;
  };
  host.cpu_family = field("cpu family");
  host.cpu_model_number = field("model");
  host.cpu_stepping = field("stepping");
  host.microcode = field("microcode");
  if (const std::string cache = field("cache size"); !cache.empty()) host.caches["cpuinfo"] = cache;
  host.hypervisor = processors.front().flags.contains("hypervisor") ? "yes" : "none";

  // Only an extension every CPU has can be relied on by a kernel that may run on any of them.
  for (const std::string_view flag : kInferenceIsaFlags) {
    const bool everywhere =
        std::all_of(processors.begin(), processors.end(),
                    [flag](const CpuinfoProcessor& p) { return p.flags.contains(flag); });
    if (everywhere) {
      host.isa_flags.emplace_back(flag);
    }
  }
}

std::string read_governor(const fs::path& root, int cpu) {
  const fs::path cpufreq = telemetry_detail::under_root(
      root, "sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpufreq");
  const fs::path governor_path = cpufreq / "scaling_governor";
  const FileText read = telemetry_detail::read_file_text(governor_path);
  const std::string prefix = std::string(kUnavailablePrefix) + ": ";
  if (read.text) {
    const std::string_view governor = telemetry_detail::trim(*read.text);
    return governor.empty() ? prefix + governor_path.string() + " is empty" : std::string(governor);
  }
  std::error_code error;
  if (read.error_number == ENOENT && !fs::exists(cpufreq, error)) {
    return prefix + "no cpufreq (" + cpufreq.string() + " missing)";
  }
  return prefix + read.failure;
}

std::uint64_t parse_mem_total_bytes(const fs::path& path, const std::string& text) {
  const auto value = telemetry_detail::proc_field(text, "MemTotal:");
  if (!value) throw host_error(path.string() + " has no MemTotal line");
  const auto bytes = telemetry_detail::parse_kib_bytes(*value);
  if (!bytes) {
    throw host_error(path.string() + ": MemTotal is " + telemetry_detail::quote_content(*value) +
                     ", not '<number> kB'");
  }
  return *bytes;
}

// A small text file's trimmed content, or empty when it cannot be read.
std::string read_optional(const fs::path& path) {
  const FileText read = telemetry_detail::read_file_text(path);
  return read.text ? collapse_whitespace(*read.text) : std::string();
}

// sysfs's cache sizes of CPU 0, by level and type: "L1d", "L1i", "L2", "L3".
void read_caches(const fs::path& root, HostInfo& host) {
  const fs::path caches = telemetry_detail::under_root(root, "sys/devices/system/cpu/cpu0/cache");
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(caches, error)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    const std::string level = read_optional(entry.path() / "level");
    const std::string type = read_optional(entry.path() / "type");
    const std::string size = read_optional(entry.path() / "size");
    if (level.empty() || size.empty()) continue;
    const std::string suffix = type == "Data" ? "d" : type == "Instruction" ? "i" : "";
    host.caches["L" + level + suffix] = size;
  }
}

// What the guest sees of its hypervisor beside cpuinfo's flag.
void describe_hypervisor(const fs::path& root, HostInfo& host) {
  if (host.hypervisor == "none") return;
  std::string details;
  for (const char* file :
       {"sys/hypervisor/type", "sys/class/dmi/id/sys_vendor", "sys/class/dmi/id/product_name"}) {
    const std::string text = read_optional(telemetry_detail::under_root(root, file));
    if (!text.empty()) details += (details.empty() ? "" : "; ") + text;
  }
  if (!details.empty()) host.hypervisor += " (" + details + ")";
}

}  // namespace

HostInfo read_host_info(const std::filesystem::path& root) {
  HostInfo host;
  // uname() would read the running kernel whatever the root; these files hold the same strings
  // for the reader's UTS namespace and can be replayed from a recorded tree.
  host.hostname = std::string(telemetry_detail::trim(
      read_required(telemetry_detail::under_root(root, "proc/sys/kernel/hostname"))));
  host.kernel_release = std::string(telemetry_detail::trim(
      read_required(telemetry_detail::under_root(root, "proc/sys/kernel/osrelease"))));

  const fs::path cpuinfo_path = telemetry_detail::under_root(root, "proc/cpuinfo");
  const std::vector<CpuinfoProcessor> processors =
      parse_cpuinfo(cpuinfo_path, read_required(cpuinfo_path));
  fill_cpu_fields(processors, host);
  for (const CpuinfoProcessor& processor : processors) {
    host.scaling_governors[processor.id] = read_governor(root, processor.id);
  }

  const fs::path meminfo_path = telemetry_detail::under_root(root, "proc/meminfo");
  host.memory_total_bytes = parse_mem_total_bytes(meminfo_path, read_required(meminfo_path));

  host.machine_id = read_optional(telemetry_detail::under_root(root, "etc/machine-id"));
  host.boot_id =
      read_optional(telemetry_detail::under_root(root, "proc/sys/kernel/random/boot_id"));
  read_caches(root, host);
  describe_hypervisor(root, host);
  return host;
}

std::string host_instance(const HostInfo& host) {
  if (host.machine_id.empty() && host.boot_id.empty()) return "";
  const auto head = [](const std::string& id) { return id.empty() ? "?" : id.substr(0, 8); };
  return head(host.machine_id) + ":" + head(host.boot_id);
}

std::string governor_summary(const HostInfo& host) {
  std::map<std::string, int> counts;
  for (const auto& [cpu, governor] : host.scaling_governors) {
    const bool unavailable = governor.rfind(kUnavailablePrefix, 0) == 0;
    ++counts[unavailable ? std::string(kUnavailablePrefix) : governor];
  }
  if (counts.empty()) {
    return std::string(kUnavailablePrefix);
  }
  if (counts.size() == 1) {
    return counts.begin()->first;
  }
  std::string summary = "mixed(";
  for (const auto& [governor, count] : counts) {
    if (summary.size() > std::string_view("mixed(").size()) {
      summary += ", ";
    }
    summary += governor + " x" + std::to_string(count);
  }
  return summary + ")";
}

std::string device_fingerprint(const HostInfo& host) {
  std::string isa;
  for (const std::string& flag : host.isa_flags) {
    isa += (isa.empty() ? "" : ",") + flag;
  }
  return "cpu=" + host.cpu_model + ";logical_cpus=" + std::to_string(host.logical_cpus) +
         ";isa=" + isa + ";governor=" + governor_summary(host);
}

nlohmann::json host_info_json(const HostInfo& host) {
  nlohmann::json governors = nlohmann::json::object();
  for (const auto& [cpu, governor] : host.scaling_governors) {
    governors[std::to_string(cpu)] = governor;
  }
  nlohmann::json json = {
      {"hostname", host.hostname},
      {"kernel_release", host.kernel_release},
      {"cpu_model", host.cpu_model},
      {"cpu_vendor", host.cpu_vendor},
      {"logical_cpus", host.logical_cpus},
      {"physical_cores", nullptr},
      {"sockets", nullptr},
      {"isa_flags", host.isa_flags},
      {"scaling_governors", governors},
      {"governor", governor_summary(host)},
      {"memory_total_bytes", host.memory_total_bytes},
      {"fingerprint", device_fingerprint(host)},
      {"machine_id", host.machine_id},
      {"boot_id", host.boot_id},
      {"instance", host_instance(host)},
      {"hypervisor", host.hypervisor},
      {"cpu_family", host.cpu_family},
      {"cpu_model_number", host.cpu_model_number},
      {"cpu_stepping", host.cpu_stepping},
      {"microcode", host.microcode},
      {"caches", host.caches},
  };
  if (host.physical_cores) {
    json["physical_cores"] = *host.physical_cores;
  }
  if (host.sockets) {
    json["sockets"] = *host.sockets;
  }
  return json;
}

}  // namespace carb
