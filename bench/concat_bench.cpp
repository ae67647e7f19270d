// oneDNN's concat against one reorder per input into the output's channel views, side by side,
// on DenseNet-like shapes: why carb's CPU engine runs a blocked concat of batch 1 as copies
// (docs/cpu-engine.md, "Ops"; figures in docs/benchmarks.md, "Concats at batch 1"). Rerun it
// when oneDNN changes: where the concat is no slower, the copies can go.
// Usage: bench_concat [--passes N]   (median of N timed passes of each, default 200)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <dnnl.hpp>

#include "carb/statistics.hpp"

namespace {

using Tag = dnnl::memory::format_tag;
using Calls = std::vector<std::pair<dnnl::primitive, std::unordered_map<int, dnnl::memory>>>;

double median_ms(dnnl::stream& stream, const Calls& calls, int passes) {
  const auto pass = [&] {
    for (const auto& [primitive, args] : calls) primitive.execute(stream, args);
    stream.wait();
  };
  for (int i = 0; i < 20; ++i) pass();
  std::vector<double> times;
  for (int i = 0; i < passes; ++i) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    times.push_back(carb::seconds_since(start) * 1e3);
  }
  return carb::median(times);
}

}  // namespace

int main(int argc, char** argv) {
  int passes = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--passes") == 0 && i + 1 < argc) {
      passes = std::stoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_concat [--passes N]\n");
      return 2;
    }
  }
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const Tag blocked =
      dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core ? Tag::nChw16c : Tag::nChw8c;
  std::printf("layout, batch, inputs, h x w, MB, concat ms, copies ms, concat / copies\n");
  for (const Tag tag : {blocked, Tag::nhwc}) {
    for (const int batch : {1, 2, 8}) {
      for (const int inputs : {1, 2, 7, 25}) {
        for (const int size : {40, 10}) {
          // A dense block's concat: 64 channels, then 32 per layer.
          std::vector<dnnl::memory::desc> descs;
          std::vector<dnnl::memory> sources;
          dnnl::memory::dim channels = 0;
          for (int k = 0; k < inputs; ++k) {
            descs.emplace_back(dnnl::memory::dims{batch, k == 0 ? 64 : 32, size, size},
                               dnnl::memory::data_type::f32, tag);
            sources.emplace_back(descs.back(), engine);
            channels += descs.back().dims()[1];
          }
          const dnnl::memory::desc out({batch, channels, size, size}, dnnl::memory::data_type::f32,
                                       tag);
          const dnnl::memory destination(out, engine);
          std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_DST, destination}};
          for (int k = 0; k < inputs; ++k) args.emplace(DNNL_ARG_MULTIPLE_SRC + k, sources[k]);
          const Calls concat = {
              {dnnl::concat(dnnl::concat::primitive_desc(out, 1, descs, engine)), args}};
          Calls copies;
          dnnl::memory::dim offset = 0;
          for (int k = 0; k < inputs; ++k) {
            const dnnl::memory::desc view = out.submemory_desc(descs[k].dims(), {0, offset, 0, 0});
            offset += descs[k].dims()[1];
            copies.push_back(
                {dnnl::reorder(dnnl::reorder::primitive_desc(engine, descs[k], engine, view)),
                 {{DNNL_ARG_FROM, sources[k]},
                  {DNNL_ARG_TO, dnnl::memory(view, engine, destination.get_data_handle())}}});
          }
          const double concat_ms = median_ms(stream, concat, passes);
          const double copies_ms = median_ms(stream, copies, passes);
          std::printf("%s, %d, %d, %dx%d, %.2f, %.4f, %.4f, %.2f\n",
                      tag == Tag::nhwc ? "nhwc" : "blocked", batch, inputs, size, size,
                      static_cast<double>(out.get_size()) / 1e6, concat_ms, copies_ms,
                      concat_ms / copies_ms);
        }
      }
    }
  }
  return 0;
}
