// RAPL package energy through the powercap sysfs tree.
#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "counter_meter.hpp"
#include "sysfs.hpp"

namespace carb {

namespace {

namespace fs = std::filesystem;
using telemetry_detail::CounterMeter;
using telemetry_detail::CounterSpec;
using telemetry_detail::FileDescriptor;
using telemetry_detail::FileText;

constexpr std::string_view kZonePrefix = "intel-rapl:";
constexpr double kJoulesPerMicrojoule = 1e-6;

// One open package zone.
struct RaplPackage {
  fs::path zone;          // e.g. /sys/class/powercap/intel-rapl:0
  std::string zone_name;  // its "name" file, e.g. "package-0"
  unsigned index;         // N of intel-rapl:N, for a stable order
  std::uint64_t max_energy_range_uj;
  FileDescriptor energy_uj;  // kept open: re-reading at offset 0 is cheaper than re-opening
};

// The package index N of a top-level zone directory named exactly "intel-rapl:N"; subzones
// ("intel-rapl:N:M") and other control types (intel-rapl-mmio) are not packages.
std::optional<unsigned> package_zone_index(const std::string& directory_name) {
  if (directory_name.rfind(kZonePrefix, 0) != 0) {
    return std::nullopt;
  }
  const auto index = telemetry_detail::parse_u64(directory_name.substr(kZonePrefix.size()));
  if (!index || *index > 0xffff) {
    return std::nullopt;
  }
  return static_cast<unsigned>(*index);
}

std::string rapl_reason(const std::string& text) { return "RAPL: " + text; }

// The reason for a failed read, with the kernel's rule for energy_uj spelled out because it is
// the usual cause on a real machine.
std::string read_reason(const FileText& read, const fs::path& path) {
  std::string reason = rapl_reason(read.failure);
  if ((read.error_number == EACCES || read.error_number == EPERM) &&
      path.filename() == "energy_uj") {
    reason += " (energy_uj is readable by root only since Linux 5.10)";
  }
  return reason;
}

// Reads a whole unsigned counter file; nullopt with `failure` set on any problem.
std::optional<std::uint64_t> read_counter_value(const FileText& read, const fs::path& path,
                                                std::string& failure) {
  if (!read.text) {
    failure = read_reason(read, path);
    return std::nullopt;
  }
  const auto value = telemetry_detail::parse_u64(*read.text);
  if (!value) {
    failure = rapl_reason(path.string() + " holds " + telemetry_detail::quote_content(*read.text) +
                          ", not an unsigned integer");
  }
  return value;
}

class RaplMeter final : public CounterMeter {
 public:
  RaplMeter(std::vector<RaplPackage> packages, std::vector<CounterSpec> counters)
      : CounterMeter(std::move(counters)), packages_(std::move(packages)) {}

  std::string name() const override { return "rapl"; }

  std::string sensor() const override {
    std::string text = "powercap";
    for (const RaplPackage& package : packages_) {
      text += " " + package.zone.string() + " (" + package.zone_name + ")";
    }
    return text;
  }

 protected:
  std::optional<std::uint64_t> read_counter(std::size_t index, std::string& failure) override {
    const fs::path path = packages_[index].zone / "energy_uj";
    return read_counter_value(telemetry_detail::reread_text(packages_[index].energy_uj, path), path,
                              failure);
  }

 private:
  std::vector<RaplPackage> packages_;
};

// Opens one package zone: reads its range and checks that energy_uj can be read and parsed.
std::optional<RaplPackage> open_package(const fs::path& zone, unsigned index, std::string zone_name,
                                        std::string& failure) {
  const fs::path range_path = zone / "max_energy_range_uj";
  const auto max_range_uj =
      read_counter_value(telemetry_detail::read_file_text(range_path), range_path, failure);
  if (!max_range_uj) {
    return std::nullopt;
  }
  if (*max_range_uj == 0) {
    failure = rapl_reason(range_path.string() + " is 0, so the counter cannot count");
    return std::nullopt;
  }
  const fs::path energy_path = zone / "energy_uj";
  FileDescriptor energy_fd = telemetry_detail::open_read_only(energy_path);
  if (!energy_fd.valid()) {
    const int error_number = errno;
    failure =
        read_reason(FileText{std::nullopt, error_number,
                             telemetry_detail::describe_read_failure(energy_path, error_number)},
                    energy_path);
    return std::nullopt;
  }
  const auto energy_uj = read_counter_value(telemetry_detail::reread_text(energy_fd, energy_path),
                                            energy_path, failure);
  if (!energy_uj) {
    return std::nullopt;
  }
  if (*energy_uj > *max_range_uj) {
    failure = rapl_reason(energy_path.string() + " reads " + std::to_string(*energy_uj) +
                          ", above max_energy_range_uj " + std::to_string(*max_range_uj));
    return std::nullopt;
  }
  return RaplPackage{zone, std::move(zone_name), index, *max_range_uj, std::move(energy_fd)};
}

}  // namespace

std::unique_ptr<EnergyMeter> open_rapl_meter(const std::filesystem::path& root) {
  const fs::path powercap = telemetry_detail::under_root(root, "sys/class/powercap");
  std::error_code error;
  const fs::file_status status = fs::status(powercap, error);
  if (status.type() == fs::file_type::not_found) {
    return std::make_unique<NoSensorMeter>(
        rapl_reason("no " + powercap.string() + " (RAPL not exposed: virtual machine?)"));
  }
  if (error) {
    return std::make_unique<NoSensorMeter>(
        rapl_reason(powercap.string() + " unreadable (" + error.message() + ")"));
  }

  std::vector<RaplPackage> packages;
  fs::directory_iterator entries(powercap, error);
  if (error) {
    const std::string reason = error == std::errc::permission_denied
                                   ? "permission denied listing " + powercap.string()
                                   : powercap.string() + " unreadable (" + error.message() + ")";
    return std::make_unique<NoSensorMeter>(rapl_reason(reason));
  }
  for (const fs::directory_entry& entry : entries) {
    const std::optional<unsigned> index = package_zone_index(entry.path().filename().string());
    if (!index) {
      continue;
    }
    const fs::path name_path = entry.path() / "name";
    const FileText name = telemetry_detail::read_file_text(name_path);
    if (!name.text) {
      return std::make_unique<NoSensorMeter>(rapl_reason(name.failure));
    }
    const std::string zone_name(telemetry_detail::trim(*name.text));
    // psys (platform) is also a top-level zone on some laptops; it covers more than the CPU.
    if (zone_name.rfind("package", 0) != 0) {
      continue;
    }
    std::string failure;
    std::optional<RaplPackage> package = open_package(entry.path(), *index, zone_name, failure);
    if (!package) {
      return std::make_unique<NoSensorMeter>(failure);
    }
    packages.push_back(std::move(*package));
  }
  if (packages.empty()) {
    return std::make_unique<NoSensorMeter>(
        rapl_reason("no package zone under " + powercap.string() +
                    " (no intel-rapl:N whose name is package-*)"));
  }

  std::sort(packages.begin(), packages.end(),
            [](const RaplPackage& a, const RaplPackage& b) { return a.index < b.index; });
  std::vector<CounterSpec> counters;
  for (const RaplPackage& package : packages) {
    counters.push_back(CounterSpec{(package.zone / "energy_uj").string(),
                                   package.max_energy_range_uj, kJoulesPerMicrojoule});
  }
  return std::make_unique<RaplMeter>(std::move(packages), std::move(counters));
}

}  // namespace carb
