// The window logic shared by RAPL and perf: cumulative counters read at start, at every sample()
// and at stop(), per-interval deltas taken modulo each counter's range, summed over counters.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "carb/telemetry.hpp"

namespace carb::telemetry_detail {

/// One cumulative energy counter (one CPU package).
struct CounterSpec {
  std::string label;        ///< names the counter in reasons, e.g. its sysfs path
  std::uint64_t max_count;  ///< largest value before the counter wraps to 0
  double joules_per_count;  ///< energy of one count
};

/// The increase of a counter from `start` to `end`, which wrapped to 0 after `max_count` if
/// `end` < `start`: (end - start) mod (max_count + 1).
std::uint64_t counter_delta(std::uint64_t start, std::uint64_t end, std::uint64_t max_count);

/// An available EnergyMeter over a fixed set of counters; subclasses say how to read one.
class CounterMeter : public EnergyMeter {
 public:
  bool available() const override;
  std::string unavailable_reason() const override;
  double max_poll_interval_s() const override;
  void start() override;
  void sample() override;
  EnergyWindow stop() override;
  bool last_sample_changed() const override;
  void restart_from_last_reading() override;

 protected:
  explicit CounterMeter(std::vector<CounterSpec> counters);

  /// Reads counter `index`'s raw value; on failure returns nullopt and sets `failure`.
  virtual std::optional<std::uint64_t> read_counter(std::size_t index, std::string& failure) = 0;

  const std::vector<CounterSpec>& counters() const { return counters_; }

 private:
  using Clock = std::chrono::steady_clock;

  // Reads every counter into `values`; records the window's failure and returns false if any
  // read fails or exceeds its range.
  bool read_all(std::vector<std::uint64_t>& values);

  std::vector<CounterSpec> counters_;
  bool in_window_ = false;
  Clock::time_point start_time_;
  Clock::time_point last_read_time_;
  std::vector<std::uint64_t> last_counts_;
  std::vector<std::uint64_t> accumulated_counts_;
  std::string window_failure_;  // why this window has no energy; empty while it is sound
  bool last_sample_changed_ = false;
};

}  // namespace carb::telemetry_detail
