// The CPU device and its sessions: capabilities, unsupported configurations, memory accounting,
// determinism, repeated runs, input/output, kernel provenance and the oneDNN check macro.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <fstream>
#include <functional>
#include <new>
#include <sstream>
#include <string>
#include <tuple>

#include "architectures.hpp"
#include "carb/backend.hpp"
#include "carb/engine_plan.hpp"
#include "carb/error.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/dnnl_check.hpp"
#include "reference.hpp"

namespace carb {
namespace {

constexpr std::uint64_t kSeed = 7;
constexpr const char* kTinyBasic = "basic10_w0.25_ds_r32_b2_fp32_k10";
constexpr const char* kTinyBottleneck = "bottleneck26_w0.25_ds_r33_b1_fp32_k10";

class CpuDeviceTest : public ::testing::Test {
 protected:
  CpuDeviceTest() : backend_(cpu::make_cpu_backend()), device_(*backend_->devices().at(0)) {}

  std::unique_ptr<Session> prepare(const std::string& key, std::uint64_t seed = kSeed) const {
    return device_.prepare(parse_key(key), seed);
  }
  static std::vector<float> run_once(Session& session) {
    session.run();
    session.sync();
    return session.read_output();
  }

  std::unique_ptr<Backend> backend_;
  const Device& device_;
};

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Imported architectures (hand-built, architectures.hpp): the device runs them, plans their
// memory exactly, lays activations out in blocks unless a slice, concat or grouped conv falls
// off them (then nhwc), counts every byte, and says why when it cannot run one.
std::vector<std::pair<std::string, Config>> imported_configs(bool with_bf16) {
  std::vector<std::pair<std::string, Config>> configs;
  for (const testing::TestArchitecture& test : testing::test_architectures()) {
    if (test.name == "overhanging_average") continue;
    for (const int batch : {1, 3}) {
      configs.emplace_back(test.name, testing::test_config(test.name, 33, batch, Precision::kFp32));
    }
    if (with_bf16) {
      configs.emplace_back(test.name, testing::test_config(test.name, 32, 2, Precision::kBf16));
    }
  }
  return configs;
}

TEST_F(CpuDeviceTest, ImportedArchitecturesAreSupportedAndPlannedExactly) {
  const bool bf16 = device_.supports(parse_key("basic10_w0.25_ds_r32_b2_bf16_k10")).supported;
  for (const auto& [name, config] : imported_configs(bf16)) {
    const Support support = device_.supports(config);
    ASSERT_TRUE(support.supported) << name << ": " << support.reason;
    const std::optional<MemoryUsage> planned = device_.plan_memory(config);
    ASSERT_TRUE(planned.has_value()) << name;
    const auto session = device_.prepare(config, kSeed);
    const MemoryUsage prepared = session->memory();
    EXPECT_EQ(planned->weight_bytes, prepared.weight_bytes) << name;
    EXPECT_EQ(planned->activation_bytes, prepared.activation_bytes) << name;
    EXPECT_EQ(planned->scratchpad_bytes, prepared.scratchpad_bytes) << name;
    EXPECT_EQ(planned->peak_bytes, prepared.peak_bytes) << name;
    EXPECT_GT(prepared.weight_bytes, 0) << name;
    const std::vector<float> output = run_once(*session);
    EXPECT_EQ(output.size(), static_cast<std::size_t>(
                                 session->network()
                                     .tensors[static_cast<std::size_t>(session->network().output)]
                                     .elements()))
        << name;
  }
}

TEST_F(CpuDeviceTest, ImportedActivationsAreBlockedUnlessAViewOrAGroupFallsOffTheBlocks) {
  const std::string blocked =
      dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core ? "nChw16c" : "nChw8c";
  // (architecture, layout, why not blocked)
  const std::vector<std::tuple<const char*, std::string, std::string>> cases = {
      {"mobilenet_v2_block", blocked, ""},   // 24 channels: padded blocks, no view
      {"densenet_transition", blocked, ""},  // concats at channels 0, 32 and 48
      {"shufflenet_v2_32", blocked, ""},     // halves of 32 channels
      {"shufflenet_v2_58", "nhwc", "concat18: a concat input off the blocks"},
      {"resnext_block", "nhwc", "conv7: a grouped conv of partial blocks"},  // 4 per group
  };
  for (const auto& [name, layout, reason] : cases) {
    const auto session =
        device_.prepare(testing::test_config(name, 32, 1, Precision::kFp32), kSeed);
    const nlohmann::json details = session->details();
    EXPECT_EQ(details.at("layout"), layout) << name;
    EXPECT_EQ(details.value("layout_reason", ""), reason) << name;
  }
  EXPECT_EQ(prepare(kTinyBasic)->details().at("layout"), blocked);
  // A 3x3 conv of fewer input channels than a block (past the stem) runs oneDNN 2.6's reference
  // kernel blocked, its brgemm kernel in nhwc.
  const auto narrow = prepare("bottleneck26_w0.1_nods_r33_b2_fp32");
  if (blocked == "nChw16c") {
    EXPECT_EQ(narrow->details().at("layout"), "nhwc");
    EXPECT_NE(narrow->details()
                  .value("layout_reason", "")
                  .find(": a conv of fewer input channels than a block"),
              std::string::npos)
        << narrow->details().dump();
  }
  for (const KernelInfo& kernel : narrow->kernels()) {
    EXPECT_EQ(kernel.implementation.find("ref"), std::string::npos)
        << kernel.name << " runs " << kernel.implementation;
  }
}

TEST_F(CpuDeviceTest, ImportedOpsRunOnOneDnnsOptimisedKernels) {
  // A reference kernel (oneDNN's "ref:") is many times slower than the jit ones: none may run.
  for (const testing::TestArchitecture& test : testing::test_architectures()) {
    if (test.name == "overhanging_average") continue;
    const auto session =
        device_.prepare(testing::test_config(test.name, 32, 2, Precision::kFp32), kSeed);
    for (const KernelInfo& kernel : session->kernels()) {
      EXPECT_EQ(kernel.implementation.find("ref"), std::string::npos)
          << test.name << ": " << kernel.name << " runs " << kernel.implementation;
    }
  }
}

// A kernel model prices the plan's ops without preparing a session (predict_by_kernels): the
// session's kernels must be those ops, in order, computing the same layers (engine::op_layers),
// but for an eltwise step, which follows its op and counts in its row (dataset_from_kernels).
TEST_F(CpuDeviceTest, TheSessionsKernelsAreThePlansOpsAndTheirSteps) {
  std::vector<Config> configs = {parse_key(kTinyBasic)};
  for (const testing::TestArchitecture& test : testing::test_architectures()) {
    if (test.name == "overhanging_average") continue;  // the engine refuses it
    configs.push_back(testing::test_config(test.name, 32, 1, Precision::kFp32));
  }
  for (const Config& config : configs) {
    const auto session = device_.prepare(config, kSeed);
    const engine::ExecutionPlan plan = engine::plan_execution(session->network());
    std::size_t op = 0;
    for (const KernelInfo& kernel : session->kernels()) {
      if (kernel.name.back() == ')') continue;  // a step of the op before
      ASSERT_LT(op, plan.ops.size()) << to_key(config) << ": " << kernel.name;
      EXPECT_EQ(kernel.layers, engine::op_layers(plan.ops[op]))
          << to_key(config) << ": " << kernel.name;
      ++op;
    }
    EXPECT_EQ(op, plan.ops.size()) << to_key(config);
  }
}

// oneDNN 2.6's concat copies one element per call where the channels are the layout's outermost
// axis (blocked, batch 1): there a concat is a reorder per input into its channels of the
// output, each input after the first a step. Batched, or in nhwc, it is oneDNN's concat.
TEST_F(CpuDeviceTest, ABlockedConcatOfBatchOneIsACopyPerInput) {
  const auto concat_kernels = [&](const char* architecture, int batch) {
    const auto session =
        device_.prepare(testing::test_config(architecture, 32, batch, Precision::kFp32), kSeed);
    std::vector<std::string> names;
    for (const KernelInfo& kernel : session->kernels()) {
      if (kernel.name.rfind("concat", 0) == 0) names.push_back(kernel.name);
    }
    return names;
  };
  EXPECT_EQ(concat_kernels("densenet_transition", 1),
            (std::vector<std::string>{"concat10", "concat10(copy 2)", "concat17",
                                      "concat17(copy 2)", "concat17(copy 3)"}));
  EXPECT_EQ(concat_kernels("densenet_transition", 2),
            (std::vector<std::string>{"concat10", "concat17"}));
  EXPECT_EQ(concat_kernels("shufflenet_v2_58", 1),
            (std::vector<std::string>{"concat18", "concat30"}));
}

TEST_F(CpuDeviceTest, ImportedKernelsFuseBatchNormsActivationsAndSums) {
  const auto session =
      device_.prepare(testing::test_config("mobilenet_v2_block", 32, 2, Precision::kFp32), kSeed);
  std::vector<std::string> names;
  for (const KernelInfo& kernel : session->kernels()) names.push_back(kernel.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "conv1+batch_norm+clip", "conv4+batch_norm+clip", "conv7+batch_norm+clip",
                "conv10+batch_norm", "conv12+batch_norm+clip", "conv15+batch_norm+clip",
                "conv18+batch_norm+add", "conv21+batch_norm+clip", "global_avg_pool24", "fc25"}));
  // A standalone hard sigmoid is two kernels (oneDNN 2.6 has none): linear, then clip. An
  // activation after a binary op that writes over padded channels is a kernel of its own.
  const auto pools = device_.prepare(
      testing::test_config("pools_and_activations", 32, 1, Precision::kFp32), kSeed);
  std::vector<std::string> pool_names;
  for (const KernelInfo& kernel : pools->kernels()) pool_names.push_back(kernel.name);
  const bool channels_padded = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
  std::vector<std::string> expected = {"conv1+relu",          "avg_pool3", "sigmoid4",
                                       "max_pool5",           "avg_pool6", "hard_sigmoid7",
                                       "hard_sigmoid7(clip)", "avg_pool8", "clip9"};
  if (channels_padded) {  // 24 channels in blocks of 16
    expected.insert(expected.end(), {"mul10+hard_swish", "mul10+hard_swish(hardswish)",
                                     "add12+relu", "add12+relu(relu)", "fc14"});
  } else {
    expected.insert(expected.end(), {"mul10+hard_swish", "add12+relu", "fc14"});
  }
  EXPECT_EQ(pool_names, expected);
}

