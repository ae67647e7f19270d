// Energy meters (Linux RAPL through powercap sysfs, perf power events, NVML's GPU energy counter,
// or an explicit "no sensor" with its reason), GPU state through NVML, host information for
// provenance, and this process's resident memory. Every sysfs/procfs reader takes the root
// directory it reads under ("/" on a live machine) so tests can replay recorded files from a
// temporary directory; NVML is opened with dlopen and never linked.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace carb {

/// Energy over one measurement window, from start() to stop() of an EnergyMeter.
struct EnergyWindow {
  /// Total energy of what the meter reads (every CPU package, or one GPU) over the window,
  /// joules; nullopt when it could not be measured (never 0 and never an estimate in that case).
  std::optional<double> energy_j;
  double duration_s = 0.0;         ///< steady-clock seconds from start() to stop()
  std::string unavailable_reason;  ///< why energy_j is nullopt; empty when it has a value
};

/// The package power assumed when deciding how often a wrapping counter must be polled. RAPL does
/// not expose a package's limit, so this is the highest TDP of current server CPUs (Xeon 6980P,
/// EPYC 9965); brief turbo excursions above it are why callers should poll well inside the bound.
inline constexpr double kAssumedMaxPackagePowerW = 500.0;

/// An energy sensor (CPU packages or a GPU) read around measurement windows. Not thread-safe;
/// one window at a time.
///
/// Usage: start(); then sample() at least every max_poll_interval_s() while the window lasts;
/// then stop(). A counter that wraps more than once between two reads loses whole wraps without
/// any trace, so a window whose reads are further apart than max_poll_interval_s() is reported
/// as unavailable rather than as a possibly short figure.
class EnergyMeter {
 public:
  virtual ~EnergyMeter() = default;

  /// The energy method as stored with a measurement: "rapl", "perf", "nvml" or "none".
  virtual std::string name() const = 0;
  /// What exactly is read (sysfs zones or perf event and CPUs); "none" without a sensor.
  virtual std::string sensor() const = 0;
  /// Whether windows can carry energy at all.
  virtual bool available() const = 0;
  /// Why the meter is unavailable; empty when available() is true.
  virtual std::string unavailable_reason() const = 0;
  /// The longest safe gap between two counter reads, seconds: the time one counter range lasts at
  /// kAssumedMaxPackagePowerW. For powercap RAPL with a typical 262143 J range, about 524 s.
  virtual double max_poll_interval_s() const = 0;

  /// Begins a window (restarting any window in progress) and takes the first counter reading.
  virtual void start() = 0;
  /// Reads the counters and adds the energy since the previous read; keeps long windows exact.
  virtual void sample() = 0;
  /// Takes the last reading and ends the window. Requires a window started with start().
  virtual EnergyWindow stop() = 0;

  /// Whether the last sample() read a value that differs from the reading before it, in any
  /// counter. Hardware updates its counters in steps (NVML's about every 100 ms, RAPL's about
  /// every millisecond), and a window that starts or stops between two updates counts a partial
  /// step at that end; measure aligns its windows to these changes (docs/measurement.md,
  /// "Energy"). False without a sensor.
  virtual bool last_sample_changed() const { return false; }
  /// Makes the last reading the start of the window in progress: what was counted so far is
  /// dropped and the window's duration counts from that reading.
  virtual void restart_from_last_reading() {}
};

/// The explicit "no sensor here" meter: every window has a duration and no energy, with the
/// reason the meter was created with.
class NoSensorMeter final : public EnergyMeter {
 public:
  explicit NoSensorMeter(std::string reason);

  std::string name() const override;
  std::string sensor() const override;
  bool available() const override;
  std::string unavailable_reason() const override;
  double max_poll_interval_s() const override;
  void start() override;
  void sample() override;
  EnergyWindow stop() override;

 private:
  std::string reason_;
  std::optional<std::chrono::steady_clock::time_point> start_time_;  // nullopt outside a window
};

/// Opens RAPL through `root`/sys/class/powercap: every package zone (intel-rapl:N named
/// package-*; AMD exposes its packages under the same name), summed; subzones (core, dram) and
/// psys are left out so nothing is counted twice. Returns a NoSensorMeter with the reason (path
/// and whether it is missing, permission-denied, unreadable or malformed) when it cannot be read.
std::unique_ptr<EnergyMeter> open_rapl_meter(const std::filesystem::path& root = "/");

