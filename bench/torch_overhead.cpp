// What the PyTorch backend's session adds to libtorch (issue: measure what users deploy; figures
// in docs/benchmarks.md, "PyTorch backend's overhead"): per configuration, the latency of one
// forward pass through carb's torch:0 session (run(): its walk over the IR, tensor bookkeeping
// and releases) against the same network written directly against ATen as a C++ user would
// write torchvision's ResNet forward, with the same weights (so both compute the same output,
// which is checked), side by side: ROUNDS rounds, each timing REPS passes of one then the other,
// alternating which goes first. Prints the medians and their ratio, and the session's prepare.
//   bench_torch_overhead [ROUNDS (15)] [REPS (20)]
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "carb/backend.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/statistics.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// The network's parameters in the order the IR builds its layers, which is the order
// torchvision's forward uses them: stem, then per block conv/bn pairs, then the downsample, fc.
struct Parameters {
  std::vector<at::Tensor> tensors;
  std::size_t next = 0;
  const at::Tensor& take() { return tensors.at(next++); }
};

at::Tensor tensor_of(const std::vector<float>& values, std::vector<std::int64_t> shape) {
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  std::copy(values.begin(), values.end(), out.data_ptr<float>());
  return out;
}

Parameters parameters_of(const carb::Network& network, std::uint64_t seed) {
  Parameters out;
  for (std::size_t i = 0; i < network.layers.size(); ++i) {
    const carb::Layer& layer = network.layers[i];
    const carb::Shape& in = network.tensors[static_cast<std::size_t>(layer.inputs[0])];
    const carb::Shape& shape = network.tensors[static_cast<std::size_t>(layer.output)];
    const carb::LayerParameters p =
        carb::generate_layer_parameters(network, static_cast<int>(i), seed);
    if (layer.kind == carb::LayerKind::kConv) {
      out.tensors.push_back(tensor_of(p.weight, {shape.c, in.c, layer.kernel, layer.kernel}));
    } else if (layer.kind == carb::LayerKind::kBatchNorm) {
      for (const auto* values : {&p.weight, &p.bias, &p.running_mean, &p.running_var}) {
        out.tensors.push_back(tensor_of(*values, {shape.c}));
      }
    } else if (layer.kind == carb::LayerKind::kFullyConnected) {
      out.tensors.push_back(tensor_of(p.weight, {shape.c, in.c}));
      out.tensors.push_back(tensor_of(p.bias, {shape.c}));
    }
  }
  return out;
}

at::Tensor conv(Parameters& p, const at::Tensor& x, int stride, int padding) {
  return at::conv2d(x, p.take(), {}, {stride, stride}, {padding, padding});
}

at::Tensor bn(Parameters& p, const at::Tensor& x) {
  const at::Tensor& weight = p.take();
  const at::Tensor& bias = p.take();
  const at::Tensor& mean = p.take();
  const at::Tensor& var = p.take();
  return at::batch_norm(x, weight, bias, mean, var, false, 0.1, carb::kBatchNormEpsilon, true);
}