// What an op holds in the weight region, unpadded: a conv its weights and one bias per output
// channel where it has a bias or a folded batch norm, an fc its weights and bias, a standalone
// batch norm its mean, variance, scale and shift.
std::int64_t unpadded_parameter_bytes(const Network& network) {
  std::int64_t values = 0;
  for (const engine::Op& op : engine::plan_execution(network).ops) {
    const Layer& layer = network.layers[static_cast<std::size_t>(op.layer)];
    const LayerParameterSizes sizes = layer_parameter_sizes(network, op.layer);
    const std::int64_t channels = network.tensors[static_cast<std::size_t>(layer.output)].c;
    if (op.kind == engine::OpKind::kConv) {
      values += static_cast<std::int64_t>(sizes.weight) +
                (op.batch_norm >= 0 || layer.bias ? channels : 0);
    } else if (op.kind == engine::OpKind::kFullyConnected) {
      values += static_cast<std::int64_t>(sizes.weight + sizes.bias);
    } else if (op.kind == engine::OpKind::kBatchNorm) {
      values += 4 * channels;
    }
  }
  return values * static_cast<std::int64_t>(sizeof(float));
}

TEST_F(CpuDeviceTest, ImportedWeightBytesAreEveryParameterInTheKernelsLayouts) {
  // Channel counts whose weights the kernels do not pad: exactly the parameters (DenseNet's
  // standalone batch norms included); the others at least that.
  for (const char* name : {"densenet_transition", "batch_norm_folded", "resnext_block"}) {
    const Config config = testing::test_config(name, 32, 1, Precision::kFp32);
    EXPECT_EQ(device_.prepare(config, kSeed)->memory().weight_bytes,
              unpadded_parameter_bytes(build_network(config)))
        << name;
  }
  for (const testing::TestArchitecture& test : testing::test_architectures()) {
    if (test.name == "overhanging_average") continue;
    const Config config = testing::test_config(test.name, 32, 1, Precision::kFp32);
    EXPECT_GE(device_.prepare(config, kSeed)->memory().weight_bytes,
              unpadded_parameter_bytes(build_network(config)))
        << test.name;
  }
}

