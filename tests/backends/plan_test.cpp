// The engines' planners: which IR layers fuse into which kernels, and where activation buffers
// sit in the arena, for ResNets and for hand-built imported architectures.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "architectures.hpp"
#include "carb/engine_plan.hpp"
#include "carb/graph.hpp"

namespace carb::engine {
namespace {

std::vector<BufferRequest> fp32_requests(const ExecutionPlan& plan) {
  std::vector<BufferRequest> requests;
  for (const Value& value : plan.values) {
    requests.push_back({value.shape.elements() * 4, value.first_op, value.last_op});
  }
  return requests;
}

const Op& op_named(const ExecutionPlan& plan, const std::string& name) {
  const auto found =
      std::find_if(plan.ops.begin(), plan.ops.end(), [&](const Op& op) { return op.name == name; });
  EXPECT_NE(found, plan.ops.end()) << name;
  return *found;
}

std::ptrdiff_t position(const ExecutionPlan& plan, const std::string& name) {
  return &op_named(plan, name) - plan.ops.data();
}

TEST(ExecutionPlan, FusesBatchNormReluAndTheResidualAddIntoConvs) {
  const Network network = build_network(parse_key("basic18_w0.25_ds_r32_b1_fp32"));
  const ExecutionPlan plan = plan_execution(network);
  // 20 convs, max pool, average pool, fc.
  ASSERT_EQ(plan.ops.size(), 23u);
  EXPECT_EQ(plan.ops.front().name, "conv1+bn1+relu");
  EXPECT_TRUE(plan.ops.front().relu);
  EXPECT_FALSE(plan.ops.front().sum);
  EXPECT_EQ(plan.ops[1].kind, OpKind::kMaxPool);
  EXPECT_EQ(plan.ops.back().kind, OpKind::kFullyConnected);
  for (const Op& op : plan.ops) {
    EXPECT_EQ(op.kind == OpKind::kConv, op.batch_norm >= 0) << op.name;
  }

  // Without downsampling the block's second conv accumulates into the block input's buffer.
  const Op& conv1 = op_named(plan, "layer1.0.conv1+bn1+relu");
  const Op& conv2 = op_named(plan, "layer1.0.conv2+bn2+add+relu");
  EXPECT_TRUE(conv2.sum && conv2.relu);
  EXPECT_EQ(conv2.output, conv1.input);
  EXPECT_EQ(conv2.input, conv1.output);

  // With downsampling it accumulates into the downsample's output, so it runs after it.
  const Op& downsample = op_named(plan, "layer2.0.downsample.0+downsample.1");
  const Op& sum = op_named(plan, "layer2.0.conv2+bn2+add+relu");
  EXPECT_FALSE(downsample.relu || downsample.sum);
  EXPECT_EQ(sum.output, downsample.output);
  EXPECT_LT(position(plan, "layer2.0.downsample.0+downsample.1"),
            position(plan, "layer2.0.conv2+bn2+add+relu"));
}

TEST(ExecutionPlan, KeepsTheInputAndOutputLiveForTheWholePass) {
  const Network network = build_network(parse_key("bottleneck50_w0.25_nods_r16_b2_fp32"));
  const ExecutionPlan plan = plan_execution(network);
  const int last = static_cast<int>(plan.ops.size()) - 1;
  const Value& input = plan.values[static_cast<std::size_t>(plan.input_value)];
  EXPECT_EQ(input.first_op, 0);
  EXPECT_EQ(input.last_op, last);
  EXPECT_EQ(plan.values[static_cast<std::size_t>(plan.output_value)].last_op, last);
  EXPECT_EQ(plan.values[static_cast<std::size_t>(plan.output_value)].shape,
            network.tensors[static_cast<std::size_t>(network.output)]);
  for (const Value& value : plan.values) {
    EXPECT_GE(value.first_op, 0);
    EXPECT_LE(value.first_op, value.last_op);
  }
  // Every op writes either a fresh value or (a residual sum) one written before it.
  for (std::size_t k = 0; k < plan.ops.size(); ++k) {
    const Value& output = plan.values[static_cast<std::size_t>(plan.ops[k].output)];
    EXPECT_EQ(output.first_op == static_cast<int>(k), !plan.ops[k].sum) << plan.ops[k].name;
  }
}

TEST(ExecutionPlan, SeparateOutputSumsReadTheIdentityAndWriteAFreshValue) {
  const Network network = build_network(parse_key("basic18_w0.25_ds_r32_b1_fp32"));
  const ExecutionPlan in_place = plan_execution(network);
  const ExecutionPlan plan = plan_execution(network, ResidualMode::kSeparateOutput);
  // The same kernels in the same order; only where the sums write differs.
  ASSERT_EQ(plan.ops.size(), in_place.ops.size());
  for (std::size_t k = 0; k < plan.ops.size(); ++k) {
    EXPECT_EQ(plan.ops[k].name, in_place.ops[k].name);
    EXPECT_EQ(plan.ops[k].sum, in_place.ops[k].sum);
    EXPECT_EQ(in_place.ops[k].residual, -1);
    // Every op writes a value no op wrote before it.
    const Value& output = plan.values[static_cast<std::size_t>(plan.ops[k].output)];
    EXPECT_EQ(output.first_op, static_cast<int>(k)) << plan.ops[k].name;
    EXPECT_EQ(plan.ops[k].residual >= 0, plan.ops[k].sum) << plan.ops[k].name;
  }
  const Op& conv1 = op_named(plan, "layer1.0.conv1+bn1+relu");
  const Op& conv2 = op_named(plan, "layer1.0.conv2+bn2+add+relu");
  EXPECT_EQ(conv2.residual, conv1.input);
  EXPECT_NE(conv2.output, conv2.residual);
  EXPECT_NE(conv2.output, conv2.input);
  const Op& downsample = op_named(plan, "layer2.0.downsample.0+downsample.1");
  const Op& sum = op_named(plan, "layer2.0.conv2+bn2+add+relu");
  EXPECT_EQ(sum.residual, downsample.output);
  // The identity stays live until the sum has read it, so the arena never lets the sum's output
  // overwrite it.
  const std::size_t sum_index = static_cast<std::size_t>(&sum - plan.ops.data());
  EXPECT_GE(plan.values[static_cast<std::size_t>(sum.residual)].last_op,
            static_cast<int>(sum_index));
  EXPECT_EQ(plan.values[static_cast<std::size_t>(plan.output_value)].shape,
            network.tensors[static_cast<std::size_t>(network.output)]);
  // A separate output costs at most one more identity-sized buffer at a time.
  const ArenaPlan separate = plan_arena(fp32_requests(plan), 64);
  const ArenaPlan accumulate = plan_arena(fp32_requests(in_place), 64);
  EXPECT_GE(separate.peak_live_bytes, accumulate.peak_live_bytes);
  EXPECT_LE(separate.peak_live_bytes, accumulate.peak_live_bytes * 2);
}

TEST(ExecutionPlan, ArenaIsThePeakLiveSetWithinTheAnalyticPeakPlusTheKeptInput) {
  for (const char* key : {"basic18_w1_ds_r224_b1_fp32", "basic34_w1_nods_r64_b4_fp32",
                          "bottleneck50_w1_ds_r224_b1_fp32", "bottleneck101_w0.5_nods_r33_b2_fp32",
                          "basic8s1.1.1_c8.16.32_w1_nods_r16_b2_fp32_k10"}) {
    const Network network = build_network(parse_key(key));
    const ExecutionPlan plan = plan_execution(network);
    const ArenaPlan arena = plan_arena(fp32_requests(plan), 64);
    const std::int64_t input_bytes = network.tensors[0].elements() * 4;
    const std::int64_t peak_bytes = compute_features(network).peak_activation_bytes;
    // Fusion never grows a live set of the analytic in-place model; the kept input is extra.
    EXPECT_LE(arena.peak_live_bytes, peak_bytes + input_bytes) << key;
    // On a ResNet's lifetimes greedy-by-size placement wastes nothing.
    EXPECT_EQ(arena.arena_bytes, arena.peak_live_bytes) << key;
  }
}

Network test_network(std::string_view name, int resolution = 32, int batch = 1) {
  return build_network(testing::test_config(name, resolution, batch, Precision::kFp32));
}

std::vector<std::string> op_names(const ExecutionPlan& plan) {
  std::vector<std::string> names;
  for (const Op& op : plan.ops) names.push_back(op.name);
  return names;
}

const Value& value_of(const ExecutionPlan& plan, int value) {
  return plan.values[static_cast<std::size_t>(value)];
}

TEST(ExecutionPlan, MobileNetBlocksFuseClipsAndSumTheProjectionIntoTheBlockInput) {
  const ExecutionPlan plan = plan_execution(test_network("mobilenet_v2_block"));
  EXPECT_EQ(op_names(plan),
            (std::vector<std::string>{
                "conv1+batch_norm+clip", "conv4+batch_norm+clip", "conv7+batch_norm+clip",
                "conv10+batch_norm", "conv12+batch_norm+clip", "conv15+batch_norm+clip",
                "conv18+batch_norm+add", "conv21+batch_norm+clip", "global_avg_pool24", "fc25"}));
  // add(block, projection): the identity is the add's first operand; the projection's conv
  // accumulates into it.
  const Op& sum = op_named(plan, "conv18+batch_norm+add");
  EXPECT_TRUE(sum.sum);
  EXPECT_EQ(sum.activation, -1);
  EXPECT_EQ(sum.output, op_named(plan, "conv10+batch_norm").output);
  EXPECT_EQ(sum.input, op_named(plan, "conv15+batch_norm+clip").output);
  const Op& clipped = op_named(plan, "conv1+batch_norm+clip");
  EXPECT_EQ(clipped.activation, 2);  // the clip layer
  EXPECT_FALSE(clipped.relu);
  EXPECT_EQ(clipped.batch_norm, 1);
}

TEST(ExecutionPlan, SqueezeExciteMultipliesInPlaceOnceThePoolHasReadItsInput) {
  const ExecutionPlan plan = plan_execution(test_network("mobilenet_v3_se"));
  EXPECT_EQ(op_names(plan), (std::vector<std::string>{
                                "conv1+batch_norm+hard_swish", "conv4+batch_norm+hard_swish",
                                "conv7+batch_norm+hard_swish", "global_avg_pool10", "conv11+relu",
                                "conv13+hard_sigmoid", "mul15", "conv16+batch_norm+add",
                                "global_avg_pool19", "fc20+hard_swish", "fc22"}));
  // The depthwise output is read by the pool and the mul; the pool runs first, so the mul
  // writes over it, its gate (the second operand) read alongside.
  const Op& mul = op_named(plan, "mul15");
  EXPECT_EQ(mul.kind, OpKind::kMul);
  EXPECT_EQ(mul.input, op_named(plan, "conv7+batch_norm+hard_swish").output);
  EXPECT_EQ(mul.output, mul.input);
  EXPECT_EQ(mul.other_inputs, (std::vector<int>{op_named(plan, "conv13+hard_sigmoid").output}));
  EXPECT_EQ(op_named(plan, "conv16+batch_norm+add").output,
            op_named(plan, "conv1+batch_norm+hard_swish").output);
  EXPECT_EQ(op_named(plan, "conv11+relu").batch_norm, -1);
  EXPECT_TRUE(op_named(plan, "conv11+relu").relu);
}

TEST(ExecutionPlan, DenseNetKeepsConcatInputsLiveAndNormalisesSharedFeaturesOutOfPlace) {
  const ExecutionPlan plan = plan_execution(test_network("densenet_transition"));
  EXPECT_EQ(
      op_names(plan),
      (std::vector<std::string>{
          "conv1+batch_norm+relu", "batch_norm4+relu", "conv6+batch_norm+relu", "conv9", "concat10",
          "batch_norm11+relu", "conv13+batch_norm+relu", "conv16", "concat17", "batch_norm18+relu",
          "conv20", "avg_pool21", "batch_norm22+relu", "global_avg_pool24", "fc25"}));
  // The stem's features are read by the first batch norm and by both concats: the batch norm
  // writes a value of its own, and the features stay live until the block's concat.
  const int stem = op_named(plan, "conv1+batch_norm+relu").output;
  const Op& first = op_named(plan, "batch_norm4+relu");
  EXPECT_EQ(first.kind, OpKind::kBatchNorm);
  EXPECT_TRUE(first.relu);
  EXPECT_EQ(first.input, stem);
  EXPECT_NE(first.output, first.input);
  const Op& block = op_named(plan, "concat17");
  EXPECT_EQ(block.input, stem);
  EXPECT_EQ(block.other_inputs,
            (std::vector<int>{op_named(plan, "conv9").output, op_named(plan, "conv16").output}));
  EXPECT_EQ(value_of(plan, stem).last_op, position(plan, "concat17"));
  EXPECT_EQ(value_of(plan, op_named(plan, "conv9").output).last_op, position(plan, "concat17"));
  // A concat read by one batch norm alone is normalised in place.
  for (const char* name : {"batch_norm11+relu", "batch_norm18+relu"}) {
    EXPECT_EQ(op_named(plan, name).output, op_named(plan, name).input) << name;
  }
  EXPECT_EQ(op_named(plan, "batch_norm11+relu").input, op_named(plan, "concat10").output);
  EXPECT_EQ(op_named(plan, "batch_norm22+relu").output, op_named(plan, "avg_pool21").output);
}

TEST(ExecutionPlan, ShuffleNetSlicesConcatsAndShufflesWriteValuesOfTheirOwn) {
  const ExecutionPlan plan = plan_execution(test_network("shufflenet_v2_58"));
  ASSERT_EQ(plan.ops.size(), 19u);
  int slices = 0, concats = 0, shuffles = 0;
  for (std::size_t k = 0; k < plan.ops.size(); ++k) {
    const Op& op = plan.ops[k];
    slices += op.kind == OpKind::kSlice ? 1 : 0;
    concats += op.kind == OpKind::kConcat ? 1 : 0;
    shuffles += op.kind == OpKind::kChannelShuffle ? 1 : 0;
    if (op.kind == OpKind::kSlice || op.kind == OpKind::kConcat ||
        op.kind == OpKind::kChannelShuffle) {
      EXPECT_EQ(value_of(plan, op.output).first_op, static_cast<int>(k)) << op.name;
    }
  }
  EXPECT_EQ(slices, 2);
  EXPECT_EQ(concats, 2);
  EXPECT_EQ(shuffles, 2);
  // Both slices read the shuffled tensor; the half kept aside lives until the second concat.
  const Op& kept = op_named(plan, "slice20");
  EXPECT_EQ(kept.input, op_named(plan, "slice21").input);
  EXPECT_EQ(kept.input, op_named(plan, "channel_shuffle19").output);
  EXPECT_EQ(value_of(plan, kept.output).last_op, position(plan, "concat30"));
  EXPECT_EQ(op_named(plan, "concat30").input, kept.output);
}

TEST(ExecutionPlan, ASumThatWouldOverwriteWhatIsStillReadRunsAsAConvAndAnAdd) {
  const ExecutionPlan plan = plan_execution(test_network("crossing_residuals"));
  EXPECT_EQ(op_names(plan),
            (std::vector<std::string>{"conv1+batch_norm+relu", "conv4+batch_norm+relu",
                                      "conv9+batch_norm", "add11", "conv7+batch_norm+add+relu",
                                      "conv14+batch_norm", "add16", "global_avg_pool17", "fc18"}));
  // add11's identity x is read by conv7, which runs at add12, later: add11 runs on its own,
  // in place over its conv's result.
  const int x = op_named(plan, "conv1+batch_norm+relu").output;
  const Op& conv = op_named(plan, "conv9+batch_norm");
  const Op& add = op_named(plan, "add11");
  EXPECT_FALSE(conv.sum);
  EXPECT_EQ(add.kind, OpKind::kAdd);
  EXPECT_EQ(add.input, conv.output);
  EXPECT_EQ(add.output, add.input);
  EXPECT_EQ(add.other_inputs, (std::vector<int>{x}));
  // conv7 reads x at its add, so x stays live until then; it accumulates into add11's result.
  const Op& sum = op_named(plan, "conv7+batch_norm+add+relu");
  EXPECT_TRUE(sum.sum && sum.relu);
  EXPECT_EQ(sum.input, x);
  EXPECT_EQ(sum.output, add.output);
  EXPECT_EQ(value_of(plan, x).last_op, position(plan, "conv7+batch_norm+add+relu"));
  // add16's identity is its conv's own input, which a sum would overwrite while the conv reads it.
  const Op& last = op_named(plan, "add16");
  EXPECT_EQ(last.input, op_named(plan, "conv14+batch_norm").output);
  EXPECT_EQ(last.other_inputs, (std::vector<int>{sum.output}));
  // With separate outputs nothing is overwritten: the first sum stays fused, the last does not.
  const ExecutionPlan separate =
      plan_execution(test_network("crossing_residuals"), ResidualMode::kSeparateOutput);
  EXPECT_EQ(op_names(separate),
            (std::vector<std::string>{"conv1+batch_norm+relu", "conv4+batch_norm+relu",
                                      "conv9+batch_norm+add", "conv7+batch_norm+add+relu",
                                      "conv14+batch_norm", "add16", "global_avg_pool17", "fc18"}));
}

TEST(ExecutionPlan, FoldedBatchNormNetworksSumEitherOperandOfAnAdd) {
  const ExecutionPlan plan = plan_execution(test_network("batch_norm_folded"));
  EXPECT_EQ(op_names(plan),
            (std::vector<std::string>{"conv1+relu", "conv3+relu", "conv5+add+relu",
                                      "conv8+batch_norm+relu", "conv12", "conv11+add+relu",
                                      "global_avg_pool15", "fc16"}));
  EXPECT_EQ(op_named(plan, "conv5+add+relu").output, op_named(plan, "conv1+relu").output);
  EXPECT_EQ(op_named(plan, "conv8+batch_norm+relu").batch_norm, 8);
  // add(shortcut, branch): the shortcut's conv comes first in the IR but its identity (the
  // branch) later, so it runs at the add and accumulates into the branch's value.
  EXPECT_EQ(op_named(plan, "conv11+add+relu").output, op_named(plan, "conv12").output);
  EXPECT_LT(position(plan, "conv12"), position(plan, "conv11+add+relu"));
}

TEST(ExecutionPlan, StandaloneActivationsRunInPlaceUnlessTheirInputIsReadLater) {
  const ExecutionPlan plan = plan_execution(test_network("pools_and_activations"));
  EXPECT_EQ(op_names(plan),
            (std::vector<std::string>{"conv1+relu", "avg_pool3", "sigmoid4", "max_pool5",
                                      "avg_pool6", "hard_sigmoid7", "avg_pool8", "clip9",
                                      "mul10+hard_swish", "add12+relu", "fc14"}));
  for (const char* name : {"sigmoid4", "hard_sigmoid7"}) {
    EXPECT_EQ(op_named(plan, name).kind, OpKind::kEltwise) << name;
    EXPECT_EQ(op_named(plan, name).output, op_named(plan, name).input) << name;
  }
  // The pooled tensor is read by the clip, the mul and the add: nothing overwrites it, and it
  // lives until the add.
  const int pooled = op_named(plan, "avg_pool8").output;
  EXPECT_NE(op_named(plan, "clip9").output, pooled);
  const Op& mul = op_named(plan, "mul10+hard_swish");
  EXPECT_EQ(mul.output, op_named(plan, "clip9").output);
  EXPECT_EQ(mul.other_inputs, (std::vector<int>{pooled}));
  EXPECT_EQ(op_named(plan, "add12+relu").output, mul.output);
  EXPECT_EQ(value_of(plan, pooled).last_op, position(plan, "add12+relu"));
}

// Properties of every plan of every hand-built architecture: each value is written before it is
// read, lifetimes cover every use, the input and output live throughout, and the arena never
// lets two live values share a byte.
TEST(ExecutionPlan, EveryImportedPlanReadsValuesOnlyWhileTheyLive) {
  for (const testing::TestArchitecture& test : testing::test_architectures()) {
    for (const int batch : {1, 2}) {
      const Network network = test_network(test.name, 32, batch);
      const ExecutionPlan plan = plan_execution(network);
      const int last = static_cast<int>(plan.ops.size()) - 1;
      std::vector<bool> written(plan.values.size(), false);
      written[static_cast<std::size_t>(plan.input_value)] = true;
      for (std::size_t k = 0; k < plan.ops.size(); ++k) {
        const Op& op = plan.ops[k];
        std::vector<int> reads = op.other_inputs;
        reads.push_back(op.input);
        if (op.sum || op.output == op.input) reads.push_back(op.output);
        for (const int value : reads) {
          EXPECT_TRUE(written[static_cast<std::size_t>(value)]) << test.name << " " << op.name;
          EXPECT_LE(value_of(plan, value).first_op, static_cast<int>(k)) << op.name;
          EXPECT_GE(value_of(plan, value).last_op, static_cast<int>(k)) << op.name;
        }
        written[static_cast<std::size_t>(op.output)] = true;
      }
      EXPECT_EQ(value_of(plan, plan.input_value).last_op, last) << test.name;
      EXPECT_EQ(value_of(plan, plan.output_value).last_op, last) << test.name;
      EXPECT_EQ(value_of(plan, plan.output_value).shape,
                network.tensors[static_cast<std::size_t>(network.output)])
          << test.name;
      const ArenaPlan arena = plan_arena(fp32_requests(plan), 64);
      EXPECT_GE(arena.arena_bytes, arena.peak_live_bytes) << test.name;
    }
  }
}

// Fusion and in-place writes never hold more than the analytic model of an eager engine that
// runs elementwise layers in place (peak_activation_bytes), but for the input kept whole pass.
TEST(ExecutionPlan, ImportedLiveSetsStayWithinTheAnalyticPeakPlusTheKeptInput) {
  for (const testing::TestArchitecture& test : testing::test_architectures()) {
    const Network network = test_network(test.name, 32, 2);
    const ArenaPlan arena = plan_arena(fp32_requests(plan_execution(network)), 64);
    const std::int64_t input_bytes = network.tensors[0].elements() * 4;
    const std::int64_t alignment_slack_bytes =
        64 * static_cast<std::int64_t>(network.layers.size());
    EXPECT_LE(arena.peak_live_bytes,
              compute_features(network).peak_activation_bytes + input_bytes + alignment_slack_bytes)
        << test.name;
  }
}

TEST(ArenaPlan, BuffersWithDisjointLifetimesShareBytes) {
  const ArenaPlan plan = plan_arena({{100, 0, 1}, {100, 1, 2}, {100, 2, 3}}, 64);
  EXPECT_EQ(plan.offsets_bytes, (std::vector<std::int64_t>{0, 128, 0}));
  EXPECT_EQ(plan.arena_bytes, 256);
  EXPECT_EQ(plan.peak_live_bytes, 256);
}

TEST(ArenaPlan, PicksTheSmallestGapThatFits) {
  // Free during op 2: [256, 512) (B) and [640, 704) (D); F fits both and takes the tighter one.
  const ArenaPlan plan = plan_arena({{256, 0, 4},  // A
                                     {256, 0, 0},  // B
                                     {128, 0, 4},  // C
                                     {64, 0, 0},   // D
                                     {64, 0, 4},   // E
                                     {64, 2, 2}},  // F
                                    64);
  EXPECT_EQ(plan.offsets_bytes, (std::vector<std::int64_t>{0, 256, 512, 640, 704, 640}));
  EXPECT_EQ(plan.arena_bytes, 768);
  EXPECT_EQ(plan.peak_live_bytes, 768);
}

TEST(ArenaPlan, RandomRequestsNeverShareBytesWhileBothLive) {
  std::uint64_t state = 12345;
  const auto next = [&state](std::uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((state >> 33) % bound);
  };
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<BufferRequest> requests;
    for (int i = 0; i < 40; ++i) {
      const int first = next(30);
      requests.push_back({1 + next(5000), first, first + next(8)});
    }
    const ArenaPlan plan = plan_arena(requests, 64);
    std::int64_t top = 0;
    for (std::size_t a = 0; a < requests.size(); ++a) {
      const std::int64_t a_end = plan.offsets_bytes[a] + requests[a].size_bytes;
      EXPECT_EQ(plan.offsets_bytes[a] % 64, 0);
      top = std::max(top, a_end);
      for (std::size_t b = a + 1; b < requests.size(); ++b) {
        const bool live_together = requests[a].first_op <= requests[b].last_op &&
                                   requests[b].first_op <= requests[a].last_op;
        const bool bytes_overlap =
            plan.offsets_bytes[a] < plan.offsets_bytes[b] + requests[b].size_bytes &&
            plan.offsets_bytes[b] < a_end;
        EXPECT_FALSE(live_together && bytes_overlap) << "trial " << trial << ": " << a << ", " << b;
      }
    }
    EXPECT_GE(plan.arena_bytes, top);
    EXPECT_GE(plan.arena_bytes, plan.peak_live_bytes);
  }
}

double feature(const std::vector<double>& values, const std::string& name) {
  const std::vector<std::string>& names = kernel_feature_names();
  const auto at = std::find(names.begin(), names.end(), name);
  EXPECT_NE(at, names.end()) << name;
  return values[static_cast<std::size_t>(at - names.begin())];
}

// The kernel model's features of a kernel: its bytes, MACs and shapes, one kind of kernel, the
// activation fused into it.
TEST(KernelFeatures, DescribeEachOpOfThePlan) {
  const Network network = build_network(parse_key("basic10_w0.25_nods_r32_b2_fp32"));
  const ExecutionPlan plan = plan_execution(network);
  const std::vector<std::string>& names = kernel_feature_names();
  ASSERT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (const Op& op : plan.ops) {
    const std::vector<double> values = kernel_features(network, op_layers(op));
    ASSERT_EQ(values.size(), names.size()) << op.name;
    double kinds = 0;
    double fused = 0;
    for (std::size_t f = 0; f < names.size(); ++f) {
      if (names[f].rfind("is_", 0) == 0) kinds += values[f];
      if (names[f].rfind("fused_", 0) == 0) fused += values[f];
    }
    EXPECT_EQ(kinds, 1) << op.name;
    EXPECT_EQ(fused, op.activation >= 0 && op.activation != op.layer ? 1 : 0) << op.name;
  }
  // The stem: a 3x3 conv at stride 1 of 2 x 3 x 32 x 32 into 2 x 16 x 32 x 32, its batch norm
  // and ReLU fused.
  const Op& stem = op_named(plan, "conv1+bn1+relu");
  const std::vector<double> values = kernel_features(network, op_layers(stem));
  const Layer& conv = network.layers[static_cast<std::size_t>(stem.layer)];
  const Layer& bn = network.layers[static_cast<std::size_t>(stem.batch_norm)];
  EXPECT_EQ(feature(values, "in_bytes"), 2 * 3 * 32 * 32 * 4);
  EXPECT_EQ(feature(values, "out_bytes"), 2 * 16 * 32 * 32 * 4);
  EXPECT_EQ(feature(values, "macs"), static_cast<double>(conv.macs + bn.macs));
  EXPECT_EQ(feature(values, "weight_bytes"), 4.0 * static_cast<double>(conv.params + bn.params));
  EXPECT_EQ(feature(values, "batch"), 2);
  EXPECT_EQ(feature(values, "cin"), 3);
  EXPECT_EQ(feature(values, "cout"), 16);
  EXPECT_EQ(feature(values, "window"), 3);
  EXPECT_EQ(feature(values, "in_hw"), 32 * 32);
  EXPECT_EQ(feature(values, "is_stem"), 1);
  EXPECT_EQ(feature(values, "fused_relu"), 1);
  EXPECT_EQ(feature(values, "inputs"), 1);
  // The classifier: an fc of 2 x 128 inputs, no activation.
  const std::vector<double> fc = kernel_features(network, op_layers(plan.ops.back()));
  EXPECT_EQ(feature(fc, "is_fc"), 1);
  EXPECT_EQ(feature(fc, "fused_relu"), 0);
  EXPECT_TRUE(kernel_features(network, {}).empty());
}

// Whether PyTorch runs a conv on its native path (is_torch_native): a batch-1, ungrouped conv of
// window 3 or less on at most 20,480 input values, in float32, of PyTorch's kernels only.
TEST(KernelFeatures, SayWhichConvsPyTorchRunsOnItsNativePath) {
  const auto native = [](const std::string& key, const std::string& layer, KernelEngine engine) {
    const Network network = build_network(parse_key(key));
    for (std::size_t i = 0; i < network.layers.size(); ++i) {
      if (layer_name(network.layers[i]) == layer) {
        return feature(kernel_features(network, {static_cast<int>(i)}, engine), "is_torch_native");
      }
    }
    ADD_FAILURE() << layer << " not in " << key;
    return -1.0;
  };
  // layer1.0.conv1: 16 x 16 x 16 = 4,096 input values at 64 px, early-downsampled, width 0.25.
  EXPECT_EQ(native("basic10_w0.25_ds_r64_b1_fp32", "layer1.0.conv1", KernelEngine::kTorch), 1);
  EXPECT_EQ(native("basic10_w0.25_ds_r64_b1_fp32", "layer1.0.conv1", KernelEngine::kCarb), 0);
  EXPECT_EQ(native("basic10_w0.25_ds_r64_b2_fp32", "layer1.0.conv1", KernelEngine::kTorch), 0);
  EXPECT_EQ(native("basic10_w0.25_ds_r64_b1_bf16", "layer1.0.conv1", KernelEngine::kTorch), 0);
  // The stem's 7x7 window, and 16 x 128 x 128 = 262,144 input values without downsampling.
  EXPECT_EQ(native("basic10_w0.25_ds_r64_b1_fp32", "conv1", KernelEngine::kTorch), 0);
  EXPECT_EQ(native("basic10_w0.25_nods_r128_b1_fp32", "layer1.0.conv1", KernelEngine::kTorch), 0);
  // Not a conv.
  EXPECT_EQ(native("basic10_w0.25_ds_r64_b1_fp32", "layer1.0.bn1", KernelEngine::kTorch), 0);
}

}  // namespace
}  // namespace carb::engine
