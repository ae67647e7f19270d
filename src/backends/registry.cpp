// The one place that knows which backends this build has.
#include "carb/backend.hpp"
#include "cpu/cpu_backend.hpp"

namespace carb {

std::vector<std::unique_ptr<Backend>> make_backends() {
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(cpu::make_cpu_backend());
  return backends;
}

}  // namespace carb
