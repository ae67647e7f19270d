// Package energy through perf's power PMU (the kernel's RAPL driver): power/energy-pkg/.
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <sstream>
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

constexpr std::string_view kEventName = "energy-pkg";

std::string perf_reason(const std::string& text) { return "perf: " + text; }

// The trimmed text of a PMU attribute file; nullopt with `failure` set when it cannot be read.
std::optional<std::string> read_attribute(const fs::path& path, std::string& failure) {
  const FileText read = telemetry_detail::read_file_text(path);
  if (!read.text) {
    failure = perf_reason(read.failure);
    return std::nullopt;
  }
  return std::string(telemetry_detail::trim(*read.text));
}

std::string malformed(const fs::path& path, std::string_view content, std::string_view expected) {
  return perf_reason(path.string() + " holds " + telemetry_detail::quote_content(content) +
                     ", not " + std::string(expected));
}

// A term value of an event string: hexadecimal with 0x, else decimal.
std::optional<std::uint64_t> parse_term_value(std::string_view text) {
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    std::uint64_t value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data() + 2, end, value, 16);
    if (ec != std::errc() || ptr != end) {
      return std::nullopt;
    }
    return value;
  }
  return telemetry_detail::parse_u64(text);
}

// Places `value` into `config` at the bits a PMU format file names ("config:0-7", or several
// ranges "config:0-7,32-35" filled low bits first), as the perf tool does.
bool place_term(const fs::path& format_path, std::string_view format, std::uint64_t value,
                std::uint64_t& config, std::string& failure) {
  constexpr std::string_view kField = "config:";
  if (format.rfind(kField, 0) != 0) {
    failure = malformed(format_path, format, "a config:<bits> field (config1/config2 unsupported)");
    return false;
  }
  const auto bits = telemetry_detail::parse_cpu_list(format.substr(kField.size()));
  if (!bits || bits->back() > 63) {
    failure = malformed(format_path, format, "config bit ranges within 0-63");
    return false;
  }
  std::size_t value_bit = 0;
  for (const int bit : *bits) {
    if ((value >> value_bit) & 1u) {
      config |= std::uint64_t{1} << bit;
    }
    ++value_bit;
  }
  if (value_bit < 64 && (value >> value_bit) != 0) {
    failure = perf_reason("value " + std::to_string(value) + " does not fit the " +
                          std::to_string(value_bit) + " bits of " + format_path.string());
    return false;
  }
  return true;
}

// Encodes an event string such as "event=0x02" into perf_event_attr.config using the PMU's format
// directory; nullopt with `failure` set when it cannot.
std::optional<std::uint64_t> encode_event(const fs::path& pmu, const fs::path& event_path,
                                          std::string_view event, std::string& failure) {
  std::uint64_t config = 0;
  std::string_view rest = event;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view term = telemetry_detail::trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t equals = term.find('=');
    const std::string_view term_name = telemetry_detail::trim(term.substr(0, equals));
    // A bare term ("edge") is a flag with value 1.
    const auto value = equals == std::string_view::npos
                           ? std::optional<std::uint64_t>{1}
                           : parse_term_value(telemetry_detail::trim(term.substr(equals + 1)));
    if (term_name.empty() || !value) {
      failure = malformed(event_path, event, "an event string such as event=0x02");
      return std::nullopt;
    }
    const fs::path format_path = pmu / "format" / std::string(term_name);
    const auto format = read_attribute(format_path, failure);
    if (!format || !place_term(format_path, *format, *value, config, failure)) {
      return std::nullopt;
    }
  }
  return config;
}

// Why perf_event_open failed, with the paranoia setting when permission was the problem.
std::string open_failure(const fs::path& root, int cpu, int error_number) {
  const std::string event = "power/" + std::string(kEventName) + "/ on cpu " + std::to_string(cpu);
  if (error_number == EACCES || error_number == EPERM) {
    const fs::path paranoid_path =
        telemetry_detail::under_root(root, "proc/sys/kernel/perf_event_paranoid");
    const FileText paranoid = telemetry_detail::read_file_text(paranoid_path);
    const std::string setting =
        paranoid.text
            ? "perf_event_paranoid is " + std::string(telemetry_detail::trim(*paranoid.text))
            : paranoid.failure;
    return perf_reason("permission denied opening " + event + " (" + setting +
                       "; system-wide events need CAP_PERFMON or perf_event_paranoid <= 0)");
  }
  return perf_reason("perf_event_open(" + event + ") failed: " + std::strerror(error_number));
}

// Reads a perf counting event's 64-bit value; nullopt with `failure` set on error.
std::optional<std::uint64_t> read_count(const FileDescriptor& fd, const std::string& label,
                                        std::string& failure) {
  std::uint64_t count = 0;
  ssize_t bytes = 0;
  do {
    bytes = ::read(fd.get(), &count, sizeof count);
  } while (bytes < 0 && errno == EINTR);
  if (bytes != static_cast<ssize_t>(sizeof count)) {
    failure = perf_reason("reading " + label +
                          " failed: " + (bytes < 0 ? std::strerror(errno) : "short read"));
    return std::nullopt;
  }
  return count;
}