TEST_F(CpuDeviceTest, AnImportedConfigurationItCannotRunIsAStatusWithItsReason) {
  const auto status = [this](const Config& config) {
    Support support;
    EXPECT_NO_THROW(support = device_.supports(config));
    EXPECT_FALSE(support.supported);
    for (const auto& call : {std::function<void()>([&] { device_.prepare(config, kSeed); }),
                             std::function<void()>([&] { device_.plan_memory(config); })}) {
      try {
        call();
        ADD_FAILURE() << "an unsupported configuration was accepted";
      } catch (const Error& error) {
        EXPECT_EQ(error.category(), ErrorCategory::kInput);
        EXPECT_NE(std::string(error.what()).find(support.reason), std::string::npos)
            << error.what();
      }
    }
    return support.reason;
  };
  const std::string overhang =
      status(testing::test_config("overhanging_average", 32, 1, Precision::kFp32));
  EXPECT_NE(overhang.find("layer avg_pool3 (avg_pool)"), std::string::npos) << overhang;
  EXPECT_NE(overhang.find("overhangs the padding"), std::string::npos) << overhang;
  // pools_and_activations has the same pool with no padding: it runs.
  EXPECT_TRUE(
      device_.supports(testing::test_config("pools_and_activations", 32, 1, Precision::kFp32))
          .supported);
  const std::string not_loaded = status(parse_key("graph-0123456789abcdef_r32_b1_fp32"));
  EXPECT_NE(not_loaded.find("is not loaded"), std::string::npos) << not_loaded;
}

