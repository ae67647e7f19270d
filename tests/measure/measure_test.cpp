// The protocol on the real CPU engine, in process and in worker processes (real fork/exec,
// real signals; faults are injected through the worker's CARB_WORKER_FAULT hook).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "carb/measure.hpp"
#include "quick_protocol.hpp"

namespace carb {
namespace {

const Device& cpu_device() {
  static const auto backends = make_backends();
  return *backends.front()->devices().front();
}

using testing::kTinyKey;
using testing::quick_protocol;

// The time limit wins over the minimum sample count: a run starved of CPU (ctest -j on a
// loaded machine) may stop early, but then it must say it did not converge.
void expect_enough_samples_or_flagged(const Measurement& measurement, const Protocol& protocol) {
  ASSERT_TRUE(measurement.wall_latency.has_value());
  if (measurement.wall_latency->count < protocol.min_samples) {
    EXPECT_GE(measurement.timed_s, protocol.max_time_s);
    EXPECT_FALSE(measurement.wall_latency->converged);
    EXPECT_NE(measurement.detail.find("not converged"), std::string::npos) << measurement.detail;
  }
  EXPECT_GE(measurement.wall_latency->count, 1);
}

TEST(Measure, InProcessOnTheCpuEngine) {
  NoSensorMeter meter("no sensor in this test");
  const Protocol protocol = quick_protocol();
  const Measurement measurement =
      measure_configuration(cpu_device(), parse_key(kTinyKey), protocol, meter);
  ASSERT_EQ(measurement.status, MeasurementStatus::kOk) << measurement.detail;
  ASSERT_TRUE(measurement.wall_latency.has_value());
  expect_enough_samples_or_flagged(measurement, protocol);
  EXPECT_EQ(measurement.wall_samples_ms.size(),
            static_cast<std::size_t>(measurement.wall_latency->count));
  EXPECT_GT(measurement.wall_latency->median_ms, 0);
  EXPECT_GE(measurement.timed_s, protocol.min_time_s);
  EXPECT_LE(measurement.timed_s, protocol.max_time_s + 1.0);
  EXPECT_GE(measurement.warmup_runs, protocol.warmup_min_runs);
  // No sensor: energy is absent with the meter's reason, never 0.
  EXPECT_FALSE(measurement.energy_j.has_value());
  EXPECT_EQ(measurement.energy_null_reason, "no sensor in this test");
  EXPECT_EQ(measurement.energy_method, "none");
  ASSERT_TRUE(measurement.engine_memory.has_value());
  EXPECT_GT(measurement.engine_memory->weight_bytes, 0);
  ASSERT_TRUE(measurement.process_peak_rss_bytes && measurement.baseline_rss_bytes);
  EXPECT_GE(*measurement.process_peak_rss_bytes, *measurement.baseline_rss_bytes);
  EXPECT_FALSE(measurement.provenance.at("kernels").empty());
  EXPECT_TRUE(measurement.provenance.at("contention").contains("window_s"));
  // A CPU's device clock is the host's: only the wall-clock figures, and no GPU state.
  EXPECT_FALSE(measurement.device_latency.has_value());
  EXPECT_TRUE(measurement.device_samples_ms.empty());
  EXPECT_FALSE(measurement.provenance.contains("gpu"));
  EXPECT_FALSE(measurement.provenance.contains("engine"));
}

TEST(Measure, OtherProcessesBusyWhileTimingAreReported) {
  // Two child processes spin on the machine's CPUs while a configuration is timed.
  std::vector<pid_t> spinners;
  const long cpus = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  for (long i = 0; i < cpus; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      volatile std::uint64_t x = 0;
      while (true) x = x + 1;
    }
    spinners.push_back(pid);
  }
  NoSensorMeter meter("none");
  Protocol protocol = quick_protocol();
  protocol.min_time_s = 0.3;
  const Measurement measurement =
      measure_configuration(cpu_device(), parse_key(kTinyKey), protocol, meter);
  for (pid_t pid : spinners) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  ASSERT_EQ(measurement.status, MeasurementStatus::kOk) << measurement.detail;
  const auto& contention = measurement.provenance.at("contention");
  ASSERT_TRUE(contention.contains("other_cpu_share")) << contention.dump();
  EXPECT_GE(contention.at("other_cpu_share").get<double>(), kContendedShare) << contention.dump();
  EXPECT_NE(measurement.detail.find("contended: other processes used "), std::string::npos)
      << measurement.detail;
}

TEST(Measure, UnsupportedIsAStatusNotAnException) {
  NoSensorMeter meter("none");
  const Config fp16 = parse_key("basic10_w0.25_nods_r32_b1_fp16");
  const Measurement measurement =
      measure_configuration(cpu_device(), fp16, quick_protocol(), meter);
  EXPECT_EQ(measurement.status, MeasurementStatus::kUnsupported);
  EXPECT_FALSE(measurement.detail.empty());
}

TEST(Measure, ResultSurvivesJson) {
  NoSensorMeter meter("none");
  const Measurement measurement =
      measure_configuration(cpu_device(), parse_key(kTinyKey), quick_protocol(), meter);
  const Measurement back = Measurement::from_json(measurement.to_json());
  EXPECT_EQ(back.to_json(), measurement.to_json());
}

class Worker : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("CARB_WORKER_FAULT"); }

  static Measurement run_worker(const Protocol& protocol) {
    return measure_in_worker({CARB_BINARY, {"__worker"}}, cpu_device().info().id,
                             parse_key(kTinyKey), protocol);
  }
};