/// Opens perf's power/energy-pkg/ event (perf_event_open, pid -1) on one CPU of each package,
/// as listed by `root`/sys/bus/event_source/devices/power/cpumask, summed; or a NoSensorMeter
/// with the reason.
std::unique_ptr<EnergyMeter> open_perf_energy_meter(const std::filesystem::path& root = "/");

/// The best CPU energy meter under `root`: RAPL, else perf, else a NoSensorMeter whose reason
/// says why each of the two failed.
std::unique_ptr<EnergyMeter> open_cpu_energy_meter(const std::filesystem::path& root = "/");

// --- NVIDIA GPUs through NVML ------------------------------------------------------------------

/// One of NVML's clocks-event ("throttle") reasons: its bit (nvml.h's nvmlClocksEventReason*) and
/// carb's name for it.
struct ClocksEventReason {
  std::uint64_t bit;
  std::string_view name;
};
inline constexpr ClocksEventReason kClocksEventReasons[] = {
    {0x1, "gpu_idle"},
    {0x2, "applications_clocks_setting"},
    {0x4, "sw_power_cap"},
    {0x8, "hw_slowdown"},
    {0x10, "sync_boost"},
    {0x20, "sw_thermal_slowdown"},
    {0x40, "hw_thermal_slowdown"},
    {0x80, "hw_power_brake_slowdown"},
    {0x100, "display_clock_setting"},
};
/// The reasons that mean the GPU slowed itself down to protect itself (hardware slowdown,
/// thermal, power brake): a window during which one was active is measured again after a
/// cooldown. A software power cap is the normal state of a GPU at full load and is only recorded.
inline constexpr std::uint64_t kRemeasureClocksEventReasons = 0x8 | 0x20 | 0x40 | 0x80;

/// The names of the reasons in `reasons`, joined by '+' in bit order ("none" for 0); unknown bits
/// as one hexadecimal number, e.g. "sw_power_cap+0x1000".
std::string clocks_event_reason_names(std::uint64_t reasons);

/// One reading of a GPU's state through NVML; a field is nullopt when NVML cannot read it there.
struct GpuSample {
  std::optional<int> sm_clock_mhz;
  std::optional<int> memory_clock_mhz;
  std::optional<int> temperature_c;
  /// nvmlDeviceGetPowerUsage: on Ampere and newer a one-second average, so a cross-check of the
  /// energy counter, never integrated into energy.
  std::optional<double> power_w;
  std::optional<double> power_limit_w;  ///< the enforced power limit
  std::optional<std::uint64_t> clocks_event_reasons;
  std::optional<int> gpu_utilization_percent;     ///< over NVML's last sample period
  std::optional<int> memory_utilization_percent;  ///< memory-controller busy share, same period
  std::optional<std::int64_t> memory_used_bytes;  ///< the whole GPU's, every process
};

/// A sample as a JSON object (absent fields are null).
nlohmann::json gpu_sample_json(const GpuSample& sample);

/// The samples of one measurement window: the first and the last, the clocks-event reasons ORed
/// over all of them, and the mean instant power.
class GpuWindow {
 public:
  void add(const GpuSample& sample);
  int samples() const { return samples_; }
  const std::optional<GpuSample>& first() const { return first_; }
  const std::optional<GpuSample>& last() const { return last_; }
  /// The reasons ORed over every sample that had them; nullopt when none had.
  std::optional<std::uint64_t> reasons() const { return reasons_; }
  /// Whether a reason of kRemeasureClocksEventReasons was active at any sample.
  bool throttled() const;
  /// {"samples", "start", "end", "clocks_event_reasons", "clocks_event_reason_names",
  /// "mean_power_w"}.
  nlohmann::json to_json() const;

 private:
  int samples_ = 0;
  std::optional<GpuSample> first_;
  std::optional<GpuSample> last_;
  std::optional<std::uint64_t> reasons_;
  double power_sum_w_ = 0;
  int power_samples_ = 0;
};

/// What a GPU is, read through NVML, for the device fingerprint and provenance.
struct GpuIdentity {
  std::string name;
  std::string uuid;  ///< "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  std::string driver_version;
  std::string nvml_version;
  std::optional<std::int64_t> memory_total_bytes;
  std::optional<double> power_limit_w;  ///< enforced now
  std::optional<double> default_power_limit_w;
};