TEST(Registry, ListsTheCpuBackendFirstWithOneDevice) {
  const auto backends = make_backends();
  ASSERT_FALSE(backends.empty());
  EXPECT_EQ(backends.front()->name(), "cpu");
  ASSERT_EQ(backends.front()->devices().size(), 1u);
  EXPECT_EQ(backends.front()->devices().front()->info().id, "cpu:0");
}

TEST_F(CpuDeviceTest, DescribesItsCapabilities) {
  const DeviceInfo& info = device_.info();
  EXPECT_EQ(info.kind, "cpu");
  EXPECT_FALSE(info.name.empty());
  EXPECT_EQ(info.library.rfind("oneDNN 2.", 0), 0u) << info.library;
  EXPECT_FALSE(info.isa.empty());
  EXPECT_GE(info.threads, 1);
  ASSERT_EQ(info.precisions.size(), 3u);
  for (const PrecisionSupport& precision : info.precisions) {
    EXPECT_EQ(precision.supported, precision.reason.empty()) << to_string(precision.precision);
    if (precision.precision == Precision::kFp32) {
      EXPECT_TRUE(precision.supported);
    } else if (precision.precision == Precision::kFp16) {
      EXPECT_FALSE(precision.supported);
    }
  }
}

TEST_F(CpuDeviceTest, Fp16IsAStatusWithAReasonNotAnException) {
  const Config config = parse_key("basic18_w0.25_ds_r32_b1_fp16");
  Support support;
  EXPECT_NO_THROW(support = device_.supports(config));
  EXPECT_FALSE(support.supported);
  EXPECT_NE(support.reason.find("fp16"), std::string::npos) << support.reason;
  EXPECT_EQ(support.to_string(), "unsupported: " + support.reason);
  try {
    device_.prepare(config, kSeed);
    FAIL() << "prepare accepted an unsupported configuration";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    EXPECT_NE(std::string(error.what()).find(support.reason), std::string::npos);
  }
}

TEST_F(CpuDeviceTest, Bf16SupportFollowsTheInstructionSet) {
  const Support support = device_.supports(parse_key("basic18_w0.25_ds_r32_b1_bf16"));
  const bool native =
      device_.info().isa == "avx512_core_bf16" || device_.info().isa == "avx512_core_amx";
  EXPECT_EQ(support.supported, native);
  if (!native) {
    EXPECT_EQ(support.reason,
              "bf16 needs avx512_bf16 or amx_bf16; this CPU's ISA is " + device_.info().isa);
  }
}

TEST_F(CpuDeviceTest, InvalidConfigurationIsAStatus) {
  Config config = parse_key(kTinyBasic);
  config.batch = 0;
  ASSERT_FALSE(invalid_reason(config).empty());
  Support support;
  EXPECT_NO_THROW(support = device_.supports(config));
  EXPECT_FALSE(support.supported);
  EXPECT_EQ(support.reason, "invalid configuration: " + invalid_reason(config));
}

TEST_F(CpuDeviceTest, SupportsFp32) {
  EXPECT_TRUE(device_.supports(parse_key(kTinyBasic)).supported);
  EXPECT_EQ(device_.supports(parse_key(kTinyBasic)).to_string(), "supported");
}