TEST_F(Worker, MeasuresInAFreshProcess) {
  const Protocol protocol = quick_protocol();
  const Measurement measurement = run_worker(protocol);
  ASSERT_EQ(measurement.status, MeasurementStatus::kOk) << measurement.detail;
  expect_enough_samples_or_flagged(measurement, protocol);
  EXPECT_GT(*measurement.process_peak_rss_bytes, 0);
}

TEST_F(Worker, SegfaultBecomesCrashed) {
  ::setenv("CARB_WORKER_FAULT", "segv", 1);
  const Measurement measurement = run_worker(quick_protocol());
  EXPECT_EQ(measurement.status, MeasurementStatus::kCrashed);
  EXPECT_NE(measurement.detail.find("SIGSEGV"), std::string::npos) << measurement.detail;
}

TEST_F(Worker, AbortBecomesCrashed) {
  ::setenv("CARB_WORKER_FAULT", "abort", 1);
  const Measurement measurement = run_worker(quick_protocol());
  EXPECT_EQ(measurement.status, MeasurementStatus::kCrashed);
  EXPECT_NE(measurement.detail.find("SIGABRT"), std::string::npos) << measurement.detail;
}

TEST_F(Worker, AllocationFailureBecomesOom) {
  ::setenv("CARB_WORKER_FAULT", "alloc", 1);
  const Measurement measurement = run_worker(quick_protocol());
  EXPECT_EQ(measurement.status, MeasurementStatus::kOom) << measurement.detail;
}

TEST_F(Worker, HangBecomesTimeout) {
  ::setenv("CARB_WORKER_FAULT", "hang", 1);
  Protocol protocol = quick_protocol();
  protocol.timeout_s = 1.5;
  const Measurement measurement = run_worker(protocol);
  EXPECT_EQ(measurement.status, MeasurementStatus::kTimeout);
  EXPECT_NE(measurement.detail.find("no result after 1.5"), std::string::npos)
      << measurement.detail;
}

TEST_F(Worker, UnknownDeviceIsAnError) {
  const Measurement measurement = measure_in_worker({CARB_BINARY, {"__worker"}}, "tpu:7",
                                                    parse_key(kTinyKey), quick_protocol());
  EXPECT_EQ(measurement.status, MeasurementStatus::kError);
  EXPECT_NE(measurement.detail.find("no device 'tpu:7'"), std::string::npos) << measurement.detail;
}

}  // namespace
}  // namespace carb
