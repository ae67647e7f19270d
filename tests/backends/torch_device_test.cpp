// The PyTorch (libtorch) device, where the build has it: what it says it is, what it refuses,
// memory accounting, determinism, input and output, and that it computes what carb's own CPU
// engine computes (tests/backends/conformance_test.cpp compares both with the float64 reference).
#include <gtest/gtest.h>

#include <malloc.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "architectures.hpp"
#include "carb/backend.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "reference.hpp"

namespace carb {
namespace {

constexpr std::uint64_t kSeed = 7;

bool built_with_torch() {
  const std::vector<std::string> names = backend_names();
  return std::find(names.begin(), names.end(), "torch") != names.end();
}

// Skips where the build has no PyTorch backend (LeftOutOfThisBuild checks that case).
class TorchDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!built_with_torch()) GTEST_SKIP() << "this build has no PyTorch backend";
    backend_ = make_backend_for("torch");
    ASSERT_FALSE(backend_->devices().empty()) << backend_->unavailable_reason();
    device_ = backend_->devices().front().get();
  }
  std::unique_ptr<Backend> backend_;
  const Device* device_ = nullptr;
};

TEST_F(TorchDeviceTest, IsAHostDeviceOfItsOwnEngine) {
  EXPECT_EQ(backend_->name(), "torch");
  const DeviceInfo& info = device_->info();
  EXPECT_EQ(info.id, "torch:0");
  EXPECT_EQ(info.kind, "cpu");
  EXPECT_EQ(info.library.rfind("PyTorch 1.", 0), 0u) << info.library;
  EXPECT_NE(info.library.find(", malloc 32/64 MiB)"), std::string::npos) << info.library;
  EXPECT_GE(info.threads, 1);
  // Its engine fingerprint is never the oneDNN engine's, so campaigns never pool the two.
  const auto cpu = make_backend_for("cpu");
  EXPECT_NE(engine_fingerprint(info), engine_fingerprint(cpu->devices().at(0)->info()));
  EXPECT_TRUE(built_with_torch());
}

TEST_F(TorchDeviceTest, RunsBf16WhereTheCpuEngineDoesAndNeverFp16) {
  const Config bf16 = parse_key("basic10_w0.25_ds_r32_b1_bf16");
  const auto cpu = make_backend_for("cpu");
  const Support engine = cpu->devices().at(0)->supports(bf16);
  const Support torch = device_->supports(bf16);
  EXPECT_EQ(torch.supported, engine.supported);
  EXPECT_EQ(torch.reason, engine.reason);
  const Support fp16 = device_->supports(parse_key("basic10_w0.25_ds_r32_b1_fp16"));
  EXPECT_FALSE(fp16.supported);
  EXPECT_NE(fp16.reason.find("fp16"), std::string::npos) << fp16.reason;
  EXPECT_THROW((void)device_->prepare(parse_key("basic10_w0.25_ds_r32_b1_fp16"), kSeed), Error);
}

TEST_F(TorchDeviceTest, SameOutputAsTheCpuEngineAndTheSameBitsOnEveryRun) {
  const Config config = parse_key("bottleneck26_w0.25_nods_r33_b2_fp32_k10");
  const auto session = device_->prepare(config, kSeed);
  session->run();
  session->sync();
  const std::vector<float> first = session->read_output();
  session->run();
  EXPECT_EQ(session->read_output(), first);  // nothing left over from the last run

  const auto cpu = make_backend_for("cpu");
  const auto engine = cpu->devices().at(0)->prepare(config, kSeed);
  engine->run();
  engine->sync();
  const std::vector<float> theirs = engine->read_output();
  ASSERT_EQ(first.size(), theirs.size());
  std::vector<double> reference(theirs.begin(), theirs.end());
  EXPECT_LE(testing::relative_error(first, reference), 1e-4);
}

// A pass run a kernel (an IR layer's operators) at a time computes what run() does, views and
// in-place operators included, and leaves the session ready for the next whole pass.
TEST_F(TorchDeviceTest, ALayerAtATimeComputesWhatAWholePassDoes) {
  for (const Config& config : {parse_key("bottleneck26_w0.25_nods_r33_b2_fp32_k10"),
                               testing::test_config("shufflenet_v2_58", 33, 2, Precision::kFp32),
                               testing::test_config("mobilenet_v3_se", 33, 2, Precision::kFp32)}) {
    SCOPED_TRACE(to_key(config));
    const auto session = device_->prepare(config, kSeed);
    session->run();
    const std::vector<float> whole = session->read_output();
    const std::vector<KernelInfo> kernels = session->kernels();
    ASSERT_EQ(kernels.size(), session->network().layers.size());
    for (std::size_t k = 0; k < kernels.size(); ++k) {
      EXPECT_EQ(kernels[k].layers, std::vector<int>{static_cast<int>(k)});
      ASSERT_TRUE(session->run_kernel(k));
    }
    EXPECT_EQ(session->read_output(), whole);
    session->run();
    EXPECT_EQ(session->read_output(), whole);
  }
}