// Folded parameters: every conv's weights plus one bias per output channel (the folded batch
// norm), and the fc's weights and bias.
std::int64_t folded_parameter_bytes(const Network& network) {
  std::int64_t count = 0;
  for (const Layer& layer : network.layers) {
    if (layer.kind == LayerKind::kConv) {
      count += layer.params + network.tensors[static_cast<std::size_t>(layer.output)].c;
    } else if (layer.kind == LayerKind::kFullyConnected) {
      count += layer.params;
    }
  }
  return count * static_cast<std::int64_t>(sizeof(float));
}

TEST_F(CpuDeviceTest, WeightBytesAreTheFoldedParametersInTheKernelsLayouts) {
  // Channel counts here are multiples of 8, so the kernels' weight layouts carry no padding.
  for (const char* key : {kTinyBasic, kTinyBottleneck}) {
    const auto session = prepare(key);
    EXPECT_EQ(session->memory().weight_bytes, folded_parameter_bytes(session->network())) << key;
  }
  // Odd channel counts (6, 13, 26, ...) may be padded to the kernels' vector blocks, and the
  // padding is held, so it is counted.
  const auto odd = prepare("bottleneck26_w0.1_ds_r32_b1_fp32_k10");
  EXPECT_GE(odd->memory().weight_bytes, folded_parameter_bytes(odd->network()));
}

TEST_F(CpuDeviceTest, ArenaIsThePlannedArenaAndWithinTheAnalyticPeakPlusTheKeptInput) {
  // Between layers, activations are channel-blocked (8 on avx2, 16 with avx512): channels are
  // padded to the block. The input is plain nchw and the output a plain matrix.
  const std::int64_t block = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core ? 16 : 8;
  const std::vector<std::pair<const char*, bool>> cases = {
      // (key, whether every channel count is a multiple of the block: no padding)
      {kTinyBasic, true},
      {kTinyBottleneck, true},
      {"basic8s1.1.1_c16.32.64_w1_nods_r16_b2_fp32_k10", true},
      {"bottleneck26_w0.1_nods_r33_b2_fp32", false},
      // 13 input channels into a 3x3 conv, under a block: nhwc, unpadded.
      {"bottleneck26_w0.2_nods_r33_b2_fp32", false}};
  for (const auto& [key, unpadded] : cases) {
    const auto session = prepare(key);
    const Network& network = session->network();
    const MemoryUsage memory = session->memory();
    const bool blocked = session->details().at("layout") != "nhwc";

    // The session holds exactly what the planner placed.
    const engine::ExecutionPlan plan = engine::plan_execution(network);
    std::vector<engine::BufferRequest> requests;
    for (std::size_t v = 0; v < plan.values.size(); ++v) {
      const engine::Value& value = plan.values[v];
      const bool plain =
          static_cast<int>(v) == plan.input_value || static_cast<int>(v) == plan.output_value;
      const std::int64_t channels =
          plain || !blocked ? value.shape.c : (value.shape.c + block - 1) / block * block;
      requests.push_back(
          {value.shape.elements() / value.shape.c * channels * 4, value.first_op, value.last_op});
    }
    const engine::ArenaPlan arena = engine::plan_arena(requests, 64);
    EXPECT_EQ(memory.activation_bytes, arena.arena_bytes) << key;
    EXPECT_GE(memory.activation_bytes, arena.peak_live_bytes) << key;

    // Without padding, fusion never makes a live set larger than the analytic in-place model's,
    // but the input is kept for the whole pass (the next run() reads it again) and buffers are
    // 64-byte aligned.
    if (unpadded) {
      const Features features = compute_features(network);
      const std::int64_t input_bytes = network.tensors[0].elements() * 4;
      const auto alignment_slack_bytes = 64 * static_cast<std::int64_t>(plan.values.size());
      EXPECT_LE(memory.activation_bytes,
                features.peak_activation_bytes + input_bytes + alignment_slack_bytes)
          << key;
      // The model's feature for the arena is the same plan in plain layouts: only the alignment
      // differs.
      EXPECT_NEAR(static_cast<double>(memory.activation_bytes),
                  static_cast<double>(features.engine_arena_bytes),
                  static_cast<double>(alignment_slack_bytes))
          << key;
      // And its prepare peak with the scratchpad (oneDNN's, which the model learns) is the
      // session's within 3%: the alignment, the folded weights (a bias where the batch norm had
      // two parameters per channel) and the batch norms' parameters staged beside a conv's differ.
      EXPECT_NEAR(static_cast<double>(features.prepare_peak_bytes + memory.scratchpad_bytes),
                  static_cast<double>(memory.peak_bytes), 0.03 * memory.peak_bytes)
          << key;
    }

    EXPECT_EQ(memory.steady_bytes(),
              memory.weight_bytes + memory.activation_bytes + memory.scratchpad_bytes);
    EXPECT_GT(memory.peak_bytes, memory.steady_bytes()) << "staging is counted";
    EXPECT_EQ(memory.scratchpad_bytes % 64, 0);
  }
}

