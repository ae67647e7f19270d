// The protocol on the real CPU engine, in process and in worker processes (real fork/exec,
// real signals; faults are injected through the worker's CARB_WORKER_FAULT hook).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "carb/backend.hpp"
#include "carb/error.hpp"
#include "carb/measure.hpp"
#include "forwarding_session.hpp"
#include "quick_protocol.hpp"

namespace carb {
namespace {

const Device& cpu_device() {
  static const auto backend = make_backend_for("cpu");
  return *backend->devices().front();
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
  // Where prepare's time went: its phases, which add up to no more than prepare itself.
  const nlohmann::json& phases = measurement.provenance.at("engine").at("prepare_s");
  ASSERT_EQ(phases.size(), 7u) << phases.dump();
  double phases_s = 0;
  for (const char* phase :
       {"describe", "allocate", "kernels", "generate", "fold", "reorder", "input"}) {
    ASSERT_TRUE(phases.contains(phase)) << phase;
    EXPECT_GE(phases.at(phase).get<double>(), 0.0) << phase;
    phases_s += phases.at(phase).get<double>();
  }
  EXPECT_GT(phases.at("generate").get<double>(), 0.0);
  EXPECT_GT(phases_s, 0.5 * measurement.prepare_s);
  EXPECT_LE(phases_s, measurement.prepare_s);
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

// A session that cannot split its pass, as Session's default run_kernel says.
class WholePassOnly final : public testing::ForwardingSession {
 public:
  using ForwardingSession::ForwardingSession;
  bool run_kernel(std::size_t /*index*/) override { return false; }
};

// A session whose kernel k takes (k + 1) ms and whose pass takes their sum, so that each timing
// has a floor it cannot be under if it covers its own kernel: sleeping is never shorter than asked.
class SleepingSession final : public testing::ForwardingSession {
 public:
  using ForwardingSession::ForwardingSession;
  static std::chrono::milliseconds kernel_time(std::size_t index) {
    return std::chrono::milliseconds(static_cast<long>(index) + 1);
  }
  void run() override {
    for (std::size_t k = 0; k < kernels().size(); ++k) std::this_thread::sleep_for(kernel_time(k));
  }
  void sync() override {}
  bool run_kernel(std::size_t index) override {
    std::this_thread::sleep_for(kernel_time(index));
    return true;
  }
};

TEST(Measure, TimesEveryKernelOfAPassAndThePassBesideThem) {
  const auto session = cpu_device().prepare(parse_key(kTinyKey), 1);
  const auto breakdown = time_kernels(*session, 1, 5);
  ASSERT_TRUE(breakdown.has_value());
  // 5, or 10 or 15 where a loaded machine stretched the whole passes and they were re-timed.
  EXPECT_EQ(breakdown->passes % 5, 0);
  EXPECT_GE(breakdown->passes, 5);
  EXPECT_LE(breakdown->passes, 5 * (1 + kPassKernelsRetimings));
  const std::vector<KernelInfo> kernels = session->kernels();
  ASSERT_EQ(breakdown->kernels.size(), kernels.size());
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    EXPECT_EQ(breakdown->kernels[k].kernel.name, kernels[k].name);
    EXPECT_GT(breakdown->kernels[k].median_ms, 0);
  }
  EXPECT_GT(breakdown->pass_median_ms, 0);
  // How the real kernels add up to the pass is a figure of bench/kernel_lofo.sh, not a test: a
  // loaded machine (sanitizers, two tests a core) can stretch a pass many times over its kernels.

  EXPECT_THROW(time_kernels(*session, 1, 0), Error);
  WholePassOnly whole(cpu_device().prepare(parse_key(kTinyKey), 1));
  EXPECT_FALSE(time_kernels(whole, 1, 2).has_value());
}

TEST(Measure, EachKernelsTimeIsItsOwnAndThePassIsTimedWhole) {
  SleepingSession sleeping(cpu_device().prepare(parse_key(kTinyKey), 1));
  const auto breakdown = time_kernels(sleeping, 0, 3);
  ASSERT_TRUE(breakdown.has_value());
  ASSERT_GE(breakdown->kernels.size(), 3u);
  double floor_ms = 0;
  for (std::size_t k = 0; k < breakdown->kernels.size(); ++k) {
    const double own_ms = static_cast<double>(SleepingSession::kernel_time(k).count());
    // A kernel timed with its predecessor's (shorter) work, or not at all, falls under its floor.
    EXPECT_GE(breakdown->kernels[k].median_ms, own_ms) << "kernel " << k;
    floor_ms += own_ms;
  }
  EXPECT_GE(breakdown->pass_median_ms, floor_ms);
}

// A session whose kernels take 2 ms each and whose first `slow_passes` whole passes take `extra`
// more than their sum, as when the host disturbs the whole passes and not the kernels'. Its pass
// does nothing but the kernels' sleeps (the kernel list is counted once, not copied each pass),
// and 2 ms keeps a loaded host's oversleeping a small share of each: under the sanitizers in CI,
// with 1 ms kernels and the list copied per kernel, undisturbed passes stayed 1.2x their kernels.
class DisturbedSession final : public testing::ForwardingSession {
 public:
  DisturbedSession(std::unique_ptr<Session> inner, int slow_passes, std::chrono::milliseconds extra)
      : ForwardingSession(std::move(inner)),
        kernel_count_(kernels().size()),
        slow_passes_(slow_passes),
        extra_(extra) {}
  void run() override {
    for (std::size_t k = 0; k < kernel_count_; ++k) std::this_thread::sleep_for(kernel_time(k));
    if (slow_passes_ != 0) {
      std::this_thread::sleep_for(extra_);
      --slow_passes_;
    }
  }
  void sync() override {}
  bool run_kernel(std::size_t index) override {
    std::this_thread::sleep_for(kernel_time(index));
    return true;
  }
  static std::chrono::milliseconds kernel_time(std::size_t /*index*/) {
    return std::chrono::milliseconds(2);
  }

