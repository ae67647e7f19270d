// Tests that need a GPU: they run the CUDA engine for real and skip, with the backend's reason,
// where there is none (the development machine has none, so these have only ever been compiled
// there; bench/gpu/check.sh runs them on a GPU machine). The conformance cases of every backend
// run in tests/backends/conformance_test.cpp, which includes the CUDA devices when there are any.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>

#include "../backends/reference.hpp"
#include "carb/backend.hpp"
#include "carb/measure.hpp"
#include "cuda/cuda_backend.hpp"

namespace carb::cuda {
namespace {

constexpr std::uint64_t kSeed = 20260101;
constexpr double kFp32Tolerance = 1e-4;

class Gpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { backend_ = make_cuda_backend().release(); }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  void SetUp() override {
    if (backend_->devices().empty()) {
      GTEST_SKIP() << "no GPU: " << backend_->unavailable_reason();
    }
  }
  const Device& device() const { return *backend_->devices().front(); }

  double error_against_reference(Session& session) const {
    const std::vector<float> output = session.read_output();
    const Network& network = session.network();
    const std::vector<double> reference =
        testing::reference_forward(network, kSeed, generate_input(network, kSeed));
    return testing::relative_error(output, reference);
  }

  static Backend* backend_;
};
Backend* Gpu::backend_ = nullptr;

TEST_F(Gpu, EagerAndGraphRunsComputeTheReferenceAndTheSameBits) {
  const Config config = parse_key("basic18_w0.25_ds_r33_b2_fp32");
  const auto eager = device().prepare(config, kSeed, {});
  eager->run();
  eager->sync();
  EXPECT_LE(error_against_reference(*eager), kFp32Tolerance);
  EXPECT_EQ(eager->details().at("cuda_graph").at("used"), false);

  SessionOptions graph_options;
  graph_options.cuda_graph = true;
  const auto graph = device().prepare(config, kSeed, graph_options);
  const nlohmann::json graph_details = graph->details().at("cuda_graph");
  EXPECT_EQ(graph_details.at("requested"), true);
  EXPECT_EQ(graph_details.at("used"), true) << graph_details.dump();
  graph->run();
  graph->sync();
  // The same kernels on the same data: a replayed graph computes the eager pass's bits.
  EXPECT_EQ(graph->read_output(), eager->read_output());
}

TEST_F(Gpu, DeviceClockTimesEachRun) {
  const auto session = device().prepare(parse_key("bottleneck26_w0.25_ds_r32_b2_fp32"), kSeed, {});
  EXPECT_EQ(session->last_run_device_ms(), std::nullopt);  // prepare's own pass is not timed
  for (int i = 0; i < 3; ++i) {
    const auto before = std::chrono::steady_clock::now();
    session->run();
    session->sync();
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - before)
            .count();
    const auto device_ms = session->last_run_device_ms();
    ASSERT_TRUE(device_ms.has_value());
    EXPECT_GT(*device_ms, 0.0);
    EXPECT_LE(*device_ms, wall_ms);
  }
}

TEST_F(Gpu, MemoryGoesThroughCarbsAllocator) {
  const Config config = parse_key("basic18_w0.5_ds_r64_b4_fp32");
  const auto session = device().prepare(config, kSeed, {});
  const MemoryUsage memory = session->memory();
  // Every conv's folded weights and bias and the classifier's, each buffer rounded up to 256
  // bytes (fp32: 4 bytes an element).
  const Network& network = session->network();
  const auto buffer = [](std::size_t elements) {
    return static_cast<std::int64_t>((elements * 4 + 255) / 256 * 256);
  };
  std::int64_t weights = 0;
  std::int64_t all_activations = 0;
  for (std::size_t i = 0; i < network.layers.size(); ++i) {
    const Layer& layer = network.layers[i];
    const LayerParameterSizes sizes = layer_parameter_sizes(network, static_cast<int>(i));
    const Shape& out = network.tensors[static_cast<std::size_t>(layer.output)];
    if (layer.kind == LayerKind::kConv) weights += buffer(sizes.weight) + buffer(out.c);
    if (layer.kind == LayerKind::kFullyConnected)
      weights += buffer(sizes.weight) + buffer(sizes.bias);
    all_activations += out.elements() * 4;
  }
  EXPECT_EQ(memory.weight_bytes, weights);
  EXPECT_GT(memory.activation_bytes, 0);
  EXPECT_LE(memory.activation_bytes, all_activations + 4 * network.tensors[0].elements() + 65536);
  EXPECT_GE(memory.scratchpad_bytes, std::int64_t{4} << 20);  // cuBLAS's workspace at least
  EXPECT_GE(memory.peak_bytes, memory.steady_bytes());
  const nlohmann::json details = session->details();
  EXPECT_EQ(details.at("memory").at("allocator_peak_bytes"), memory.peak_bytes);
  EXPECT_TRUE(details.at("memory").contains("context_baseline_bytes"));
  EXPECT_EQ(details.at("layout"), "nchw");
  EXPECT_EQ(details.at("algorithm_selection").at("mode"), "heuristic");
  for (const KernelInfo& kernel : session->kernels()) {
    EXPECT_FALSE(kernel.implementation.empty()) << kernel.name;
  }
}