TEST_F(CpuDeviceTest, PlannedMemoryIsExactlyWhatPrepareReaches) {
  // Shapes the planner must get right: odd widths whose channels the blocked layout pads, batch
  // sizes between the usual powers of two, both block types, both stems, bf16 where it runs.
  std::vector<std::string> keys = {
      kTinyBasic, kTinyBottleneck, "basic12_w0.375_nods_r36_b3_fp32_k10",
      "bottleneck20_w0.625_ds_r44_b6_fp32_k10", "basic16_w1.125_ds_r52_b1_fp32_k10"};
  if (device_.supports(parse_key("basic10_w0.25_ds_r32_b2_bf16_k10")).supported) {
    keys.push_back("basic10_w0.375_ds_r32_b5_bf16_k10");
  }
  for (const std::string& key : keys) {
    const std::optional<MemoryUsage> planned = device_.plan_memory(parse_key(key));
    ASSERT_TRUE(planned.has_value()) << key;
    const MemoryUsage prepared = prepare(key)->memory();
    EXPECT_EQ(planned->weight_bytes, prepared.weight_bytes) << key;
    EXPECT_EQ(planned->activation_bytes, prepared.activation_bytes) << key;
    EXPECT_EQ(planned->scratchpad_bytes, prepared.scratchpad_bytes) << key;
    EXPECT_EQ(planned->peak_bytes, prepared.peak_bytes) << key;
    EXPECT_GT(planned->peak_bytes, planned->steady_bytes()) << key;  // a layer's staging on top
  }
  // Planning an unsupported configuration fails as prepare() does.
  EXPECT_THROW(device_.plan_memory(parse_key("basic10_w0.25_ds_r32_b2_fp16_k10")), Error);
}

TEST_F(CpuDeviceTest, SameSeedGivesIdenticalBitsAndAnotherSeedDoesNot) {
  const std::vector<float> first = run_once(*prepare(kTinyBottleneck, 11));
  const std::vector<float> second = run_once(*prepare(kTinyBottleneck, 11));
  const std::vector<float> other = run_once(*prepare(kTinyBottleneck, 12));
  EXPECT_TRUE(bitwise_equal(first, second));
  EXPECT_FALSE(bitwise_equal(first, other));
}

TEST_F(CpuDeviceTest, RunCanBeRepeatedAndKeepsItsInput) {
  const auto session = prepare(kTinyBasic);
  const std::vector<float> first = run_once(*session);
  for (int i = 0; i < 3; ++i) session->run();
  session->sync();
  EXPECT_TRUE(bitwise_equal(session->read_output(), first));
}

TEST_F(CpuDeviceTest, SetInputReplacesTheInput) {
  const auto session = prepare(kTinyBasic);
  const Network& network = session->network();
  const std::vector<float> seeded = run_once(*session);

  const std::vector<float> input = generate_input(network, kSeed + 1);
  session->set_input(input);
  const std::vector<float> other = run_once(*session);
  EXPECT_FALSE(bitwise_equal(other, seeded));
  EXPECT_LE(testing::relative_error(other, testing::reference_forward(network, kSeed, input)),
            1e-4);

  session->set_input(generate_input(network, kSeed));
  EXPECT_TRUE(bitwise_equal(run_once(*session), seeded));

  const std::vector<float> wrong_size(5, 0.0f);
  try {
    session->set_input(wrong_size);
    FAIL() << "set_input accepted 5 values";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
  }
}