TEST_F(TorchDeviceTest, ANewInputGivesTheReferencesOutputForIt) {
  const Config config = parse_key("basic10_w0.25_ds_r32_b2_fp32_k10");
  const auto session = device_->prepare(config, kSeed);
  std::vector<float> input = generate_input(session->network(), kSeed + 1);
  session->set_input(input);
  session->run();
  const std::vector<double> reference =
      testing::reference_forward(session->network(), kSeed, input);
  EXPECT_LE(testing::relative_error(session->read_output(), reference), 1e-4);
  EXPECT_THROW(session->set_input(std::vector<float>(3)), Error);
}

TEST_F(TorchDeviceTest, MemoryIsItsParameterTensorsAndEagerPeakOfActivations) {
  const Config config = parse_key("bottleneck26_w0.5_ds_r64_b4_fp32");
  const auto session = device_->prepare(config, kSeed);
  const Network& network = session->network();
  const Features features = compute_features(network);
  // Parameters plus the batch norms' running statistics (two per channel), four bytes each.
  std::int64_t running = 0;
  for (const Layer& layer : network.layers) {
    if (layer.kind == LayerKind::kBatchNorm) {
      running += std::int64_t{2} * network.tensors[static_cast<std::size_t>(layer.output)].c;
    }
  }
  const MemoryUsage usage = session->memory();
  EXPECT_EQ(usage.weight_bytes, features.param_bytes + 4 * running);
  EXPECT_EQ(usage.activation_bytes, features.peak_activation_bytes);
  EXPECT_EQ(usage.peak_bytes, usage.steady_bytes());
  const auto kernels = session->kernels();
  ASSERT_EQ(kernels.size(), network.layers.size());
  EXPECT_EQ(kernels.front().implementation, "aten::conv2d");
  EXPECT_EQ(kernels.back().name, "fc");
  EXPECT_EQ(session->details().at("inference_mode"), true);
  if (device_->supports(parse_key("bottleneck26_w0.5_ds_r64_b4_bf16")).supported) {
    const auto half = device_->prepare(parse_key("bottleneck26_w0.5_ds_r64_b4_bf16"), kSeed);
    EXPECT_EQ(2 * half->memory().weight_bytes, usage.weight_bytes);  // two bytes a value
  }
}

TEST_F(TorchDeviceTest, PlansTheMemoryItsSessionsHoldWithoutPreparingThem) {
  std::vector<std::string> keys = {"basic10_w0.25_ds_r32_b1_fp32_k10",
                                   "bottleneck26_w0.5_ds_r64_b4_fp32",
                                   "basic12_w0.375_nods_r36_b3_fp32_k10"};
  if (device_->supports(parse_key("basic10_w0.25_ds_r32_b2_bf16_k10")).supported) {
    keys.push_back("basic10_w0.375_ds_r32_b5_bf16_k10");
  }
  for (const std::string& key : keys) {
    const std::optional<MemoryUsage> planned = device_->plan_memory(parse_key(key));
    ASSERT_TRUE(planned.has_value()) << key;
    EXPECT_EQ(*planned, device_->prepare(parse_key(key), kSeed)->memory()) << key;
    EXPECT_GT(planned->weight_bytes, 0) << key;
  }
  EXPECT_THROW(device_->plan_memory(parse_key("basic10_w0.25_ds_r32_b2_fp16_k10")), Error);
}

TEST_F(TorchDeviceTest, PreparingASessionPinsMallocSoALayersOutputComesFromTheHeap) {
  // glibc's own start: blocks from 128 KiB on are mapped, and unmapped when freed.
  ASSERT_EQ(::mallopt(M_MMAP_THRESHOLD, 128 << 10), 1);
  const auto session = device_->prepare(parse_key("basic10_w0.25_ds_r32_b1_fp32_k10"), kSeed);
  EXPECT_EQ(session->details().at("malloc"), "malloc 32/64 MiB");
  // A 16 MiB tensor (a batch-8 MobileNet layer's output) now comes from the heap, so freeing it
  // hands nothing back to the kernel for the next pass to fault in again.
  const std::size_t mapped = ::mallinfo2().hblkhd;
  void* block = std::malloc(std::size_t{16} << 20);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(::mallinfo2().hblkhd, mapped);
  std::free(block);
}

TEST_F(TorchDeviceTest, ReadingBeforeAnyRunIsAnError) {
  const auto session = device_->prepare(parse_key("basic10_w0.25_ds_r32_b1_fp32_k10"), kSeed);
  EXPECT_THROW((void)session->read_output(), Error);
}

// Its output for `config` against the float64 reference's.
double error_against_reference(const Device& device, const Config& config) {
  const auto session = device.prepare(config, kSeed);
  session->run();
  const Network& network = session->network();
  return testing::relative_error(
      session->read_output(),
      testing::reference_forward(network, kSeed, generate_input(network, kSeed)));
}

