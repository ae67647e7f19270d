// Host information parsed from recorded /proc/cpuinfo files (tests/telemetry/data/README.md
// says where each comes from) under a temporary root, and read live from this machine.
#include <gtest/gtest.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "carb/error.hpp"
#include "carb/telemetry.hpp"
#include "fake_root.hpp"

namespace carb {
namespace {

using test::FakeRoot;

std::string data_file(const std::string& name) {
  std::ifstream in(std::string(CARB_SOURCE_DIR) + "/tests/telemetry/data/" + name);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(text.str().empty()) << name;
  return text.str();
}

// A root with the procfs files read_host_info needs.
void write_proc(const FakeRoot& root, const std::string& cpuinfo, const std::string& hostname,
                const std::string& memtotal_line = "MemTotal:       24684096 kB") {
  root.write("proc/cpuinfo", cpuinfo);
  root.write("proc/sys/kernel/hostname", hostname + "\n");
  root.write("proc/sys/kernel/osrelease", "6.18.44-fc-v595\n");
  root.write("proc/meminfo", memtotal_line + "\nMemFree:        24225500 kB\n");
}

void write_governor(const FakeRoot& root, int cpu, const std::string& governor) {
  root.write("sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpufreq/scaling_governor",
             governor + "\n");
}

TEST(HostInfo, RecordedAmdEpycVmWithoutCpufreq) {
  FakeRoot root;
  write_proc(root, data_file("cpuinfo_amd_epyc_vm.txt"), "vm");
  const HostInfo host = read_host_info(root.path());
  EXPECT_EQ(host.hostname, "vm");
  EXPECT_EQ(host.kernel_release, "6.18.44-fc-v595");
  EXPECT_EQ(host.cpu_model, "AMD EPYC");
  EXPECT_EQ(host.cpu_vendor, "AuthenticAMD");
  EXPECT_EQ(host.logical_cpus, 2);
  EXPECT_EQ(host.physical_cores, 2);
  EXPECT_EQ(host.sockets, 1);
  EXPECT_EQ(host.isa_flags, (std::vector<std::string>{"sse4_2", "avx", "avx2", "fma"}));
  ASSERT_EQ(host.scaling_governors.size(), 2u);
  EXPECT_EQ(host.scaling_governors.at(1),
            "unavailable: no cpufreq (" + root.at("sys/devices/system/cpu/cpu1/cpufreq").string() +
                " missing)");
  EXPECT_EQ(host.memory_total_bytes, 24684096ull * 1024);
  EXPECT_EQ(governor_summary(host), "unavailable");
  EXPECT_EQ(device_fingerprint(host),
            "cpu=AMD EPYC;logical_cpus=2;isa=sse4_2,avx,avx2,fma;governor=unavailable");
}

TEST(HostInfo, RecordedIntelXeon8480WithAmxAndGovernors) {
  FakeRoot root;
  write_proc(root, data_file("cpuinfo_intel_xeon_8480.txt"), "spr-node-07");
  for (const int cpu : {0, 1, 56, 112}) {
    write_governor(root, cpu, "performance");
  }
  HostInfo host = read_host_info(root.path());
  EXPECT_EQ(host.cpu_model, "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(host.cpu_vendor, "GenuineIntel");
  EXPECT_EQ(host.logical_cpus, 4);
  EXPECT_EQ(host.physical_cores, 3);  // CPU 112 is CPU 0's SMT sibling
  EXPECT_EQ(host.sockets, 2);
  EXPECT_EQ(host.isa_flags,
            (std::vector<std::string>{"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16",
                                      "avx512_vnni", "amx_bf16", "amx_tile", "avx512_fp16"}));
  EXPECT_EQ(
      host.scaling_governors,
      (std::map<int, std::string>{
          {0, "performance"}, {1, "performance"}, {56, "performance"}, {112, "performance"}}));
  EXPECT_EQ(device_fingerprint(host),
            "cpu=Intel(R) Xeon(R) Platinum 8480+;logical_cpus=4;isa=sse4_2,avx,avx2,fma,avx512f,"
            "avx512_bf16,avx512_vnni,amx_bf16,amx_tile,avx512_fp16;governor=performance");

  write_governor(root, 56, "powersave");
  host = read_host_info(root.path());
  EXPECT_EQ(governor_summary(host), "mixed(performance x3, powersave x1)");
}

TEST(HostInfo, FingerprintIgnoresHostnameButNotGovernorOrFlags) {
  FakeRoot first;
  FakeRoot second;
  write_proc(first, data_file("cpuinfo_intel_xeon_8480.txt"), "node-a");
  write_proc(second, data_file("cpuinfo_intel_xeon_8480.txt"), "node-b");
  const HostInfo a = read_host_info(first.path());
  HostInfo b = read_host_info(second.path());
  EXPECT_NE(a.hostname, b.hostname);
  EXPECT_EQ(device_fingerprint(a), device_fingerprint(b));

  write_governor(second, 0, "performance");
  b = read_host_info(second.path());
  EXPECT_NE(device_fingerprint(a), device_fingerprint(b));

  b = a;
  b.isa_flags.pop_back();
  EXPECT_NE(device_fingerprint(a), device_fingerprint(b));
  b = a;
  b.logical_cpus = 8;
  EXPECT_NE(device_fingerprint(a), device_fingerprint(b));
}

TEST(HostInfo, SyntheticCpuinfoFlagsMustBeOnEveryCpuAndVmxFlagsAreNotFlags) {
  // Synthetic: CPU 1 lacks avx512f, and a "vmx flags" line names words that are not ISA flags.
  FakeRoot root;
  write_proc(root,
             "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Test   CPU  \n"
             "physical id\t: 0\ncore id\t\t: 0\nflags\t\t: avx avx2 avx512f\n"
             "vmx flags\t: amx_tile avx512_fp16\n\n"
             "processor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Test   CPU  \n"
             "physical id\t: 0\ncore id\t\t: 1\nflags\t\t: avx avx2\n\n",
             "h");
  const HostInfo host = read_host_info(root.path());
  EXPECT_EQ(host.cpu_model, "Test CPU");
  EXPECT_EQ(host.isa_flags, (std::vector<std::string>{"avx", "avx2"}));
}

TEST(HostInfo, SyntheticCpuinfoWithoutTopologyLeavesCoresUnknown) {
  // Synthetic, in the layout of an arm64 /proc/cpuinfo: no model name, no physical/core ids.
  FakeRoot root;
  write_proc(
      root,
      "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm\nCPU part\t: 0xd0c\n\n"
      "processor\t: 1\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm\nCPU part\t: 0xd0c\n\n",
      "arm");
  const HostInfo host = read_host_info(root.path());
  EXPECT_EQ(host.logical_cpus, 2);
  EXPECT_EQ(host.physical_cores, std::nullopt);
  EXPECT_EQ(host.sockets, std::nullopt);
  EXPECT_TRUE(host.isa_flags.empty());
  EXPECT_EQ(host.cpu_model, "");
  const nlohmann::json json = host_info_json(host);
  EXPECT_TRUE(json.at("physical_cores").is_null());
  EXPECT_TRUE(json.at("sockets").is_null());
}

TEST(HostInfo, UnreadableGovernorIsRecordedWithItsReason) {
  FakeRoot root;
  write_proc(root, data_file("cpuinfo_amd_epyc_vm.txt"), "vm");
  write_governor(root, 0, "schedutil");
  root.make_directory("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor");
  const HostInfo host = read_host_info(root.path());
  EXPECT_EQ(host.scaling_governors.at(0), "schedutil");
  EXPECT_EQ(
      host.scaling_governors.at(1),
      "unavailable: " + root.at("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor").string() +
          " unreadable (Is a directory)");
  EXPECT_EQ(governor_summary(host), "mixed(schedutil x1, unavailable x1)");
}

TEST(HostInfo, JsonDumpCarriesEveryField) {
  FakeRoot root;
  write_proc(root, data_file("cpuinfo_amd_epyc_vm.txt"), "vm");
  const HostInfo host = read_host_info(root.path());
  const nlohmann::json json = host_info_json(host);
  EXPECT_EQ(json.at("hostname"), "vm");
  EXPECT_EQ(json.at("kernel_release"), "6.18.44-fc-v595");
  EXPECT_EQ(json.at("cpu_model"), "AMD EPYC");
  EXPECT_EQ(json.at("cpu_vendor"), "AuthenticAMD");
  EXPECT_EQ(json.at("logical_cpus"), 2);
  EXPECT_EQ(json.at("physical_cores"), 2);
  EXPECT_EQ(json.at("sockets"), 1);
  EXPECT_EQ(json.at("isa_flags"), nlohmann::json({"sse4_2", "avx", "avx2", "fma"}));
  EXPECT_EQ(json.at("scaling_governors").size(), 2u);
  EXPECT_EQ(json.at("scaling_governors").at("0"), host.scaling_governors.at(0));
  EXPECT_EQ(json.at("governor"), "unavailable");
  EXPECT_EQ(json.at("memory_total_bytes"), 24684096ull * 1024);
  EXPECT_EQ(json.at("fingerprint"), device_fingerprint(host));
  // Identity that is not in the fingerprint: nothing of it can be read under this root but
  // cpuinfo's revision and cache size.
  EXPECT_EQ(json.at("machine_id"), "");
  EXPECT_EQ(json.at("boot_id"), "");
  EXPECT_EQ(json.at("instance"), "");
  EXPECT_EQ(json.at("hypervisor"), "yes");
  EXPECT_EQ(json.at("cpu_family"), "25");
  EXPECT_EQ(json.at("cpu_model_number"), "1");
  EXPECT_EQ(json.at("cpu_stepping"), "1");
  EXPECT_EQ(json.at("microcode"), "0x1000065");
  EXPECT_EQ(json.at("caches"), nlohmann::json({{"cpuinfo", "512 KB"}}));
  EXPECT_EQ(json.size(), 21u);
}

TEST(HostInfo, IdentityTellsMachinesAndBootsApartButNotTheFingerprint) {
  FakeRoot root;
  write_proc(root, data_file("cpuinfo_amd_epyc_vm.txt"), "vm");
  root.write("etc/machine-id", "3d1219c7a0b14c6f8e2d9a51c0ffee00\n");
  root.write("proc/sys/kernel/random/boot_id", "e8c3e171-5b2f-4c1e-9d0a-123456789abc\n");
  root.write("sys/hypervisor/type", "xen\n");
  root.write("sys/class/dmi/id/sys_vendor", "QEMU\n");
  root.write("sys/devices/system/cpu/cpu0/cache/index0/level", "1\n");
  root.write("sys/devices/system/cpu/cpu0/cache/index0/type", "Data\n");
  root.write("sys/devices/system/cpu/cpu0/cache/index0/size", "32K\n");
  root.write("sys/devices/system/cpu/cpu0/cache/index2/level", "2\n");
  root.write("sys/devices/system/cpu/cpu0/cache/index2/type", "Unified\n");
  root.write("sys/devices/system/cpu/cpu0/cache/index2/size", "512K\n");
  const HostInfo first = read_host_info(root.path());
  EXPECT_EQ(first.machine_id, "3d1219c7a0b14c6f8e2d9a51c0ffee00");
  EXPECT_EQ(host_instance(first), "3d1219c7:e8c3e171");
  EXPECT_EQ(first.hypervisor, "yes (xen; QEMU)");
  EXPECT_EQ(first.caches.at("L1d"), "32K");
  EXPECT_EQ(first.caches.at("L2"), "512K");

  // After a reboot (a VM may come back on another physical host) the instance changes; the
  // fingerprint, which decides what is one device, does not.
  root.write("proc/sys/kernel/random/boot_id", "0badf00d-5b2f-4c1e-9d0a-123456789abc\n");
  const HostInfo rebooted = read_host_info(root.path());
  EXPECT_EQ(host_instance(rebooted), "3d1219c7:0badf00d");
  EXPECT_EQ(device_fingerprint(rebooted), device_fingerprint(first));
}

TEST(HostSpeed, MeasuresPlausibleBandwidthAndMultiplyAddRates) {
  const HostSpeed speed = measure_host_speed(0.1);
  // Any machine carb runs on streams between 0.1 and 1000 GB/s on one thread and multiplies
  // and adds between 0.05 and 1000 GFLOP/s; zero or NaN means the probe measured nothing.
  EXPECT_GT(speed.triad_gb_per_s, 0.1);
  EXPECT_LT(speed.triad_gb_per_s, 1000);
  EXPECT_GT(speed.fma_gflop_per_s, 0.05);
  EXPECT_LT(speed.fma_gflop_per_s, 1000);
  EXPECT_GT(speed.seconds, 0);
  const nlohmann::json json = host_speed_json(speed);
  EXPECT_DOUBLE_EQ(json.at("triad_gb_per_s").get<double>(), speed.triad_gb_per_s);
}

void expect_runtime_error(const FakeRoot& root, const std::string& message) {
  try {
    read_host_info(root.path());
    ADD_FAILURE() << "expected carb::Error: " << message;
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kRuntime);
    EXPECT_EQ(std::string(error.what()), "host information: " + message);
  }
}

TEST(HostInfo, MissingOrGarbageProcFilesAreRuntimeErrors) {
  FakeRoot root;
  expect_runtime_error(root, root.at("proc/sys/kernel/hostname").string() + " missing");

  write_proc(root, "no processors here\n", "h");
  expect_runtime_error(root, root.at("proc/cpuinfo").string() + " lists no processor");

  write_proc(root, "processor\t: zero\n", "h");
  expect_runtime_error(
      root, root.at("proc/cpuinfo").string() + ": 'processor' is 'zero', not a CPU number");

  write_proc(root, "processor\t: 0\nphysical id\t: ?\n", "h");
  expect_runtime_error(root,
                       root.at("proc/cpuinfo").string() + ": 'physical id' is '?', not a number");

  write_proc(root, data_file("cpuinfo_amd_epyc_vm.txt"), "h", "MemTotal:       lots");
  expect_runtime_error(
      root, root.at("proc/meminfo").string() + ": MemTotal is 'lots', not '<number> kB'");

  root.write("proc/meminfo", "MemFree:        1 kB\n");
  expect_runtime_error(root, root.at("proc/meminfo").string() + " has no MemTotal line");
}

TEST(HostInfo, LiveMachineMatchesUnameAndSysconf) {
  const HostInfo host = read_host_info();
  utsname names{};
  ASSERT_EQ(::uname(&names), 0);
  EXPECT_EQ(host.hostname, names.nodename);
  EXPECT_EQ(host.kernel_release, names.release);
  EXPECT_EQ(host.logical_cpus, ::sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_EQ(host.scaling_governors.size(), static_cast<std::size_t>(host.logical_cpus));
  const auto physical_pages = static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES));
  const auto page_bytes = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(host.memory_total_bytes, physical_pages * page_bytes);
  EXPECT_FALSE(host.cpu_model.empty());
}

}  // namespace
}  // namespace carb