class PerfEnergyMeter final : public CounterMeter {
 public:
  PerfEnergyMeter(std::string sensor, std::vector<FileDescriptor> events,
                  std::vector<CounterSpec> counters)
      : CounterMeter(std::move(counters)), sensor_(std::move(sensor)), events_(std::move(events)) {}

  std::string name() const override { return "perf"; }
  std::string sensor() const override { return sensor_; }

 protected:
  std::optional<std::uint64_t> read_counter(std::size_t index, std::string& failure) override {
    return read_count(events_[index], counters()[index].label, failure);
  }

 private:
  std::string sensor_;
  std::vector<FileDescriptor> events_;
};

}  // namespace

std::unique_ptr<EnergyMeter> open_perf_energy_meter(const std::filesystem::path& root) {
  const fs::path pmu = telemetry_detail::under_root(root, "sys/bus/event_source/devices/power");
  std::error_code error;
  if (fs::status(pmu, error).type() == fs::file_type::not_found) {
    return std::make_unique<NoSensorMeter>(
        perf_reason("no power PMU (" + pmu.string() + " missing)"));
  }
  const fs::path event_path = pmu / "events" / std::string(kEventName);
  if (fs::status(event_path, error).type() == fs::file_type::not_found) {
    return std::make_unique<NoSensorMeter>(perf_reason("power PMU has no " +
                                                       std::string(kEventName) + " event (" +
                                                       event_path.string() + " missing)"));
  }

  std::string failure;
  const auto type_text = read_attribute(pmu / "type", failure);
  const auto event_text = type_text ? read_attribute(event_path, failure) : std::nullopt;
  const fs::path scale_path = event_path.string() + ".scale";
  const fs::path unit_path = event_path.string() + ".unit";
  const auto scale_text = event_text ? read_attribute(scale_path, failure) : std::nullopt;
  const auto unit = scale_text ? read_attribute(unit_path, failure) : std::nullopt;
  const auto cpumask_text = unit ? read_attribute(pmu / "cpumask", failure) : std::nullopt;
  if (!cpumask_text) {
    return std::make_unique<NoSensorMeter>(failure);
  }

  const auto type = telemetry_detail::parse_u64(*type_text);
  if (!type || *type > 0xffffffffu) {
    return std::make_unique<NoSensorMeter>(
        malformed(pmu / "type", *type_text, "a 32-bit PMU type number"));
  }
  const auto config = encode_event(pmu, event_path, *event_text, failure);
  if (!config) {
    return std::make_unique<NoSensorMeter>(failure);
  }
  const auto joules_per_count = telemetry_detail::parse_double(*scale_text);
  if (!joules_per_count || *joules_per_count <= 0.0) {
    return std::make_unique<NoSensorMeter>(
        malformed(scale_path, *scale_text, "a positive number of joules per count"));
  }
  if (*unit != "Joules") {
    return std::make_unique<NoSensorMeter>(malformed(unit_path, *unit, "Joules"));
  }
  const auto cpus = telemetry_detail::parse_cpu_list(*cpumask_text);
  if (!cpus) {
    return std::make_unique<NoSensorMeter>(
        malformed(pmu / "cpumask", *cpumask_text, "a CPU list such as 0,64"));
  }

  std::vector<FileDescriptor> events;
  std::vector<CounterSpec> counters;
  for (const int cpu : *cpus) {
    perf_event_attr attr;
    std::memset(&attr, 0, sizeof attr);
    attr.type = static_cast<std::uint32_t>(*type);
    attr.size = sizeof attr;
    attr.config = *config;
    // pid -1 with a CPU: count the whole package that CPU stands for, not one process.
    FileDescriptor fd(
        static_cast<int>(::syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC)));
    if (!fd.valid()) {
      return std::make_unique<NoSensorMeter>(open_failure(root, cpu, errno));
    }
    const std::string label =
        "power/" + std::string(kEventName) + "/ on cpu " + std::to_string(cpu);
    if (!read_count(fd, label, failure)) {
      return std::make_unique<NoSensorMeter>(failure);
    }
    events.push_back(std::move(fd));
    // The kernel accumulates the 32-bit hardware counter into a 64-bit count, so only the 64-bit
    // count itself wraps.
    counters.push_back(CounterSpec{label, UINT64_MAX, *joules_per_count});
  }

  std::ostringstream sensor;
  sensor << "perf power/" << kEventName << "/ (type " << *type << ", config 0x" << std::hex
         << *config << std::dec << ", " << *scale_text << " J per count, cpus " << *cpumask_text
         << ")";
  return std::make_unique<PerfEnergyMeter>(sensor.str(), std::move(events), std::move(counters));
}

}  // namespace carb