 private:
  std::size_t kernel_count_;
  int slow_passes_;  // -1: every pass
  std::chrono::milliseconds extra_;
};

TEST(Measure, WholePassesFarFromTheirKernelsAreTimedAgainPooled) {
  const auto session_of = [](int slow_passes) {
    auto inner = cpu_device().prepare(parse_key(kTinyKey), 1);
    const auto floor_ms = 2.0 * static_cast<double>(inner->kernels().size());  // a pass's sleeps
    // A disturbed pass is 4x an undisturbed one.
    const auto extra = std::chrono::milliseconds(static_cast<long>(3 * floor_ms));
    return std::pair{std::make_unique<DisturbedSession>(std::move(inner), slow_passes, extra),
                     floor_ms};
  };
  // Three of the first five whole passes disturbed: their median is, so five more are timed,
  // and the median of the ten is an undisturbed pass's.
  const auto [disturbed, floor_ms] = session_of(3);
  const auto once = time_kernels(*disturbed, 0, 5);
  ASSERT_TRUE(once.has_value());
  EXPECT_EQ(once->passes, 10) << "whole passes' median " << once->pass_median_ms
                              << " ms, kernels' sum " << kernels_sum_ms(*once) << " ms";
  EXPECT_GE(once->pass_median_ms, floor_ms);
  // A disturbed pass is 3 floors over the kernels' sum (sleeps overrun in both alike).
  EXPECT_LT(once->pass_median_ms, kernels_sum_ms(*once) + 1.5 * floor_ms);

  // Every whole pass disturbed: timed twice more, then kept as measured, not made to agree.
  const auto [always, always_floor_ms] = session_of(-1);
  const auto kept = time_kernels(*always, 0, 5);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->passes, 5 * (1 + kPassKernelsRetimings));
  EXPECT_GE(kept->pass_median_ms, 4 * always_floor_ms);
}

TEST(Measure, RoundsCombineIntoTheMedianOfEachKernelAndOfThePass) {
  const auto breakdown = [](std::vector<double> kernel_ms, double pass_ms, int passes,
                            std::optional<double> probe_ms) {
    KernelBreakdown out;
    for (std::size_t k = 0; k < kernel_ms.size(); ++k) {
      out.kernels.push_back({KernelInfo{"k" + std::to_string(k), "jit", {}}, kernel_ms[k]});
    }
    out.pass_median_ms = pass_ms;
    out.passes = passes;
    out.probe_ms = probe_ms;
    return out;
  };
  const KernelBreakdown three =
      combine_rounds({breakdown({1, 5}, 10, 5, 0.2), breakdown({3, 4}, 30, 5, std::nullopt),
                      breakdown({2, 10}, 20, 10, 0.4)});
  ASSERT_EQ(three.kernels.size(), 2u);
  EXPECT_EQ(three.kernels[1].kernel.name, "k1");
  EXPECT_DOUBLE_EQ(three.kernels[0].median_ms, 2);
  EXPECT_DOUBLE_EQ(three.kernels[1].median_ms, 5);
  EXPECT_DOUBLE_EQ(three.pass_median_ms, 20);
  EXPECT_EQ(three.passes, 20);
  ASSERT_TRUE(three.probe_ms.has_value());
  EXPECT_DOUBLE_EQ(*three.probe_ms, 0.3);  // the two rounds that had one
  // Two rounds: the mean of each pair; no probe in either: none.
  const KernelBreakdown two =
      combine_rounds({breakdown({1}, 10, 5, std::nullopt), breakdown({2}, 14, 5, std::nullopt)});
  EXPECT_DOUBLE_EQ(two.kernels[0].median_ms, 1.5);
  EXPECT_DOUBLE_EQ(two.pass_median_ms, 12);
  EXPECT_FALSE(two.probe_ms.has_value());
  EXPECT_THROW(combine_rounds({}), Error);
  EXPECT_THROW(combine_rounds({breakdown({1}, 1, 1, {}), breakdown({1, 2}, 1, 1, {})}), Error);
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

// The worker's pid and how many configurations it measured before this one.
std::pair<int, int> worker_of(const Measurement& measurement) {
  const auto& worker = measurement.provenance.at("worker");
  return {worker.at("pid").get<int>(), worker.at("measured_before").get<int>()};
}

TEST_F(Worker, OneProcessMeasuresUpToWorkerReuseConfigurations) {
  Protocol protocol = quick_protocol();
  protocol.worker_reuse = 2;
  WorkerProcess worker({CARB_BINARY, {"__worker"}}, cpu_device().info().id);
  std::vector<std::pair<int, int>> workers;
  for (int i = 0; i < 3; ++i) {
    const Measurement measurement = worker.measure(parse_key(kTinyKey), protocol);
    ASSERT_EQ(measurement.status, MeasurementStatus::kOk) << measurement.detail;
    workers.push_back(worker_of(measurement));
  }
  EXPECT_EQ(workers[0].first, workers[1].first);
  EXPECT_NE(workers[1].first, workers[2].first) << "the third gets a fresh process";
  EXPECT_EQ(workers[0].second, 0);
  EXPECT_EQ(workers[1].second, 1);
  EXPECT_EQ(workers[2].second, 0);
  EXPECT_NE(workers[0].first, ::getpid());
}

TEST_F(Worker, EachConfigurationHasItsOwnPeakRss) {
  // A large network, then a tiny one in the same process: the tiny one's peak is not the large
  // one's, because the worker lowers its peak mark between configurations.
  Protocol protocol = quick_protocol();
  protocol.worker_reuse = 10;
  WorkerProcess worker({CARB_BINARY, {"__worker"}}, cpu_device().info().id);
  const Measurement large = worker.measure(parse_key("basic18_w1_nods_r64_b8_fp32"), protocol);
  const Measurement tiny = worker.measure(parse_key(kTinyKey), protocol);
  ASSERT_EQ(large.status, MeasurementStatus::kOk) << large.detail;
  ASSERT_EQ(tiny.status, MeasurementStatus::kOk) << tiny.detail;
  ASSERT_EQ(worker_of(large).first, worker_of(tiny).first);
  ASSERT_GT(large.engine_memory->peak_bytes, 40'000'000);  // resnet18's weights alone: 46 MB
  EXPECT_GE(*large.process_peak_rss_bytes,
            *large.baseline_rss_bytes + large.engine_memory->weight_bytes);
  // Above its own baseline, not the large one's peak. (Compared with baselines, because memory
  // the large one freed may stay resident: AddressSanitizer's quarantine keeps it.)
  EXPECT_GE(*tiny.process_peak_rss_bytes, *tiny.baseline_rss_bytes);
  EXPECT_LT(*tiny.process_peak_rss_bytes - *tiny.baseline_rss_bytes,
            large.engine_memory->weight_bytes / 2)
      << "large " << *large.process_peak_rss_bytes << ", tiny " << *tiny.process_peak_rss_bytes
      << " over a baseline of " << *tiny.baseline_rss_bytes;
}

TEST_F(Worker, KeptWeightMemoryCountsInNeitherTheBaselineNorThePeakOfTheNext) {
  // A reused worker keeps the large network's weight memory; the next, smaller one writes its
  // weights at its start and leaves the rest untouched. peak - baseline still holds all of the
  // small one's weights and none of the large one's, as in a fresh process.
  Protocol protocol = quick_protocol();
  protocol.worker_reuse = 10;
  WorkerProcess worker({CARB_BINARY, {"__worker"}}, cpu_device().info().id);
  const Measurement large = worker.measure(parse_key("basic18_w1_nods_r64_b8_fp32"), protocol);
  const Measurement next = worker.measure(parse_key("basic18_w0.25_nods_r64_b1_fp32"), protocol);
  ASSERT_EQ(large.status, MeasurementStatus::kOk) << large.detail;
  ASSERT_EQ(next.status, MeasurementStatus::kOk) << next.detail;
  ASSERT_EQ(worker_of(large).first, worker_of(next).first);
  const auto worker_bytes = [](const Measurement& measurement, const char* what) {
    return measurement.provenance.at("worker").at(what).get<std::int64_t>();
  };
  EXPECT_EQ(worker_bytes(large, "kept_bytes"), 0);
  EXPECT_EQ(worker_bytes(large, "kept_unused_bytes"), 0);
  EXPECT_GT(worker_bytes(next, "kept_bytes"),
            large.engine_memory->weight_bytes - (std::int64_t{2} << 20));
  EXPECT_GE(worker_bytes(next, "kept_unused_bytes"),
            worker_bytes(next, "kept_bytes") - next.engine_memory->weight_bytes - (64 << 10));
  const std::int64_t above = *next.process_peak_rss_bytes - *next.baseline_rss_bytes;
  EXPECT_GE(above, next.engine_memory->weight_bytes);
  EXPECT_LT(above, next.engine_memory->peak_bytes + (std::int64_t{16} << 20))
      << "the large network's weights counted in the next one's peak";
}

TEST_F(Worker, AReusedPyTorchWorkerCountsTheNextConfigurationsTensorsInItsPeak) {
  // libtorch allocates its tensors with malloc; what one configuration frees, glibc would keep
  // resident for the next, whose tensors then never raise the peak above its baseline (peak RSS
  // over baseline was a median 1.5% of carb's engine's in the engine campaign; here, without the
  // worker's malloc_trim, 0.25 MB for 12 MB of weights). The worker hands that memory back
  // between configurations, so a smaller network after a larger one counts its own tensors.
  const std::vector<std::string> names = backend_names();
  if (std::find(names.begin(), names.end(), "torch") == names.end()) {
    GTEST_SKIP() << "this build has no PyTorch backend";
  }
  Protocol protocol = quick_protocol();
  protocol.worker_reuse = 10;
  WorkerProcess worker({CARB_BINARY, {"__worker"}}, "torch:0");
  const Measurement first = worker.measure(parse_key("basic18_w1_nods_r64_b8_fp32"), protocol);
  const Measurement second = worker.measure(parse_key("basic18_w0.5_nods_r64_b8_fp32"), protocol);
  ASSERT_EQ(first.status, MeasurementStatus::kOk) << first.detail;
  ASSERT_EQ(second.status, MeasurementStatus::kOk) << second.detail;
  ASSERT_EQ(worker_of(first).first, worker_of(second).first);
  ASSERT_GT(second.engine_memory->weight_bytes, 10'000'000);  // half-width resnet18's: 11.7 MB
  EXPECT_GE(*second.process_peak_rss_bytes - *second.baseline_rss_bytes,
            second.engine_memory->weight_bytes)
      << "baseline " << *second.baseline_rss_bytes << ", peak " << *second.process_peak_rss_bytes;
}

TEST_F(Worker, AFailedConfigurationCostsItsWorkerAndTheNextGetsAFreshOne) {
  Protocol protocol = quick_protocol();
  // Long enough for a fresh worker to start and measure a tiny network on a loaded machine
  // under ASan; the hang below costs all of it.
  protocol.timeout_s = 8;
  const std::string crashes = "basic10_w0.25_nods_r32_b1_fp32_k10";
  const std::string hangs = "basic10_w0.25_nods_r32_b4_fp32_k10";
  ::setenv("CARB_WORKER_FAULT", ("segv:" + crashes + ",hang:" + hangs).c_str(), 1);
  WorkerProcess worker({CARB_BINARY, {"__worker"}}, cpu_device().info().id);
  const Measurement first = worker.measure(parse_key(kTinyKey), protocol);
  const Measurement crashed = worker.measure(parse_key(crashes), protocol);
  const Measurement after_crash = worker.measure(parse_key(kTinyKey), protocol);
  const Measurement hung = worker.measure(parse_key(hangs), protocol);
  const Measurement after_hang = worker.measure(parse_key(kTinyKey), protocol);
  ASSERT_EQ(first.status, MeasurementStatus::kOk) << first.detail;
  EXPECT_EQ(crashed.status, MeasurementStatus::kCrashed) << crashed.detail;
  EXPECT_NE(crashed.detail.find("SIGSEGV"), std::string::npos) << crashed.detail;
  ASSERT_EQ(after_crash.status, MeasurementStatus::kOk) << after_crash.detail;
  EXPECT_EQ(hung.status, MeasurementStatus::kTimeout) << hung.detail;
  ASSERT_EQ(after_hang.status, MeasurementStatus::kOk) << after_hang.detail;
  EXPECT_NE(worker_of(first).first, worker_of(after_crash).first);
  EXPECT_EQ(worker_of(after_crash).second, 0);
  EXPECT_NE(worker_of(after_crash).first, worker_of(after_hang).first);
  EXPECT_EQ(worker_of(after_hang).second, 0);
}

TEST_F(Worker, AWorkerThatReportedAFailureIsNotReused) {
  // An out-of-memory the worker survives and reports: its process is still not used again.
  const std::string fails = "basic10_w0.25_nods_r32_b1_fp32_k10";
  ::setenv("CARB_WORKER_FAULT", ("alloc:" + fails).c_str(), 1);
  WorkerProcess worker({CARB_BINARY, {"__worker"}}, cpu_device().info().id);
  const Measurement first = worker.measure(parse_key(kTinyKey), quick_protocol());
  const Measurement failed = worker.measure(parse_key(fails), quick_protocol());
  const Measurement next = worker.measure(parse_key(kTinyKey), quick_protocol());
  ASSERT_EQ(first.status, MeasurementStatus::kOk) << first.detail;
  EXPECT_EQ(failed.status, MeasurementStatus::kOom) << failed.detail;
  ASSERT_EQ(next.status, MeasurementStatus::kOk) << next.detail;
  EXPECT_EQ(worker_of(next).second, 0) << "a fresh process after the failure";
  EXPECT_NE(worker_of(next).first, worker_of(first).first);
}

TEST_F(Worker, AWorkerKilledWhileIdleIsReplacedWithoutCostingAConfiguration) {
  WorkerProcess worker({CARB_BINARY, {"__worker"}}, cpu_device().info().id);
  const Measurement first = worker.measure(parse_key(kTinyKey), quick_protocol());
  ASSERT_EQ(first.status, MeasurementStatus::kOk) << first.detail;
  const int pid = worker_of(first).first;
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // Reaped by its parent (us) only when the next measure() looks: wait until it is a zombie.
  for (int i = 0; i < 500; ++i) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid) {
      break;
    }
    ::usleep(10'000);
  }
  const Measurement second = worker.measure(parse_key(kTinyKey), quick_protocol());
  ASSERT_EQ(second.status, MeasurementStatus::kOk) << second.detail;
  EXPECT_NE(worker_of(second).first, pid);
}

}  // namespace
}  // namespace carb