// torchvision's ResNet forward, by hand: BasicBlock and Bottleneck (v1.5), relu in place.
at::Tensor forward(const carb::Config& config, Parameters& p, const at::Tensor& input) {
  c10::InferenceMode guard;
  p.next = 0;
  at::Tensor x = config.early_downsample ? conv(p, input, 2, 3) : conv(p, input, 1, 1);
  x = bn(p, x).relu_();
  if (config.early_downsample) x = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  int channels = config.stage_channels(0);
  const int expansion = config.block == carb::BlockType::kBasic ? 1 : 4;
  for (std::size_t stage = 0; stage < config.stage_blocks.size(); ++stage) {
    const int planes = config.stage_channels(static_cast<int>(stage));
    for (int block = 0; block < config.stage_blocks[stage]; ++block) {
      const int stride = stage > 0 && block == 0 ? 2 : 1;
      at::Tensor y;
      if (config.block == carb::BlockType::kBasic) {
        y = bn(p, conv(p, x, stride, 1)).relu_();
        y = bn(p, conv(p, y, 1, 1));
      } else {
        y = bn(p, conv(p, x, 1, 0)).relu_();
        y = bn(p, conv(p, y, stride, 1)).relu_();
        y = bn(p, conv(p, y, 1, 0));
      }
      const at::Tensor identity =
          stride != 1 || channels != planes * expansion ? bn(p, conv(p, x, stride, 0)) : x;
      y.add_(identity);
      x = y.relu_();
      channels = planes * expansion;
    }
  }
  x = at::adaptive_avg_pool2d(x, {1, 1});
  const at::Tensor& weight = p.take();
  const at::Tensor& bias = p.take();
  return at::linear(at::flatten(x, 1), weight, bias);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  if (rounds < 1 || reps < 1) {
    std::fprintf(stderr, "usage: bench_torch_overhead [ROUNDS >= 1] [REPS >= 1]\n");
    return 2;
  }
  try {
    const std::unique_ptr<carb::Backend> backend = carb::make_backend_for("torch");
    if (backend->devices().empty()) {
      std::fprintf(stderr, "bench_torch_overhead: no torch device: %s\n",
                   backend->unavailable_reason().c_str());
      return 2;
    }
    const carb::Device& device = *backend->devices().front();
    std::printf(
        "torch:0 session against the same ResNet written directly on ATen, %s; %d rounds "
        "of %d passes each, alternating\n",
        device.info().library.c_str(), rounds, reps);
    std::printf("%-36s %10s %10s %8s %10s %12s\n", "configuration", "direct_ms", "session_ms",
                "ratio", "max_diff", "prepare_ms");
    for (const char* key :
         {"basic10_w0.25_ds_r32_b1_fp32", "basic18_w0.5_ds_r64_b1_fp32",
          "basic18_w0.5_ds_r64_b8_fp32", "basic34_w1_ds_r224_b1_fp32",
          "bottleneck50_w0.5_ds_r128_b4_fp32", "bottleneck50_w1_ds_r224_b1_fp32"}) {
      const carb::Config config = carb::parse_key(key);
      const carb::Network network = carb::build_network(config);
      constexpr std::uint64_t kSeed = 1;
      const Clock::time_point prepare_start = Clock::now();
      const std::unique_ptr<carb::Session> session = device.prepare(config, kSeed, {});
      const double prepare_ms = 1e3 * seconds_since(prepare_start);
      Parameters parameters = parameters_of(network, kSeed);
      const carb::Shape& shape = network.tensors[static_cast<std::size_t>(network.input)];
      const at::Tensor input =
          tensor_of(carb::generate_input(network, kSeed), {shape.n, shape.c, shape.h, shape.w});
      // The same function: the session's output against the direct forward's.
      session->run();
      const std::vector<float> from_session = session->read_output();
      const at::Tensor direct = forward(config, parameters, input).contiguous();
      CARB_CHECK(parameters.next == parameters.tensors.size(), "every parameter used once");
      CARB_CHECK(static_cast<std::size_t>(direct.numel()) == from_session.size(),
                 "one output size");
      double max_diff = 0;
      for (std::size_t i = 0; i < from_session.size(); ++i) {
        max_diff = std::max(
            max_diff, std::abs(static_cast<double>(direct.data_ptr<float>()[i] - from_session[i])));
      }
      std::vector<double> direct_ms, session_ms, ratios;
      for (int round = 0; round < rounds; ++round) {
        double times[2] = {0, 0};
        for (int which : {round % 2, 1 - round % 2}) {
          const Clock::time_point start = Clock::now();
          for (int r = 0; r < reps; ++r) {
            if (which == 0) {
              (void)forward(config, parameters, input);
            } else {
              session->run();
            }
          }
          times[which] = 1e3 * seconds_since(start) / reps;
        }
        direct_ms.push_back(times[0]);
        session_ms.push_back(times[1]);
        ratios.push_back(times[1] / times[0]);
      }
      std::printf("%-36s %10.4f %10.4f %8.4f %10.2e %12.2f\n", key, carb::median(direct_ms),
                  carb::median(session_ms), carb::median(ratios), max_diff, prepare_ms);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_torch_overhead: %s\n", error.what());
    return 1;
  }
  return 0;
}