TEST_F(TorchDeviceTest, RunsImportedArchitecturesTheCpuEngineRefusesAsPyTorchDoes) {
  // An average pool counting its padding whose ceil-mode window overhangs that padding: oneDNN
  // has no such pooling, torch.nn.AvgPool2d does (the reference follows PyTorch's rule).
  const Config overhang = testing::test_config("overhanging_average", 32, 2, Precision::kFp32);
  EXPECT_TRUE(device_->supports(overhang).supported);
  EXPECT_LE(error_against_reference(*device_, overhang), 1e-4);
  // Every hand-built family, its kernels named after ATen's operators.
  for (const testing::TestArchitecture& test : testing::test_architectures()) {
    const Config config = testing::test_config(test.name, 32, 1, Precision::kFp32);
    EXPECT_LE(error_against_reference(*device_, config), 1e-4) << test.name;
  }
  const auto session =
      device_->prepare(testing::test_config("shufflenet_v2_58", 32, 1, Precision::kFp32), kSeed);
  std::vector<std::string> operators;
  for (const KernelInfo& kernel : session->kernels()) operators.push_back(kernel.implementation);
  for (const char* op : {"aten::narrow", "aten::cat", "aten::channel_shuffle"}) {
    EXPECT_NE(std::find(operators.begin(), operators.end(), op), operators.end()) << op;
  }
}

TEST_F(TorchDeviceTest, PoolsPaddedUnevenlyAsTheReferenceDoes) {
  // ONNX pads a pool's sides separately (TensorFlow's "same" at stride 2: none before, one
  // after); ATen's pools take one padding for both sides.
  testing::ArchitectureBuilder b("uneven_pools");
  int x = b.relu(b.conv(0, 8, 3, 1, 1, {.bias = true}));
  x = b.max_pool(x, 3, 2, 0, false);
  x = b.avg_pool(x, 3, 1, 0, false, true);          // the padding counted
  x = b.avg_pool(b.relu(x), 3, 2, 0, true, false);  // not counted, ceil mode
  b.fc(b.global_avg_pool(b.max_pool(x, 2, 2, 1, true)), 4);
  Architecture architecture = b.finish();
  const std::vector<std::pair<int, int>> paddings = {{0, 1}, {1, 0}, {0, 2}, {1, 0}};
  int pool = 0;
  for (Layer& layer : architecture.layers) {
    if (layer.kind != LayerKind::kMaxPool && layer.kind != LayerKind::kAvgPool) continue;
    std::tie(layer.padding, layer.padding_after) = paddings.at(static_cast<std::size_t>(pool++));
  }
  ASSERT_EQ(pool, 4);
  const Architecture& registered = *find_architecture(register_architecture(architecture));
  for (const int resolution : {16, 17, 33}) {
    const Config config = imported_config(registered, resolution, 2, Precision::kFp32);
    EXPECT_LE(error_against_reference(*device_, config), 1e-4) << resolution;
  }
}

TEST_F(TorchDeviceTest, NeverWritesInPlaceOverAViewWhoseStorageAnotherLayerStillReads) {
  // A ReLU over a slice is in place in the IR (the slice has one reader), but ATen's slice is a
  // view of `x`, which the concat reads after it: writing over the view would change `x`.
  testing::ArchitectureBuilder b("relu_over_a_view");
  const int x = b.conv(0, 8, 3, 1, 1, {.bias = true});
  const int half = b.relu(b.slice(x, 0, 4));
  b.fc(b.global_avg_pool(b.concat({half, x})), 4);
  const Architecture architecture = b.finish();
  register_architecture(architecture);
  const Config config = imported_config(architecture, 16, 2, Precision::kFp32);
  const Network network = build_network(config);
  ASSERT_TRUE(network.layers[2].in_place);  // the ReLU: the case this test is about
  EXPECT_LE(error_against_reference(*device_, config), 1e-4);
}

TEST(TorchDevice, AModuleThatCannotBeOpenedIsABackendWithoutDevicesThatSaysWhy) {
  if (!built_with_torch()) GTEST_SKIP() << "this build has no PyTorch backend";
  ::setenv("CARB_TORCH_MODULE", "/nonexistent/libcarb_torch.so", 1);
  const auto backend = make_backend_for("torch");
  ::unsetenv("CARB_TORCH_MODULE");
  EXPECT_EQ(backend->name(), "torch");
  EXPECT_TRUE(backend->devices().empty());
  EXPECT_NE(backend->unavailable_reason().find("/nonexistent/libcarb_torch.so"), std::string::npos)
      << backend->unavailable_reason();
}

TEST(TorchDevice, LeftOutOfThisBuildIsAUsageErrorNamingTheBackends) {
  if (built_with_torch()) GTEST_SKIP() << "this build has the PyTorch backend";
  try {
    (void)make_backend_for("torch:0");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kUsage);
    EXPECT_NE(std::string(error.what()).find("backends are cpu"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace carb