// A pass run a kernel at a time (carb kernels) computes what run() does, and each kernel names
// the IR layers it computes: every conv, fc and batch norm in exactly one kernel, as its anchor
// or fused into one.
TEST_F(CpuDeviceTest, AKernelAtATimeComputesWhatAWholePassDoesAndNamesItsLayers) {
  std::vector<Config> configs = {parse_key(kTinyBottleneck)};
  for (const char* name : {"mobilenet_v3_se", "shufflenet_v2_58", "pools_and_activations"}) {
    configs.push_back(testing::test_config(name, 33, 2, Precision::kFp32));
  }
  for (const Config& config : configs) {
    SCOPED_TRACE(to_key(config));
    const auto session = device_.prepare(config, kSeed);
    const Network& network = session->network();
    const std::vector<float> input = generate_input(network, kSeed + 1);
    session->set_input(input);
    const std::vector<float> whole = run_once(*session);
    session->set_input(generate_input(network, kSeed));  // the kernels must overwrite its output
    run_once(*session);
    session->set_input(input);
    const std::vector<KernelInfo> kernels = session->kernels();
    for (std::size_t k = 0; k < kernels.size(); ++k) ASSERT_TRUE(session->run_kernel(k));
    EXPECT_TRUE(bitwise_equal(session->read_output(), whole));

    std::vector<int> owners(network.layers.size(), 0);
    for (const KernelInfo& kernel : kernels) {
      ASSERT_FALSE(kernel.layers.empty()) << kernel.name;
      for (const int layer : kernel.layers) {
        ASSERT_GE(layer, 0);
        ASSERT_LT(layer, static_cast<int>(network.layers.size()));
      }
      if (kernel.name.ends_with(")")) continue;  // an activation's step: its layer owns no kernel
      for (const int layer : kernel.layers) ++owners[static_cast<std::size_t>(layer)];
      // Named after its anchor first.
      EXPECT_EQ(kernel.name.find(
                    layer_name(network.layers[static_cast<std::size_t>(kernel.layers.front())])),
                0u)
          << kernel.name;
    }
    for (std::size_t i = 0; i < network.layers.size(); ++i) {
      const LayerKind kind = network.layers[i].kind;
      if (kind == LayerKind::kConv || kind == LayerKind::kFullyConnected ||
          kind == LayerKind::kBatchNorm) {
        EXPECT_EQ(owners[i], 1) << layer_name(network.layers[i]);
      }
    }
  }
}

TEST_F(CpuDeviceTest, KernelsFuseEveryBatchNormReluAndResidualAdd) {
  const auto session = prepare(kTinyBottleneck);
  const Network& network = session->network();
  const Features features = compute_features(network);
  const std::vector<KernelInfo> kernels = session->kernels();
  // One kernel per conv, pool and fc; batch norm, ReLU and add run inside the convs.
  EXPECT_EQ(static_cast<int>(kernels.size()),
            features.layer_counts[LayerKind::kConv] + features.layer_counts[LayerKind::kMaxPool] +
                features.layer_counts[LayerKind::kGlobalAvgPool] +
                features.layer_counts[LayerKind::kFullyConnected]);
  int adds = 0;
  int relus = 0;
  for (const KernelInfo& kernel : kernels) {
    EXPECT_FALSE(kernel.implementation.empty()) << kernel.name;
    adds += kernel.name.find("+add") != std::string::npos ? 1 : 0;
    relus += kernel.name.find("+relu") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(adds, features.layer_counts[LayerKind::kAdd]);
  EXPECT_EQ(relus, features.layer_counts[LayerKind::kRelu]);
  EXPECT_EQ(kernels.front().name, "conv1+bn1+relu");
  EXPECT_EQ(kernels.back().name, "fc");
}

// The kernel's transparent-huge-page mode ("always", "madvise" or "never"), or "" where it has
// none.
std::string transparent_huge_page_mode() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(file, line);
  const auto open = line.find('[');
  const auto close = line.find(']');
  if (open == std::string::npos || close == std::string::npos) return "";
  return line.substr(open + 1, close - open - 1);
}

// Bytes of this process's anonymous memory on transparent huge pages.
std::int64_t anon_huge_page_bytes() {
  std::ifstream file("/proc/self/smaps_rollup");
  std::string key;
  std::int64_t kib = 0;
  std::string line;
  while (std::getline(file, line)) {
    std::istringstream fields(line);
    if (fields >> key >> kib && key == "AnonHugePages:") return kib * 1024;
  }
  return -1;
}