/// GpuIdentity as a JSON object (absent fields are null).
nlohmann::json gpu_identity_json(const GpuIdentity& identity);

/// One GPU seen through NVML. Never changes any setting of the GPU. Not thread-safe.
class GpuMonitor {
 public:
  virtual ~GpuMonitor() = default;
  /// Whether NVML is loaded and sees this GPU.
  virtual bool available() const = 0;
  /// Why not; empty when available() is true.
  virtual std::string unavailable_reason() const = 0;
  /// Name, UUID, driver, memory and power limits; an identity with only the UUID when unavailable.
  virtual GpuIdentity identity() const = 0;
  /// The state now; every field nullopt when unavailable.
  virtual GpuSample sample() = 0;
  /// This process's memory on the GPU as the driver counts it (its CUDA context included),
  /// bytes; nullopt with `why` when NVML cannot say: no NVML, no permission, or this process's
  /// id not among the GPU's compute processes (a container with its own PID namespace).
  virtual std::optional<std::int64_t> process_memory_bytes(std::string* why) = 0;
};

/// The GPU whose NVML UUID is `uuid`, through libnvidia-ml.so.1 (opened at first use, once per
/// process); an unavailable monitor with the reason when the library cannot be loaded or
/// initialised, or has no such GPU.
std::unique_ptr<GpuMonitor> open_gpu_monitor(const std::string& uuid);

/// The energy meter of that GPU: NVML's total-energy counter (mJ, Volta and newer), read around
/// each window; a NoSensorMeter with the reason when NVML, the GPU or the counter is unavailable.
std::unique_ptr<EnergyMeter> open_nvml_energy_meter(const std::string& uuid);

/// ISA extensions that decide which inference kernels a CPU runs, in /proc/cpuinfo's spelling.
inline constexpr std::string_view kInferenceIsaFlags[] = {
    "sse4_2",      "avx",         "avx2",     "fma",      "avx512f",
    "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile", "avx512_fp16"};

/// The host a measurement ran on, read from procfs and sysfs.
struct HostInfo {
  std::string hostname;        ///< /proc/sys/kernel/hostname (what uname() reports)
  std::string kernel_release;  ///< /proc/sys/kernel/osrelease (uname -r)
  std::string cpu_model;       ///< cpuinfo "model name", whitespace collapsed; empty if absent
  std::string cpu_vendor;      ///< cpuinfo "vendor_id", e.g. "GenuineIntel"; empty if absent
  int logical_cpus = 0;        ///< processor entries in cpuinfo (online logical CPUs)
  /// Distinct (physical id, core id) pairs; nullopt when cpuinfo has no topology fields.
  std::optional<int> physical_cores;
  std::optional<int> sockets;  ///< distinct physical ids; nullopt when cpuinfo has none
  /// The kInferenceIsaFlags every logical CPU has, in kInferenceIsaFlags order.
  std::vector<std::string> isa_flags;
  /// cpufreq scaling governor per logical CPU id, or "unavailable: <reason>".
  std::map<int, std::string> scaling_governors;
  std::uint64_t memory_total_bytes = 0;  ///< /proc/meminfo MemTotal

  // What tells one machine (or VM, or boot of it) from another of the same CPU model; none of it
  // enters the device fingerprint, so identical machines still share models and measurement keys.
  std::string machine_id;  ///< /etc/machine-id; empty when unreadable
  std::string boot_id;     ///< /proc/sys/kernel/random/boot_id; new at every boot
  /// "none" without cpuinfo's hypervisor flag; else "yes", with /sys/hypervisor/type and the DMI
  /// vendor and product where the guest can read them, e.g. "yes (KVM; QEMU Standard PC)".
  std::string hypervisor;
  /// cpuinfo's "cpu family", "model", "stepping" and "microcode" of the first CPU; empty if absent.
  std::string cpu_family, cpu_model_number, cpu_stepping, microcode;
  /// Cache sizes: cpuinfo's "cache size" as "cpuinfo", and sysfs's per level and type
  /// (cpu0/cache/index*) as e.g. "L1d", "L2", "L3", in their own text ("32K").
  std::map<std::string, std::string> caches;
};

