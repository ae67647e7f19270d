// Features of every point of a space, on one core: cold (cache being filled) and warm passes,
// plus the uncached path (build the network of every point) for comparison, side by side.
// Usage: bench_space_features [spec.yaml] (default examples/spaces/million.yaml)
#include <chrono>
#include <cstdio>
#include <string>

#include "bench_clock.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"

using carb_bench::Clock;
using carb_bench::seconds_since;

int main(int argc, char** argv) {
  const std::string spec =
      argc > 1 ? argv[1] : std::string(CARB_SOURCE_DIR) + "/examples/spaces/million.yaml";
  try {
    const carb::Space space = carb::Space::from_file(spec);
    carb::SpaceFeatures features(space);
    std::int64_t checksum = 0;

    std::printf(
        "space %s: %llu points, %llu (architecture, resolution) pairs\n\n", space.name().c_str(),
        static_cast<unsigned long long>(space.size()),
        static_cast<unsigned long long>(space.size() / space.points_per_architecture_resolution()));
    std::printf("%-34s %12s %10s %16s\n", "pass", "points", "seconds", "points/second");

    for (const char* pass : {"cached, cold (fills the cache)", "cached, warm"}) {
      const auto start = Clock::now();
      for (std::uint64_t index = 0; index < space.size(); ++index) {
        checksum += features.at(index).peak_activation_bytes;
      }
      const double elapsed = seconds_since(start);
      std::printf("%-34s %12llu %10.3f %16.0f\n", pass,
                  static_cast<unsigned long long>(space.size()), elapsed,
                  static_cast<double>(space.size()) / elapsed);
    }

    // Uncached: a network built and walked for every point (a sample: it is slow).
    const std::uint64_t uncached_points = std::min<std::uint64_t>(space.size(), 20000);
    const std::uint64_t stride = space.size() / uncached_points;
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < uncached_points; ++i) {
      checksum +=
          carb::compute_features(carb::build_network(space.at(i * stride))).peak_activation_bytes;
    }
    const double elapsed = seconds_since(start);
    std::printf("%-34s %12llu %10.3f %16.0f\n", "uncached (build every network)",
                static_cast<unsigned long long>(uncached_points), elapsed,
                static_cast<double>(uncached_points) / elapsed);
    std::printf("\nchecksum %lld\n", static_cast<long long>(checksum));
  } catch (const carb::Error& error) {
    std::fprintf(stderr, "bench_space_features: %s\n", error.what());
    return error.exit_code();
  }
  return 0;
}
