// Times the CPU engine's prepare() (weights generated from the seed, batch norm folded, weights
// reordered, primitives created), the first run() after it, and apart the generation of every
// layer's parameters alone; prints one table row per key (best of --repeats, seconds). The
// campaign's harness overhead is mostly prepare (docs/cpu-engine.md#prepare). A campaign
// prepares each configuration in a fresh process: run one key per process, --repeats 1, for
// the figure a campaign sees (later keys and repeats find oneDNN's primitive cache warm).
// --keep does what a reused campaign worker does: the device keeps each session's weight memory
// for the next (Device::keep_memory_between_sessions).
// Usage: bench_prepare [--repeats N] [--keep] KEY...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_clock.hpp"
#include "carb/error.hpp"
#include "carb/measure.hpp"

using carb_bench::Clock;
using carb_bench::seconds_since;

int main(int argc, char** argv) {
  int repeats = 3;
  bool keep = false;
  std::vector<std::string> keys;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::stoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--keep") == 0) {
      keep = true;
    } else {
      keys.emplace_back(argv[i]);
    }
  }
  try {
    const auto backends = carb::make_backends();
    const carb::Device& device = *backends.front()->devices().front();
    device.keep_memory_between_sessions(keep);
    std::printf("%-40s %12s %12s %12s %12s\n", "key", "params", "prepare_s", "generate_s",
                "first_run_s");
    for (const std::string& key : keys) {
      const carb::Config config = carb::parse_key(key);
      const carb::Network network = carb::build_network(config);
      double prepare_s = 1e30;
      double generate_s = 1e30;
      double first_run_s = 1e30;
      for (int r = 0; r < repeats; ++r) {
        // prepare() first: in a campaign each configuration is prepared in a fresh worker.
        auto start = Clock::now();
        const auto session = device.prepare(config, 1);
        prepare_s = std::min(prepare_s, seconds_since(start));
        start = Clock::now();
        session->run();
        session->sync();
        first_run_s = std::min(first_run_s, seconds_since(start));
        start = Clock::now();
        std::int64_t generated = 0;
        for (int layer = 0; layer < static_cast<int>(network.layers.size()); ++layer) {
          generated += static_cast<std::int64_t>(
              carb::generate_layer_parameters(network, layer, 1).weight.size());
        }
        generate_s = std::min(generate_s, seconds_since(start));
        if (generated < 0) return 1;
      }
      std::printf("%-40s %12lld %12.4f %12.4f %12.4f\n", key.c_str(),
                  static_cast<long long>(carb::compute_features(network).params), prepare_s,
                  generate_s, first_run_s);
      std::fflush(stdout);
    }
  } catch (const carb::Error& error) {
    std::fprintf(stderr, "bench_prepare: %s\n", error.what());
    return error.exit_code();
  }
  return 0;
}
