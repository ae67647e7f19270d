#include "counter_meter.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "carb/error.hpp"
#include "carb/statistics.hpp"

namespace carb::telemetry_detail {

std::uint64_t counter_delta(std::uint64_t start, std::uint64_t end, std::uint64_t max_count) {
  if (end >= start) {
    return end - start;
  }
  // Written so that max_count = UINT64_MAX (a 64-bit perf count) cannot overflow: start > end >= 0
  // makes max_count - start + 1 at most max_count.
  return (max_count - start) + 1 + end;
}

CounterMeter::CounterMeter(std::vector<CounterSpec> counters) : counters_(std::move(counters)) {
  CARB_CHECK(!counters_.empty(), "a counter meter needs at least one counter");
}

bool CounterMeter::available() const { return true; }

std::string CounterMeter::unavailable_reason() const { return {}; }

double CounterMeter::max_poll_interval_s() const {
  double interval_s = 0.0;
  bool first = true;
  for (const CounterSpec& counter : counters_) {
    // One full range of the counter, in joules, spent at the assumed maximum power.
    const double range_j =
        (static_cast<double>(counter.max_count) + 1.0) * counter.joules_per_count;
    const double counter_interval_s = range_j / kAssumedMaxPackagePowerW;
    interval_s = first ? counter_interval_s : std::min(interval_s, counter_interval_s);
    first = false;
  }
  return interval_s;
}

bool CounterMeter::read_all(std::vector<std::uint64_t>& values) {
  values.resize(counters_.size());
  for (std::size_t i = 0; i < counters_.size(); ++i) {
    std::string failure;
    const std::optional<std::uint64_t> value = read_counter(i, failure);
    if (!value) {
      window_failure_ = failure;
      return false;
    }
    if (*value > counters_[i].max_count) {
      window_failure_ = counters_[i].label + " read " + std::to_string(*value) +
                        ", above the counter's maximum " + std::to_string(counters_[i].max_count);
      return false;
    }
    values[i] = *value;
  }
  return true;
}

void CounterMeter::start() {
  in_window_ = true;
  last_sample_changed_ = false;
  window_failure_.clear();
  accumulated_counts_.assign(counters_.size(), 0);
  start_time_ = Clock::now();
  read_all(last_counts_);
  last_read_time_ = Clock::now();
}

void CounterMeter::sample() {
  CARB_CHECK(in_window_, "EnergyMeter::sample() outside a window");
  last_sample_changed_ = false;
  if (!window_failure_.empty()) {
    return;  // the window is already lost; further reads cannot restore it
  }
  std::vector<std::uint64_t> counts;
  if (!read_all(counts)) {
    return;
  }
  last_sample_changed_ = counts != last_counts_;
  const Clock::time_point now = Clock::now();
  const double gap_s = std::chrono::duration<double>(now - last_read_time_).count();
  if (gap_s > max_poll_interval_s()) {
    char message[256];
    std::snprintf(message, sizeof message,
                  "%.6g s between counter reads exceeds the wrap-safe interval of %.6g s "
                  "(one counter range at an assumed %.0f W); the counter may have wrapped "
                  "more than once",
                  gap_s, max_poll_interval_s(), kAssumedMaxPackagePowerW);
    window_failure_ = message;
    return;
  }
  for (std::size_t i = 0; i < counters_.size(); ++i) {
    accumulated_counts_[i] += counter_delta(last_counts_[i], counts[i], counters_[i].max_count);
  }
  last_counts_ = std::move(counts);
  last_read_time_ = now;
}

bool CounterMeter::last_sample_changed() const { return last_sample_changed_; }

void CounterMeter::restart_from_last_reading() {
  CARB_CHECK(in_window_, "EnergyMeter::restart_from_last_reading() outside a window");
  accumulated_counts_.assign(counters_.size(), 0);
  start_time_ = last_read_time_;
}

EnergyWindow CounterMeter::stop() {
  CARB_CHECK(in_window_, "EnergyMeter::stop() without start()");
  sample();
  in_window_ = false;
  EnergyWindow window;
  window.duration_s = seconds_since(start_time_);
  if (!window_failure_.empty()) {
    window.unavailable_reason = window_failure_;
    return window;
  }
  double energy_j = 0.0;
  for (std::size_t i = 0; i < counters_.size(); ++i) {
    energy_j += static_cast<double>(accumulated_counts_[i]) * counters_[i].joules_per_count;
  }
  window.energy_j = energy_j;
  return window;
}

}  // namespace carb::telemetry_detail
