// A session that passes every call to another one, for tests to override what they change.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "carb/backend.hpp"

namespace carb::testing {

class ForwardingSession : public Session {
 public:
  explicit ForwardingSession(std::unique_ptr<Session> inner) : inner_(std::move(inner)) {}
  void run() override { inner_->run(); }
  void sync() override { inner_->sync(); }
  std::optional<double> last_run_device_ms() override { return inner_->last_run_device_ms(); }
  const Network& network() const override { return inner_->network(); }
  MemoryUsage memory() const override { return inner_->memory(); }
  std::vector<KernelInfo> kernels() const override { return inner_->kernels(); }
  bool run_kernel(std::size_t index) override { return inner_->run_kernel(index); }
  void set_input(std::span<const float> values) override { inner_->set_input(values); }
  std::vector<float> read_output() override { return inner_->read_output(); }

 private:
  std::unique_ptr<Session> inner_;
};

}  // namespace carb::testing
