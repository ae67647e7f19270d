// The explicit "no sensor" meter and the choice between CPU energy sensors.
#include <chrono>
#include <limits>
#include <memory>
#include <utility>

#include "carb/error.hpp"
#include "carb/statistics.hpp"
#include "carb/telemetry.hpp"

namespace carb {

NoSensorMeter::NoSensorMeter(std::string reason) : reason_(std::move(reason)) {
  CARB_CHECK(!reason_.empty(), "a meter without a sensor must say why");
}

std::string NoSensorMeter::name() const { return "none"; }

std::string NoSensorMeter::sensor() const { return "none"; }

bool NoSensorMeter::available() const { return false; }

std::string NoSensorMeter::unavailable_reason() const { return reason_; }

double NoSensorMeter::max_poll_interval_s() const {
  // Nothing is read, so no gap between polls can lose energy.
  return std::numeric_limits<double>::infinity();
}

void NoSensorMeter::start() { start_time_ = std::chrono::steady_clock::now(); }

void NoSensorMeter::sample() { CARB_CHECK(start_time_, "EnergyMeter::sample() outside a window"); }

EnergyWindow NoSensorMeter::stop() {
  CARB_CHECK(start_time_, "EnergyMeter::stop() without start()");
  EnergyWindow window;
  window.duration_s = seconds_since(*start_time_);
  window.unavailable_reason = reason_;
  start_time_.reset();
  return window;
}

std::unique_ptr<EnergyMeter> open_cpu_energy_meter(const std::filesystem::path& root) {
  std::unique_ptr<EnergyMeter> rapl = open_rapl_meter(root);
  if (rapl->available()) {
    return rapl;
  }
  std::unique_ptr<EnergyMeter> perf = open_perf_energy_meter(root);
  if (perf->available()) {
    return perf;
  }
  return std::make_unique<NoSensorMeter>(rapl->unavailable_reason() + "; " +
                                         perf->unavailable_reason());
}

}  // namespace carb