TEST_F(CpuDeviceTest, LargeBuffersLieOnHugePagesWhereTheKernelAllowsItAndAreGivenBack) {
  const std::string mode = transparent_huge_page_mode();
  if (mode != "always" && mode != "madvise") {
    GTEST_SKIP() << "transparent huge pages are '" << mode << "' on this kernel";
  }
  const std::int64_t before = anon_huge_page_bytes();
  ASSERT_GE(before, 0) << "no AnonHugePages in /proc/self/smaps_rollup";
  std::int64_t weight_bytes = 0;
  {
    // 11.7 M parameters: ~47 MB of weights in one region, ~21 MB of it one layer's staging.
    const auto session = prepare("basic18_w1_ds_r32_b1_fp32");
    weight_bytes = session->memory().weight_bytes;
    ASSERT_GT(weight_bytes, std::int64_t{40} << 20);
    const std::int64_t during = anon_huge_page_bytes();
    // Every whole 2 MiB of the weights at least (the region's tail may be on 4 KiB pages). With
    // 4 KiB pages (the engine's memory before it asked for huge pages) this grew by 0.
    EXPECT_GE(during - before, weight_bytes - (std::int64_t{4} << 20)) << "mode " << mode;
    EXPECT_EQ(run_once(*session).size(), 1000u);
  }
  // Destroying the session unmaps its regions: no huge page stays behind.
  EXPECT_LE(anon_huge_page_bytes() - before, std::int64_t{2} << 20);
}

TEST_F(CpuDeviceTest, KeptWeightMemoryServesTheNextSessionAndChangesNoBit) {
  // 46 MB of weights kept, then a network with odd channel counts (padded channel blocks in
  // its weight layouts) prepared in them: every byte it reads must be its own, so its output
  // is the same bits as in memory nobody used before.
  const std::string next = "basic18_w0.35_ds_r33_b2_fp32";
  std::vector<float> expected;
  {
    const auto fresh_backend = cpu::make_cpu_backend();
    const Device& fresh = *fresh_backend->devices().at(0);
    { const auto session = fresh.prepare(parse_key(next), kSeed); }
    EXPECT_EQ(fresh.kept_memory_bytes(), 0) << "keeping is off by default";
    expected = run_once(*fresh.prepare(parse_key(next), kSeed));
  }
  constexpr std::int64_t kHugePage = std::int64_t{2} << 20;
  device_.keep_memory_between_sessions(true);
  std::int64_t large_weight_bytes = 0;
  {
    const auto large = prepare("basic18_w1_ds_r32_b1_fp32");
    large_weight_bytes = large->memory().weight_bytes;
    run_once(*large);
  }
  const std::int64_t kept = device_.kept_memory_bytes();
  EXPECT_EQ(kept % kHugePage, 0) << "whole huge pages";
  EXPECT_GT(kept, large_weight_bytes - kHugePage);
  EXPECT_LE(kept, large_weight_bytes + kHugePage);
  EXPECT_EQ(device_.kept_memory_unused_bytes(), kept) << "no session since";
  std::int64_t next_weight_bytes = 0;
  {
    const auto session = prepare(next);
    next_weight_bytes = session->memory().weight_bytes;
    EXPECT_TRUE(bitwise_equal(run_once(*session), expected));
  }
  // The next network used the start of the kept memory (its weights, with their 64-byte
  // alignment, page-rounded); the rest it left alone. The larger mapping stays kept.
  const std::int64_t unused = device_.kept_memory_unused_bytes();
  EXPECT_LE(unused, kept - next_weight_bytes);
  EXPECT_GE(unused, kept - next_weight_bytes - (std::int64_t{64} << 10));
  EXPECT_EQ(device_.kept_memory_bytes(), kept);
  device_.keep_memory_between_sessions(false);
  EXPECT_EQ(device_.kept_memory_bytes(), 0);
}

TEST(DnnlCheck, TurnsAOneDnnFailureIntoARuntimeErrorNamingTheCall) {
  const dnnl::memory::desc md({2, 3}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  try {
    // A reshape to a different element count is invalid.
    CARB_DNNL(md.reshape({7}));
    FAIL() << "the invalid reshape did not throw";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.category(), ErrorCategory::kRuntime);
    EXPECT_NE(message.find("oneDNN call md.reshape({7}) failed at "), std::string::npos) << message;
    EXPECT_NE(message.find("cpu_device_test.cpp:"), std::string::npos) << message;
    EXPECT_NE(message.find("invalid_arguments"), std::string::npos) << message;
  }
}

TEST(DnnlCheck, PassesResultsThrough) {
  const dnnl::memory::desc md = CARB_DNNL(
      dnnl::memory::desc({2, 3}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab));
  EXPECT_EQ(md.get_size(), 24u);
}

}  // namespace
}  // namespace carb