TEST_F(Gpu, FindSearchesOnceAndThenReadsTheCache) {
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("carb-gpu-test-" + std::to_string(::getpid()));
  std::filesystem::remove(cache);
  SessionOptions options;
  options.cudnn_find = true;
  options.algorithm_cache = cache.string();
  const Config config = parse_key("basic10_w0.25_ds_r32_b2_fp32");
  const auto first = device().prepare(config, kSeed, options);
  const nlohmann::json searched = first->details().at("algorithm_selection");
  EXPECT_EQ(searched.at("mode"), "find");
  EXPECT_GT(searched.at("searched").get<int>(), 0);
  // Convolutions of the same shape within the network already share one search.
  const int convs = searched.at("searched").get<int>() + searched.at("cache_hits").get<int>();
  const auto second = device().prepare(config, kSeed, options);
  const nlohmann::json cached = second->details().at("algorithm_selection");
  EXPECT_EQ(cached.at("searched"), 0);
  EXPECT_EQ(cached.at("cache_hits"), convs);
  second->run();
  second->sync();
  EXPECT_LE(error_against_reference(*second), kFp32Tolerance);
  std::filesystem::remove(cache);
}

TEST_F(Gpu, OutOfMemoryIsBadAllocAndLeavesTheGpuUsable) {
  // Its first activation alone is 512 x 256 x 1024 x 1024 floats: 512 GiB.
  const Config huge = parse_key("basic10_w4_ds_r2048_b512_fp32");
  EXPECT_THROW(device().prepare(huge, kSeed, {}), std::bad_alloc);
  const auto small = device().prepare(parse_key("basic10_w0.25_ds_r32_b1_fp32"), kSeed, {});
  small->run();
  small->sync();
  EXPECT_LE(error_against_reference(*small), kFp32Tolerance);
}

TEST_F(Gpu, MeasureFillsDeviceLatencyEnergyAndGpuState) {
  Protocol protocol;
  protocol.min_time_s = 0.2;
  protocol.max_time_s = 1.0;
  protocol.energy_window_min_s = 1.0;
  const std::unique_ptr<EnergyMeter> meter = open_energy_meter(device().info());
  const std::unique_ptr<GpuMonitor> monitor = open_device_monitor(device().info());
  ASSERT_NE(monitor, nullptr);
  const Measurement measurement = measure_configuration(
      device(), parse_key("basic18_w0.5_ds_r64_b8_fp16"), protocol, *meter, monitor.get());
  ASSERT_EQ(measurement.status, MeasurementStatus::kOk) << measurement.detail;
  ASSERT_TRUE(measurement.device_latency.has_value());
  EXPECT_EQ(measurement.device_samples_ms.size(), measurement.wall_samples_ms.size());
  EXPECT_LE(measurement.device_latency->median_ms, measurement.wall_latency->median_ms);
  EXPECT_EQ(measurement.energy_method, meter->name());
  if (meter->available()) {
    ASSERT_TRUE(measurement.energy_j.has_value()) << measurement.energy_null_reason;
    EXPECT_GT(*measurement.energy_j, 0.0);
  } else {
    EXPECT_FALSE(measurement.energy_null_reason.empty());
  }
  EXPECT_TRUE(measurement.provenance.contains("gpu"));
  EXPECT_TRUE(measurement.provenance.contains("engine"));
  EXPECT_EQ(measurement.provenance.at("engine").at("layout"), "nhwc");
}

TEST_F(Gpu, MeasureReportsOutOfMemoryAsAStatus) {
  Protocol protocol;
  NoSensorMeter meter("test");
  const Measurement measurement =
      measure_configuration(device(), parse_key("basic10_w4_ds_r2048_b512_fp32"), protocol, meter);
  EXPECT_EQ(measurement.status, MeasurementStatus::kOom) << measurement.detail;
}

}  // namespace
}  // namespace carb::cuda
