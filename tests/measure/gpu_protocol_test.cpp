// The protocol's GPU paths on the real CPU engine: a session with a device clock of its own, and
// a GPU monitor whose clocks-event reasons make a window be measured again. There is no GPU on
// the development machine, so the device clock here is a stand-in (a constant, so convergence
// on it is unmistakable) and the monitor replays states in NVML's terms: hw_thermal_slowdown
// (0x40) until it has been left idle for a while, as a card cools down. They test the protocol,
// not a GPU; tests/cuda/gpu_test.cpp runs it on one.
#include <gtest/gtest.h>

#include <chrono>

#include "carb/measure.hpp"
#include "forwarding_session.hpp"
#include "quick_protocol.hpp"

namespace carb {
namespace {

using Clock = std::chrono::steady_clock;

const Device& cpu_device() {
  static const auto backend = make_backend_for("cpu");
  return *backend->devices().front();
}

// A CPU session whose "device clock" reads a constant 1 ms per pass.
class ConstantClockSession final : public testing::ForwardingSession {
 public:
  using ForwardingSession::ForwardingSession;
  void run() override {
    ForwardingSession::run();
    ran_ = true;
  }
  std::optional<double> last_run_device_ms() override {
    return ran_ ? std::optional<double>(1.0) : std::nullopt;
  }

 private:
  bool ran_ = false;
};

class ConstantClockDevice final : public Device {
 public:
  const DeviceInfo& info() const override { return cpu_device().info(); }
  Support supports(const Config& config) const override { return cpu_device().supports(config); }
  std::unique_ptr<Session> prepare(const Config& config, std::uint64_t seed,
                                   const SessionOptions& options) const override {
    return std::make_unique<ConstantClockSession>(cpu_device().prepare(config, seed, options));
  }
};

// Replays a GPU that is throttled (hw_thermal_slowdown) until it has been idle for `recovery`
// between two samples, or forever when `recovery` is zero.
class ThermalReplayMonitor final : public GpuMonitor {
 public:
  explicit ThermalReplayMonitor(std::chrono::milliseconds recovery) : recovery_(recovery) {}
  bool available() const override { return true; }
  std::string unavailable_reason() const override { return {}; }
  GpuIdentity identity() const override {
    return {"NVIDIA H200", "GPU-replay", "", "", {}, {}, {}};
  }
  GpuSample sample() override {
    const auto now = Clock::now();
    if (recovery_.count() > 0 && samples_ > 0 && now - last_ >= recovery_) throttled_ = false;
    last_ = now;
    ++samples_;
    GpuSample sample;
    sample.sm_clock_mhz = throttled_ ? 1200 : 1980;
    sample.clocks_event_reasons = throttled_ ? 0x44 : 0x4;  // sw_power_cap throughout
    sample.power_w = 600;
    return sample;
  }
  std::optional<std::int64_t> process_memory_bytes(std::string* why) override {
    if (why != nullptr) *why = "replayed monitor";
    return std::nullopt;
  }
  int samples() const { return samples_; }

 private:
  std::chrono::milliseconds recovery_;
  bool throttled_ = true;
  int samples_ = 0;
  Clock::time_point last_;
};

using testing::kTinyKey;
using testing::quick_protocol;

TEST(GpuProtocol, ConvergesOnTheDeviceClockWhereTheSessionHasOne) {
  Protocol protocol = quick_protocol();
  // The host clock never gets this tight; the constant device clock does as soon as the minimum
  // samples are in. The limit is far away, so only the device clock can stop the timing early
  // even on a loaded machine (where one pass of this network can take a second).
  protocol.target_relative_ci = 1e-9;
  protocol.min_samples = 5;
  protocol.max_time_s = 20;
  NoSensorMeter meter("none");
  const Measurement measurement =
      measure_configuration(ConstantClockDevice(), parse_key(kTinyKey), protocol, meter);
  ASSERT_EQ(measurement.status, MeasurementStatus::kOk) << measurement.detail;
  ASSERT_TRUE(measurement.device_latency.has_value());
  EXPECT_EQ(measurement.device_latency->median_ms, 1.0);
  EXPECT_TRUE(measurement.device_latency->converged);
  EXPECT_EQ(measurement.device_samples_ms.size(), measurement.wall_samples_ms.size());
  // Stopped by the device clock's convergence, long before the time limit.
  EXPECT_LT(measurement.timed_s, protocol.max_time_s) << measurement.timed_s;
  EXPECT_EQ(measurement.detail.find("not converged"), std::string::npos) << measurement.detail;
}

TEST(GpuProtocol, ThrottledWindowIsMeasuredAgainAfterTheCooldown) {
  Protocol protocol = quick_protocol();
  protocol.max_time_s = 0.3;
  protocol.throttle_cooldown_s = 0.4;
  protocol.throttle_retries = 2;
  NoSensorMeter meter("none");
  ThermalReplayMonitor monitor(std::chrono::milliseconds(300));
  const Measurement measurement =
      measure_configuration(cpu_device(), parse_key(kTinyKey), protocol, meter, &monitor);
  ASSERT_EQ(measurement.status, MeasurementStatus::kOk) << measurement.detail;
  const nlohmann::json& attempts = measurement.provenance.at("gpu").at("attempts");
  ASSERT_EQ(attempts.size(), 2u) << measurement.provenance.at("gpu").dump();
  EXPECT_EQ(attempts[0].at("timing").at("clocks_event_reason_names"),
            "sw_power_cap+hw_thermal_slowdown");
  EXPECT_EQ(attempts[1].at("timing").at("clocks_event_reason_names"), "sw_power_cap");
  EXPECT_GE(attempts[0].at("timing").at("samples").get<int>(), 2);
  EXPECT_EQ(measurement.detail.find("throttled"), std::string::npos) << measurement.detail;
  EXPECT_EQ(measurement.provenance.at("gpu_memory").at("process_bytes_null_reason"),
            "replayed monitor");
}

TEST(GpuProtocol, PersistentThrottlingIsRecordedAfterTheLastAttempt) {
  for (const int retries : {0, 2}) {
    Protocol protocol = quick_protocol();
    protocol.max_time_s = 0.1;
    protocol.throttle_cooldown_s = 0.02;
    protocol.throttle_retries = retries;
    NoSensorMeter meter("none");
    ThermalReplayMonitor monitor(std::chrono::milliseconds(0));  // never recovers
    const Measurement measurement =
        measure_configuration(cpu_device(), parse_key(kTinyKey), protocol, meter, &monitor);
    ASSERT_EQ(measurement.status, MeasurementStatus::kOk) << measurement.detail;
    EXPECT_EQ(measurement.provenance.at("gpu").at("attempts").size(),
              static_cast<std::size_t>(retries + 1));
    const std::string times = retries == 0 ? "measured 1 time" : "measured 3 times";
    EXPECT_NE(measurement.detail.find("throttled: sw_power_cap+hw_thermal_slowdown, " + times),
              std::string::npos)
        << measurement.detail;
  }
}

}  // namespace
}  // namespace carb