/// The machine instance: the first 8 hex digits of the machine id and of the boot id, e.g.
/// "3d1219c7:e8c3e171"; empty when neither can be read. Two VMs of one CPU model, or one machine
/// before and after a reboot (a VM may then run on another physical host), differ here.
std::string host_instance(const HostInfo& host);

/// Reads HostInfo under `root`. Throws carb::Error (runtime) when cpuinfo, meminfo, hostname or
/// osrelease cannot be read or parsed; a missing cpufreq is recorded, not thrown.
HostInfo read_host_info(const std::filesystem::path& root = "/");

/// One governor for the whole host: the common name, "mixed(name xN, ...)" when CPUs differ, or
/// "unavailable" when no CPU has one (the reason is left out so the summary stays stable).
std::string governor_summary(const HostInfo& host);

/// A stable string naming what decides CPU performance: CPU model, logical CPUs, ISA flags and
/// governor summary. It leaves out the hostname, so identical machines share a fingerprint.
std::string device_fingerprint(const HostInfo& host);

/// Every HostInfo field plus "governor" (governor_summary), "fingerprint" and "instance"
/// (host_instance), as a JSON object.
nlohmann::json host_info_json(const HostInfo& host);

/// A short measure of this machine's speed, to tell hosts apart beside their identity: one
/// thread's streaming bandwidth (a STREAM-style triad over 64 MiB) and its scalar multiply-add
/// rate, each the best of several repetitions over about `seconds` / 2.
struct HostSpeed {
  double triad_gb_per_s = 0;   ///< bytes read and written per second / 1e9
  double fma_gflop_per_s = 0;  ///< 2 FLOP per multiply-add
  double seconds = 0;          ///< what measuring took
};
HostSpeed measure_host_speed(double seconds = 0.2);
nlohmann::json host_speed_json(const HostSpeed& speed);

/// This process's peak resident set, bytes: VmHWM of `root`/proc/self/status, the high-water
/// mark since the process started or since reset_peak_rss(). Throws carb::Error (runtime) when
/// status cannot be read or has no VmHWM line.
std::uint64_t peak_rss_bytes(const std::filesystem::path& root = "/");

/// Lowers this process's peak-RSS mark to its current resident set (writes "5" to
/// /proc/self/clear_refs, Linux 4.0 and later), so that peak_rss_bytes() covers what follows.
/// Returns false with the reason in `why` where the kernel refuses.
bool reset_peak_rss(std::string* why);

/// This process's current resident set, bytes: resident pages of `root`/proc/self/statm times the
/// page size. The kernel keeps it in per-CPU batches, so it may differ from peak_rss_bytes() by a
/// few hundred KiB even at the peak. Throws carb::Error (runtime) when statm cannot be read or
/// parsed.
std::uint64_t current_rss_bytes(const std::filesystem::path& root = "/");

/// CPU time of the whole machine and of this process at one moment, to tell how much of the
/// machine other processes (or, in a VM, the host: steal) took while carb was timing.
struct CpuUsage {
  double busy_s = 0;   ///< all CPUs' user, nice, system, irq and softirq time (/proc/stat)
  double steal_s = 0;  ///< all CPUs' steal time: a VM's CPUs running someone else's work
  double own_s = 0;    ///< this process's user + system time, every thread (getrusage)
  int cpus = 0;        ///< CPU lines in /proc/stat
};

/// Reads `root`/proc/stat and this process's CPU time; nullopt (with `why`) when unreadable.
std::optional<CpuUsage> read_cpu_usage(std::string* why = nullptr,
                                       const std::filesystem::path& root = "/");
/// Parses /proc/stat text at `ticks_per_s` (USER_HZ); nullopt when it has no "cpu" lines.
std::optional<CpuUsage> parse_proc_stat(std::string_view text, double ticks_per_s);

/// What other work took of the machine over a window, as shares of all its CPUs (0..1).
struct Contention {
  double other_share = 0;  ///< CPU time of other processes / (window x CPUs)
  double steal_share = 0;  ///< steal time / (window x CPUs)
};
/// Contention between two readings `window_s` apart (other_share never below 0).
Contention contention_between(const CpuUsage& before, const CpuUsage& after, double window_s);

}  // namespace carb
